"""Disks and permissions in downloads: full disks (a real tmpfs), directories another user
may not write (a real unprivileged user), read-only mounts, and lock files that any
user sharing the cache can take and that die with their holder.

Each case runs through :func:`cudaup.download.download` and through ``cudaup download``,
for the error class, the exit code and the words (the path, the bytes, what to do).
Mounting and switching users need root; as another user these tests are skipped
with that reason.
"""

from __future__ import annotations

import collections
import errno
import hashlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cudaup.config import Settings
from cudaup.download import DownloadRequest, download, download_many
from cudaup.errors import (
    EXIT_CODES,
    InsufficientSpaceError,
    IntegrityError,
    LockedError,
    PermissionDeniedError,
)
from cudaup.net import backoff
from cudaup.net.backoff import Backoff
from cudaup.net.http import HttpClient
from cudaup.util import cachedir
from cudaup.util.faults import cache_place
from cudaup.util.locks import locked
from tests.download.support import recorded
from tests.faultserver import Fault, FaultServer, payload
from tests.helpers import run_cli
from tests.osfaults import as_nobody, nobody_argv, readable_python

MIB = 1024 * 1024
SIZE = 3 * MIB
BODY = payload(SIZE, seed=21)
SHA = hashlib.sha256(BODY).hexdigest()
needs_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="mounting a tmpfs and switching to another user need root"
)


@pytest.fixture(autouse=True)
def _quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backoff, "DEFAULT", Backoff(base=0.01, cap=0.01))


def client(cache: Path) -> HttpClient:
    return HttpClient(Settings.from_env(cache_dir=cache), backoff=Backoff(base=0.01, cap=0.01))


