"""The unpacked cache is checked every time it is used, and trusted only when it is ours.

Each test installs a real release from a real (loopback) server twice: once to fill the
cache, then again after the cache was damaged, replaced or handed to another user; the
second install must be byte-identical to a clean one and say what it found.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from cudaup.errors import EXIT_CODES
from cudaup.install.installer import InstallOptions, InstallResult, install
from cudaup.install.linking import LinkMode
from cudaup.install.store import InstalledToolkit, Store
from tests.fakenvidia.server import FakeNvidiaServer
from tests.faultserver import FaultServer
from tests.helpers import point_env_at, run_cli, settings_for
from tests.install.served import CUDART, make_wheel, serve_pypi
from tests.osfaults import NOBODY, ROOT_ONLY

RELEASE = "13.0.1"


#: ``cudaup install`` of RELEASE's nvcc (and its closure) from the fake NVIDIA server.
CLI_INSTALL = ("install", RELEASE, "--channel", "redist", "--components", "nvcc",
               "--platform", "linux-x86_64", "--json")  # fmt: skip


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Store:
    monkeypatch.setenv("CUDAUP_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CUDAUP_SYSTEM_ROOT", str(tmp_path / "root"))
    (tmp_path / "root").mkdir()
    return Store(tmp_path / "home")


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return Path(os.environ["CUDAUP_CACHE_DIR"])


@pytest.fixture
def toolkit(
    fake_nvidia: FakeNvidiaServer,
    store: Store,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> Path:
    """RELEASE's nvcc installed into the store by the CLI (``CLI_INSTALL``)."""
    point_env_at(monkeypatch, fake_nvidia)
    assert run_cli(capsys, *CLI_INSTALL).code == 0
    return store.toolkits_dir / RELEASE


def install_at(
    server: FakeNvidiaServer,
    store: Store,
    prefix: Path,
    *,
    link_mode: LinkMode = "hardlink",
    verify: bool = False,
) -> InstallResult:
    options = InstallOptions(
        platform="linux-x86_64", channel="redist", components=("nvcc",), prefix=prefix,
        link_mode=link_mode, verify=verify,
    )  # fmt: skip
    return install(RELEASE, options, settings=settings_for(server), store=store)


Snapshot = dict[str, tuple[str, int, bytes]]


def snapshot(root: Path) -> Snapshot:
    """Every entry of an installed toolkit: its type, mode and bytes (or link target)."""
    found: Snapshot = {}
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(directory, name)
            relative = path.relative_to(root).as_posix()
            info = path.lstat()
            if relative == "cudaup-record.json":
                continue
            if stat.S_ISLNK(info.st_mode):
                found[relative] = ("link", 0, str(path.readlink()).encode())
            elif stat.S_ISDIR(info.st_mode):
                found[relative] = ("dir", stat.S_IMODE(info.st_mode), b"")
            else:
                found[relative] = ("file", stat.S_IMODE(info.st_mode), path.read_bytes())
    return found


def nvcc_entry(cache: Path) -> Path:
    """The cache entry of the cuda_nvcc archive (the one whose tree holds bin/nvcc)."""
    [entry] = [p for p in (cache / "unpacked").iterdir() if (p / "tree/bin/nvcc").is_file()]
    return entry


def record_of(prefix: Path, component: str) -> dict[str, object]:
    record = json.loads((prefix / "cudaup-record.json").read_text())
    [artifact] = [a for a in record["artifacts"] if a["component"] == component]
    assert isinstance(artifact, dict)
    return artifact


def truncate(nvcc: Path) -> str:
    with nvcc.open("r+b") as handle:
        handle.truncate(3)
    return "bin/nvcc has 3 bytes"


def replace(nvcc: Path) -> str:
    """Another file of the same size and mode in its place (what `cp evil nvcc` leaves)."""
    size, mode = nvcc.stat().st_size, stat.S_IMODE(nvcc.stat().st_mode)
    evil = nvcc.with_name("evil")
    evil.write_bytes(b"#!/bin/sh\necho owned\n".ljust(size, b"#")[:size])
    evil.chmod(mode)
    evil.replace(nvcc)
    return "bin/nvcc does not hold the bytes the archive gave it"


