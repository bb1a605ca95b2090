"""How many connections one download uses: start with one, add while they raise the throughput.

Pure: the supervising thread reports the bytes on disk, and when the last of them were
counted, about ten times a second (:meth:`ConnectionRamp.observe`) and gets the number of
connections wanted now.

A connection costs CPU (a thread reading the socket, writing the part file, taking
the GIL) and brings bytes only where something caps each connection (a CDN's rate per
connection, a long round trip).  On a link the CPUs already limit (loopback, a LAN) a
second connection brings nothing and slows the hash: a verified download cannot end
before its hash has read every byte, so throughput past the hash speed buys nothing.
So a download starts with one connection and, after each :data:`WINDOW` of transfer
(the first one shorter for a large file from a far server, :data:`FIRST_WINDOW`):

- if the throughput already reaches :data:`HEADROOM` of ``ceiling`` (the hash speed), it
  keeps the count: the connections already take about as much CPU as the hash, and one
  more would take from the hash what it brings (the hash has its core);
- so it does when each connection kept its thread busy for :data:`BUSY` of the window
  (its CPU time): what holds a connection back is the CPU, not the link, and one more
  would take a core from the hash;
- otherwise it adds as many connections as would reach the ceiling at the speed of
  one (all that are allowed when nothing bounds the download), but no more than the CPU
  the process left idle can run, at the share of a core each connection used, and none
  while less than :data:`SPARE` of a core is idle (it holds the count and measures
  again; a connection that its link caps uses too little CPU to count).  The
  download then shares its process with work that needs the cores too (an install's
  extraction of the file as it lands, other downloads, their hashes), and a connection
  more would take its CPU from them (a cold pypi install of nvcc on 2 CPUs: 1.16 s with
  each wheel's download going wide, 1.04 with one connection each);
- connections that were added keep their place while each brought at least
  :data:`MIN_GAIN` of the speed of the ones before; if together they raised the
  throughput by less than :data:`MIN_RISE`, the download goes back to the count before
  them, for good (they only cost CPU); anything between keeps the count and stops
  adding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: The most connections a download adapts up to when no count is given.
DEFAULT_CONNECTIONS = 8
#: Seconds of transfer a count of connections is measured over before the next step.
WINDOW = 0.2
#: ... the first count's, for a file of at least :data:`LARGE_FILE` bytes from a server
#: at least :data:`FAR` away: one tick of the supervisor (0.1 s; a little less, so that
#: the second tick decides).  PyPI's CDN answers each request 50-65 ms after it is sent
#: and one connection there brought ~60 MB/s: with 0.2 s, a 61 MB wheel had a third of
#: its bytes in before its second connection was asked for.  Loopback and a LAN answer
#: within a millisecond or two and keep the whole window: a short one, on a loaded
#: machine, once measured a connection waiting for a core as a slow link and went wide.
FIRST_WINDOW = 0.08
#: Files this large may get the :data:`FIRST_WINDOW` (a smaller one ends before more
#: connections would have their first byte).
LARGE_FILE = 32 * 1024 * 1024
#: The least round trip (seconds from a request to its first byte) of a far server.
FAR = 0.03
#: Added connections keep ramping while each brought this share of an earlier one's speed.
MIN_GAIN = 0.5
#: Added connections that together raised the throughput by less than this are removed.
MIN_RISE = 0.1
#: No connection is added once the throughput reaches this share of the ceiling.
HEADROOM = 0.5
#: ... nor once each connection's thread used this share of a core: a connection capped
#: at 6 MiB/s uses 1-3 % of one; one on loopback 30-50 % on a loaded 2-core machine
#: (where it waits for a core besides), more on an idle one.
BUSY = 0.25
#: What one connection's thread must use of a core to be counted against the CPU the
#: process left idle (a connection capped by its link uses 1-3 %: it always fits).
HUNGRY = 0.05
#: ... and the least idle CPU, in cores, for such connections to be added: below it the
#: cores the process keeps busy are all it gets (on 2 CPUs, a cold pypi install's
#: downloads met their first step with 0.3-0.45 of a core idle, each connection using a
#: tenth of one: two or three more each brought nothing and were taken back).
SPARE = 0.5
#: Seconds a count waits for its connections' first bytes before it is measured anyway
#: (what has not come by then counts as nothing brought).
PATIENCE = 1.0


@dataclass(frozen=True, slots=True)
class Step:
    """One measured count: ``connections`` moved ``rate`` bytes per second together."""

    connections: int
    rate: float


class ConnectionRamp:
    """The number of connections wanted now, from the throughput each count reached."""

    def __init__(
        self,
        most: int,
        *,
        start: int = 1,
        window: float = WINDOW,
        size: int = 0,
        cores: int | None = None,
    ) -> None:
        self.most = max(1, most)
        #: the CPUs the process may use (None: not known, the idle CPU is not measured)
        self.cores = cores
        self.count = max(1, min(start, self.most))
        self.window = window
        #: the file's size: a large one from a far server takes its first step sooner
        self.size = size
        #: no more steps: the count stays (lowered only by the server, see :meth:`cap`)
        self.settled = self.count >= self.most
        #: the last count measured was kept for want of idle CPU: while so, the download
        #: runs as if no connection will join (its pieces are not cut for them)
        self.held = False
        #: what each count reached, in order (for the tests and the debugging eye)
        self.steps: list[Step] = []
        #: (time, bytes, the connections' CPU, counting time, the process's CPU) at the
        #: window's start
        self._since: tuple[float, int, float | None, float | None, float | None] | None = None
        #: since when the count has waited for connections that have not brought a byte
        self._waiting_since: float | None = None

    def cap(self, most: int) -> None:
        """The server asked for fewer connections (503/429): never more than ``most``."""
        self.most = max(1, min(self.most, most))
        self.count = min(self.count, self.most)
        if self.most == 1:
            self.settled = True

    @property
    def may_grow_to(self) -> int:
        """The connections the download may still grow to (0: none will join, settled or
        held): what its pieces are sized for (``SegmentPlan.may_grow_to``)."""
        return 0 if self.settled or self.held else self.most

    def observe(
        self,
        now: float,
        completed: int,
        ceiling: float | None = None,
        cpu: float | None = None,
        round_trip: float | None = None,
        connecting: int = 0,
        counted_at: float | None = None,
        process_cpu: float | None = None,
    ) -> int:
        """``completed`` bytes are on disk at ``now`` (seconds); the connections wanted.

        ``ceiling``: the bytes per second past which more connections cannot end the
        download sooner (the hash speed), None when nothing bounds it.  ``cpu``: the CPU
        seconds the connections' threads have used so far (None: not measured).
        ``round_trip``: the least seconds a request waited for its first byte (None: no
        answer yet).  ``connecting``: connections started that have neither brought a
        byte nor ended; the window of a count starts once there are none.
        ``counted_at``: when the last of the ``completed`` bytes were counted (None: not
        said).  Bytes arrive a read at a time, and a read lasts about a tenth of a second
        (:func:`~cudaup.download.remote.read_body`): counted against the ticks, a window of
        two tenths moved one read more or less than it did, which measured one connection
        of an 8 MiB/s link anywhere from 7.5 to 9.4 MiB/s.  Between two counting times
        the bytes counted are exactly those that arrived, so the rate is taken over those
        times where both are known.  ``process_cpu``: the CPU seconds the whole process
        has used so far, every thread's (None: not measured); with :attr:`cores` it says
        what CPU the process left idle.
        """
        if self.settled:
            return self.count
        if self._since is None:
            self._since = (now, completed, cpu, counted_at, process_cpu)
            return self.count
        if connecting:
            if self._waiting_since is None:
                self._waiting_since = now
            if now - self._waiting_since < PATIENCE:
                self._since = (now, completed, cpu, counted_at, process_cpu)
                return self.count
        began, base, base_cpu, base_counted_at, base_process_cpu = self._since
        if now - began < self._window(round_trip):
            return self.count
        if completed == base:
            # No read ended within the window: nothing was measured, and a rate of zero
            # would settle the count for good.  A read can outlast a window: reads grow
            # to 1 MiB while they return quickly (a server's first burst: nginx's
            # limit_rate sends a second's worth at once), and one then took 1 s at a cap
            # of 1 MiB/s per connection, which kept a 24 MiB download on one connection
            # (22 s).  The window goes on until a read ends (a stall is the watchdog's).
            return self.count
        if counted_at is not None and base_counted_at is not None and counted_at > base_counted_at:
            rate = (completed - base) / (counted_at - base_counted_at)
        else:
            rate = (completed - base) / (now - began)
        busy = (
            (cpu - base_cpu) / (now - began) / self.count
            if cpu is not None and base_cpu is not None
            else 0.0
        )
        idle = (
            self.cores - (process_cpu - base_process_cpu) / (now - began)
            if self.cores is not None and process_cpu is not None and base_process_cpu is not None
            else None
        )
        self._since = (now, completed, cpu, counted_at, process_cpu)
        before = self.steps[-1] if self.steps else None
        self.steps.append(Step(self.count, rate))
        # A count held for want of idle CPU is measured again, not judged as an addition.
        if before is not None and not self.held and not self._keep(before, rate):
            return self.count
        past_ceiling = ceiling is not None and rate >= HEADROOM * ceiling
        if self.count >= self.most or rate <= 0 or past_ceiling or busy >= BUSY:
            self.settled = True
            return self.count
        one = rate / self.count
        wanted = self.most if ceiling is None else math.ceil(ceiling / one)
        self.held = idle is not None and busy >= HUNGRY and idle < SPARE
        if self.held:
            return self.count  # the process keeps the cores busy: see again next window
        if idle is not None and busy >= HUNGRY:
            wanted = min(wanted, self.count + math.floor(idle / busy))
        self.count = max(self.count + 1, min(self.most, wanted))
        self._waiting_since = None
        return self.count

    def _window(self, round_trip: float | None) -> float:
        """What the count now is measured over: :data:`FIRST_WINDOW` for the first count
        of a large file from a far server, else :attr:`window`."""
        far = round_trip is not None and round_trip >= FAR
        if not self.steps and far and self.size >= LARGE_FILE:
            return min(self.window, FIRST_WINDOW)
        return self.window

    def _keep(self, before: Step, rate: float) -> bool:
        """Whether to go on ramping after the connections added since ``before``."""
        added = self.count - before.connections
        gained = rate - before.rate
        if gained >= MIN_GAIN * added * before.rate / before.connections:
            return True
        self.settled = True
        if gained < MIN_RISE * before.rate:
            self.count = before.connections  # they brought nothing: back, for good
        return False
