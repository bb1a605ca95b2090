"""Transfers that end: a speed floor per connection, a stall limit per download.

Every request of a download is a :class:`Flow` registered with the download's
:class:`Watchdog` from before it is sent until its body is read or dropped.  The
thread that supervises the download calls :meth:`Watchdog.check` about ten times a
second (ten times per floor window where the window is shorter than a second):

- a flow whose body has moved fewer than ``speed_limit * speed_time`` bytes in the
  last ``speed_time`` seconds (curl's ``--speed-limit``/``--speed-time``) is dropped:
  its socket is shut down, the blocked read returns, and the range is asked again.
  A trickle of a byte a second never trips a socket timeout; this does.
- when less than one window's worth at the floor (``speed_limit * speed_time`` bytes,
  at least one byte) has arrived in ``stall_timeout`` seconds with a request out, the
  download fails: the server stalled.  A few bytes per reconnect from a trickling
  server are not progress.  Time spent with nothing in flight (waiting for a
  connection slot another download holds, or for a ``Retry-After``) does not count.

Waiting for response headers cannot be interrupted this way (urllib3 hands out the
socket only with the response), so each request's socket timeout is at most
``speed_time`` and at most what is left of the stall limit.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from cudaup.config import Settings
from cudaup.errors import NetworkError
from cudaup.util.parallel import check as check_cancelled

#: How often, at most, the supervising thread wakes: progress events, the speed floor,
#: cancellation (:attr:`Watchdog.tick` is shorter for a floor window under a second).
TICK = 0.1


@dataclass(frozen=True, slots=True)
class TransferLimits:
    #: bytes per second below which a connection is dropped (0: no floor)
    speed_limit: int
    #: seconds a connection may stay below the floor
    speed_time: float
    #: seconds without any byte, with a request out, after which the download fails
    stall_timeout: float
    #: the client's socket timeout, never exceeded
    read_timeout: float

    @classmethod
    def of(cls, settings: Settings) -> TransferLimits:
        return cls(
            settings.speed_limit, settings.speed_time, settings.stall_timeout, settings.timeout
        )


class Flow:
    """One request of a download: its body's bytes over time, and a way to drop it."""

    def __init__(self, began: float) -> None:
        self.began = began
        self.received = 0
        #: the size of the read now waiting on the socket (bytes not yet counted)
        self.reading = 0
        #: why the watchdog dropped this flow, once it did
        self.dropped: str | None = None
        #: ends the blocked read and every later one (set once the headers arrived)
        self._cut: Callable[[], None] | None = None
        self._attached_at: float | None = None
        self._samples: deque[tuple[float, int]] = deque()

    def attach(self, cut: Callable[[], None], now: float) -> None:
        """The headers arrived: from now on the body is measured against the floor, and
        ``cut`` drops it (:func:`cudaup.net.deadline.cut_off` on its socket)."""
        self._cut = cut
        self._attached_at = now
        self._samples.append((now, 0))

    def too_slow(self, now: float, limits: TransferLimits) -> str | None:
        """Why this flow is below the floor, or None."""
        if limits.speed_limit <= 0 or self._attached_at is None or self.dropped:
            return None
        window = limits.speed_time
        self._samples.append((now, self.received))
        cutoff = now - window
        while len(self._samples) >= 2 and self._samples[1][0] <= cutoff:
            self._samples.popleft()
        if now - self._attached_at < window:
            return None
        moved = self.received - self._samples[0][1]
        floor = limits.speed_limit * window
        # A read still waiting on the socket holds bytes that arrived but are not
        # counted yet; grant up to half the floor for it, so a connection exactly at
        # the floor is kept and a trickle under one big read is still dropped.
        if moved + min(self.reading, floor / 2) >= floor:
            return None
        return (
            f"slower than {_rate(limits.speed_limit)} for {window:g} s "
            f"({_rate(moved / window)} in the last {window:g} s)"
        )

    def drop(self, reason: str) -> None:
        """Shut the socket: the thread blocked in a read sees the body end early."""
        self.dropped = reason
        if self._cut is not None:
            self._cut()


