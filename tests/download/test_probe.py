"""The probe that brings the bytes a reader needs first (a zip's tail), checked like any range."""

from __future__ import annotations

import hashlib
import io
import threading
from pathlib import Path

import pytest

from cudaup.config import Settings
from cudaup.download import DownloadRequest, DownloadResult, download
from cudaup.download.arrival import Arrival
from cudaup.download.range_plan import SegmentPlan, probe_range, tail_start
from cudaup.errors import ArrivalLostError, IntegrityError, NetworkError
from cudaup.net import backoff
from cudaup.net.backoff import Backoff
from cudaup.net.http import HttpClient
from tests.faultserver import Fault, FaultServer, payload

SIZE = 8 * 1024 * 1024
BODY = payload(SIZE)
TAIL = 256 * 1024
#: where a fresh plan's tail segment, and so the probe's range, begins
HEAD = tail_start(SIZE, TAIL)
TAIL_RANGE = f"bytes={HEAD}-{SIZE - 1}"


@pytest.fixture(autouse=True)
def _quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backoff, "DEFAULT", Backoff(base=0.01, cap=0.01))


def _client(tmp_path: Path) -> HttpClient:
    return HttpClient(
        Settings.from_env(cache_dir=tmp_path / "cache", timeout=30.0),
        backoff=Backoff(base=0.01, cap=0.01),
    )


def _fetch(
    server: FaultServer,
    tmp_path: Path,
    arrival: Arrival | None,
    body: bytes = BODY,
    size: int | None = None,
) -> tuple[DownloadResult, bytes]:
    """Download ``/f.whl`` with one connection while another thread reads its tail, as
    the install's extraction does; the result and what the reader read."""
    request = DownloadRequest(
        server.url + "/f.whl",
        "f.whl",
        len(body) if size is None else size,
        hashlib.sha256(body).hexdigest(),
    )
    read: list[bytes] = []

    def reader() -> None:
        assert arrival is not None
        try:
            with arrival.open() as handle:
                handle.seek(-1000, io.SEEK_END)
                read.append(handle.read())
        except ArrivalLostError:
            pass  # the download failed: what the test asserts

    thread = threading.Thread(target=reader) if arrival is not None else None
    if thread is not None:
        thread.start()
    try:
        result = download(
            request, tmp_path / "out", http=_client(tmp_path), connections=1, arrival=arrival
        )
    finally:
        if thread is not None:
            thread.join(timeout=30)
    assert result.path.read_bytes() == body
    return result, read[0] if read else b""