def add_extra(nvcc: Path) -> str:
    (nvcc.parent / "evil").write_bytes(b"#!/bin/sh\n")
    return "bin/evil is not part of the archive"


def loosen_mode(nvcc: Path) -> str:
    nvcc.chmod(0o775)
    return "bin/nvcc has mode 775 (writable by group or others), not 755"


def link_a_directory_away(nvcc: Path) -> str:
    """bin/ becomes a link to a directory elsewhere, holding the same files."""
    elsewhere = nvcc.parent.parent.parent / "elsewhere"
    nvcc.parent.rename(elsewhere)
    nvcc.parent.symlink_to(elsewhere)
    return "bin is a symlink, not a dir"


def steer_the_manifest(nvcc: Path) -> str:
    manifest = nvcc.parent.parent.parent / "manifest.json"
    document = json.loads(manifest.read_text())
    document["entries"].append({"path": "../../../../escape", "type": "dir", "mode": 493})
    manifest.write_text(json.dumps(document))
    return "its manifest has a bad path"


@pytest.mark.parametrize(
    "tamper",
    [truncate, replace, add_extra, loosen_mode, link_a_directory_away, steer_the_manifest],
)
def test_a_tampered_tree_is_unpacked_again_and_the_install_is_clean(
    fake_nvidia: FakeNvidiaServer, store: Store, cache: Path, tmp_path: Path, tamper: object
) -> None:
    install_at(fake_nvidia, store, tmp_path / "clean")
    clean = snapshot(tmp_path / "clean")  # before the tampering: the first install shares it
    entry = nvcc_entry(cache)
    damaged = (entry / "tree/bin/nvcc").stat().st_ino
    assert callable(tamper)
    problem = tamper(entry / "tree/bin/nvcc")
    result = install_at(fake_nvidia, store, tmp_path / "again")
    assert snapshot(tmp_path / "again") == clean
    assert any(problem in note and "discarded" in note for note in result.notes), result.notes
    assert (tmp_path / "again/bin/nvcc").stat().st_ino != damaged
    assert (nvcc_entry(cache) / "tree/bin/nvcc").stat().st_ino != damaged  # a fresh tree
    assert record_of(tmp_path / "again", "cuda_nvcc")["tree"] == "unpacked"
    assert record_of(tmp_path / "again", "cuda_cudart")["tree"] == "cache"  # not touched


def test_reuse_checks_sizes_and_modes_and_first_use_after_boot_checks_digests(
    fake_nvidia: FakeNvidiaServer, store: Store, cache: Path, tmp_path: Path
) -> None:
    first = install_at(fake_nvidia, store, tmp_path / "a")
    assert record_of(tmp_path / "a", "cuda_nvcc")["checks"] == [
        "sha256 of the download",
        "tree: sizes+modes",
    ]
    assert not [n for n in first.notes if "cached tree" in n]
    install_at(fake_nvidia, store, tmp_path / "b")
    # Same boot, files untouched since their digests were computed: sizes and modes only.
    assert record_of(tmp_path / "b", "cuda_nvcc")["tree"] == "cache"
    assert "tree: digests" not in record_of(tmp_path / "b", "cuda_nvcc")["checks"]  # type: ignore[operator]
    # A stamp from another boot: the digests are checked again, and found right.
    stamp = nvcc_entry(cache) / "verified.json"
    document = json.loads(stamp.read_text())
    stamp.write_text(json.dumps({**document, "boot": "another-boot"}))
    install_at(fake_nvidia, store, tmp_path / "c")
    assert record_of(tmp_path / "c", "cuda_nvcc")["checks"] == [
        "sha256 of the download",
        "tree: sizes+modes",
        "tree: digests",
    ]
    assert json.loads(stamp.read_text())["boot"] != "another-boot"  # stamped anew