def request(server: FaultServer) -> DownloadRequest:
    return DownloadRequest(server.url + "/f.run", "f.run", SIZE, SHA)


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Callable[[str], Path]]:
    """Mount small tmpfs file systems (``mount -t tmpfs -o OPTIONS``), unmounted after."""
    mounted: list[Path] = []

    def mount(options: str) -> Path:
        where = tmp_path / f"tmpfs-{len(mounted)}"
        where.mkdir()
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)],
            check=True, capture_output=True,
        )  # fmt: skip
        mounted.append(where)
        return where

    yield mount
    for where in reversed(mounted):
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.fixture
def shared() -> Iterator[Path]:
    """A directory every user can reach (pytest's own tmp_path is root's alone)."""
    base = Path(tempfile.mkdtemp(prefix="cudaup-test-", dir="/tmp"))
    base.chmod(0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def fill_when_held(server: FaultServer, disk: Path, go_on: threading.Event) -> threading.Thread:
    """Once the download is under way (its first range answer held mid-body, its resume
    state saved with the first bytes), take every free byte of ``disk``, then let the
    answer go on: its next writes find the disk full."""

    def fill() -> None:
        server.wait_for_requests(2, "/f.run")
        deadline = time.monotonic() + 60
        while not recorded(disk / "f.run.part.json") and time.monotonic() < deadline:
            time.sleep(0.02)  # the state is rewritten every second
        free = shutil.disk_usage(disk).free
        fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            os.posix_fallocate(fd, 0, free)
        finally:
            os.close(fd)
        go_on.set()

    thread = threading.Thread(target=fill, daemon=True)
    thread.start()
    return thread


def held_server(server: FaultServer, go_on: threading.Event) -> None:
    server.add(
        "/f.run", BODY, Fault(times=1), Fault(times=1, hang="body", hang_after=MIB, until=go_on)
    )


# ---------------------------------------------------------------------------
# Full disks
# ---------------------------------------------------------------------------
@needs_root
def test_disk_full_mid_download_names_the_directory_then_resumes(
    fault_server: FaultServer, tmp_path: Path, tmpfs: Callable[[str], Path]
) -> None:
    disk = tmpfs("size=4m")
    go_on = threading.Event()
    held_server(fault_server, go_on)
    fill_when_held(fault_server, disk, go_on)
    with pytest.raises(InsufficientSpaceError) as caught:
        download(request(fault_server), disk, http=client(tmp_path / "cache"), connections=1)
    message = str(caught.value)
    found = re.fullmatch(
        rf"cannot write {disk}/f\.run\.part: the disk is full in {disk}: it needs (\d+) bytes, "
        "0 bytes are free; free some space and run the same command again",
        message,
    )
    assert found, message
    assert 0 < int(found.group(1)) < SIZE  # the first bytes were written
    assert caught.value.exit_code == 10
    saved = recorded(disk / "f.run.part.json")  # the last state saved (the disk is full)
    (disk / "filler").unlink()  # room again: the same download resumes and verifies
    fault_server.resources["/f.run"].faults.clear()
    result = download(request(fault_server), disk, http=client(tmp_path / "cache"), connections=1)
    assert result.path.read_bytes() == BODY
    assert result.resumed_from == saved > 0


@needs_root
def test_disk_full_through_the_cli(
    fault_server: FaultServer, tmpfs: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    disk = tmpfs("size=4m")
    go_on = threading.Event()
    held_server(fault_server, go_on)
    fill_when_held(fault_server, disk, go_on)
    run = run_cli(
        capsys, "download", fault_server.url + "/f.run", "--sha256", SHA, "-o", str(disk),
        "--connections", "1",
    )  # fmt: skip
    assert run.code == EXIT_CODES["insufficient-space"] == 10, run.err
    last = run.err.splitlines()[-1]
    assert last.startswith(f"cudaup: error: cannot write {disk}/")
    assert f"the disk is full in {disk}: it needs " in last and "free some space" in last


@needs_root
@pytest.mark.parametrize("kernel", ["/proc/1", "/sys/kernel"])
def test_a_kernel_file_system_is_a_refusal_not_a_full_disk(
    fault_server: FaultServer, capsys: pytest.CaptureFixture[str], kernel: str
) -> None:
    # proc and sysfs hold no blocks: "0 bytes free" would blame the disk (exit 10)
    fault_server.add("/f.run", BODY)
    run = run_cli(capsys, "download", fault_server.url + "/f.run", "--sha256", SHA, "-o", kernel)
    assert run.code == EXIT_CODES["permission-denied"] == 14, run.err
    assert run.err.splitlines()[-1].startswith(f"cudaup: error: cannot write in {kernel}: ")
    assert fault_server.requests() == []  # refused before the probe


def test_several_files_need_their_room_in_one_sentence(
    fault_server: FaultServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    Usage = collections.namedtuple("Usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda _p: Usage(10**9, 10**9, 1000))
    requests = [
        DownloadRequest(fault_server.url + f"/{name}", name, SIZE, SHA) for name in ("a", "b")
    ]
    with pytest.raises(InsufficientSpaceError, match=f"^2 files need {2 * SIZE} more bytes "):
        download_many(requests, tmp_path / "out", http=client(tmp_path / "cache"))
    with pytest.raises(InsufficientSpaceError, match=f"^1 file needs {SIZE} more bytes "):
        download_many(requests[:1], tmp_path / "out", http=client(tmp_path / "cache"))


def test_a_body_of_unknown_size_rechecks_the_free_space_as_it_grows(
    fault_server: FaultServer,
    tmp_path: Path,
    tmpfs: Callable[[str], Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A body no source gives a size for, that never ends, far below the size ceiling:
    it stops while 64 MiB (one step) are still free, before the disk is full."""
    disk = tmpfs("size=96m")
    fault_server.add("/f.run", BODY, Fault(ignore_range=True, no_length=True, endless=True))
    unsized = DownloadRequest(fault_server.url + "/f.run", "f.run", None, SHA)
    with pytest.raises(InsufficientSpaceError) as caught:
        download(unsized, disk, http=client(tmp_path / "cache"))
    found = re.fullmatch(
        rf"f\.run \(its size unknown, (\d+) bytes so far\) needs 67108864 more bytes "
        rf"\(0\.06 GiB\) in {disk}, but only (\d+) bytes \(0\.\d\d GiB\) are free",
        str(caught.value),
    )
    assert found, caught.value
    written, free = int(found.group(1)), int(found.group(2))
    assert written > 0 and 0 < free < 64 * MIB  # stopped early: the disk never filled
    assert list(disk.iterdir()) == []  # and the partial file is gone
    run = run_cli(capsys, "download", unsized.url, "--sha256", SHA, "-o", str(disk))
    assert run.code == EXIT_CODES["insufficient-space"] == 10, run.err
    assert "f.run (its size unknown, " in run.err.splitlines()[-1]


@needs_root
def test_no_room_for_the_part_file_itself(
    fault_server: FaultServer, tmp_path: Path, tmpfs: Callable[[str], Path]
) -> None:
    disk = tmpfs("size=4m,nr_inodes=1")  # the root directory is the only file it can hold
    fault_server.add("/f.run", BODY)
    with pytest.raises(InsufficientSpaceError) as caught:
        download(request(fault_server), disk, http=client(tmp_path / "cache"))
    assert str(caught.value).startswith(
        f"cannot create {disk}/f.run.part: the file system has no free inodes (room for new "
        f"files) left in {disk}: it needs {SIZE} bytes"
    )
    assert [r.range for r in fault_server.requests()] == ["bytes=0-0"]  # no byte fetched


@needs_root
def test_no_room_for_the_resume_state(
    fault_server: FaultServer, tmp_path: Path, tmpfs: Callable[[str], Path]
) -> None:
    disk = tmpfs("size=4m,nr_inodes=2")  # room for the part file, none for its state
    fault_server.add("/f.run", BODY)
    with pytest.raises(InsufficientSpaceError) as caught:
        download(request(fault_server), disk, http=client(tmp_path / "cache"))
    assert str(caught.value).startswith(f"cannot write {disk}/f.run.part.json: ")
    assert f" in {disk}: it needs " in str(caught.value)


def test_full_disk_and_quota_at_publish_and_in_writes(
    fault_server: FaultServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A rename and a quota cannot be made to fail for real here: the system calls are.
    fault_server.add("/f.run", BODY)
    out = tmp_path / "out"

    real_replace = Path.replace

    def renamed(self: Path, target: Path) -> Path:
        if self.name == "f.run.part":  # the publishing rename, not the state's
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_replace(self, target)

    with monkeypatch.context() as patch:
        patch.setattr(Path, "replace", renamed)
        with pytest.raises(InsufficientSpaceError, match=re.escape(
            f"cannot create {out}/f.run: the disk is full in {out}: it needs 4096 bytes"
        )):  # fmt: skip
            download(request(fault_server), out, http=client(tmp_path / "cache"))

    def over_quota(fd: int, data: bytes, offset: int) -> int:
        raise OSError(errno.EDQUOT, "Disk quota exceeded")

    with monkeypatch.context() as patch:
        patch.setattr(os, "pwrite", over_quota)
        with pytest.raises(InsufficientSpaceError) as caught:
            download(request(fault_server), out, http=client(tmp_path / "cache"))
    assert str(caught.value).startswith(
        f"cannot write {out}/f.run.part: the disk quota is exhausted in {out}: it needs "
        f"{SIZE} bytes"
    )


# ---------------------------------------------------------------------------
# Directories this user may not write
# ---------------------------------------------------------------------------
FETCH_AS_LIBRARY = """
import sys
from pathlib import Path
from cudaup.config import Settings
from cudaup.download import DownloadRequest, download, download_many
from cudaup.errors import CudaupError
from cudaup.net.http import HttpClient
url, sha, out = sys.argv[1:4]
try:
    download(DownloadRequest.from_url(url, sha256=sha), Path(out), http=HttpClient(Settings.from_env()))
except CudaupError as exc:
    print(type(exc).__name__, exc.exit_code, exc, sep="|")
else:
    print("done")
"""


def python_as_nobody(args: list[str], cache: Path, home: Path) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` as nobody, with a cudaup that user can read."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "CUDAUP_CACHE_DIR": str(cache),
        "PYTHONDONTWRITEBYTECODE": "1",
        "LC_ALL": "C.UTF-8",
    }
    return as_nobody([readable_python(), *args], env, timeout=120)


@needs_root
def test_a_directory_another_user_may_not_write(fault_server: FaultServer, shared: Path) -> None:
    fault_server.add("/f.run", BODY)
    out = shared / "out"  # root's, 0755
    out.mkdir()
    cache = shared / "cache"
    cache.mkdir(mode=0o777)
    cache.chmod(0o777)
    url = fault_server.url + "/f.run"
    library = python_as_nobody(["-c", FETCH_AS_LIBRARY, url, SHA, str(out)], cache, shared)
    assert library.stdout.strip() == (
        f"PermissionDeniedError|14|cannot write in {out}: permission denied: {out} (owned by "
        "uid 0; cudaup runs as uid 65534); choose another -o directory, or fix its permissions"
    ), library.stderr
    cli = python_as_nobody(
        ["-m", "cudaup", "download", url, "--sha256", SHA, "-o", str(out)], cache, shared
    )
    assert cli.returncode == 14, cli.stderr
    assert cli.stderr.strip().endswith(
        f"cudaup: error: cannot write in {out}: permission denied: {out} (owned by uid 0; "
        "cudaup runs as uid 65534); choose another -o directory, or fix its permissions"
    )
    assert fault_server.requests() == []  # refused before any byte moved
    assert list(out.iterdir()) == []


@needs_root
def test_a_cache_another_user_may_not_write(fault_server: FaultServer, shared: Path) -> None:
    fault_server.add("/f.run", BODY)
    out = shared / "out"
    out.mkdir()
    out.chmod(0o777)
    cache = shared / "cache"  # root's, 0755: no lock file can be made there
    cache.mkdir()
    url = fault_server.url + "/f.run"
    cli = python_as_nobody(
        ["-m", "cudaup", "download", url, "--sha256", SHA, "-o", str(out)], cache, shared
    )
    assert cli.returncode == 14, cli.stderr
    assert re.search(
        rf"cudaup: error: cannot open the lock file {cache}/locks/[0-9a-f]{{24}}\.lock: "
        rf"permission denied: {cache}/locks \(it does not exist; {cache} is the nearest "
        r"directory that does, owned by uid 0; cudaup runs as uid 65534\); "
        "set CUDAUP_CACHE_DIR to a directory you can write, or fix its permissions",
        cli.stderr,
    ), cli.stderr


@needs_root
def test_a_read_only_file_system(
    fault_server: FaultServer,
    tmp_path: Path,
    tmpfs: Callable[[str], Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    fault_server.add("/f.run", BODY)
    disk = tmpfs("size=1m,ro")
    with pytest.raises(PermissionDeniedError) as caught:
        download(request(fault_server), disk, http=client(tmp_path / "cache"))
    assert str(caught.value) == (
        f"cannot write in {disk}: read-only file system: {disk}; choose another -o "
        "directory, or fix its permissions"
    )
    run = run_cli(capsys, "download", fault_server.url + "/f.run", "--sha256", SHA, "-o", str(disk))
    assert run.code == 14 and f": read-only file system: {disk}" in run.err
    # the cache on a read-only file system: the lock file cannot be made
    with pytest.raises(PermissionDeniedError, match=re.escape(
        f"cannot open the lock file {disk}/locks/"
    )):  # fmt: skip
        download(request(fault_server), tmp_path / "out", http=client(disk))
    assert fault_server.requests() == []


# ---------------------------------------------------------------------------
# Lock files other users can take, that die with their holder
# ---------------------------------------------------------------------------
HOLD_LOCK = """
import sys, time
from pathlib import Path
from cudaup.util.faults import cache_place
from cudaup.util.locks import locked
with locked(Path(sys.argv[1]), busy="busy", wait=5, place=cache_place(Path(sys.argv[1]).parent)):
    print("held", flush=True)
    time.sleep(600)
"""

TAKE_LOCK = """
import sys
from pathlib import Path
from cudaup.util.faults import cache_place
from cudaup.util.locks import locked
with locked(Path(sys.argv[1]), busy="busy", wait=5, place=cache_place(Path(sys.argv[1]).parent)):
    print("took it")
"""


@needs_root
def test_a_lock_file_root_made_is_taken_by_another_user(shared: Path) -> None:
    cache = shared / "cache"
    cache.mkdir()
    cache.chmod(0o1777)  # a cache the machine's users share
    lock = cachedir.CacheLayout(cache).download_lock(shared / "out" / "f.run")
    old = os.umask(0o077)  # the strictest umask: the lock file is still 0o666
    try:
        with locked(lock, busy="busy", wait=1, place=cache_place(lock.parent)):
            pass
    finally:
        os.umask(old)
    assert lock.stat().st_mode & 0o7777 == 0o666
    assert lock.parent.stat().st_mode & 0o7777 == 0o1777  # as shared as the cache
    taken = python_as_nobody(["-c", TAKE_LOCK, str(lock)], cache, shared)
    assert taken.stdout == "took it\n", taken.stderr
    # a lock file an older cudaup left, readable only: taken read-only (flock needs no more)
    lock.chmod(0o644)
    taken = python_as_nobody(["-c", TAKE_LOCK, str(lock)], cache, shared)
    assert taken.stdout == "took it\n", taken.stderr
    # and a lock file nobody made, in the shared locks directory, root can take
    new = lock.with_name("made-by-nobody.lock")
    made = python_as_nobody(["-c", TAKE_LOCK, str(new)], cache, shared)
    assert made.stdout == "took it\n" and new.stat().st_uid == 65534
    with locked(new, busy="busy", wait=1, place=cache_place(new.parent)):
        pass


@needs_root
def test_a_lock_held_by_another_users_killed_process_does_not_block(shared: Path) -> None:
    cache = shared / "cache"
    cache.mkdir()
    cache.chmod(0o1777)
    lock = cachedir.CacheLayout(cache).unpacked_lock
    holder = subprocess.Popen(
        nobody_argv([readable_python(), "-c", HOLD_LOCK, str(lock)]),
        env={"PATH": os.environ["PATH"], "PYTHONDONTWRITEBYTECODE": "1"},
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(LockedError, match="an install is using"):
            cachedir.prune(cache, wait=0.3)  # the live holder keeps it
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.communicate(timeout=30)
    assert cachedir.prune(cache, wait=5).removed == []  # the kernel let go with the process


def test_a_planted_link_is_never_followed_nor_truncated(tmp_path: Path) -> None:
    layout = cachedir.CacheLayout(tmp_path / "cache")
    layout.locks.mkdir(parents=True)
    victim = tmp_path / "precious"
    victim.write_text("precious")
    victim.chmod(0o600)
    lock = layout.download_lock(tmp_path / "out/f.run")
    lock.symlink_to(victim)
    with (
        pytest.raises(IntegrityError, match=re.escape(f"{lock} is not a regular file")),
        locked(lock, busy="busy", wait=1, place=cache_place(lock.parent)),
    ):
        pass  # pragma: no cover
    assert victim.read_text() == "precious" and victim.stat().st_mode & 0o777 == 0o600


@needs_root
def test_cli_another_user_downloads_where_root_left_its_lock(
    fault_server: FaultServer, shared: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    fault_server.add("/f.run", BODY)
    cache, out = shared / "cache", shared / "out"
    cache.mkdir()
    cache.chmod(0o1777)
    out.mkdir()
    out.chmod(0o1777)
    monkeypatch.setenv("CUDAUP_CACHE_DIR", str(cache))
    old = os.umask(0o022)
    try:
        first = run_cli(
            capsys, "download", fault_server.url + "/f.run", "--sha256", SHA, "-o", str(out)
        )
    finally:
        os.umask(old)
    assert first.code == 0, first.err
    again = python_as_nobody(
        ["-m", "cudaup", "download", fault_server.url + "/f.run", "--sha256", SHA, "-o", str(out)],
        cache, shared,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert "already here" in again.stdout