def test_the_probe_brings_the_tail_one_request_fewer(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    fault_server.add("/f.whl", BODY)
    _fetch(fault_server, tmp_path / "plain", None)
    plain = [r.range for r in fault_server.requests("/f.whl")]
    assert plain == ["bytes=0-0", f"bytes=0-{SIZE - 1}"]

    fault_server.log.clear()
    _result, tail = _fetch(fault_server, tmp_path / "early", Arrival(tail_first=TAIL))
    assert tail == BODY[-1000:]
    requests = fault_server.requests("/f.whl")
    # the probe asked for the tail itself; the one connection then takes the rest, no more:
    # before, a probe of one byte, the tail, then the head (three requests, not two)
    assert [(r.range, r.status) for r in requests] == [
        (TAIL_RANGE, 206),
        (f"bytes=0-{HEAD - 1}", 206),
    ]
    assert requests[0].sent == SIZE - HEAD
    assert sum(r.sent for r in requests) == SIZE  # no byte fetched twice


def test_a_file_smaller_than_a_tail_segment_comes_whole_in_the_probe(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    small = payload(1024 * 1024 + 123, seed=3)
    assert probe_range(len(small), TAIL) == (0, len(small))
    fault_server.add("/f.whl", small)
    _result, tail = _fetch(fault_server, tmp_path, Arrival(tail_first=TAIL), body=small)
    assert tail == small[-1000:]
    assert [r.range for r in fault_server.requests("/f.whl")] == [f"bytes=0-{len(small) - 1}"]


def test_a_probe_answered_with_another_range_is_asked_again_and_its_bytes_unused(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    # the first answer is the range shifted by a byte: a right-looking length, wrong bytes
    fault_server.add("/f.whl", BODY, Fault(times=1, wrong_range=True))
    _result, tail = _fetch(fault_server, tmp_path, Arrival(tail_first=TAIL))
    assert tail == BODY[-1000:]
    requests = fault_server.requests("/f.whl")
    assert [r.range for r in requests[:2]] == [TAIL_RANGE, TAIL_RANGE]


def test_a_probe_whose_body_ends_short_is_asked_again(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    fault_server.add("/f.whl", BODY, Fault(times=1, short_by=1000))
    _result, tail = _fetch(fault_server, tmp_path, Arrival(tail_first=TAIL))
    assert tail == BODY[-1000:]
    assert [r.range for r in fault_server.requests("/f.whl")[:2]] == [TAIL_RANGE, TAIL_RANGE]


def test_a_probe_never_answered_with_its_range_ends_the_download(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    fault_server.add("/f.whl", BODY, Fault(wrong_range=True))
    with pytest.raises(NetworkError, match=r"the probe failed .*asked for bytes"):
        _fetch(fault_server, tmp_path, Arrival(tail_first=TAIL))


def test_a_server_that_ignores_ranges_gets_one_stream_and_the_reader_its_tail(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    fault_server.add("/f.whl", BODY, Fault(ignore_range=True))
    result, tail = _fetch(fault_server, tmp_path, Arrival(tail_first=TAIL))
    assert tail == BODY[-1000:]
    assert result.connections == 1
    requests = fault_server.requests("/f.whl")
    assert [(r.range, r.status) for r in requests] == [(TAIL_RANGE, 200), (None, 200)]
    assert requests[0].sent < SIZE  # the probe's 200 body is not read to its end


def test_a_file_shorter_than_the_index_says_is_refused_naming_both_sizes(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    short = BODY[: HEAD - 4096]  # the probe's range starts past its end: 416
    fault_server.add("/f.whl", short)
    with pytest.raises(IntegrityError, match=f"says {SIZE} bytes but .* serves {len(short)}"):
        _fetch(fault_server, tmp_path, Arrival(tail_first=TAIL), body=BODY)
    assert [r.status for r in fault_server.requests("/f.whl")] == [416]


def test_a_file_longer_than_the_index_says_is_refused_before_its_bytes_are_kept(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    fault_server.add("/f.whl", BODY + b"more")
    with pytest.raises(IntegrityError, match=f"says {SIZE} bytes but .* serves {SIZE + 4}"):
        _fetch(fault_server, tmp_path, Arrival(tail_first=TAIL), body=BODY)
    assert not (tmp_path / "out" / "f.whl.part").exists()


def test_the_probes_bytes_go_only_where_a_plan_has_none() -> None:
    plan = SegmentPlan.split(SIZE, 2, tail_first=TAIL)
    tail = plan.fresh_segment_at(HEAD)
    assert tail is not None and tail.first and tail.end == SIZE
    assert plan.fresh_segment_at(HEAD + 4096) is None  # no segment begins there
    plan.advance(tail, 10)
    assert plan.fresh_segment_at(HEAD) is None  # a resumed plan that has some of them
    taken = plan.take()
    assert taken is not None and taken.start == HEAD  # the tail is still handed out first
    assert plan.fresh_segment_at(0) is not None
    plan.take()
    assert plan.fresh_segment_at(0) is None  # a worker fills it


def test_a_probe_answered_with_a_shorter_prefix_keeps_it_and_asks_for_the_rest(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    # the server's own chunk limit: every 206 carries at most 100 kB of what was asked
    fault_server.add("/f.whl", BODY, Fault(max_range=100_000))
    _result, tail = _fetch(fault_server, tmp_path, Arrival(tail_first=TAIL))
    assert tail == BODY[-1000:]
    requests = fault_server.requests("/f.whl")
    assert requests[0].range == TAIL_RANGE and requests[0].sent == 100_000
    # the rest of the tail is asked for first, from where the probe's answer ended
    assert requests[1].range == f"bytes={HEAD + 100_000}-{SIZE - 1}"
    assert sum(r.sent for r in requests) == SIZE
