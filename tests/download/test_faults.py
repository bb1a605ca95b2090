"""The fault matrix: each way a server misbehaves, against the library and the CLI.

Every case runs against :class:`~tests.faultserver.FaultServer` with small limits (a
stall limit of 0.6 s, a speed floor of 64 KiB/s over a third of it), once through
:func:`cudaup.download.download` with exact assertions on the outcome and on the requests
the server saw, and once through ``cudaup download URL --sha256 … -o DIR`` for the exit
code and the message, in a sandboxed filesystem (:mod:`tests.sandbox`) snapshotted
before and after: nothing changes outside the cache and ``-o``, and a failure leaves no
file there.  Answers no retry mends (a refused TLS certificate, headers too long to
read) are asked once.  Disk and permission faults are in ``test_disk.py``, the size
ceiling in ``test_ceiling.py``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from cudaup.config import Settings
from cudaup.download import DownloadRequest, DownloadResult, ProgressEvent, download
from cudaup.download.arrival import Arrival
from cudaup.download.remote import (
    MAX_FAILURES,
    MIN_READ,
    ReadBuffer,
    RetryableError,
    ask,
    body_of,
    read_body,
)
from cudaup.download.watch import Flow, TransferLimits, Watchdog
from cudaup.errors import EXIT_CODES, ArrivalLostError, NetworkError
from cudaup.net import backoff
from cudaup.net.backoff import Backoff
from cudaup.net.http import HttpClient
from tests.faultserver import Fault, FaultServer, Served, payload, self_signed
from tests.helpers import run_cli
from tests.sandbox import Sandbox, sandbox  # noqa: F401 - fixture

MIB = 1024 * 1024
SIZE = 4 * MIB
BODY = payload(SIZE, seed=11)
SHA = hashlib.sha256(BODY).hexdigest()
#: The stall limit every case runs with (the default is 60 s), the one figure the others
#: follow, so that a stall costs a fraction of a second on the real socket.
STALL = 0.6
#: The speed floor's window (the default is 30 s), a third of the stall limit: it is also
#: each request's socket timeout, so the stall limit is three such requests.
WINDOW = STALL / 3
#: A trickle's bytes per second: far below the floor (64 KiB/s), a few bytes every
#: 0.05 s, never silent long enough for the socket timeout (one window) to fire.
TRICKLE = 20 / WINDOW
#: Headers dribbled a byte per this many seconds: no socket timeout fires on them either.
DRIBBLE = WINDOW / 4
LIMITS: dict[str, Any] = {"speed_limit": 64 * 1024, "speed_time": WINDOW, "stall_timeout": STALL}
ENV = {
    "CUDAUP_SPEED_LIMIT": "65536",
    "CUDAUP_SPEED_TIME": f"{WINDOW:g}",
    "CUDAUP_STALL_TIMEOUT": f"{STALL:g}",
}


@pytest.fixture(autouse=True)
def _quick(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retries wait 10 ms; the CLI runs with the small limits above."""
    monkeypatch.setattr(backoff, "DEFAULT", Backoff(base=0.01, cap=0.01))
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)


def client(tmp_path: Path, slept: list[float] | None = None, **settings: Any) -> HttpClient:
    wait = slept.append if slept is not None else (lambda _seconds: None)
    configured = Settings.from_env(cache_dir=tmp_path / "cache")
    return HttpClient(
        dataclasses.replace(configured, **{**LIMITS, **settings}),
        backoff=Backoff(base=0.01, cap=0.01, sleep=wait),
    )


def get(
    server: FaultServer,
    tmp_path: Path,
    *,
    connections: int = 1,
    body: bytes = BODY,
    http: HttpClient | None = None,
    progress: list[ProgressEvent] | None = None,
) -> DownloadResult:
    request = DownloadRequest(
        server.url + "/f.run", "f.run", len(body), hashlib.sha256(body).hexdigest()
    )
    return download(
        request, tmp_path / "out", http=http or client(tmp_path), connections=connections,
        progress=progress.append if progress is not None else None,
    )  # fmt: skip


def verified(result: DownloadResult, body: bytes = BODY) -> None:
    assert result.path.read_bytes() == body
    assert not result.path.with_name("f.run.part").exists()
    assert not result.path.with_name("f.run.part.json").exists()


def ranges(server: FaultServer) -> list[Served]:
    """The requests after the probe."""
    return server.requests("/f.run")[1:]


