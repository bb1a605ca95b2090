"""The probe that brings the bytes a reader needs first (a zip's tail), checked like any
range; and the download of a fresh zip of known size and checksum, which starts without
one: its tail and its front asked for at once, the first answers proving what a probe
would (ranges, size, validators)."""

from __future__ import annotations

import hashlib
import io
import json
import threading
from pathlib import Path

import pytest

from cudaup.config import Settings
from cudaup.download import DownloadRequest, DownloadResult, ProgressEvent, download
from cudaup.download.arrival import Arrival
from cudaup.download.range_plan import SegmentPlan, probe_range, tail_start
from cudaup.errors import ArrivalLostError, IntegrityError, NetworkError
from cudaup.net import backoff
from cudaup.net.backoff import Backoff
from cudaup.net.http import HttpClient
from cudaup.util.parallel import CancelledError
from tests.faultserver import Fault, FaultServer, payload

MIB = 1024 * 1024
SIZE = 8 * MIB
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
    *,
    connections: int | None = 1,
    events: list[ProgressEvent] | None = None,
    cancel: threading.Event | None = None,
) -> tuple[DownloadResult, bytes]:
    """Download ``/f.whl`` with one connection (``connections``; None: adapting, as an
    install's do) while another thread reads its tail, as the install's extraction does;
    the result and what the reader read (nothing: it was told the bytes were lost)."""
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
            request,
            tmp_path / "out",
            http=_client(tmp_path),
            connections=connections,
            arrival=arrival,
            progress=events.append if events is not None else None,
            cancel=cancel,
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


@pytest.mark.parametrize("connections", [1, None], ids=["probed", "without-a-probe"])
def test_a_file_longer_than_the_index_says_is_refused_before_its_bytes_are_kept(
    fault_server: FaultServer, tmp_path: Path, connections: int | None
) -> None:
    # Without a probe, the first answers' size is another than the index's: the download
    # asks again with a probe, which names both sizes; the bytes the answers brought go.
    fault_server.add("/f.whl", BODY + b"more")
    with pytest.raises(IntegrityError, match=f"says {SIZE} bytes but .* serves {SIZE + 4}"):
        _fetch(fault_server, tmp_path, Arrival(tail_first=TAIL), connections=connections)
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


# -- without a probe ---------------------------------------------------------------
def test_the_tail_and_the_front_are_asked_for_at_once(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    # The first request's answer waits until a second request has come: a probe, which
    # must be answered before anything else is asked, would wait for ever (the deadline).
    answer = threading.Event()
    fault_server.add("/f.whl", BODY, Fault(times=1, hang="headers", until=answer))
    outcome: list[tuple[DownloadResult, bytes]] = []
    worker = threading.Thread(
        target=lambda: outcome.append(
            _fetch(fault_server, tmp_path, Arrival(tail_first=TAIL), connections=None)
        )
    )
    worker.start()
    try:
        fault_server.wait_for_requests(2, "/f.whl", deadline=10)
    finally:
        answer.set()
        worker.join(timeout=60)
    result, tail = outcome[0]
    assert result.path.read_bytes() == BODY and tail == BODY[-1000:]
    first_two = fault_server.requests("/f.whl")[:2]
    assert {r.range for r in first_two} >= {TAIL_RANGE}
    assert any(str(r.range).startswith("bytes=0-") for r in first_two)
    assert all(r.if_range is None for r in first_two)  # no validator is known yet
    assert sum(r.sent for r in fault_server.requests("/f.whl")) == SIZE  # no byte twice


def test_the_first_answers_validators_go_with_every_later_request(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    fault_server.add("/f.whl", BODY, etag='"v7"')
    result, _tail = _fetch(fault_server, tmp_path, Arrival(tail_first=TAIL), connections=None)
    assert result.path.read_bytes() == BODY
    requests = fault_server.requests("/f.whl")
    assert len(requests) > 2, [r.range for r in requests]
    assert [r.if_range for r in requests[:2]] == [None, None]
    assert all(r.if_range == '"v7"' for r in requests[2:])


def test_another_version_among_the_first_answers_is_probed_and_fetched_anew(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    # The answer for the front names another ETag than the tail's: two versions.
    fault_server.add(
        "/f.whl", BODY, Fault(times=1, only_from=0, headers={"ETag": '"v0"'}), etag='"v1"'
    )
    events: list[ProgressEvent] = []
    result, _tail = _fetch(
        fault_server, tmp_path, Arrival(tail_first=TAIL), connections=None, events=events
    )
    assert result.path.read_bytes() == BODY
    said = [e.message or "" for e in events if e.kind == "notice"]
    assert any("another version" in m and "asking the server first" in m for m in said), said
    # then the download went as a probed one does: the tail in the probe, then the rest
    ranges = [r.range for r in fault_server.requests("/f.whl")]
    assert TAIL_RANGE in ranges[2:], ranges


def test_a_server_that_ignores_ranges_gets_one_stream(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    fault_server.add("/f.whl", BODY, Fault(ignore_range=True))
    result, tail = _fetch(fault_server, tmp_path, Arrival(tail_first=TAIL), connections=None)
    assert result.path.read_bytes() == BODY
    # The reader is told its part file is gone (it then reads the verified file, as an
    # install's extraction does), never left reading a file being replaced.
    assert tail == b""
    assert result.connections == 1
    assert fault_server.requests("/f.whl")[-1].range is None  # the stream asks no range


def test_the_resume_state_records_the_validators_the_answers_brought(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    # Slow enough to stop midway: the state then saved must name the server's validators
    # (none were known when the download began), or the next run could not resume it.
    fault_server.add("/f.whl", BODY, Fault(rate=2 * MIB), etag='"v9"')
    cancel = threading.Event()

    def stop_midway() -> None:
        while fault_server.sent("/f.whl") < 2 * MIB and not cancel.is_set():
            cancel.wait(0.01)
        cancel.set()

    stopper = threading.Thread(target=stop_midway)
    stopper.start()
    try:
        with pytest.raises(CancelledError):
            _fetch(
                fault_server, tmp_path, Arrival(tail_first=TAIL), connections=None, cancel=cancel
            )
    finally:
        cancel.set()
        stopper.join()
    state = json.loads((tmp_path / "out" / "f.whl.part.json").read_text())
    assert state["etag"] == '"v9"'
    assert state["size"] == SIZE
    assert sum(position - start for start, position, _end in state["segments"]) > 0