class Watchdog:
    """The flows of one download, its speed floor and its stall clock."""

    def __init__(self, limits: TransferLimits, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self._clock = clock
        self._lock = threading.Lock()
        self._flows: set[Flow] = set()
        #: seconds with a request out since the stall clock last started, up to the
        #: current busy spell, and the bytes that arrived meanwhile
        self._stalled = 0.0
        self._busy_since: float | None = None
        self._arrived = 0
        self._enough = max(1, int(limits.speed_limit * limits.speed_time))
        #: why the last request failed (for the stall message)
        self.last_failure = ""

    @contextlib.contextmanager
    def flow(self) -> Iterator[Flow]:
        """Register one request for the block: open it, attach its response, read it."""
        now = self._clock()
        flow = Flow(now)
        with self._lock:
            if not self._flows:
                self._busy_since = now
            self._flows.add(flow)
        try:
            yield flow
        finally:
            # Unregistered before the caller releases the connection to the pool, so a
            # drop never shuts down a socket that another request has taken since.
            with self._lock:
                self._flows.discard(flow)
                if not self._flows and self._busy_since is not None:
                    self._stalled += self._clock() - self._busy_since
                    self._busy_since = None

    @property
    def tick(self) -> float:
        """Seconds between two checks: :data:`TICK`, or a tenth of the floor's window if
        that is shorter, so a drop comes within a tenth of a window of the floor's verdict
        whatever the window (a short one is what the fault tests run with)."""
        return min(TICK, self.limits.speed_time / 10)

    def attach(self, flow: Flow, cut: Callable[[], None]) -> None:
        with self._lock:
            flow.attach(cut, self._clock())

    def progressed(self, count: int) -> None:
        """``count`` body bytes arrived; once enough have, the stall clock starts again."""
        with self._lock:
            self._arrived += count
            if self._arrived >= self._enough:
                self._restart()

    def answered(self) -> None:
        """The server answered the probe: it is alive, the stall clock starts again."""
        with self._lock:
            self._restart()

    def _restart(self) -> None:
        self._stalled = 0.0
        self._arrived = 0
        if self._busy_since is not None:
            self._busy_since = self._clock()

    def stalled_for(self) -> float:
        """Seconds without a byte while a request was out."""
        with self._lock:
            busy = self._clock() - self._busy_since if self._busy_since is not None else 0.0
            return self._stalled + busy

    def request_timeout(self) -> float:
        """The socket timeout for the next request: within the floor's window and the stall limit."""
        left = self.limits.stall_timeout - self.stalled_for()
        return max(0.01, min(self.limits.read_timeout, self.limits.speed_time, left))

    def stall_error(self, what: str) -> NetworkError | None:
        """The error that ends the download if it has stalled, else None."""
        if self.stalled_for() < self.limits.stall_timeout:
            return None
        with self._lock:
            arrived = self._arrived
        seconds = f"{self.limits.stall_timeout:g} s"
        amount = (
            f"nothing arrived from {what} for {seconds}"
            if not arrived
            else f"only {arrived} bytes arrived from {what} in {seconds}"
        )
        last = f" (last: {self.last_failure})" if self.last_failure else ""
        return NetworkError(f"the server stalled: {amount}{last}; try again later")

    def check(self) -> None:
        """Drop every flow below the floor (called by the supervising thread)."""
        now = self._clock()
        with self._lock:
            for flow in self._flows:
                reason = flow.too_slow(now, self.limits)
                if reason is not None:
                    flow.drop(reason)

    def drop_all(self, reason: str) -> None:
        """Unblock every read (the download is stopping)."""
        with self._lock:
            for flow in self._flows:
                if flow.dropped is None:
                    flow.drop(reason)

    def note_failure(self, error: BaseException) -> None:
        """Remember why the last request failed, for the stall message."""
        self.last_failure = str(error) or type(error).__name__


def supervise(
    threads: list[threading.Thread],
    watchdog: Watchdog,
    *,
    what: str,
    cancel: threading.Event | None,
    failed: Callable[[], bool],
    finished: Callable[[], bool],
    every_tick: Callable[[], None],
) -> None:
    """Run ``threads`` and watch them from this thread until they end or ``finished()``.

    ``every_tick`` may append started threads to ``threads``: they are watched too.

    Each :attr:`Watchdog.tick`: ``every_tick`` (progress, resume state), the speed floor, the stall limit
    (raises its :class:`NetworkError`), ``cancel`` (raises
    :class:`~cudaup.util.parallel.CancelledError`).  The caller stops the workers and
    saves state on the way out, whatever the exception.
    """
    for thread in threads:
        if thread.ident is None:  # not started yet (the caller may start some, and add more)
            thread.start()
    while alive := [t for t in threads if t.is_alive()]:
        alive[0].join(watchdog.tick)
        check_cancelled(cancel)
        every_tick()
        watchdog.check()
        if failed() or finished():
            return
        stalled = watchdog.stall_error(what)
        if stalled is not None:
            raise stalled


def join_all(threads: list[threading.Thread], within: float) -> None:
    """Wait for the started ``threads`` to end, ``within`` seconds for all of them together.

    A worker still waiting for response headers cannot be interrupted; it ends at its
    socket timeout, refused any further use of the part file, while the download stops.
    """
    deadline = time.monotonic() + within
    for thread in threads:
        if thread.ident is not None:  # started
            thread.join(max(0.0, deadline - time.monotonic()))


def _rate(value: float) -> str:
    for unit, size in (("MiB/s", 2**20), ("KiB/s", 2**10)):
        if value >= size:
            return f"{value / size:.3g} {unit}"
    return f"{value:.0f} B/s"
