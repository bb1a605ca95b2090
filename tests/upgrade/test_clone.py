"""Hard-linked clones, their fingerprints and the atomic exchange, on real trees."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cudaup.errors import ConflictError, SourceFormatError
from cudaup.upgrade.clone import Entry, clone_tree, exchange, fingerprint
from tests.osfaults import ROOT_ONLY, tmpfs
from tests.upgrade.world import tree_state


def _tree(root: Path) -> Path:
    (root / "bin").mkdir(parents=True)
    (root / "lib" / "private").mkdir(parents=True)
    script = root / "bin" / "tool"
    script.write_text("#!/bin/sh\necho tool\n")
    script.chmod(0o755)
    secret = root / "lib" / "private" / "key"
    secret.write_text("k")
    secret.chmod(0o600)
    (root / "lib" / "private").chmod(0o700)
    (root / "bin" / "python").symlink_to("/usr/bin/python3")
    (root / "lib64").symlink_to("lib")
    (root / "dangling").symlink_to("nowhere")
    os.utime(root / "bin", ns=(1_000_000_000, 1_000_000_000))
    return root


def test_a_clone_is_the_tree_and_shares_its_files(tmp_path: Path) -> None:
    source = _tree(tmp_path / "env")
    printed = clone_tree(source, tmp_path / "clone")
    clone = tmp_path / "clone"
    assert tree_state(clone) == tree_state(source)
    assert (clone / "bin" / "tool").stat().st_ino == (source / "bin" / "tool").stat().st_ino
    assert (clone / "bin").stat().st_mtime_ns == 1_000_000_000
    assert (clone / "lib" / "private").stat().st_mode & 0o777 == 0o700
    assert printed.files == 2 and printed.bytes == len("#!/bin/sh\necho tool\n") + 1
    assert printed.differences(clone) == []
    assert fingerprint(clone).differences(clone) == []


def test_differences_name_what_changed(tmp_path: Path) -> None:
    source = _tree(tmp_path / "env")
    printed = clone_tree(source, tmp_path / "clone")
    clone = tmp_path / "clone"
    # A write into a file the tree shares with its clone is a write into both.
    with (source / "bin" / "tool").open("a") as handle:
        handle.write("# more\n")
    (clone / "lib" / "private" / "key").chmod(0o644)
    (clone / "dangling").unlink()
    (clone / "dangling").symlink_to("somewhere")
    (clone / "new").write_text("")
    found = printed.differences(clone, limit=10)
    assert "bin/tool was replaced or written" in found
    assert "lib/private/key mode 644, was 600" in found
    assert "dangling points elsewhere" in found
    assert "new was added" in found
    (clone / "lib64").unlink()
    assert "lib64 is gone" in printed.differences(clone, limit=10)


def test_a_special_file_is_refused(tmp_path: Path) -> None:
    source = _tree(tmp_path / "env")
    os.mkfifo(source / "lib" / "pipe")
    with pytest.raises(ConflictError, match="neither a file, a directory nor a link"):
        clone_tree(source, tmp_path / "clone")


def test_exchange_swaps_two_directories(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    (first / "mark").write_text("a")
    assert exchange(first, second) is True
    assert (second / "mark").read_text() == "a" and not (first / "mark").exists()
    with pytest.raises(FileNotFoundError):
        exchange(first, tmp_path / "missing")


@ROOT_ONLY
def test_across_filesystems_files_are_copied(tmp_path: Path) -> None:
    source = _tree(tmp_path / "env")
    with tmpfs(tmp_path / "other", size="4m") as other:
        printed = clone_tree(source, other / "clone")
        assert tree_state(other / "clone") == tree_state(source)
        assert (other / "clone" / "bin" / "tool").stat().st_ino != (
            source / "bin" / "tool"
        ).stat().st_ino
        assert printed.differences(other / "clone") == []


@pytest.mark.parametrize(
    "row",
    [
        ["../etc/passwd", "file", 420, 1, 1, 1, None],
        ["/abs", "file", 420, 1, 1, 1, None],
        ["x", "device", 420, 1, 1, 1, None],
        ["x", "file", -1, 1, 1, 1, None],
        ["x", "file", 420, 1, 1],
        "x",
    ],
)
def test_a_manifest_row_cudaup_did_not_write_is_refused(row: object) -> None:
    with pytest.raises(SourceFormatError):
        Entry.from_json(row, "manifest.json")