def change_in_place(nvcc: Path, text: bytes) -> None:
    """Same size, same mode, same inode, mtime put back: only the digests can tell."""
    before = nvcc.stat()
    with nvcc.open("r+b") as handle:
        handle.write(text)
    os.utime(nvcc, ns=(before.st_atime_ns, before.st_mtime_ns))


def test_a_change_in_place_is_found_with_verify_and_after_a_restart(
    fake_nvidia: FakeNvidiaServer, store: Store, cache: Path, tmp_path: Path
) -> None:
    install_at(fake_nvidia, store, tmp_path / "clean", link_mode="copy")
    clean = snapshot(tmp_path / "clean")
    change_in_place(nvcc_entry(cache) / "tree/bin/nvcc", b"#!/bin/sh\nexit 9\n")
    verified = install_at(fake_nvidia, store, tmp_path / "verified", verify=True)
    assert snapshot(tmp_path / "verified") == clean
    assert any("sha256 differs" in note for note in verified.notes), verified.notes
    assert "tree: digests" in record_of(tmp_path / "verified", "cuda_cudart")["checks"]  # type: ignore[operator]

    change_in_place(nvcc_entry(cache) / "tree/bin/nvcc", b"#!/bin/sh\nexit 8\n")
    stamp = nvcc_entry(cache) / "verified.json"
    stamp.write_text(json.dumps({**json.loads(stamp.read_text()), "boot": "before-reboot"}))
    restarted = install_at(fake_nvidia, store, tmp_path / "restarted")
    assert snapshot(tmp_path / "restarted") == clean
    assert any("sha256 differs" in note for note in restarted.notes), restarted.notes


def test_a_tree_from_an_older_cudaup_has_no_manifest_and_is_unpacked_again(
    fake_nvidia: FakeNvidiaServer, store: Store, cache: Path, tmp_path: Path
) -> None:
    install_at(fake_nvidia, store, tmp_path / "clean")
    (nvcc_entry(cache) / "manifest.json").unlink()
    result = install_at(fake_nvidia, store, tmp_path / "again")
    assert any("has no manifest" in note for note in result.notes)
    assert snapshot(tmp_path / "again") == snapshot(tmp_path / "clean")
    assert (nvcc_entry(cache) / "manifest.json").is_file()


CliInstall = Callable[..., list[str]]


