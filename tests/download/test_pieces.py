"""In-order pieces through the real downloader: the file fills from its front, pieces
are sized to what requests cost, and the part file is synced while it fills."""

from __future__ import annotations

import errno
import hashlib
import itertools
import json
import os
import sys
from pathlib import Path

import pytest

from cudaup.config import Settings
from cudaup.download import DownloadRequest, DownloadResult, ProgressEvent, download, parallel
from cudaup.download.arrival import Arrival
from cudaup.download.range_plan import BASE_PIECE
from cudaup.errors import InsufficientSpaceError
from cudaup.net import backoff
from cudaup.net.backoff import Backoff
from cudaup.net.http import HttpClient
from cudaup.util import libc
from tests.download.support import recorded
from tests.faultserver import Fault, FaultServer, payload

MIB = 1024 * 1024


@pytest.fixture(autouse=True)
def _quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backoff, "DEFAULT", Backoff(base=0.01, cap=0.01))


def client(tmp_path: Path) -> HttpClient:
    return HttpClient(
        Settings.from_env(cache_dir=tmp_path / "cache"), backoff=Backoff(base=0.01, cap=0.01)
    )


def get(
    server: FaultServer,
    tmp_path: Path,
    body: bytes,
    connections: int,
    **kwargs: object,
) -> DownloadResult:
    request = DownloadRequest(
        server.url + "/f.run", "f.run", len(body), hashlib.sha256(body).hexdigest()
    )
    result = download(
        request, tmp_path / "out", http=client(tmp_path), connections=connections,
        **kwargs,  # type: ignore[arg-type]
    )  # fmt: skip
    assert result.path.read_bytes() == body
    return result


def asked(server: FaultServer) -> list[tuple[int, int]]:
    """The byte ranges asked for after the probe, ``(first, last + 1)``, in arrival order."""
    ranges = []
    for served in server.requests("/f.run"):
        if served.range in {None, "bytes=0-0"}:
            continue
        first, last = str(served.range).removeprefix("bytes=").split("-")
        ranges.append((int(first), int(last) + 1))
    return ranges


