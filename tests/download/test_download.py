"""The downloader against a misbehaving loopback server (cases from reliability.md)."""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import types
from collections import namedtuple
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cudaup.config import Settings
from cudaup.core.units import binary_size
from cudaup.download import (
    DownloadRequest,
    DownloadResult,
    ProgressEvent,
    digest,
    download,
    download_many,
)
from cudaup.download.arrival import Arrival
from cudaup.download.range_plan import MIN_SPLIT
from cudaup.download.remote import MIN_READ
from cudaup.errors import (
    ArrivalLostError,
    InsufficientSpaceError,
    IntegrityError,
    NetworkError,
    RemoteFileMissingError,
    UntrustedPathError,
    UsageError,
)
from cudaup.net import backoff
from cudaup.net.backoff import Backoff
from cudaup.net.http import HttpClient
from cudaup.util import libc
from cudaup.util.boot import boot_id
from tests.download.support import recorded
from tests.faultserver import Fault, FaultServer, payload

SIZE = 8 * 1024 * 1024
BODY = payload(SIZE)
SHA = hashlib.sha256(BODY).hexdigest()


@pytest.fixture(autouse=True)
def _quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retries in these tests wait 10 ms, not seconds (clients built with the default)."""
    monkeypatch.setattr(backoff, "DEFAULT", Backoff(base=0.01, cap=0.01))


def client(tmp_path: Path, timeout: float = 30.0) -> HttpClient:
    return HttpClient(
        Settings.from_env(cache_dir=tmp_path / "cache", timeout=timeout),
        backoff=Backoff(base=0.01, cap=0.01),
    )


def request(server: FaultServer, path: str = "/f.run", **kwargs: object) -> DownloadRequest:
    fields: dict[str, object] = {"size": SIZE, "sha256": SHA}
    fields.update(kwargs)
    return DownloadRequest(server.url + path, path.rsplit("/", 1)[-1], **fields)  # type: ignore[arg-type]


def fetched_ok(path: Path, body: bytes = BODY) -> None:
    assert path.read_bytes() == body
    assert not path.with_name(path.name + ".part").exists()
    assert not path.with_name(path.name + ".part.json").exists()


def test_parallel_ranges_verified_while_streaming(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    # Every answer holds after its first byte until eight ranges are asked for: they are
    # in flight together, however loaded the machine is.  32 MiB make eight pieces from
    # the front (8 MiB are cut into eight only while no first byte has come back, since a
    # piece that has begun is not split below two MiB: a race this test once lost).
    together = threading.Event()
    body = payload(32 * 1024 * 1024, seed=3)
    fault_server.add("/f.run", body, Fault(hang="body", hang_after=1, until=together))

    def when_eight_are_in() -> None:
        fault_server.wait_for_requests(1 + 8, "/f.run")  # the probe, then the ranges
        together.set()

    threading.Thread(target=when_eight_are_in, daemon=True).start()
    events: list[ProgressEvent] = []
    sha = hashlib.sha256(body).hexdigest()
    result = download(
        request(fault_server, size=len(body), sha256=sha),
        tmp_path / "out",
        http=client(tmp_path),
        connections=8,
        progress=events.append,
    )
    fetched_ok(result.path, body)
    assert result.digest == sha and result.algorithm == "sha256" and result.fetched == len(body)
    ranges = [r.range for r in fault_server.requests("/f.run") if r.range != "bytes=0-0"]
    assert len(ranges) >= 8 and all(r and r.startswith("bytes=") for r in ranges)
    assert fault_server.connections("/f.run") >= 8
    assert all(
        r.if_range == '"v1"' for r in fault_server.requests("/f.run") if r.range != "bytes=0-0"
    )
    assert events[0].kind == "start" and events[-1].kind == "done"


def test_sha256_is_what_is_checked_where_md5_vouches_too(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    # A redist manifest lists both: the stronger one decides (the md5 here is wrong).
    fault_server.add("/f.run", BODY)
    result = download(request(fault_server, md5="0" * 32), tmp_path / "out", http=client(tmp_path))
    assert result.algorithm == "sha256" and result.digest == SHA
    fetched_ok(result.path)


def test_a_hash_behind_the_last_byte_says_verifying_until_the_verdict(
    fault_server: FaultServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The hash may not start before the display was told "verifying": it is behind.
    fault_server.add("/f.run", BODY)
    told = threading.Event()

    class HeldBack:
        def __init__(self, algorithm: str) -> None:
            self._digest = hashlib.new(algorithm)

        def update(self, data: memoryview) -> None:
            assert told.wait(30)
            self._digest.update(data)

        def hexdigest(self) -> str:
            return self._digest.hexdigest()

    monkeypatch.setattr(digest, "hashlib", types.SimpleNamespace(new=HeldBack))
    events: list[ProgressEvent] = []

    part = tmp_path / "out" / "f.run.part"
    on_disk: list[bool] = []

    def progress(event: ProgressEvent) -> None:
        events.append(event)
        if event.kind == "verifying" and not told.is_set():
            on_disk.append(part.read_bytes() == BODY)  # every byte landed before
            told.set()

    result = download(
        request(fault_server), tmp_path / "out", http=client(tmp_path), progress=progress
    )
    fetched_ok(result.path)
    kinds = [e.kind for e in events]
    first = kinds.index("verifying")
    assert events[first].done < SIZE and events[first].total == SIZE
    assert on_disk == [True] and "done" not in kinds[:first]
    assert set(kinds[first:-1]) == {"verifying"} and kinds[-1] == "done"  # then the verdict


@pytest.mark.parametrize(
    "fault",
    [
        Fault(times=3, drop_after=100_000),
        Fault(times=3, short_by=5000),
        Fault(times=2, extra=5000),
        Fault(times=2, wrong_range=True),
        Fault(times=2, status=503),
        Fault(times=2, status=429, retry_after="1"),
    ],
    ids=["drop", "short", "extra", "wrong-range", "503", "429"],
)
def test_transient_faults_are_retried(
    fault_server: FaultServer, tmp_path: Path, fault: Fault
) -> None:
    fault_server.add("/f.run", BODY, fault)
    result = download(request(fault_server), tmp_path / "out", http=client(tmp_path), connections=4)
    fetched_ok(result.path)
    assert fault.used == fault.times


def test_retry_after_is_honoured(fault_server: FaultServer, tmp_path: Path) -> None:
    fault_server.add("/f.run", BODY, Fault(times=1, status=429, retry_after="2"))
    slept: list[float] = []
    http = HttpClient(
        Settings.from_env(cache_dir=tmp_path / "cache"), backoff=Backoff(sleep=slept.append)
    )
    download(request(fault_server), tmp_path / "out", http=http, connections=2)
    assert 2.0 in slept


def test_server_that_ignores_range_gets_one_plain_stream(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    fault_server.add("/f.run", BODY, Fault(ignore_range=True))
    result = download(request(fault_server), tmp_path / "out", http=client(tmp_path), connections=8)
    fetched_ok(result.path)
    gets = fault_server.requests("/f.run")
    assert [g.status for g in gets] == [200, 200]  # the probe (closed early) and one full stream
    assert result.connections == 1


def test_endless_body_beyond_the_known_size_is_refused(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    # no Content-Length, no ranges: only the manifest's size bounds the body
    fault_server.add("/f.run", BODY, Fault(ignore_range=True, extra=10, no_length=True))
    with pytest.raises(IntegrityError, match=f"more than the expected {SIZE} bytes"):
        download(request(fault_server), tmp_path / "out", http=client(tmp_path))
    assert not (tmp_path / "out/f.run").exists()


def test_a_range_that_never_matches_fails_with_the_reason(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    fault_server.add("/f.run", BODY, Fault(wrong_range=True, only_from=SIZE))
    with pytest.raises(NetworkError, match="asked for bytes"):
        download(request(fault_server), tmp_path / "out", http=client(tmp_path), connections=2)


def test_416_restarts_then_gives_up(fault_server: FaultServer, tmp_path: Path) -> None:
    fault_server.add("/f.run", BODY, Fault(status=416))
    with pytest.raises(NetworkError, match="keeps changing"):
        download(request(fault_server), tmp_path / "out", http=client(tmp_path), connections=2)


def test_stalled_connection_times_out_and_is_retried(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    # the probe is served; the first range goes silent 100 000 bytes into its body until
    # the server shuts down: only the socket timeout (0.5 s) and a retry finish the file
    fault_server.add(
        "/f.run", BODY, Fault(times=1), Fault(times=1, hang="body", hang_after=100_000)
    )
    result = download(
        request(fault_server), tmp_path / "out", http=client(tmp_path, timeout=0.5), connections=2
    )
    fetched_ok(result.path)
    hung, *others = fault_server.requests("/f.run")[1:]
    assert hung.sent == 100_000 and hung.range is not None
    # its first read (64 KiB) was written; the rest of its range was asked again (the
    # range that hung is whichever of the two connections' first asks came first)
    start, end = (int(n) for n in hung.range.removeprefix("bytes=").split("-"))
    assert f"bytes={start + MIN_READ}-{end}" in [r.range for r in others]


def test_redirect_loop_is_stopped(fault_server: FaultServer, tmp_path: Path) -> None:
    fault_server.add("/loop.run", BODY, Fault(redirect="/loop.run"))
    with pytest.raises(NetworkError, match="more than 10 redirects"):
        download(request(fault_server, "/loop.run"), tmp_path / "out", http=client(tmp_path))


def test_redirect_is_followed_to_the_real_file(fault_server: FaultServer, tmp_path: Path) -> None:
    fault_server.add("/real.run", BODY)
    fault_server.add("/alias.run", b"", Fault(redirect="/real.run"))
    result = download(
        request(fault_server, "/alias.run"), tmp_path / "out", http=client(tmp_path), connections=4
    )
    assert result.path.name == "alias.run" and result.path.read_bytes() == BODY
    # segments go straight to where the redirect led
    assert len(fault_server.requests("/alias.run")) == 1


def test_checksum_mismatch_deletes_and_names_both(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    fault_server.add("/f.run", BODY)
    wrong = "0" * 64
    with pytest.raises(IntegrityError, match=f"sha256 mismatch: expected {wrong}, got {SHA}"):
        download(request(fault_server, sha256=wrong), tmp_path / "out", http=client(tmp_path))
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == []


def test_md5_for_installers(fault_server: FaultServer, tmp_path: Path) -> None:
    fault_server.add("/f.run", BODY)
    result = download(
        request(fault_server, sha256=None, md5=hashlib.md5(BODY).hexdigest()),
        tmp_path / "o",
        http=client(tmp_path),
    )
    assert result.algorithm == "md5"


def test_no_checksum_needs_allow_unverified(fault_server: FaultServer, tmp_path: Path) -> None:
    fault_server.add("/f.run", BODY)
    with pytest.raises(IntegrityError, match="no checksum is known") as refused:
        download(request(fault_server, sha256=None), tmp_path / "out", http=client(tmp_path))
    assert refused.value.hint == "--allow-unverified downloads it anyway"
    assert fault_server.requests() == []
    result = download(
        request(fault_server, sha256=None),
        tmp_path / "out",
        http=client(tmp_path),
        allow_unverified=True,
    )
    assert result.algorithm is None and result.path.read_bytes() == BODY


def test_404_fails_at_once_with_the_url(fault_server: FaultServer, tmp_path: Path) -> None:
    with pytest.raises(RemoteFileMissingError, match="/missing.run answered HTTP 404"):
        download(request(fault_server, "/missing.run"), tmp_path / "out", http=client(tmp_path))
    assert len(fault_server.requests()) == 1


def test_size_disagreeing_with_the_source(fault_server: FaultServer, tmp_path: Path) -> None:
    fault_server.add("/f.run", BODY)
    with pytest.raises(IntegrityError, match="sources disagree"):
        download(request(fault_server, size=SIZE + 1), tmp_path / "out", http=client(tmp_path))


def test_existing_verified_file_is_not_fetched_again(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    fault_server.add("/f.run", BODY)
    download(request(fault_server), tmp_path / "out", http=client(tmp_path))
    before = len(fault_server.log)
    again = download(request(fault_server), tmp_path / "out", http=client(tmp_path))
    assert again.skipped and len(fault_server.log) == before


def test_free_space_is_checked_before_the_first_byte(
    fault_server: FaultServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fault_server.add("/f.run", BODY)
    Usage = namedtuple("Usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda _p: Usage(10**9, 10**9, 1000))
    with pytest.raises(InsufficientSpaceError, match=f"needs {SIZE} more bytes .* only 1000 bytes"):
        download(request(fault_server), tmp_path / "out", http=client(tmp_path))
    assert [r.range for r in fault_server.requests()] == ["bytes=0-0"]


def _interrupt_after(limit: int) -> Callable[[ProgressEvent], None]:
    def progress(event: ProgressEvent) -> None:
        if event.kind == "advance" and event.done >= limit:
            raise KeyboardInterrupt

    return progress


def test_interrupted_download_resumes_without_refetching(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    # Each range answer sends 256 KiB, then holds: the interrupt comes with bytes on disk
    # and most of the file missing, however loaded the machine is.
    held = threading.Event()
    fault_server.add("/f.run", BODY, Fault(hang="body", hang_after=256 * 1024, until=held))
    with pytest.raises(KeyboardInterrupt):
        download(
            request(fault_server),
            tmp_path / "out",
            http=client(tmp_path),
            connections=4,
            progress=_interrupt_after(256 * 1024),
        )
    held.set()
    state = json.loads((tmp_path / "out/f.run.part.json").read_text())
    completed = sum(pos - start for start, pos, _end in state["segments"])
    assert 0 < completed <= 4 * 256 * 1024 and not (tmp_path / "out/f.run").exists()
    fault_server.resources["/f.run"].faults.clear()
    before = time.monotonic()
    events: list[ProgressEvent] = []
    # One connection: nothing is stolen, so no answer is cut off with bytes in flight.
    result = download(
        request(fault_server), tmp_path / "out", http=client(tmp_path), connections=1,
        progress=events.append,
    )  # fmt: skip
    fetched_ok(result.path)
    refetched = fault_server.sent(since=before)
    assert result.resumed_from == completed
    assert refetched == SIZE - completed + 1  # exactly what was missing (+ the probe byte)
    [said] = [e.message for e in events if e.kind == "notice"]
    assert said == f"resuming at {binary_size(completed)} of 8.0 MiB"  # binary units


def test_an_unsynced_partial_file_resumes_only_within_its_boot(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    """An install's archive (``durable=False``) saves its resume state unsynced: the rows
    hold while the page cache does, so Ctrl-C then a rerun resumes, and after a restart
    (another boot id in the state) the download starts over instead of resuming bytes a
    crash may have lost."""

    def interrupted() -> dict[str, Any]:
        held = threading.Event()
        fault_server.add("/f.run", BODY, Fault(hang="body", hang_after=256 * 1024, until=held))
        with pytest.raises(KeyboardInterrupt):
            download(
                request(fault_server), tmp_path / "out", http=client(tmp_path), connections=4,
                progress=_interrupt_after(256 * 1024), durable=False,
            )  # fmt: skip
        held.set()
        fault_server.resources["/f.run"].faults.clear()
        state: dict[str, Any] = json.loads((tmp_path / "out/f.run.part.json").read_text())
        return state

    def rerun() -> tuple[int, list[str]]:
        notices: list[str] = []
        result = download(
            request(fault_server), tmp_path / "out", http=client(tmp_path), connections=1,
            durable=False, progress=lambda e: notices.extend([e.message] if e.message else []),
        )  # fmt: skip
        fetched_ok(result.path)
        result.path.unlink()
        return result.resumed_from, notices

    state = interrupted()
    assert state["synced"] is False and state["boot"] == boot_id()
    resumed, _ = rerun()
    assert resumed > 0  # the same boot: Ctrl-C then the same command resumes
    state = interrupted()
    state["boot"] = "another-boot"
    (tmp_path / "out/f.run.part.json").write_text(json.dumps(state))
    resumed, notices = rerun()
    assert resumed == 0
    assert "the partial file was not synced and the machine restarted since; restarting" in notices


def test_changed_remote_restarts_cleanly(fault_server: FaultServer, tmp_path: Path) -> None:
    fault_server.add("/f.run", BODY, Fault(rate=1.5 * 1024 * 1024))
    with pytest.raises(KeyboardInterrupt):
        download(
            request(fault_server, size=None, sha256=None),
            tmp_path / "out",
            http=client(tmp_path),
            connections=4,
            progress=_interrupt_after(SIZE // 4),
            allow_unverified=True,
        )
    new_body = payload(SIZE, seed=99)
    fault_server.add("/f.run", new_body, etag='"v2"')
    notices: list[str] = []

    def progress(event: ProgressEvent) -> None:
        if event.kind == "notice" and event.message:
            notices.append(event.message)

    result = download(
        request(fault_server, size=None, sha256=hashlib.sha256(new_body).hexdigest()),
        tmp_path / "out",
        http=client(tmp_path),
        progress=progress,
    )
    fetched_ok(result.path, new_body)
    assert any("the remote file changed (ETag '\"v1\"' → '\"v2\"')" in n for n in notices)
    assert result.resumed_from == 0


def test_remote_changing_mid_download_is_caught_by_if_range(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    # connections drop early, so segments are asked for again after the file changed;
    # If-Range makes those answers whole-file 200s, and the download restarts on v2
    resource = fault_server.add("/f.run", BODY, Fault(drop_after=200_000, times=5))
    new_body = payload(SIZE, seed=5)
    notices: list[str] = []

    def progress(event: ProgressEvent) -> None:
        if event.kind == "notice" and event.message:
            notices.append(event.message)
        if fault_server.resources["/f.run"] is resource:
            fault_server.add("/f.run", new_body, etag='"v2"')

    result = download(
        request(fault_server, size=None, sha256=hashlib.sha256(new_body).hexdigest()),
        tmp_path / "out",
        http=client(tmp_path),
        connections=4,
        progress=progress,
    )
    fetched_ok(result.path, new_body)
    assert any("the remote file changed" in n for n in notices)
    assert any(r.status == 200 and r.if_range == '"v1"' for r in fault_server.requests())


def test_disk_full_mid_download_keeps_resumable_state(
    fault_server: FaultServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fault_server.add("/f.run", BODY)
    real_pwrite = os.pwrite
    calls = {"n": 0}

    def full(fd: int, data: bytes, offset: int) -> int:
        calls["n"] += 1
        if calls["n"] > 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_pwrite(fd, data, offset)

    monkeypatch.setattr(os, "pwrite", full)
    with pytest.raises(InsufficientSpaceError, match="the disk is full"):
        download(request(fault_server), tmp_path / "out", http=client(tmp_path), connections=2)
    assert (tmp_path / "out/f.run.part.json").exists()
    monkeypatch.setattr(os, "pwrite", real_pwrite)
    result = download(request(fault_server), tmp_path / "out", http=client(tmp_path), connections=2)
    fetched_ok(result.path)
    assert result.resumed_from > 0


def test_slow_segment_is_stolen(fault_server: FaultServer, tmp_path: Path) -> None:
    # the connection for the first segment crawls; the others finish and take its second half
    body = payload(16 * MIN_SPLIT, seed=3)
    slow = 1024 * 1024
    fault_server.add(
        "/f.run", body, Fault(rate=slow, only_from=0, times=2)
    )  # the probe, then segment 0
    started = time.monotonic()
    result = download(
        request(fault_server, size=len(body), sha256=hashlib.sha256(body).hexdigest()),
        tmp_path / "out",
        http=client(tmp_path),
        connections=4,
    )
    fetched_ok(result.path, body)
    first_end = len(body) // 4
    starts = [
        int(r.range.split("=")[1].split("-")[0])
        for r in fault_server.requests()
        if r.range and r.range != "bytes=0-0"
    ]
    assert any(0 < s < first_end for s in starts), starts  # a stolen piece of segment 0
    assert (
        time.monotonic() - started < first_end / slow * 0.8
    )  # faster than the slow connection alone


def test_many_files_share_a_global_connection_cap(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    bodies = {f"/f{i}.run": payload(3 * MIN_SPLIT, seed=i) for i in range(5)}
    for path, body in bodies.items():
        fault_server.add(path, body, Fault(rate=8 * 1024 * 1024))
    requests = [
        DownloadRequest(fault_server.url + p, p[1:], len(b), hashlib.sha256(b).hexdigest())
        for p, b in bodies.items()
    ]
    results = download_many(
        requests, tmp_path / "out", http=client(tmp_path), connections=4, total_connections=3
    )
    for result, body in zip(results, bodies.values(), strict=True):
        assert result.path.read_bytes() == body
    # probes are outside the cap (one per file, at most 4 files at once); ranges are within it
    assert fault_server.peak <= 3 + 4


# -- whole processes -------------------------------------------------------------
def _cli(tmp_path: Path, url: str, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "CUDAUP_CACHE_DIR": str(tmp_path / "cache")}
    return subprocess.Popen(
        [sys.executable, "-m", "cudaup", "download", url, "--sha256", SHA, "-o", str(tmp_path / "out"), *extra],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_sigint_then_rerun_resumes(fault_server: FaultServer, tmp_path: Path) -> None:
    # Each range answer sends 256 KiB, then holds until the test lets it go: the process
    # cannot finish before the signal, however loaded the machine is.
    hold = threading.Event()
    fault_server.add(
        "/f.run", BODY, Fault(times=1), Fault(hang="body", hang_after=256 * 1024, until=hold)
    )
    process = _cli(tmp_path, fault_server.url + "/f.run", "--connections", "4")
    state = tmp_path / "out/f.run.part.json"
    deadline = time.monotonic() + 60
    while recorded(state) == 0:  # the state file, rewritten every second, counts bytes
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    _out, err = process.communicate(timeout=60)
    hold.set()
    assert process.returncode == 130, err
    assert "run the same command again to resume" in err
    saved = json.loads(state.read_text())
    completed = sum(pos - start for start, pos, _end in saved["segments"])
    assert completed > 0
    fault_server.resources["/f.run"].faults.clear()
    before = time.monotonic()
    rerun = _cli(tmp_path, fault_server.url + "/f.run", "--json")
    out, err = rerun.communicate(timeout=30)
    assert rerun.returncode == 0, err
    [file] = json.loads(out)["files"]
    assert file["resumed_from"] == completed and file["verified"]
    # no more than the segments that were in flight: exactly what was missing
    assert fault_server.sent(since=before) <= SIZE - completed + 1
    fetched_ok(tmp_path / "out/f.run")


def test_two_processes_one_good_file(fault_server: FaultServer, tmp_path: Path) -> None:
    fault_server.add("/f.run", BODY, Fault(rate=16 * 1024 * 1024))
    first = _cli(tmp_path, fault_server.url + "/f.run", "--quiet")
    second = _cli(tmp_path, fault_server.url + "/f.run", "--quiet")
    for process in (first, second):
        _out, err = process.communicate(timeout=60)
        assert process.returncode == 0, err
    fetched_ok(tmp_path / "out/f.run")
    # One transfer: the other process found the file (it never probed).  Its end game may
    # steal half of a last piece, whose victim had some of it in flight (at most a piece
    # of 2 MiB here, at 16 MiB/s per answer), never the file twice.
    probes = [r for r in fault_server.requests("/f.run") if r.range == "bytes=0-0"]
    assert len(probes) == 1
    assert fault_server.sent() <= SIZE + 1 + 2 * 1024 * 1024


# -- a real web server ------------------------------------------------------------------
@pytest.mark.slow  # a real nginx
def test_through_real_nginx_with_a_per_connection_cap(tmp_path: Path) -> None:
    from tests.nginx import Nginx

    site = tmp_path / "site"
    site.mkdir()
    (site / "cuda.run").write_bytes(BODY)
    with Nginx(site, {"plain": None, "capped": "4m"}) as nginx:
        for name in ("plain", "capped"):
            started = time.monotonic()
            result = download(
                DownloadRequest(nginx.url(name) + "/cuda.run", "cuda.run", SIZE, SHA),
                tmp_path / name, http=client(tmp_path), connections=8,
            )  # fmt: skip
            fetched_ok(result.path)
            if name == "capped":
                # 8 MiB at 4 MiB/s per connection: one stream needs 2 s, eight well under 1 s
                assert time.monotonic() - started < 1.5


class _ScriptedBody:
    """A response body whose reads take the time the test says, on a fake clock."""

    def __init__(self, total: int, seconds_per_read: Callable[[int], float]) -> None:
        self.left = total
        self.now = 0.0
        self.sizes: list[int] = []
        self._seconds = seconds_per_read

    def clock(self) -> float:
        return self.now

    def readinto(self, view: memoryview) -> int:
        size = len(view)
        self.sizes.append(size)
        self.now += self._seconds(size)
        count = min(size, self.left)
        self.left -= count
        view[:count] = b"x" * count
        return count


def test_reads_grow_on_a_fast_link_and_shrink_on_a_slow_one() -> None:
    from cudaup.download.remote import MAX_READ, MIN_READ, ReadBuffer, read_body

    fast = _ScriptedBody(64 * 2**20, lambda size: 0.001)
    buffer = ReadBuffer()
    assert sum(len(chunk) for chunk in read_body(fast, buffer, fast.clock)) == 64 * 2**20
    assert fast.sizes[0] == MIN_READ
    assert max(fast.sizes) == MAX_READ  # a fast link gets few, large reads
    assert len(fast.sizes) < 80

    # 1 MB/s: a 1 MiB read would take a second; reads settle where each takes ~0.1-0.2 s.
    slow = _ScriptedBody(4 * 2**20, lambda size: size / 1e6)
    chunks = [len(chunk) for chunk in read_body(slow, buffer, slow.clock)]
    assert sum(chunks) == 4 * 2**20
    assert max(slow.sizes) <= 256 * 1024
    assert slow.sizes[-1] <= 256 * 1024


# ---------------------------------------------------------------------------
# Reading a file while it downloads (Arrival)
# ---------------------------------------------------------------------------
def _fetch_in_background(
    server: FaultServer, tmp_path: Path, arrival: Arrival, **kwargs: object
) -> tuple[threading.Thread, list[object]]:
    outcome: list[object] = []

    def run() -> None:
        try:
            result = download(
                request(server), tmp_path / "out", http=client(tmp_path),
                arrival=arrival, **kwargs,  # type: ignore[arg-type]
            )  # fmt: skip
        except BaseException as exc:
            outcome.append(exc)
        else:
            outcome.append(result)
        outcome.append(time.monotonic())

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def test_an_early_reader_gets_the_tail_first_and_every_byte(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    # 2 MiB/s a connection: the whole file takes seconds, its tail a fraction of one
    fault_server.add("/f.run", BODY, Fault(rate=2 * 1024 * 1024))
    arrival = Arrival(tail_first=256 * 1024)
    thread, outcome = _fetch_in_background(fault_server, tmp_path, arrival, connections=2)
    with arrival.open() as reader:
        reader.seek(-1000, io.SEEK_END)
        assert reader.read() == BODY[-1000:]
        tail_before_the_end = thread.is_alive() and not outcome  # read while still arriving
        reader.seek(0)
        assert reader.read() == BODY
    thread.join()
    result, _done_at = outcome
    assert isinstance(result, DownloadResult)
    fetched_ok(result.path)
    assert tail_before_the_end
    ranges = [
        r.range for r in fault_server.requests("/f.run") if r.range not in {None, "bytes=0-0"}
    ]
    # the tail is asked for in the first round (the two connections' requests may reach
    # the server in either order)
    [tail] = [r for r in ranges[:2] if str(r).endswith(f"-{SIZE - 1}")]
    first_start = str(tail)[len("bytes=") :].split("-")[0]
    assert 256 * 1024 <= SIZE - int(first_start) < SIZE // 2
    assert not arrival.lost


def test_an_early_reader_of_a_failed_download_is_told(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    # connections drop every 300 kB, so ranges keep being asked for again
    fault_server.add("/f.run", BODY, Fault(rate=2 * 1024 * 1024, drop_after=300_000))
    arrival = Arrival()
    thread, outcome = _fetch_in_background(fault_server, tmp_path, arrival, connections=2)
    with arrival.open() as reader:
        assert reader.read(1000) == BODY[:1000]
        fault_server.add("/f.run", BODY, Fault(status=404))  # the next requests fail
        with pytest.raises(ArrivalLostError):
            reader.read()
    thread.join()
    assert isinstance(outcome[0], RemoteFileMissingError)
    assert arrival.lost


@pytest.mark.parametrize("why", ["name", "directory"])
def test_an_early_reader_of_a_download_refused_before_it_began_is_told(
    fault_server: FaultServer, tmp_path: Path, why: str
) -> None:
    """A download that stops before its first request (a file name whose resume state no
    file system takes; a directory others may write) leaves no reader waiting: an install
    that extracts while it downloads hung there (round 19)."""
    fault_server.add("/f.run", BODY)
    arrival = Arrival()
    out = tmp_path / "out"
    name = "a" * 250 + ".run" if why == "name" else "f.run"
    if why == "directory":
        out.mkdir(mode=0o777)
        out.chmod(0o777)
    refused = DownloadRequest(fault_server.url + "/f.run", name, SIZE, SHA)
    opened: list[BaseException] = []

    def read() -> None:
        try:
            arrival.open().close()
        except ArrivalLostError as exc:
            opened.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    with pytest.raises((UsageError, UntrustedPathError)):
        download(refused, out, http=client(tmp_path), arrival=arrival)
    reader.join(timeout=30)
    assert not reader.is_alive() and len(opened) == 1
    assert arrival.lost and fault_server.requests() == []


def test_an_early_reader_learns_that_the_download_restarted(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    resource = fault_server.add("/f.run", BODY, Fault(drop_after=200_000, times=5))
    new_body = payload(SIZE, seed=5)
    arrival = Arrival()

    def progress(event: ProgressEvent) -> None:
        if fault_server.resources["/f.run"] is resource:
            fault_server.add("/f.run", new_body, etag='"v2"')

    result = download(
        request(fault_server, size=None, sha256=hashlib.sha256(new_body).hexdigest()),
        tmp_path / "out", http=client(tmp_path), connections=4, progress=progress,
        arrival=arrival,
    )  # fmt: skip
    fetched_ok(result.path, new_body)
    assert arrival.lost  # what an early reader read may have been v1's bytes
    with pytest.raises(ArrivalLostError):
        arrival.open()


def test_a_reader_of_a_finished_download_reads_the_final_file(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    fault_server.add("/f.run", BODY)
    arrival = Arrival()
    result = download(
        request(fault_server), tmp_path / "out", http=client(tmp_path), arrival=arrival
    )
    with arrival.open() as reader:
        assert reader.read() == BODY
    again = Arrival()
    download(request(fault_server), tmp_path / "out", http=client(tmp_path), arrival=again)
    with again.open() as reader:  # already here and verified: nothing downloads
        assert reader.read(10) == BODY[:10]
    assert result.path.name == "f.run"


@pytest.mark.parametrize("connections", [1, 4])
def test_a_file_read_once_is_not_fsynced_and_still_verified(
    fault_server: FaultServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, connections: int
) -> None:
    """An install's archive (``durable=False``) syncs nothing that a kept download syncs
    (its bytes, its resume state, its name) and hands none of its bytes to the disk's
    writeback, on both transfer paths; its bytes are checked all the same."""
    fault_server.add("/f.run", BODY)
    synced: list[str] = []
    writeback_asked: list[bool] = []
    real_fsync, real_fdatasync = os.fsync, os.fdatasync
    real_can = libc.can_start_writeback

    def counting(real: Callable[[int], None]) -> Callable[[int], None]:
        def sync(fd: int) -> None:
            synced.append(str(Path(f"/proc/self/fd/{fd}").readlink()))
            real(fd)

        return sync

    def asking() -> bool:
        writeback_asked.append(True)
        return real_can()

    monkeypatch.setattr(os, "fsync", counting(real_fsync))
    monkeypatch.setattr(os, "fdatasync", counting(real_fdatasync))
    monkeypatch.setattr(libc, "can_start_writeback", asking)
    kept = download(
        request(fault_server), tmp_path / "kept", http=client(tmp_path), connections=connections
    )
    fetched_ok(kept.path)
    assert any(name.endswith("f.run.part") for name in synced), "a kept file's bytes are synced"
    assert any(Path(name).is_dir() for name in synced), "and so is its name"
    # a server that takes ranges gets the parallel path, even on one connection: its
    # flusher asks whether writeback can start ahead of the syncs
    assert writeback_asked
    synced.clear()
    writeback_asked.clear()
    once = download(
        request(fault_server), tmp_path / "once", http=client(tmp_path),
        connections=connections, durable=False,
    )  # fmt: skip
    fetched_ok(once.path)
    assert synced == []
    assert writeback_asked == []
    fault_server.add("/bad.run", b"x" * SIZE)
    with pytest.raises(IntegrityError, match="sha256 mismatch"):
        download(
            request(fault_server, "/bad.run"), tmp_path / "once", http=client(tmp_path),
            connections=connections, durable=False,
        )  # fmt: skip
