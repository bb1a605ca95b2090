"""A full disk and a refused write, for real, through ``cudaup install``: exit 10 or 14,
one sentence naming the path (and the bytes, and the way round), nothing left behind.

The disk is a small tmpfs and the refusals come from the kernel, to an unprivileged
user (uid 65534) or from a read-only mount: both need root, and skip elsewhere.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from cudaup.errors import EXIT_CODES
from cudaup.util.faults import explained, store_place
from tests.fakenvidia.server import FakeNvidiaServer
from tests.faultserver import FaultServer, payload
from tests.helpers import CliResult, point_env_at, run_cli
from tests.install.served import serve_redist
from tests.osfaults import NOBODY, ROOT_ONLY, as_nobody, cudaup_argv, shared_tmp, tmpfs

pytestmark = ROOT_ONLY


@pytest.fixture
def redist_env(
    fault_server: FaultServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> FaultServer:
    monkeypatch.setenv("CUDAUP_NVIDIA_DOWNLOAD_URL", fault_server.url)
    monkeypatch.setenv("CUDAUP_NVIDIA_ARCHIVE_URL", fault_server.url)
    monkeypatch.setenv("CUDAUP_SYSTEM_ROOT", str(tmp_path / "root"))
    (tmp_path / "root").mkdir()
    return fault_server


def install(capsys: pytest.CaptureFixture[str], release: str, *extra: str) -> CliResult:
    return run_cli(
        capsys, "install", release, "--channel", "redist", "--components", "nvcc",
        "--platform", "linux-x86_64", "-q", *extra,
    )  # fmt: skip


def test_a_cache_out_of_room_while_extracting_is_exit_10(
    redist_env: FaultServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """300 headers fit in bytes, not in the 64 files this cache's filesystem can hold."""
    files = {f"include/h{i}.h": (b"#pragma once\n", 0o644) for i in range(300)}
    serve_redist(redist_env, "90.0.1", files)
    with tmpfs(tmp_path / "cache", size="16m", inodes=64) as cache:
        monkeypatch.setenv("CUDAUP_CACHE_DIR", str(cache))
        result = install(capsys, "90.0.1")
        assert result.code == EXIT_CODES["insufficient-space"], result.err
        err = result.err
        assert "cannot extract cuda_nvcc-linux-x86_64-90.0.1-archive.tar.xz" in err
        assert f"in {cache}/unpacked/" in err and "no free inodes" in err
        assert "set CUDAUP_CACHE_DIR" in err and "internal error" not in err
        assert [p.name for p in (cache / "unpacked").iterdir()] == []  # nothing half-made
    assert not (tmp_path / "home/toolkits/90.0.1").exists()