def test_the_file_fills_from_its_front_and_the_hash_follows(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    body = payload(48 * MIB, seed=21)
    fault_server.add("/f.run", body, Fault(rate=12 * MIB))  # about a second in all
    arrival = Arrival()
    lags: list[int] = []

    def progress(event: ProgressEvent) -> None:
        plan = arrival._plan
        if event.kind == "advance" and plan is not None:
            lags.append(plan.completed - plan.watermark())

    get(fault_server, tmp_path, body, connections=4, arrival=arrival, progress=progress)
    assert lags
    # Four connections, pieces of at most BASE_PIECE: the contiguous prefix (what the hash
    # can read) stays within the pieces in flight (16 MiB; 24 allowed for a slow moment).
    # Four equal segments leave three quarters of what arrived behind it: 32 MiB at 90 %.
    assert max(lags) <= 6 * BASE_PIECE, lags
    first_round = sorted(asked(fault_server)[:4])
    assert first_round[0][0] == 0
    assert all(a[1] == b[0] for a, b in itertools.pairwise(first_round))
    assert first_round[-1][1] <= 4 * BASE_PIECE  # from the front, not spread over the file


def test_a_far_server_gets_larger_pieces(fault_server: FaultServer, tmp_path: Path) -> None:
    """Each request waits at least 0.2 s for its answer: pieces grow until that round trip
    no longer shows (here to the even share of what is left, then the rest at once:
    smaller last pieces would cost more round trips than they save).  How a near server's
    pieces compare is the plan's (a loaded machine answers a near request late too):
    test_segments' test_pieces_follow_the_round_trip."""
    body = payload(32 * MIB, seed=22)
    fault_server.add("/f.run", body, Fault(rate=16 * MIB, latency=0.2))
    get(fault_server, tmp_path / "far", body, connections=2)
    far = [last - first for first, last in asked(fault_server)]
    assert far[:2] == [BASE_PIECE, BASE_PIECE]  # nothing known yet
    # 64 round trips of at least 0.2 s: more than the base piece at any speed above 0.33 MiB/s
    assert max(far[2:]) > BASE_PIECE, far


def test_the_bytes_on_disk_go_to_the_writeback_between_the_saves(
    fault_server: FaultServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between two saves of the state (each a sync that holds the writers back), the
    bytes written since are handed to the kernel's writeback, which does not wait: only
    bytes already in the part file, and most of the file before its last byte lands."""
    monkeypatch.setattr(parallel, "FLUSH_BYTES", 2 * MIB)  # not where writeback can start
    monkeypatch.setattr(parallel, "STATE_INTERVAL", 3600.0)  # never by the clock
    if not sys.platform.startswith("linux"):
        pytest.skip("sync_file_range is Linux's")
    assert libc.can_start_writeback()
    body = payload(16 * MIB, seed=23)
    fault_server.add("/f.run", body, Fault(rate=8 * MIB))  # two seconds with two connections
    state = tmp_path / "out" / "f.run.part.json"
    handed: list[tuple[int, int, bool]] = []  # (offset, length, they hold the file's bytes)
    real = libc.start_writeback

    def start_writeback(fd: int, offset: int, length: int) -> None:
        assert offset % parallel.PAGE == 0 and length % parallel.PAGE == 0
        handed.append((offset, length, os.pread(fd, length, offset) == body[offset:][:length]))
        real(fd, offset, length)

    monkeypatch.setattr(libc, "start_writeback", start_writeback)
    seen: set[int] = set()

    def progress(event: ProgressEvent) -> None:
        if event.kind == "advance":
            seen.add(recorded(state))

    get(fault_server, tmp_path, body, connections=2, progress=progress)
    assert all(holds for _, _, holds in handed), handed
    assert max(offset + length for offset, length, _ in handed) >= len(body) // 2, handed
    assert seen <= {0}, seen  # saved at the start only: not every 2 MiB


def test_without_writeback_the_state_is_saved_as_the_bytes_arrive(
    fault_server: FaultServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where writeback cannot be started without waiting, each :data:`FLUSH_BYTES` brings
    a sync and a save, so that the writeback overlaps the transfer all the same."""
    monkeypatch.setattr(parallel, "FLUSH_BYTES", 2 * MIB)
    monkeypatch.setattr(parallel, "STATE_INTERVAL", 3600.0)  # never by the clock
    monkeypatch.setattr(libc, "can_start_writeback", lambda: False)
    body = payload(16 * MIB, seed=23)
    fault_server.add("/f.run", body, Fault(rate=8 * MIB))  # two seconds with two connections
    state = tmp_path / "out" / "f.run.part.json"
    seen: set[int] = set()

    def progress(event: ProgressEvent) -> None:
        if event.kind == "advance":
            seen.add(recorded(state))

    get(fault_server, tmp_path, body, connections=2, progress=progress)
    saved_midway = sorted(n for n in seen if 0 < n < len(body))
    assert len(saved_midway) >= 2, seen  # synced and saved every 2 MiB or so


def test_a_sync_that_finds_the_disk_full_ends_the_download_resumably(
    fault_server: FaultServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file system that allocates blocks late says "full" when the data is synced, not
    when it is written: the sync that fails names the part file, and the state saved
    before it still resumes."""
    monkeypatch.setattr(parallel, "STATE_INTERVAL", 0.1)  # a second sync comes soon
    body = payload(16 * MIB, seed=24)
    fault_server.add("/f.run", body, Fault(rate=8 * MIB))
    real = os.fdatasync
    syncs: list[int] = []

    def full_after_the_first(fd: int) -> None:
        syncs.append(fd)
        if len(syncs) > 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(fd)

    monkeypatch.setattr(os, "fdatasync", full_after_the_first)
    with pytest.raises(InsufficientSpaceError) as caught:
        get(fault_server, tmp_path, body, connections=2)
    out = tmp_path / "out"
    assert str(caught.value).startswith(f"cannot write {out}/f.run.part: the disk is full")
    assert json.loads((out / "f.run.part.json").read_text())["size"] == len(body)
    monkeypatch.setattr(os, "fdatasync", real)
    fault_server.resources["/f.run"].faults.clear()
    assert get(fault_server, tmp_path, body, connections=2).path == out / "f.run"


def test_the_probe_sizes_the_first_piece(fault_server: FaultServer, tmp_path: Path) -> None:
    """The probe that brought a zip's member list measured the link (its round trip and
    its body's speed): the first piece is cut to that, not blind.  Cut blind it was the
    base piece, a round trip of idle link after it (a 61 MB wheel 60 ms away: three
    requests where one or two carry it)."""
    body = payload(40 * MIB, seed=23)
    fault_server.add("/f.run", body, Fault(rate=16 * MIB, latency=0.05))
    get(fault_server, tmp_path, body, connections=2, arrival=Arrival(tail_first=MIB))
    first, *_ = asked(fault_server)[1:]  # after the probe's tail
    # 64 round trips of at least 0.05 s at what the tail's megabyte took: several base pieces.
    assert first[0] == 0 and first[1] > 2 * BASE_PIECE, asked(fault_server)