def stalled(server: FaultServer, tmp_path: Path, connections: int = 1) -> tuple[str, str]:
    """The message of a download that must fail with exit 5, and the server's host."""
    with pytest.raises(NetworkError) as caught:
        get(server, tmp_path, connections=connections)
    assert caught.value.exit_code == 5
    return str(caught.value), server.url.removeprefix("http://")


# ---------------------------------------------------------------------------
# The library, case by case
# ---------------------------------------------------------------------------
def test_trickle_is_dropped_at_the_floor_and_asked_again(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    # the probe is served; the first range trickles (no socket timeout ever fires); the
    # next is served
    fault_server.add("/f.run", BODY, Fault(times=1), Fault(times=1, rate=TRICKLE))
    result = get(fault_server, tmp_path)
    verified(result)
    trickled, again = ranges(fault_server)
    assert trickled.range == f"bytes=0-{SIZE - 1}" and trickled.sent < 100
    start = int(str(again.range).removeprefix("bytes=").split("-")[0])
    assert again.range == f"bytes={start}-{SIZE - 1}" and start <= trickled.sent
    # the probe's connection carried the trickle, which was dropped: a fresh one after
    assert fault_server.connections("/f.run") == 2


def test_a_trickle_that_never_ends_fails_as_a_stall(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    fault_server.add("/f.run", BODY, Fault(times=1), Fault(rate=TRICKLE))
    message, host = stalled(fault_server, tmp_path)
    # a few bytes per attempt are not progress: less than a window at the floor
    assert re.match(
        rf"the server stalled: (nothing arrived from {host} for|only \d+ bytes arrived from "
        rf"{host} in) {STALL:g} s \(last: slower than 64 KiB/s for {WINDOW:g} s",
        message,
    ), message
    # each range request lasts one floor window of the stall limit (three windows)
    assert len(ranges(fault_server)) in {3, 4}
    assert (tmp_path / "out/f.run.part.json").exists()  # what arrived is kept, to resume


def test_a_server_that_never_answers_fails_within_the_stall_limit(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    fault_server.add("/f.run", BODY, Fault(hang="headers"))
    message, host = stalled(fault_server, tmp_path)
    assert message.startswith(f"the server stalled: nothing arrived from {host} for {STALL:g} s")
    assert "timed out" in message and message.endswith("; try again later")
    # the probe, asked with the floor's window as its timeout until the stall limit is gone
    assert len(fault_server.requests("/f.run")) in {3, 4}


def test_headers_dribbled_a_byte_at_a_time_end_at_the_stall_limit(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    # a byte every quarter window: no socket timeout fires and no body is there to measure
    fault_server.add("/f.run", BODY, Fault(hang="dribble", dribble_every=DRIBBLE))
    message, host = stalled(fault_server, tmp_path)
    assert message == (
        f"the server stalled: nothing arrived from {host} for {STALL:g} s; try again later"
    )
    assert len(fault_server.requests("/f.run")) == 1  # the probe, never answered


def test_a_response_that_stops_mid_body_is_asked_again_from_where_it_stopped(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    fault_server.add(
        "/f.run", BODY, Fault(times=1), Fault(times=1, hang="body", hang_after=100_000)
    )
    result = get(fault_server, tmp_path)
    verified(result)
    hung, again = ranges(fault_server)
    assert hung.range == f"bytes=0-{SIZE - 1}" and hung.sent == 100_000
    # the first read (64 KiB) was written; the next one, cut off by the silence, was not
    assert again.range == f"bytes={MIN_READ}-{SIZE - 1}"


def test_a_server_that_goes_silent_after_its_headers_fails_as_a_stall(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    fault_server.add("/f.run", BODY, Fault(times=1), Fault(hang="body"))
    message, host = stalled(fault_server, tmp_path, connections=2)
    assert message.startswith(
        f"the server stalled: nothing arrived from {host} for {STALL:g} s (last: "
    )
    assert all(r.sent == 0 for r in ranges(fault_server))


def test_a_dropped_tls_connection_hands_over_no_raw_record_as_the_body(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The watchdog drops a TLS connection while its next records wait in the kernel.
    # urllib3's own shutdown (SSLSocket.shutdown) dropped the TLS object too: the reads
    # after it read the socket raw, and those records came back as if they were the body
    # (a download wrote them into its file; only the checksum caught them).
    body = payload(8 * MIB, seed=13)
    with FaultServer(tls=self_signed(tmp_path)) as server:
        server.add("/f.run", body)
        monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "cert.pem"))
        http = client(tmp_path)
        watchdog = Watchdog(TransferLimits.of(http.settings))
        got = bytearray()

        def receive(raw: Any, flow: Flow) -> tuple[None, bool]:
            chunks = read_body(body_of(raw), ReadBuffer(), flow=flow)
            got.extend(next(chunks))
            deadline = time.monotonic() + 10
            while server.sent("/f.run") < len(got) + 4 * MIN_READ:  # sent: queued here
                assert time.monotonic() < deadline, "the server sent no more"
                time.sleep(0.01)
            watchdog.drop_all("dropped by the test")
            for chunk in chunks:
                got.extend(chunk)
            return None, True

        with pytest.raises(RetryableError, match="dropped by the test"):
            ask(http, watchdog, server.url + "/f.run", {"Accept-Encoding": "identity"}, receive)
    assert len(got) > MIN_READ  # what was queued was read after the drop...
    assert bytes(got) == body[: len(got)]  # ...and all of it is the body's


#: Enough for a segment per connection of 8, so that all 8 ask and 6 are refused: at 8 MiB
#: a worker could find no free segment and end first (fewer refusals: the test below).
CAPPED_SIZE = 32 * MIB


def capped(server: FaultServer, body: bytes) -> None:
    """Serve ``body`` 2 requests at a time per client, 503 + Retry-After beyond.  The 2
    served ones wait until all 8 first requests have arrived, so the refusals are the
    same on every run."""
    everyone_asked = threading.Event()
    server.add(
        "/f.run",
        body,
        Fault(times=1),
        Fault(cap=2, retry_after="1", hang="body", until=everyone_asked),
    )

    def release_when_all_asked() -> None:
        server.wait_for_requests(1 + 8, "/f.run")
        everyone_asked.set()

    threading.Thread(target=release_when_all_asked, daemon=True).start()


def test_a_connection_cap_lowers_the_connections_for_the_rest_of_the_download(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    body = payload(CAPPED_SIZE, seed=12)
    capped(fault_server, body)
    slept: list[float] = []
    events: list[ProgressEvent] = []
    # the held answers wait for the slowest thread to ask: no floor may drop them meanwhile
    patient = client(tmp_path, slept, speed_time=30.0, stall_timeout=60.0)
    result = get(fault_server, tmp_path, connections=8, body=body, http=patient, progress=events)
    verified(result, body)
    refused = [r for r in ranges(fault_server) if r.status == 503]
    assert len(refused) == 6 and result.connections == 2
    assert fault_server.serving_peak == 2
    assert slept == []  # each refused connection was given up, not retried
    notices = [e.message for e in events if e.kind == "notice"]
    assert any(n and n.endswith("using 2 connections from now on") for n in notices), notices


def test_a_cap_met_with_fewer_workers_than_allowed_retires_the_refused_ones(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    """4 MiB in pieces for 8 connections: some workers find no piece left and end, so
    fewer than 8 run when the server refuses.  Each refusal lowers the count to one fewer
    than run, and the refused worker stops.  Counted down from 8 instead, the count stayed
    above the workers left, and the refused ones waited out Retry-After and asked again
    (4 waits).  The 2 served answers hold until only their 2 workers are left."""
    body = payload(4 * MIB, seed=3)
    settled = threading.Event()
    fault_server.add(
        "/f.run", body, Fault(times=1), Fault(cap=2, retry_after="1", hang="body", until=settled)
    )

    def release_when_two_workers_are_left() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not settled.is_set():
            workers = [t for t in threading.enumerate() if t.name.startswith("cudaup-dl-")]
            if fault_server.requests("/f.run")[1:] and len(workers) <= 2:
                settled.set()
            time.sleep(0.005)  # the state is polled for, within the deadline
        settled.set()

    threading.Thread(target=release_when_two_workers_are_left, daemon=True).start()
    slept: list[float] = []
    patient = client(tmp_path, slept, speed_time=30.0, stall_timeout=60.0)
    result = get(fault_server, tmp_path, connections=8, body=body, http=patient)
    verified(result, body)
    assert 503 in [r.status for r in ranges(fault_server)]
    assert fault_server.serving_peak == 2
    assert slept == []  # each refused connection was given up, not retried


def test_retry_after_is_honoured_on_the_last_connection(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    fault_server.add("/f.run", BODY, Fault(times=1), Fault(times=2, status=429, retry_after="7"))
    slept: list[float] = []
    result = get(fault_server, tmp_path, http=client(tmp_path, slept))
    verified(result)
    assert slept == [7.0, 7.0]  # through the one retry policy, as the server asked
    assert [r.status for r in ranges(fault_server)] == [429, 429, 206]


def test_a_shorter_206_is_kept_and_the_rest_asked_for(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    fault_server.add("/f.run", BODY, Fault(max_range=MIB))  # the server's own chunk limit
    result = get(fault_server, tmp_path)
    verified(result)
    assert [r.range for r in ranges(fault_server)] == [
        f"bytes={start}-{SIZE - 1}" for start in range(0, SIZE, MIB)
    ]
    assert all(r.status == 206 and r.sent == MIB for r in ranges(fault_server))


def test_a_server_that_stops_honouring_ranges_gets_one_stream_from_byte_0(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    # ranges (1 MiB at a time) for the first 3 requests, then the whole file to anything
    fault_server.add("/f.run", BODY, Fault(times=3, max_range=MIB), Fault(ignore_range=True))
    events: list[ProgressEvent] = []
    result = get(fault_server, tmp_path, progress=events)
    verified(result)
    requests = fault_server.requests("/f.run")
    assert [(r.range, r.status) for r in requests] == [
        ("bytes=0-0", 206),
        (f"bytes=0-{SIZE - 1}", 206),
        (f"bytes={MIB}-{SIZE - 1}", 206),
        (f"bytes={2 * MIB}-{SIZE - 1}", 200),  # not written at 2 MiB: read no further
        (None, 200),  # one stream from byte 0, into a fresh part file
    ]
    assert requests[4].sent == SIZE
    assert result.connections == 1 and result.resumed_from == 0
    assert any(
        e.message == "the server answered a range request with the whole file; starting over "
        "with one stream"
        for e in events
    )


def test_an_early_reader_learns_that_the_download_went_to_one_stream(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    fault_server.add("/f.run", BODY, Fault(times=3, max_range=MIB), Fault(ignore_range=True))
    arrival = Arrival()
    request = DownloadRequest(fault_server.url + "/f.run", "f.run", SIZE, SHA)
    result = download(
        request, tmp_path / "out", http=client(tmp_path), connections=1, arrival=arrival
    )
    verified(result)
    assert arrival.lost  # it read from a part file that was then replaced
    with pytest.raises(ArrivalLostError):
        arrival.open()


def test_one_stream_continues_where_it_broke_when_the_server_honours_ranges(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    # ranges work but the size is never told ("bytes 0-0/*"): one stream, and when it
    # breaks off, a range from where it stopped instead of starting over
    fault_server.add(
        "/f.run",
        BODY,
        Fault(times=1, unknown_total=True),
        Fault(times=1, unknown_total=True, drop_after=MIB),
        Fault(unknown_total=True),
    )
    request = DownloadRequest(fault_server.url + "/f.run", "f.run", None, SHA)
    result = download(request, tmp_path / "out", http=client(tmp_path), connections=4)
    verified(result)
    probe, broken, rest = fault_server.requests("/f.run")
    assert (probe.range, broken.range, broken.status, broken.sent) == ("bytes=0-0", None, 200, MIB)
    start = int(str(rest.range).removeprefix("bytes=").removesuffix("-"))
    assert rest.range == f"bytes={start}-" and rest.if_range == '"v1"' and rest.status == 206
    assert 0 < start <= MIB and rest.sent == SIZE - start  # nothing fetched twice
    assert result.connections == 1


def test_no_ranges_and_every_other_connection_dropped(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    fault_server.add(
        "/f.run",
        BODY,
        Fault(ignore_range=True, drop_after=SIZE // 2, every=2),
        Fault(ignore_range=True),
    )
    result = get(fault_server, tmp_path, connections=4)
    verified(result)
    probe, dropped, whole = fault_server.requests("/f.run")
    assert probe.range == "bytes=0-0" and dropped.range is None and whole.range is None
    assert (dropped.sent, whole.sent) == (SIZE // 2, SIZE)


def test_no_ranges_restarts_budgeted_on_getting_further(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    # each attempt breaks off later than the one before: 9 restarts, more than the
    # budget of failures in a row, and still every one is progress
    drops = [Fault(times=1, ignore_range=True, drop_after=SIZE * k // 10) for k in range(1, 10)]
    fault_server.add(
        "/f.run", BODY, Fault(times=1, ignore_range=True), *drops, Fault(ignore_range=True)
    )
    assert len(drops) > MAX_FAILURES + 1
    result = get(fault_server, tmp_path)
    verified(result)
    assert [r.sent for r in fault_server.requests("/f.run")[1:]] == [
        SIZE * k // 10 for k in range(1, 10)
    ] + [SIZE]


def test_no_ranges_restarts_that_get_no_further_end(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    fault_server.add("/f.run", BODY, Fault(ignore_range=True, drop_after=SIZE // 2))
    with pytest.raises(NetworkError) as caught:
        get(fault_server, tmp_path)
    assert str(caught.value) == (
        f"{fault_server.url}/f.run: the download failed {MAX_FAILURES + 1} times in a row "
        f"without progress (the connection broke {SIZE // 2} bytes into the body, "
        f"{SIZE // 2} bytes short)"
    )
    # the probe, the attempt that got half-way, then the failures that got no further
    assert len(fault_server.requests("/f.run")) == 1 + 1 + MAX_FAILURES + 1
    assert not (tmp_path / "out/f.run.part").exists()


def test_a_redirect_to_another_host_is_refused_unless_configured(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    with FaultServer(host="127.0.0.2") as other:
        other.add("/f.run", BODY)
        fault_server.add("/f.run", b"", Fault(redirect=other.url + "/f.run"))
        with pytest.raises(NetworkError) as caught:
            get(fault_server, tmp_path)
        origin, target = fault_server.url[7:], other.url[7:]
        assert str(caught.value).startswith(f"refusing a redirect from {origin} to {target} (")
        assert other.requests() == []
        mirrored = client(tmp_path, download_url=other.url)  # the other host is a source
        verified(get(fault_server, tmp_path, http=mirrored, connections=4))
        assert len(fault_server.requests("/f.run")) == 2  # both probes; ranges went to b
        # its probe, then ranges (as many as the workers found pieces for: the first
        # connections may take the whole file before the last one starts, on a busy machine)
        probe, *taken = other.requests("/f.run")
        assert probe.range == "bytes=0-0" and taken and all(r.status == 206 for r in taken)


# ---------------------------------------------------------------------------
# The same cases through the command line
# ---------------------------------------------------------------------------
@dataclass
class Case:
    faults: list[Fault]
    code: int
    words: str
    connections: int = 1
    extra: list[str] = field(default_factory=list)
    #: how many requests the server must have seen (the probe included), when it matters
    requests: int | None = None


CLI_CASES = {
    "trickle-once": Case([Fault(times=1), Fault(times=1, rate=TRICKLE)], 0, "sha256 verified"),
    "trickle-always": Case([Fault(times=1), Fault(rate=TRICKLE)], 5, "the server stalled:"),
    "no-answer": Case([Fault(hang="headers")], 5, "the server stalled: nothing arrived"),
    "dribbled-headers": Case(
        [Fault(hang="dribble", dribble_every=DRIBBLE)], 5, "nothing arrived from"
    ),
    "silent-mid-body": Case(
        [Fault(times=1), Fault(times=1, hang="body", hang_after=100_000)], 0, "sha256 verified"
    ),
    "silent-after-headers": Case(
        [Fault(times=1), Fault(hang="body")], 5, f"for {STALL:g} s (last:"
    ),
    "429-retry-after": Case(
        [Fault(times=1), Fault(times=2, status=429, retry_after="0")], 0, "sha256 verified"
    ),
    "short-206": Case([Fault(max_range=MIB)], 0, "sha256 verified", connections=4),
    "ranges-then-200": Case(
        [Fault(times=3, max_range=MIB), Fault(ignore_range=True)],
        0,
        "starting over with one stream",
    ),
    "one-stream-resumes": Case(
        [
            Fault(times=1, unknown_total=True),
            Fault(times=1, unknown_total=True, drop_after=MIB),
            Fault(unknown_total=True),
        ],
        0,
        "sha256 verified",
    ),
    "no-ranges-every-other-drop": Case(
        [Fault(ignore_range=True, drop_after=SIZE // 2, every=2), Fault(ignore_range=True)],
        0,
        "sha256 verified",
    ),
    "no-ranges-no-further": Case(
        [Fault(ignore_range=True, drop_after=SIZE // 2)],
        5,
        f"without progress (the connection broke {SIZE // 2} bytes into the body",
    ),
    # the bytes are hashed as sent, whatever the server says they are encoded with
    "gzip-said-plain-sent": Case(
        [Fault(headers={"Content-Encoding": "gzip"})], 0, "sha256 verified", connections=4
    ),
    "1-MB-header": Case(
        [Fault(headers={"X-Big": "a" * MIB})],
        5,
        "sent response headers too long to read (got more than 65536 bytes when reading "
        "header line) for",
        requests=1,
    ),
    "endless-headers": Case(
        [Fault(hang="endless-headers")], 5, "(got more than 100 headers) for", requests=1
    ),
}


@pytest.mark.parametrize("name", list(CLI_CASES))
def test_cli(
    name: str,
    fault_server: FaultServer,
    sandbox: Sandbox,  # noqa: F811 - fixture
    capsys: pytest.CaptureFixture[str],
) -> None:
    case = CLI_CASES[name]
    fault_server.add("/f.run", BODY, *case.faults)
    out = sandbox.work / "out"
    before = sandbox.snapshot()
    run = run_cli(
        capsys, "download", fault_server.url + "/f.run", "--sha256", SHA, "-o", str(out),
        "--connections", str(case.connections), *case.extra,
    )  # fmt: skip
    assert run.code == case.code, run.err
    assert case.words in run.out + run.err
    assert sandbox.changed_outside(before, sandbox.snapshot(), [sandbox.cache, out]) == set()
    if case.requests is not None:
        assert len(fault_server.requests("/f.run")) == case.requests
    if case.code == 0:
        assert [p.name for p in out.iterdir()] == ["f.run"]
        assert (out / "f.run").read_bytes() == BODY
    else:
        assert not (out / "f.run").exists()
        last = run.err.splitlines()[-1]
        assert last.startswith("cudaup: error: ") and case.words in last


def test_cli_a_refused_certificate_fails_at_the_first_try(
    sandbox: Sandbox,  # noqa: F811 - fixture
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    slept: list[float] = []
    monkeypatch.setattr(backoff, "DEFAULT", Backoff(base=0.01, cap=0.01, sleep=slept.append))
    with FaultServer(tls=self_signed(tmp_path)) as server:
        server.add("/f.run", BODY)
        url = server.url + "/f.run"
        before = sandbox.snapshot()
        run = run_cli(capsys, "download", url, "--sha256", SHA, "-o", str(sandbox.work), "--json")
        assert run.code == EXIT_CODES["network"] == 5, run.err
        host = server.url.removeprefix("https://")
        assert run.err.splitlines()[-1] == (
            f"cudaup: error: the TLS certificate of {host} was refused (certificate verify "
            f"failed: self-signed certificate) for {url}; not retried, as it would be refused "
            "again (SSL_CERT_FILE or SSL_CERT_DIR adds a CA you trust)"
        )
        assert run.json()["error"]["kind"] == "network"
        assert server.accepted == 1 and slept == []  # one handshake: the probe's, not retried
        assert sandbox.changed_outside(before, sandbox.snapshot(), [sandbox.cache]) == set()
        # the control: with the certificate trusted, the same command downloads
        monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "cert.pem"))
        run = run_cli(capsys, "download", url, "--sha256", SHA, "-o", str(sandbox.work))
        assert run.code == 0, run.err
        assert (sandbox.work / "f.run").read_bytes() == BODY


def test_cli_connection_cap(
    fault_server: FaultServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    body = payload(CAPPED_SIZE, seed=12)
    capped(fault_server, body)
    monkeypatch.setenv("CUDAUP_SPEED_TIME", "30")  # the held answers wait for every thread
    monkeypatch.setenv("CUDAUP_STALL_TIMEOUT", "60")
    run = run_cli(
        capsys, "download", fault_server.url + "/f.run", "--sha256",
        hashlib.sha256(body).hexdigest(), "-o", str(tmp_path / "out"), "--connections", "8",
    )  # fmt: skip
    assert run.code == 0, run.err
    assert "f.run: 127.0.0.1:" in run.err and "using 2 connections from now on" in run.err
    assert len([r for r in fault_server.requests() if r.status == 503]) == 6


def test_cli_cross_host_redirect(
    fault_server: FaultServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with FaultServer(host="127.0.0.2") as other:
        other.add("/f.run", BODY)
        fault_server.add("/f.run", b"", Fault(redirect=other.url + "/f.run"))
        url = fault_server.url + "/f.run"
        run = run_cli(capsys, "download", url, "--sha256", SHA, "-o", str(tmp_path / "out"))
        assert run.code == EXIT_CODES["network"]
        assert f"refusing a redirect from 127.0.0.1:{url.split(':')[2].split('/')[0]} " in run.err
        assert f"to {other.url[7:]} " in run.err
        # with the other host as the mirror, the same command works
        run = run_cli(
            capsys, "download", url, "--sha256", SHA, "-o", str(tmp_path / "out"),
            "--mirror", other.url,
        )  # fmt: skip
        assert run.code == 0, run.err