@pytest.fixture
def cli_install(
    fake_nvidia: FakeNvidiaServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> CliInstall:
    """``cudaup install`` of the release into a prefix, from the fake NVIDIA server; its notes."""
    point_env_at(monkeypatch, fake_nvidia)

    def run(prefix: Path, *extra: str) -> list[str]:
        result = run_cli(
            capsys, "install", RELEASE, "--channel", "redist", "--components", "nvcc",
            "--platform", "linux-x86_64", "--prefix", str(prefix), "--json", *extra,
        )  # fmt: skip
        assert result.code == 0, result.err
        notes = result.json()["notes"]
        assert isinstance(notes, list)
        return notes

    return run


@ROOT_ONLY
@pytest.mark.parametrize("what", ["tree", "manifest.json"])
def test_a_tree_another_user_owns_is_never_linked_nor_deleted(
    cli_install: CliInstall, store: Store, cache: Path, tmp_path: Path, what: str
) -> None:
    cli_install(tmp_path / "clean")
    entry = nvcc_entry(cache)
    if what == "tree":
        subprocess.run(["chown", "-R", f"{NOBODY}:{NOBODY}", str(entry)], check=True)
    else:
        os.chown(entry / what, NOBODY, NOBODY)
    planted = entry / "tree/bin/nvcc"
    notes = cli_install(tmp_path / "again")
    assert snapshot(tmp_path / "again") == snapshot(tmp_path / "clean")
    nvcc = (tmp_path / "again/bin/nvcc").stat()
    assert nvcc.st_ino != planted.stat().st_ino and nvcc.st_nlink == 1
    assert planted.is_file() and (entry / "manifest.json").stat().st_uid == NOBODY  # left alone
    assert any(
        f"belongs to uid {NOBODY}" in note and "never deletes another user's files" in note
        for note in notes
    ), notes
    assert record_of(tmp_path / "again", "cuda_nvcc")["tree"] == "private"


@ROOT_ONLY
def test_an_unpacked_directory_another_user_owns_is_not_used_at_all(
    fake_nvidia: FakeNvidiaServer, store: Store, cache: Path, tmp_path: Path
) -> None:
    install_at(fake_nvidia, store, tmp_path / "clean")
    os.chown(cache / "unpacked", NOBODY, NOBODY)
    result = install_at(fake_nvidia, store, tmp_path / "again")
    assert snapshot(tmp_path / "again") == snapshot(tmp_path / "clean")
    assert any(f"belongs to uid {NOBODY}" in note for note in result.notes), result.notes
    for component in ("cuda_nvcc", "cuda_cudart"):
        assert record_of(tmp_path / "again", component)["tree"] == "private"


@ROOT_ONLY
def test_a_downloads_directory_another_user_made_is_not_used(
    fake_nvidia: FakeNvidiaServer,
    store: Store,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A shared cache (sticky, writable by all) where another user made ``downloads/``
    first: they could rewrite a part file there between its check and its use, so the
    archives are downloaded into the install's own staging, and their files stay."""
    install_at(fake_nvidia, store, tmp_path / "clean")
    shared = tmp_path / "shared-cache"
    shared.mkdir()
    shared.chmod(0o1777)
    downloads = shared / "downloads"
    downloads.mkdir()
    planted = downloads / "planted.part"
    planted.write_bytes(b"theirs")
    for path in (downloads, planted):
        os.chown(path, NOBODY, NOBODY)
    monkeypatch.setenv("CUDAUP_CACHE_DIR", str(shared))
    result = install_at(fake_nvidia, store, tmp_path / "again")
    assert snapshot(tmp_path / "again") == snapshot(tmp_path / "clean")
    assert [n for n in result.notes if "does not download into" in n] == [
        f"{downloads} is owned by uid {NOBODY} (nobody), not by you (uid 0 (root)) or root: "
        f"cudaup does not download into {downloads}, where another user could change an "
        "archive between its check and its use; the archives were downloaded for this "
        "install only (make the cache yours and not writable by others, or set "
        "CUDAUP_CACHE_DIR)"
    ]
    assert sorted(p.name for p in downloads.iterdir()) == ["planted.part"]
    assert planted.read_bytes() == b"theirs" and planted.stat().st_uid == NOBODY
    # The trees were unpacked from the verified archives into the cache, which is ours.
    assert record_of(tmp_path / "again", "cuda_nvcc")["tree"] == "unpacked"


def test_trees_writable_by_group_or_others_are_refused(
    cli_install: CliInstall, store: Store, cache: Path, tmp_path: Path
) -> None:
    cli_install(tmp_path / "clean")
    nvcc_entry(cache).chmod(0o777)
    discarded = cli_install(tmp_path / "again")
    assert any("writable by group or others" in n and "discarded" in n for n in discarded)
    assert record_of(tmp_path / "again", "cuda_nvcc")["tree"] == "unpacked"
    (cache / "unpacked").chmod(0o775)
    unused = cli_install(tmp_path / "third")
    assert any("is writable by group or others" in n for n in unused), unused
    assert record_of(tmp_path / "third", "cuda_cudart")["tree"] == "private"
    assert snapshot(tmp_path / "third") == snapshot(tmp_path / "clean")


def test_link_mode_copy_shares_nothing_with_the_cache(
    fake_nvidia: FakeNvidiaServer, store: Store, cache: Path, tmp_path: Path
) -> None:
    linked = install_at(fake_nvidia, store, tmp_path / "linked")
    assert (tmp_path / "linked/bin/nvcc").stat().st_nlink == 2  # the toolkit's and the cache's
    assert not [n for n in linked.notes if "copied" in n]
    install_at(fake_nvidia, store, tmp_path / "copied", link_mode="copy")
    files = [Path(d, name) for d, _dirs, names in os.walk(tmp_path / "copied") for name in names]
    regular = [p for p in files if stat.S_ISREG(p.lstat().st_mode)]
    assert regular and all(p.lstat().st_nlink == 1 for p in regular)
    assert snapshot(tmp_path / "copied") == snapshot(tmp_path / "linked")
    record = json.loads((tmp_path / "copied/cudaup-record.json").read_text())
    assert record["link_mode"] == "copy"
    assert not any(a["hard_links"] for a in record["artifacts"])


# -- through the command line ---------------------------------------------------------
def test_cli_tampered_tree_verify_and_copy(
    cli_install: CliInstall,
    store: Store,
    cache: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    cli_install(tmp_path / "a")
    truncate(nvcc_entry(cache) / "tree/bin/nvcc")
    notes = cli_install(tmp_path / "b", "--verify", "--link-mode", "copy")
    assert any("bin/nvcc has 3 bytes" in note for note in notes), notes
    assert (tmp_path / "b/bin/nvcc").stat().st_nlink == 1
    assert record_of(tmp_path / "b", "cuda_cudart")["checks"] == [
        "sha256 of the download",
        "tree: sizes+modes",
        "tree: digests",
    ]
    bad = run_cli(capsys, "install", RELEASE, "--link-mode", "symlink")
    assert bad.code == EXIT_CODES["usage"] and "invalid choice: 'symlink'" in bad.err


def test_cli_pypi_wheel_checked_against_its_record_and_tampering_found(
    fault_server: FaultServer,
    store: Store,
    cache: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("CUDAUP_PYPI_URL", serve_pypi(fault_server, RELEASE, make_wheel(
        "nvidia-cuda-runtime", "13.0.88", CUDART)))  # fmt: skip
    argv = ["install", RELEASE, "--channel", "pypi", "--components", "cudart",
            "--platform", "linux-x86_64", "--json"]  # fmt: skip
    first = run_cli(capsys, *argv, "--prefix", str(tmp_path / "a"))
    assert first.code == 0, first.err
    assert record_of(tmp_path / "a", "cuda_cudart")["checks"] == [
        "sha256 of the download",
        "wheel RECORD",
        "tree: sizes+modes",
    ]
    [entry] = [p for p in (cache / "unpacked").iterdir() if not p.name.startswith(".")]
    (entry / "tree/nvidia/cu13/include/cuda_runtime.h").write_bytes(b"#error planted\n")
    again = run_cli(capsys, *argv, "--prefix", str(tmp_path / "b"))
    assert again.code == 0, again.err
    assert any("cuda_runtime.h has 15 bytes" in n for n in again.json()["notes"])
    assert snapshot(tmp_path / "b") == snapshot(tmp_path / "a") | {
        "include/cuda_runtime.h": ("file", 0o644, b"#pragma once\n")
    }


def test_cli_a_wheel_that_lies_about_a_member_is_exit_7(
    fault_server: FaultServer,
    store: Store,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The listing says 1 KiB; the member inflates to 1 GiB of zeros."""
    from tests.install.test_extract_faults import lying_zip, zeros_deflated

    lie = lying_zip(tmp_path / "lie.whl", "nvidia/cu13/lib/libcudart.so.13", zeros_deflated(1024),
                    8, 1024)  # fmt: skip
    monkeypatch.setenv("CUDAUP_PYPI_URL", serve_pypi(fault_server, RELEASE, lie.read_bytes()))
    result = run_cli(capsys, "install", RELEASE, "--channel", "pypi", "--components", "cudart",
                     "--platform", "linux-x86_64", "--json")  # fmt: skip
    assert result.code == EXIT_CODES["integrity"], result.err
    assert "holds more than the 1024 bytes the zip's listing says" in result.err
    assert result.json()["error"]["kind"] == "integrity"
    assert not (store.toolkits_dir / RELEASE).exists()


def test_cli_a_change_in_place_with_its_mtime_put_back_is_found_on_reinstall(
    toolkit: Path,
    cache: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue #20's attack: install, uninstall, change the cached ``tree/bin/nvcc`` in
    place (same size, same inode, mtime put back with ``os.utime``), install again.
    Its ctime moved, which nothing but the clock could put back: the tree is hashed,
    found wrong, and unpacked again."""
    clean = snapshot(toolkit)
    assert run_cli(capsys, "uninstall", RELEASE, "--json").code == 0
    cached = nvcc_entry(cache) / "tree/bin/nvcc"
    inode, mtime = cached.stat().st_ino, cached.stat().st_mtime_ns
    change_in_place(cached, b"#!/bin/sh\nid -u > /tmp/owned\n")
    assert (cached.stat().st_ino, cached.stat().st_mtime_ns) == (inode, mtime)
    again = run_cli(capsys, *CLI_INSTALL)
    assert again.code == 0, again.err
    notes = again.json()["notes"]
    assert any("bin/nvcc does not hold the bytes" in note and "discarded" in note
               for note in notes), notes  # fmt: skip
    assert snapshot(toolkit) == clean
    assert record_of(toolkit, "cuda_nvcc")["tree"] == "unpacked"
    # The tree unpacked anew and then linked is vouched for by its stamp again: a
    # second prefix is checked by sizes and modes only.
    prefix = run_cli(capsys, *CLI_INSTALL, "--prefix", str(toolkit.parent / "second"))
    assert prefix.code == 0, prefix.err
    assert "tree: digests" not in record_of(toolkit.parent / "second", "cuda_nvcc")["checks"]  # type: ignore[operator]


def test_cli_uninstall_keeps_the_stamps_of_the_trees_it_was_linked_from(
    toolkit: Path,
    cache: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Removing a toolkit's hard links moves the ctime of every cached file they shared:
    without ``uninstall`` stamping the trees anew, the next install would hash them all."""
    cached = nvcc_entry(cache) / "tree/bin/nvcc"
    ctime = cached.stat().st_ctime_ns
    assert run_cli(capsys, "uninstall", RELEASE, "--json").code == 0
    assert cached.stat().st_ctime_ns != ctime  # what voids a stamp taken before
    again = run_cli(capsys, *CLI_INSTALL)
    assert again.code == 0, again.err
    for component in ("cuda_nvcc", "cuda_cudart"):
        assert record_of(toolkit, component)["tree"] == "cache"
        assert "tree: digests" not in record_of(toolkit, component)["checks"]  # type: ignore[operator]


def test_cli_uninstall_vouches_for_no_tree_its_stamp_did_not_vouch_for_before(
    toolkit: Path,
    cache: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A tree changed in place before the uninstall (mtime put back), or written while it
    removes the links, is not stamped: the next install hashes it, finds it wrong, and
    unpacks it again."""
    clean = snapshot(toolkit)
    change_in_place(nvcc_entry(cache) / "tree/bin/nvcc", b"#!/bin/sh\nexit 7\n")
    assert run_cli(capsys, "uninstall", RELEASE, "--json").code == 0
    again = run_cli(capsys, *CLI_INSTALL)
    assert again.code == 0, again.err
    assert any("bin/nvcc does not hold the bytes" in n for n in again.json()["notes"])
    assert snapshot(toolkit) == clean

    removal = Store.remove

    def remove_then_write(self: Store, installed: InstalledToolkit) -> None:
        removal(self, installed)
        with (nvcc_entry(cache) / "tree/bin/nvcc").open("r+b") as handle:
            handle.write(b"#!/bin/sh\nexit 6\n")  # as a tool writes: its mtime moves

    monkeypatch.setattr(Store, "remove", remove_then_write)
    assert run_cli(capsys, "uninstall", RELEASE, "--json").code == 0
    monkeypatch.setattr(Store, "remove", removal)
    third = run_cli(capsys, *CLI_INSTALL)
    assert third.code == 0, third.err
    assert any("bin/nvcc does not hold the bytes" in n for n in third.json()["notes"])
    assert snapshot(toolkit) == clean