def test_a_store_out_of_room_while_copying_from_the_cache_is_exit_10(
    redist_env: FaultServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The cache is on another filesystem, so files are copied, and 3 MiB do not fit in 1."""
    serve_redist(redist_env, "90.0.2", {"bin/nvcc": (payload(3 * 2**20), 0o755)})
    with tmpfs(tmp_path / "home", size="1m") as home:
        monkeypatch.setenv("CUDAUP_HOME", str(home))
        result = install(capsys, "90.0.2")
        err = result.err
        assert result.code == EXIT_CODES["insufficient-space"], err
        assert "cannot put cuda_nvcc-linux-x86_64-90.0.2-archive.tar.xz's files into" in err
        assert f"the disk is full in {home}/toolkits/.staging-90.0.2-" in err
        assert f"it needs {3 * 2**20} bytes" in err and "are free" in err
        assert list((home / "toolkits").iterdir()) == []  # staging removed, nothing published
    # With room, the same cross-filesystem install copies, and says so.
    with tmpfs(tmp_path / "home", size="16m") as home:
        done = run_cli(capsys, "install", "90.0.2", "--channel", "redist", "--components",
                       "nvcc", "--platform", "linux-x86_64")  # fmt: skip
        assert done.code == 0, done.err
        assert "files were copied, not hard-linked" in done.out
        assert (home / "toolkits/90.0.2/bin/nvcc").stat().st_nlink == 1


def test_a_store_out_of_room_when_publishing_is_exit_10(
    fake_nvidia: FakeNvidiaServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A store with room for the toolkit's files and version.json, not for its record:
    tmpfs counts whole pages of file data only, so the room can be made exact."""
    point_env_at(monkeypatch, fake_nvidia)
    monkeypatch.setenv("CUDAUP_SYSTEM_ROOT", str(tmp_path / "root"))
    (tmp_path / "root").mkdir()
    monkeypatch.setenv("CUDAUP_HOME", str(tmp_path / "roomy"))
    assert install(capsys, "13.0.1").code == 0
    toolkit = tmp_path / "roomy/toolkits/13.0.1"
    pages = sum(
        -(-path.stat().st_size // 4096)
        for path in toolkit.rglob("*")
        if path.is_file() and not path.is_symlink()
        and path.name not in {"cudaup-record.json", "version.json"}
    )  # fmt: skip
    with tmpfs(tmp_path / "home", size=str((pages + 1) * 4096)) as home:
        monkeypatch.setenv("CUDAUP_HOME", str(home))
        result = install(capsys, "13.0.1")
        assert result.code == EXIT_CODES["insufficient-space"], result.err
        assert f"cannot publish CUDA 13.0.1 at {home}/toolkits/13.0.1" in result.err
        assert f"the disk is full in {home}/toolkits: it needs " in result.err
        assert list((home / "toolkits").iterdir()) == []


def test_a_read_only_store_is_exit_14_naming_it(
    redist_env: FaultServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    serve_redist(redist_env, "90.0.3", {"bin/nvcc": (b"#!/bin/sh\n", 0o755)})
    with tmpfs(tmp_path / "home", ro=True) as home:
        monkeypatch.setenv("CUDAUP_HOME", str(home))
        result = install(capsys, "90.0.3", "--json")
        err = result.err
        assert result.code == EXIT_CODES["permission-denied"], err
        assert f"read-only file system: {home}/locks" in err and "set CUDAUP_HOME" in err
        assert result.json()["error"]["kind"] == "permission-denied"


# -- as a user who may not write there -----------------------------------------------
@pytest.fixture
def shared() -> Iterator[Path]:
    with shared_tmp() as directory:
        yield directory


def nobody_env(fake: FakeNvidiaServer, shared: Path, home: Path, cache: Path) -> dict[str, str]:
    root = shared / "root"
    root.mkdir(exist_ok=True)
    return {
        **os.environ,
        "CUDAUP_NVIDIA_DOWNLOAD_URL": fake.download_url,
        "CUDAUP_NVIDIA_ARCHIVE_URL": fake.archive_url,
        "CUDAUP_HOME": str(home),
        "CUDAUP_CACHE_DIR": str(cache),
        "CUDAUP_SYSTEM_ROOT": str(root),
        "HOME": str(shared),
    }


def owned_by_nobody(path: Path) -> Path:
    path.mkdir()
    os.chown(path, NOBODY, NOBODY)
    return path


ARGS = ("install", "13.0.1", "--channel", "redist", "--components", "nvcc", "--platform",
        "linux-x86_64", "-q")  # fmt: skip


def test_a_store_the_user_may_not_write_is_exit_14(
    fake_nvidia: FakeNvidiaServer, shared: Path
) -> None:
    home = shared / "home"
    home.mkdir()  # root's
    env = nobody_env(fake_nvidia, shared, home, owned_by_nobody(shared / "cache"))
    done = as_nobody(cudaup_argv(*ARGS), env)
    assert done.returncode == EXIT_CODES["permission-denied"], done.stderr
    # locks/ does not exist: the directory that refused to hold it is named, not locks/.
    assert (
        f"permission denied: {home}/locks (it does not exist; {home} is the nearest directory "
        f"that does, owned by uid 0; cudaup runs as uid {NOBODY})"
    ) in done.stderr
    assert "set CUDAUP_HOME" in done.stderr and "--prefix" in done.stderr
    assert list(home.iterdir()) == []


def test_a_cache_the_user_may_not_write_is_exit_14(
    fake_nvidia: FakeNvidiaServer, shared: Path
) -> None:
    """The cache belongs to root (say a `sudo cudaup install` filled it): another user's
    install links nothing from it and is refused cleanly, naming it."""
    cache = shared / "cache"
    root_env = nobody_env(fake_nvidia, shared, shared / "root-home", cache)
    filled = run_root(cudaup_argv(*ARGS), root_env)
    assert filled.returncode == 0, filled.stderr
    env = nobody_env(fake_nvidia, shared, owned_by_nobody(shared / "home"), cache)
    done = as_nobody(cudaup_argv(*ARGS), env)
    assert done.returncode == EXIT_CODES["permission-denied"], done.stderr
    assert f"permission denied: {cache}/" in done.stderr and "CUDAUP_CACHE_DIR" in done.stderr
    assert not (shared / "home/toolkits/13.0.1").exists()


def test_a_prefix_the_user_may_not_write_is_exit_14(
    fake_nvidia: FakeNvidiaServer, shared: Path
) -> None:
    opt = shared / "opt"
    opt.mkdir()  # root's
    env = nobody_env(
        fake_nvidia, shared, owned_by_nobody(shared / "home"), owned_by_nobody(shared / "cache")
    )
    done = as_nobody(cudaup_argv(*ARGS, "--prefix", str(opt / "cuda-13.0.1")), env)
    assert done.returncode == EXIT_CODES["permission-denied"], done.stderr
    assert f"permission denied: {opt}/.staging-cuda-13.0.1-" in done.stderr
    assert "choose a --prefix you can write" in done.stderr
    assert list(opt.iterdir()) == []


def run_root(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, check=False)


def test_the_translation_of_a_real_full_disk_and_a_real_refusal(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "tiny", size="64k") as tiny:
        with pytest.raises(Exception) as full, explained("cannot write", tiny, [], 100_000):
            (tiny / "big").write_bytes(bytes(100_000))
        assert type(full.value).__name__ == "InsufficientSpaceError"
        assert str(full.value).startswith(f"cannot write: the disk is full in {tiny}: it needs")
    with tmpfs(tmp_path / "ro", ro=True) as read_only:
        place = store_place(read_only)
        with pytest.raises(Exception) as refused, explained("cannot write", read_only, [place]):
            (read_only / "x").mkdir()
        assert type(refused.value).__name__ == "PermissionDeniedError"
        assert f"read-only file system: {read_only}/x" in str(refused.value)
    shutil.rmtree(tmp_path / "ro", ignore_errors=True)
