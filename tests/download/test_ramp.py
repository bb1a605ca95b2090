"""How many connections a download uses: the pure rule, then through real downloads."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from cudaup.download import download, parallel
from cudaup.download.ramp import (
    FAR,
    FIRST_WINDOW,
    LARGE_FILE,
    MIN_RISE,
    PATIENCE,
    WINDOW,
    ConnectionRamp,
    Step,
)
from tests.download.test_download import client, request
from tests.faultserver import Fault, FaultServer, SharedLink, payload

MiB = 2**20


def ramp_through(ramp: ConnectionRamp, rate_of: Mapping[int, float], ceiling: float | None) -> int:
    """Feed ``ramp`` windows in which each count moves ``rate_of[count]`` bytes per second,
    until it settles; the count it settled on."""
    now, completed = 0.0, 0
    ramp.observe(now, completed, ceiling)
    for _ in range(20):
        if ramp.settled:
            return ramp.count
        now += WINDOW
        completed += int(rate_of[ramp.count] * WINDOW)
        ramp.observe(now, completed, ceiling)
    raise AssertionError(f"never settled: {ramp.steps}")


def test_capped_connections_go_wide_at_once() -> None:
    # 6 MiB/s each, a hash of 1 GiB/s: every connection adds its 6 MiB/s.
    ramp = ConnectionRamp(8)
    assert ramp.count == 1
    assert ramp_through(ramp, {n: n * 6 * MiB for n in range(1, 9)}, 1024 * MiB) == 8
    assert [s.connections for s in ramp.steps] == [1, 8]


def test_one_connection_past_the_hash_speed_stays_alone() -> None:
    ramp = ConnectionRamp(8)
    assert ramp_through(ramp, {1: 1400 * MiB}, 1000 * MiB) == 1
    assert ramp.steps == [Step(1, 1400 * MiB)]


def test_a_connection_that_keeps_its_core_busy_stays_alone() -> None:
    # 300 MiB/s, far below a hash of 1000, but its thread used 40 % of a core: the CPU
    # holds it back, not the link (a loaded machine), and a second one would take the
    # hash's core.  The same rate with the CPU of a capped link (2 %) goes wide.
    for share, count in ((0.4, 1), (0.02, 4)):
        ramp = ConnectionRamp(8)
        ramp.observe(0.0, 0, 1000 * MiB, cpu=0.0)
        assert (
            ramp.observe(WINDOW, int(300 * MiB * WINDOW), 1000 * MiB, cpu=share * WINDOW) == count
        )
        assert ramp.settled == (count == 1)


class Windows:
    """Windows fed to ``ramp`` one by one, each with what its connections and the whole
    process did in it."""

    def __init__(self, ramp: ConnectionRamp) -> None:
        self.ramp = ramp
        self.now, self.completed, self.cpu, self.process_cpu = 0.0, 0, 0.0, 0.0
        ramp.observe(0.0, 0, 1000 * MiB, cpu=0.0, process_cpu=0.0)

    def next(self, rate: float, busy: float, process: float) -> int:
        """A window in which each connection moved ``rate`` bytes per second using ``busy``
        of a core, and the process used ``process`` cores; the count wanted."""
        count = self.ramp.count
        self.now += WINDOW
        self.completed += int(rate * count * WINDOW)
        self.cpu += busy * count * WINDOW
        self.process_cpu += process * WINDOW
        return self.ramp.observe(
            self.now, self.completed, 1000 * MiB, cpu=self.cpu, process_cpu=self.process_cpu
        )


def test_a_process_that_keeps_its_cores_busy_holds_the_count() -> None:
    # A cold pypi install on 2 CPUs: 60 MiB/s on the one connection, its thread using a
    # tenth of a core, the process 1.6 cores (the other downloads, their hashes, the
    # extraction of what lands).  Another connection would take its CPU from them: the
    # count holds, unsettled, and the download runs as a lone one (held) ...
    ramp = ConnectionRamp(8, cores=2)
    windows = Windows(ramp)
    assert windows.next(60 * MiB, 0.1, 1.6) == 1
    assert ramp.held and not ramp.settled
    # ... a slower window while held is measured again, not judged as an addition ...
    assert windows.next(40 * MiB, 0.1, 1.7) == 1
    assert ramp.held and not ramp.settled
    # ... and once the process leaves cores idle, the connections they can run are added.
    assert windows.next(60 * MiB, 0.1, 0.4) == 8
    assert not ramp.held and [s.connections for s in ramp.steps] == [1, 1, 1]


def test_the_idle_cpu_caps_the_connections_added() -> None:
    # 0.9 of a core idle, a fifth of one per connection: four more, not the eight that
    # would pass the hash speed; without the process's CPU, the eight.
    ramp = ConnectionRamp(8, cores=2)
    assert Windows(ramp).next(60 * MiB, 0.2, 1.1) == 5
    unmeasured = ConnectionRamp(8)
    unmeasured.observe(0.0, 0, 1000 * MiB, cpu=0.0)
    assert unmeasured.observe(WINDOW, int(60 * MiB * WINDOW), 1000 * MiB, cpu=0.2 * WINDOW) == 8


def test_a_connection_its_link_caps_goes_wide_in_a_busy_process() -> None:
    # 6 MiB/s, 2 % of a core each: connections that cost next to nothing are added
    # however busy the process is (an extraction beside a capped download).
    ramp = ConnectionRamp(8, cores=2)
    assert Windows(ramp).next(6 * MiB, 0.02, 1.95) == 8
    assert not ramp.held


def test_connections_that_bring_nothing_are_taken_back() -> None:
    # The CPUs are the limit: eight connections move what one did (a little less).
    rates = {1: 600 * MiB, **dict.fromkeys(range(2, 9), 560 * MiB)}
    ramp = ConnectionRamp(8)
    assert ramp_through(ramp, rates, None) == 1
    assert [s.connections for s in ramp.steps] == [1, 8]


def test_a_partial_gain_keeps_the_count_and_stops_adding() -> None:
    # A shared pipe of 20 MiB/s that one connection fills to 6: eight bring 20, not 48.
    ramp = ConnectionRamp(8)
    rates = {1: 6 * MiB, **{n: min(20, 6 * n) * MiB for n in range(2, 9)}}
    assert ramp_through(ramp, rates, 1024 * MiB) == 8
    assert ramp.settled


def test_the_ceiling_sizes_the_step() -> None:
    # one connection moves 300 MiB/s, the hash 1000: four are enough to pass it
    ramp = ConnectionRamp(8)
    rates = {n: n * 300 * MiB for n in range(1, 9)}
    assert ramp_through(ramp, rates, 1000 * MiB) == 4
    assert [s.connections for s in ramp.steps] == [1, 4]


def test_a_rise_below_the_least_goes_back() -> None:
    rates = {1: 100 * MiB, 8: 100 * MiB * (1 + MIN_RISE / 2)}
    assert ramp_through(ConnectionRamp(8), rates, None) == 1


def test_an_explicit_count_never_moves() -> None:
    ramp = ConnectionRamp(4, start=4)
    assert ramp.settled and ramp.observe(0.0, 0) == 4 and ramp.observe(10.0, 10**9) == 4


def test_a_count_is_measured_once_its_connections_bring_bytes() -> None:
    # 4 MB/s on one connection, the same on a shared pipe with eight: seven new threads
    # still connecting for three windows must not read as "they brought nothing".
    ramp = ConnectionRamp(8)
    ramp.observe(0.0, 0)
    assert ramp.observe(WINDOW, int(4e6 * WINDOW)) == 8
    now, completed = WINDOW, int(4e6 * WINDOW)
    for _ in range(3):  # the old connection alone still brings its 4 MB/s
        now, completed = now + WINDOW, completed + int(4e6 * WINDOW)
        assert ramp.observe(now, completed, connecting=6) == 8 and not ramp.settled
    ramp.observe(now + 0.01, completed)  # all eight bring bytes (or ended): it starts
    assert not ramp.settled and len(ramp.steps) == 1
    # Eight together bring no more than one: back to one, for good.
    assert ramp.observe(now + 0.01 + WINDOW, completed + int(4e6 * WINDOW)) == 1
    assert ramp.settled and [s.connections for s in ramp.steps] == [1, 8]


def test_connections_that_never_bring_a_byte_are_measured_after_the_patience() -> None:
    ramp = ConnectionRamp(8)
    ramp.observe(0.0, 0)
    assert ramp.observe(WINDOW, int(4e6 * WINDOW)) == 8
    now, completed, rate = WINDOW, int(4e6 * WINDOW), 4e6
    while not ramp.settled:
        now, completed = now + WINDOW, completed + int(rate * WINDOW)
        ramp.observe(now, completed, connecting=7)
        assert now < WINDOW + PATIENCE + 3 * WINDOW, ramp.steps
    assert ramp.count == 1 and now >= WINDOW + PATIENCE


def test_a_window_in_which_no_read_ended_measures_nothing() -> None:
    # One connection's reads of 1 MiB at 1 MiB/s: the windows of 0.2 s that hold no end
    # of a read wait for one, instead of taking a rate of zero and settling on one.
    ramp = ConnectionRamp(8)
    ramp.observe(0.0, 0, counted_at=0.0)
    for tick in (0.2, 0.4, 0.6, 0.8):
        assert ramp.observe(tick, 0, counted_at=0.0) == 1
    assert not ramp.settled and ramp.steps == []
    assert ramp.observe(1.0, MiB, counted_at=1.0) == 8  # the read ended: 1 MiB/s, go wide
    assert ramp.steps == [Step(1, MiB)]


def test_the_server_lowers_the_most() -> None:
    ramp = ConnectionRamp(8)
    ramp.cap(1)
    assert ramp.settled and ramp.count == 1


# -- through real downloads ---------------------------------------------------------------

SIZE = 12 * MiB
BODY = payload(SIZE, seed=11)


def test_a_cap_per_connection_gets_more_connections(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    # 1 MiB/s per answer: one connection is far below anything the CPUs limit.
    fault_server.add("/f.run", BODY, Fault(rate=MiB))
    result = download(
        request(fault_server, size=SIZE, sha256=_sha(BODY)), tmp_path / "out",
        http=client(tmp_path),
    )  # fmt: skip
    assert result.path.read_bytes() == BODY
    assert result.connections == 8
    assert fault_server.connections("/f.run") >= 8


def test_a_burst_then_a_cap_per_connection_gets_more_connections(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    """nginx's ``limit_rate``: a second's bytes at once, then the rate.  The burst lets the
    reads grow to 1 MiB, which at 1 MiB/s outlast a window: a window in which no read
    ended has measured nothing, not a rate of zero, which kept this download on one
    connection (22 s; 1.4 s on eight)."""
    body = payload(24 * MiB, seed=12)  # its pieces (1.5 MiB) outlast the burst
    fault_server.add("/f.run", body, Fault(rate=MiB, burst=MiB))
    result = download(
        request(fault_server, size=len(body), sha256=_sha(body)), tmp_path / "out",
        http=client(tmp_path),
    )  # fmt: skip
    assert result.path.read_bytes() == body
    assert result.connections == 8
    assert fault_server.connections("/f.run") >= 8


def test_a_rate_is_taken_between_the_times_its_bytes_were_counted() -> None:
    """A read of an 8 MiB/s link brings 1 MiB every 1/8 s, and the ticks come every
    tenth: counted against the ticks, one connection's window of 0.2 s held one read
    (5 MiB/s) and eight connections' two (10 MiB/s), and the added connections that
    brought nothing looked like a doubling, and stayed."""

    def run(counting: bool) -> ConnectionRamp:
        ramp = ConnectionRamp(8)
        reads = [0.06 + k / 8 for k in range(40)]  # the link's reads land, 1 MiB each
        for tick in (0.1, 0.2, 0.3001, 0.4, 0.5002):  # a window is 0.2001 s
            landed = [at for at in reads if at <= tick]
            counted_at = landed[-1] if counting else None
            ramp.observe(tick, len(landed) * MiB, counted_at=counted_at)
        return ramp

    counted = run(counting=True)
    assert [step.rate for step in counted.steps] == [pytest.approx(8 * MiB)] * 2
    assert counted.settled and counted.count == 1  # eight brought nothing: back to one
    ticked = run(counting=False)
    assert [step.connections for step in ticked.steps] == [1, 8]
    assert ticked.count == 8  # what the ticks alone measured: a rise, kept


def test_a_shared_pipe_is_not_split_for_nothing(fault_server: FaultServer, tmp_path: Path) -> None:
    # 8 MiB/s for every connection together: the added ones bring nothing, so the
    # download goes back to one (having tried more).  12 MiB leave pieces to steal for
    # the added connections however late a loaded machine lets the ramp decide.
    fault_server.add("/f.run", BODY, Fault(link=SharedLink(8 * MiB)))
    result = download(
        request(fault_server, size=SIZE, sha256=_sha(BODY)), tmp_path / "out",
        http=client(tmp_path),
    )  # fmt: skip
    assert result.path.read_bytes() == BODY
    assert result.connections == 1
    assert fault_server.connections("/f.run") > 2


def test_an_explicit_count_opens_that_many_at_once(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    # Every answer waits until four requests are in: they came together, from the start.
    gate = threading.Event()
    fault_server.add("/f.run", BODY, Fault(hang="body", hang_after=1, until=gate))

    def open_the_gate() -> None:
        fault_server.wait_for_requests(5, "/f.run")  # the probe and four ranges
        gate.set()

    watcher = threading.Thread(target=open_the_gate, daemon=True)
    watcher.start()
    result = download(
        request(fault_server, size=SIZE, sha256=_sha(BODY)), tmp_path / "out",
        http=client(tmp_path), connections=4,
    )  # fmt: skip
    watcher.join()
    assert result.path.read_bytes() == BODY and result.connections == 4


def _sha(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def test_a_large_file_from_a_far_server_takes_its_first_step_sooner() -> None:
    # 60 MB/s on one connection that uses 5 % of a core, 55 ms to each first byte (PyPI's
    # CDN): the second tick decides; a smaller file, or one from loopback, waits a window
    def ramp_of(size: int) -> ConnectionRamp:
        ramp = ConnectionRamp(8, size=size)
        ramp.observe(0.0, 0, 1000 * MiB, cpu=0.0)
        return ramp

    large, small, near = ramp_of(LARGE_FILE), ramp_of(LARGE_FILE - 1), ramp_of(LARGE_FILE)
    moved = int(60 * MiB * 0.1)
    assert large.observe(0.1, moved, 1000 * MiB, 0.005, round_trip=0.055) == 8
    assert small.observe(0.1, moved, 1000 * MiB, 0.005, round_trip=0.055) == 1  # measuring
    assert near.observe(0.1, moved, 1000 * MiB, 0.005, round_trip=0.0005) == 1
    assert large.observe(0.1, moved, 1000 * MiB, 0.005, round_trip=None) == 8  # stays
    for ramp in (small, near):
        assert ramp.observe(WINDOW, 2 * moved, 1000 * MiB, 0.01, round_trip=0.055) == 8
    # every later count is measured over the whole window
    assert large.observe(0.1 + WINDOW / 2, 2 * moved, 1000 * MiB, round_trip=0.055) == 8
    assert len(large.steps) == 1


def test_a_large_file_whose_connection_keeps_its_core_busy_still_stays_alone() -> None:
    # 500 MiB/s, the connection's thread 45 % of a core over the short window
    ramp = ConnectionRamp(8, size=1024 * MiB)
    ramp.observe(0.0, 0, 1000 * MiB, cpu=0.0)
    moved = int(500 * MiB * FIRST_WINDOW)
    assert ramp.observe(FIRST_WINDOW, moved, 1000 * MiB, cpu=0.036, round_trip=0.05) == 1
    assert ramp.settled


def test_a_far_server_gets_the_other_connections_at_the_second_tick(
    fault_server: FaultServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 40 ms to each first byte, 16 MiB/s per answer, 40 MiB: the observation that starts
    # the clock (the first, or a later one while the connection has brought no byte yet,
    # as on a loaded machine) is followed by the one that widens, a tick later; with the
    # whole window it was the one after that.  A late tick only lengthens what it measures.
    ramps: list[ConnectionRamp] = []
    connecting: list[int] = []  # each observation's connections still connecting, to the step

    class Recorded(ConnectionRamp):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            ramps.append(self)

        def observe(self, *args: Any, **kwargs: Any) -> int:
            if not self.steps:
                connecting.append(args[5] if len(args) > 5 else kwargs.get("connecting", 0))
            return super().observe(*args, **kwargs)

    monkeypatch.setattr(parallel, "ConnectionRamp", Recorded)
    body = payload(40 * MiB, seed=5)
    fault_server.add("/f.run", body, Fault(latency=FAR + 0.01, rate=16 * MiB))
    result = download(
        request(fault_server, size=len(body), sha256=_sha(body)), tmp_path / "out",
        http=client(tmp_path),
    )  # fmt: skip
    assert result.path.read_bytes() == body
    [ramp] = ramps
    assert ramp.steps and ramp.steps[0].connections == 1
    # The step came at the observation after the clock's start: the one before it was the
    # first, or one that restarted the clock while the connection was still connecting.
    *before, _step = connecting
    assert before and (len(before) == 1 or before[-1] > 0), (connecting, ramp.steps)
    assert result.connections > 1
    assert fault_server.connections("/f.run") > 2


@pytest.mark.parametrize("held", [True, False], ids=["held", "measuring"])
def test_a_held_download_asks_for_the_rest_in_one_request(
    fault_server: FaultServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, held: bool
) -> None:
    # A ramp that keeps one connection and never settles: held (the process keeps the
    # cores busy), the connection takes the rest of the file in one request; still
    # measuring, it takes pieces cut for connections that may join, a request each
    # (PyPI's wheels through this machine's proxy: nvvm's 61 MB in 36 requests on one
    # connection, each a round trip the connection stood idle).
    class Kept(ConnectionRamp):
        def observe(self, *args: Any, **kwargs: Any) -> int:
            self.held = held
            return self.count

    monkeypatch.setattr(parallel, "ConnectionRamp", Kept)
    body = payload(48 * MiB, seed=7)
    fault_server.add("/f.run", body, Fault(latency=0.01, rate=48 * MiB))
    result = download(
        request(fault_server, size=len(body), sha256=_sha(body)), tmp_path / "out",
        http=client(tmp_path),
    )  # fmt: skip
    assert result.path.read_bytes() == body and result.connections == 1
    asked = [s.range or "" for s in fault_server.requests("/f.run")]
    spans = [int(last) - int(first) + 1 for first, last in (a[6:].split("-") for a in asked)]
    # The ramp's first look comes a tick or two into the transfer, 5-10 MiB here.
    assert (max(spans) >= len(body) // 2) if held else (max(spans) < len(body) // 4), asked
