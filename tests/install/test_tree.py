"""A tree's manifest, its checks and its stamp, fed right and wrong."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from cudaup.install.linking import materialize
from cudaup.install.tree import (
    DamagedTreeError,
    ForeignTreeError,
    Stamp,
    TreeManifest,
    check_digests,
    compare,
    describe,
    fingerprint,
    read_owned,
    scan,
)
from tests.osfaults import NOBODY, ROOT_ONLY


def make_tree(root: Path) -> TreeManifest:
    (root / "bin").mkdir(parents=True)
    (root / "bin/nvcc").write_bytes(b"#!/bin/sh\n")
    (root / "bin/nvcc").chmod(0o755)
    (root / "lib").mkdir()
    (root / "lib/libx.so.1").write_bytes(b"\x7fELF")
    (root / "lib/libx.so").symlink_to("libx.so.1")
    digests = {
        path: hashlib.sha256((root / path).read_bytes()).hexdigest()
        for path in ("bin/nvcc", "lib/libx.so.1")
    }
    return TreeManifest(
        "a.tar.xz", "ab" * 32, describe(scan(root), digests), ("sha256 of the download",)
    )


def test_a_manifest_round_trips_and_matches_its_tree(tmp_path: Path) -> None:
    manifest = make_tree(tmp_path / "tree")
    assert TreeManifest.from_bytes(manifest.to_bytes()) == manifest
    assert [entry.path for entry in manifest.entries] == [
        "bin", "bin/nvcc", "lib", "lib/libx.so", "lib/libx.so.1",
    ]  # fmt: skip
    assert manifest.file_bytes == 14
    assert compare(scan(tmp_path / "tree"), manifest) is None
    assert check_digests(tmp_path / "tree", manifest) is None


def test_describe_refuses_a_file_that_was_not_extracted(tmp_path: Path) -> None:
    make_tree(tmp_path / "tree")
    (tmp_path / "tree/lib/planted").write_bytes(b"x")
    with pytest.raises(DamagedTreeError, match="planted appeared in the tree"):
        describe(scan(tmp_path / "tree"), {"bin/nvcc": "0" * 64, "lib/libx.so.1": "0" * 64})


def document(manifest: TreeManifest) -> dict[str, object]:
    loaded = json.loads(manifest.to_bytes())
    assert isinstance(loaded, dict)
    return loaded


def edited(
    manifest: TreeManifest, entry: object = None, top: dict[str, object] | None = None
) -> bytes:
    changed = document(manifest) | (top or {})
    if entry is not None:
        rows = changed["entries"]
        assert isinstance(rows, list)
        changed["entries"] = [*rows, entry]
    return json.dumps(changed).encode()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"schema": 2}, "not a schema-1 manifest"),
        ({"entries": "all"}, "lacks the archive"),
        ({"checked": [1]}, "malformed list of checks"),
    ],
)
def test_a_manifest_with_bad_fields_is_refused(
    tmp_path: Path, change: dict[str, object], message: str
) -> None:
    manifest = make_tree(tmp_path / "tree")
    with pytest.raises(DamagedTreeError, match=message):
        TreeManifest.from_bytes(edited(manifest, top=change))


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"path": "../escape", "type": "file", "mode": 420, "size": 1, "sha256": "0" * 64}, "bad path"),
        ({"path": "/etc/passwd", "type": "file", "mode": 420, "size": 1, "sha256": "0" * 64}, "bad path"),
        ({"path": "bin//x", "type": "dir", "mode": 493}, "bad path"),
        ({"path": "bin/nvcc", "type": "dir", "mode": 493}, "lists a path twice"),
        ({"path": "x", "type": "fifo", "mode": 420}, "malformed entry for x"),
        ({"path": "x", "type": "file", "mode": 420, "size": -1, "sha256": "0" * 64}, "malformed entry"),
        ({"path": "x", "type": "file", "mode": 420, "size": 1, "sha256": "zz"}, "no sha256 for x"),
        ({"path": "x", "type": "symlink"}, "no target for x"),
        ("not an object", "not an object"),
    ],
)  # fmt: skip
def test_a_manifest_that_would_steer_a_write_elsewhere_is_refused(
    tmp_path: Path, entry: object, message: str
) -> None:
    manifest = make_tree(tmp_path / "tree")
    with pytest.raises(DamagedTreeError, match=message):
        TreeManifest.from_bytes(edited(manifest, entry))
    with pytest.raises(DamagedTreeError, match="not JSON"):
        TreeManifest.from_bytes(b"{")


def test_compare_names_the_first_difference(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    manifest = make_tree(root)
    (root / "lib/libx.so").unlink()
    (root / "lib/libx.so").symlink_to("/etc/passwd")
    assert compare(scan(root), manifest) == "lib/libx.so points to '/etc/passwd', not 'libx.so.1'"
    (root / "lib/libx.so").unlink()
    assert compare(scan(root), manifest) == "lib/libx.so is missing"
    (root / "lib/libx.so").mkdir()
    assert compare(scan(root), manifest) == "lib/libx.so is a dir, not a symlink"


def test_materialize_links_or_copies_only_what_the_manifest_lists(tmp_path: Path) -> None:
    source = tmp_path / "tree"
    manifest = make_tree(source)
    (source / "bin/not-listed").write_bytes(b"x")  # the checks before would refuse it
    assert materialize(source, tmp_path / "linked", manifest, "hardlink")
    assert not (tmp_path / "linked/bin/not-listed").exists()
    assert (tmp_path / "linked/bin/nvcc").stat().st_ino == (source / "bin/nvcc").stat().st_ino
    assert not materialize(source, tmp_path / "copied", manifest, "copy")
    copied = tmp_path / "copied/bin/nvcc"
    assert copied.read_bytes() == b"#!/bin/sh\n" and copied.stat().st_nlink == 1
    assert copied.stat().st_mode & 0o777 == 0o755
    assert compare(scan(tmp_path / "copied"), manifest) is None


def test_the_fingerprint_moves_with_any_write_or_replacement(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    make_tree(root)
    before = fingerprint(scan(root))
    os.utime(root / "bin/nvcc", ns=(0, 10**18))
    touched = fingerprint(scan(root))
    assert touched != before
    replacement = root / "bin/new"
    replacement.write_bytes(b"#!/bin/sh\n")
    os.utime(replacement, ns=(0, 10**18))
    replacement.chmod(0o755)
    replacement.replace(root / "bin/nvcc")  # same size, mode and mtime: another inode
    assert fingerprint(scan(root)) != touched
    # Written in place, same size, mtime put back: the ctime moved, and no call undoes it.
    replaced = fingerprint(scan(root))
    info = (root / "bin/nvcc").stat()
    with (root / "bin/nvcc").open("r+b") as handle:
        handle.write(b"#!/bin/X")
    os.utime(root / "bin/nvcc", ns=(info.st_atime_ns, info.st_mtime_ns))
    assert (root / "bin/nvcc").stat().st_mtime_ns == info.st_mtime_ns
    assert fingerprint(scan(root)) != replaced


def test_a_stamp_that_is_not_one_reads_as_none() -> None:
    assert Stamp.from_bytes(Stamp("boot", "f").to_bytes()) == Stamp("boot", "f")
    for junk in (b"", b"[]", b'{"schema": 1, "boot": 3}', b"\xff"):
        assert Stamp.from_bytes(junk) is None


def test_read_owned_opens_only_a_plain_file_no_one_else_may_write(tmp_path: Path) -> None:
    uid = os.geteuid()
    plain = tmp_path / "manifest.json"
    plain.write_bytes(b"{}")
    assert read_owned(plain, uid) == b"{}"
    link = tmp_path / "link.json"
    link.symlink_to(plain)
    with pytest.raises(DamagedTreeError, match="cannot be opened"):
        read_owned(link, uid)
    plain.chmod(0o666)
    with pytest.raises(DamagedTreeError, match="writable by group or others"):
        read_owned(plain, uid)
    plain.chmod(0o644)
    with pytest.raises(DamagedTreeError, match="is over 1 bytes"):
        read_owned(plain, uid, limit=1)
    (tmp_path / "dir").mkdir()
    with pytest.raises(DamagedTreeError, match="not a regular file"):
        read_owned(tmp_path / "dir", uid)
    with pytest.raises(FileNotFoundError):
        read_owned(tmp_path / "missing.json", uid)


@ROOT_ONLY
def test_read_owned_refuses_another_users_file(tmp_path: Path) -> None:
    theirs = tmp_path / "manifest.json"
    theirs.write_bytes(b"{}")
    os.chown(theirs, NOBODY, NOBODY)
    with pytest.raises(ForeignTreeError, match=f"belongs to uid {NOBODY}"):
        read_owned(theirs, os.geteuid())
