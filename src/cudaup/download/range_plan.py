"""The byte-range plan of one parallel download: pieces in order, work stealing, watermark.

Pure and thread-safe: the downloader's workers ask :meth:`SegmentPlan.take` for work,
report bytes with :meth:`SegmentPlan.advance` and what each request cost with
:meth:`SegmentPlan.observe`, and the hashing thread waits on
:meth:`SegmentPlan.wait_for_prefix`.  The segments always partition ``[0, size)``;
each segment's ``[start, pos)`` is on disk.

Connections take the next piece from the front of what nobody has taken yet, so the
file fills from its start, about as wide as the connections' pieces together, and the
hash of the contiguous prefix follows the arrival: when the last byte lands only the
last pieces remain to hash.  A piece is sized to the link (:meth:`SegmentPlan.piece`):
large enough that the round trip each request costs does not show; near the end the
pieces shrink, so that the connections finish together and leave little to hash.
When nothing is left to take, an idle worker steals the second half of the segment
with the most bytes left, so one slow connection cannot hold the end of the download.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

#: Never carve or steal a piece smaller than this: each one costs a request.
MIN_SPLIT = 1024 * 1024
ALIGN = 64 * 1024
#: The piece a connection takes while nothing is known of the link, and the least a piece
#: is sized to before the end (each request costs Python a few hundred µs of CPU).
BASE_PIECE = 4 * 1024 * 1024
#: The largest piece: the pieces in flight together bound how far the hash can lag.
MAX_PIECE = 64 * 1024 * 1024
#: A piece takes this many round trips to arrive, so the idle round trip between two
#: requests on a connection costs it 1/(1+N) of its speed (1.5 % at 64).
ROUND_TRIPS_PER_PIECE = 64
#: A steal is worth a request when each half takes this many round trips.
ROUND_TRIPS_PER_STEAL = 4
#: The hash speed assumed until the hasher has measured its own (md5 on a slow core).
ASSUMED_HASH_SPEED = 512 * 1024 * 1024
#: Weight of the newest measurement in the smoothed speeds (of a connection, of the hash).
SMOOTHING = 0.25
#: Requests that carried fewer bytes than this say little of a connection's speed.
MIN_SAMPLE = 256 * 1024


@dataclass
class Segment:
    start: int
    pos: int
    end: int
    active: bool = False
    #: bytes handed to a writer but not yet reported: a steal must not split below this
    reserved: int = 0
    #: handed out before the others (a zip's tail, where its member list is)
    first: bool = False

    @property
    def done(self) -> bool:
        return self.pos >= self.end


class SegmentPlan:
    def __init__(self, size: int, segments: list[Segment], connections: int = 1) -> None:
        self.size = size
        self.segments = segments
        #: the connections that share the rest of the download (lowered after a 503/429)
        self.connections = max(1, connections)
        #: while more connections may join (:mod:`cudaup.download.ramp`), how many there
        #: may be: pieces are sized for them (even a lone connection takes pieces from the
        #: front), so that the ones that join continue the prefix, not steal; else 0
        self.may_grow_to = 0
        self._lock = threading.Condition()
        self.cancelled = False
        self._range_waiters = 0
        #: the least seconds seen from sending a request to its first byte, and the
        #: smoothed bytes per second of one connection's body; None until a request told
        self.round_trip: float | None = None
        self.speed: float | None = None
        #: bytes per second the hasher reads back and hashes; None until it told
        self.hash_speed: float | None = None
        #: when the last bytes were counted (the clock a caller of :meth:`advance` gave)
        self._counted_at: float | None = None

    @classmethod
    def split(cls, size: int, connections: int, tail_first: int = 0) -> SegmentPlan:
        """The plan of a fresh download: nothing taken yet, pieces carved as asked for.

        With ``tail_first``, the file's last bytes (at least that many, aligned) form
        a segment of their own that is handed out first: a zip lists its members at
        its end, so an unpacker can plan while the rest arrives.
        """
        head = tail_start(size, tail_first)
        segments = [Segment(0, 0, head)]
        if head < size:
            segments.append(Segment(head, head, size, first=True))
        return cls(size, segments, connections)

    def fresh_segment_at(self, start: int) -> Segment | None:
        """The segment that begins at ``start`` with none of its bytes on disk and nobody
        filling it: where bytes that came before any worker (the probe's) may go."""
        with self._lock:
            return next(
                (s for s in self.segments if s.start == start == s.pos < s.end and not s.active),
                None,
            )

    @classmethod
    def from_state(cls, size: int, rows: list[list[int]], connections: int = 1) -> SegmentPlan:
        """The plan a resume state file recorded (read from disk: checked, never trusted)."""
        if not all(type(value) is int for row in rows for value in row):
            raise ValueError("segments in the state file are not whole numbers")
        if not all(len(row) == 3 for row in rows):
            raise ValueError("segments in the state file are not [start, position, end]")
        segments = sorted((Segment(a, p, b) for a, p, b in rows), key=lambda s: s.start)
        covered = 0
        for segment in segments:
            if segment.start != covered or not segment.start <= segment.pos <= segment.end:
                raise ValueError("segments in the state file do not partition the file")
            covered = segment.end
        if covered != size:
            raise ValueError("segments in the state file do not cover the file")
        return cls(size, segments or [Segment(0, 0, 0)], connections)

    def state(self) -> list[list[int]]:
        with self._lock:
            return [[s.start, s.pos, s.end] for s in self.segments]

    @property
    def completed(self) -> int:
        with self._lock:
            return sum(s.pos - s.start for s in self.segments)

    def counted(self) -> tuple[int, float | None]:
        """The bytes on disk and when the last of them were counted (None: no
        :meth:`advance` said), read together."""
        with self._lock:
            return sum(s.pos - s.start for s in self.segments), self._counted_at

    # -- handing out work ---------------------------------------------------------
    def take(self) -> Segment | None:
        """The next piece from the front, or the stolen second half of the busiest segment."""
        with self._lock:
            if self.cancelled:
                return None
            idle = [s for s in self.segments if not s.active and not s.done]
            if idle:
                segment = min(idle, key=lambda s: (not s.first, s.start))
                self._carve(segment, self._piece())
                segment.active = True
                return segment
            return self._steal()

    def _carve(self, segment: Segment, piece: int) -> None:
        """Cut ``segment`` after ``piece`` more bytes; the rest stays for the next taker."""
        cut = (segment.pos + piece) // ALIGN * ALIGN
        if cut <= segment.pos or segment.end - cut < MIN_SPLIT:
            return  # what would be left is not worth a request of its own
        rest = Segment(cut, cut, segment.end, first=segment.first)
        segment.end = cut
        self._insert_after(segment, rest)

    def _steal(self) -> Segment | None:
        victim = max(
            (s for s in self.segments if s.active and not s.done),
            key=lambda s: s.end - max(s.pos, s.reserved),
            default=None,
        )
        if victim is None:
            return None
        floor = max(victim.pos, victim.reserved)
        smallest = self._least(ROUND_TRIPS_PER_STEAL, MIN_SPLIT)
        if victim.end - floor < 2 * smallest:
            return None
        middle = (floor + (victim.end - floor) // 2) // ALIGN * ALIGN
        if middle <= floor or victim.end - middle < smallest:
            return None
        stolen = Segment(middle, middle, victim.end, active=True)
        victim.end = middle
        self._insert_after(victim, stolen)
        return stolen

    def _insert_after(self, segment: Segment, new: Segment) -> None:
        # By identity: two segments may compare equal field by field (dataclass ==).
        at = next(i for i, s in enumerate(self.segments) if s is segment)
        self.segments.insert(at + 1, new)

    def piece(self) -> int:
        """How many bytes the next connection to ask should take from the front."""
        with self._lock:
            return self._piece()

    def _piece(self) -> int:
        connections = max(self.connections, self.may_grow_to)
        if connections <= 1:
            return self.size  # one stream fills the file in order by itself
        target = min(MAX_PIECE, self._least(ROUND_TRIPS_PER_PIECE, BASE_PIECE))
        # Near the end, pieces shrink to half an even share of what is left (so the
        # connections finish together), down to the tail floor.
        left = self.size - sum(s.pos - s.start for s in self.segments)
        share = -(-left // (2 * connections))
        piece = max(self._tail_floor(target, connections), min(target, share))
        if self.connections <= 1:
            # Alone while others may join (the ramp has not decided): the round trip
            # between two of its requests leaves its link idle, and pieces cut for eight
            # (the tail floor: half a round trip's worth from a fast, far server) left it
            # idle more than half the time, a 62 MB wheel 30 ms away in 5 requests.  Each
            # of its pieces takes at least the round trips a joiner may steal half of.
            piece = max(piece, min(target, self._least(ROUND_TRIPS_PER_STEAL, MIN_SPLIT)))
        return piece

    def _tail_floor(self, target: int, connections: int) -> int:
        """The smallest piece near the end: the pieces in flight when the last byte lands
        (all but one of them) are hashed after it, while each smaller piece costs a round
        trip.  Halving the last pieces is worth a round trip while the hash of what it
        saves, (connections - 1) * piece / 4, takes longer: down to twice
        ``round_trip * hash_speed / (connections - 1)``."""
        if self.round_trip is None:
            return MIN_SPLIT
        hash_speed = self.hash_speed or ASSUMED_HASH_SPEED
        floor = int(2 * self.round_trip * hash_speed / (connections - 1))
        return max(MIN_SPLIT, min(target, -(-floor // ALIGN) * ALIGN))

    def _least(self, round_trips: int, floor: int) -> int:
        """Bytes that take one connection ``round_trips`` round trips, at least ``floor``."""
        if self.round_trip is None or self.speed is None:
            return floor
        wanted = int(round_trips * self.round_trip * self.speed)
        return max(floor, -(-wanted // ALIGN) * ALIGN)

    def observe(self, first_byte: float, length: int, body: float) -> None:
        """One request answered: ``first_byte`` seconds after it was sent, then
        ``length`` body bytes in ``body`` seconds."""
        with self._lock:
            # The least seen: what the link costs.  A busy CPU (threads waiting for the
            # GIL, a loaded machine) only adds to it, and idle connections cost nothing there.
            self.round_trip = min(first_byte, self.round_trip or first_byte)
            if length >= MIN_SAMPLE and body > 0:
                self.speed = _smoothed(self.speed, length / body)

    def observe_hash(self, length: int, seconds: float) -> None:
        """The hasher took ``seconds`` for ``length`` bytes (read back and hashed)."""
        if length >= MIN_SAMPLE and seconds > 0:
            with self._lock:
                self.hash_speed = _smoothed(self.hash_speed, length / seconds)

    # -- progress -----------------------------------------------------------------
    def reserve(self, segment: Segment, length: int) -> int:
        """How many of ``length`` bytes at ``segment.pos`` still belong to this segment."""
        with self._lock:
            allowed = max(0, min(length, segment.end - segment.pos))
            segment.reserved = segment.pos + allowed
            return allowed

    def advance(self, segment: Segment, length: int, at: float | None = None) -> None:
        """``length`` more bytes of ``segment`` are on disk, counted at ``at`` (seconds of
        the caller's clock; None: do not say when, as for bytes that came before the
        transfer)."""
        with self._lock:
            at_watermark = segment.pos == self._watermark()
            segment.pos = min(segment.end, segment.pos + length)
            if at is not None:
                self._counted_at = at
            # Only the segment at the watermark can move it; waking the hasher for
            # every other chunk costs a context switch for nothing (unless a reader
            # waits for a range elsewhere).
            if at_watermark or self._range_waiters:
                self._lock.notify_all()

    def release(self, segment: Segment) -> None:
        with self._lock:
            segment.active = False
            segment.reserved = segment.pos
            self._merge_done()
            self._lock.notify_all()

    def _merge_done(self) -> None:
        """Join neighbours that are both on disk and idle: the list stays about as long
        as the pieces in flight, however many pieces the file took."""
        merged: list[Segment] = []
        for segment in self.segments:
            last = merged[-1] if merged else None
            if (
                last is not None
                and last.done
                and segment.done
                and not last.active
                and not segment.active
            ):
                last.end = last.pos = segment.end
                continue
            merged.append(segment)
        self.segments[:] = merged

    def watermark(self) -> int:
        """End of the contiguous prefix that is on disk."""
        with self._lock:
            return self._watermark()

    def _watermark(self) -> int:
        # Segments are sorted by start and partition the file: the first unfinished
        # one's position is the end of the contiguous prefix.
        for segment in self.segments:
            if segment.pos < segment.end:
                return segment.pos
        return self.size

    def wait_for_prefix(self, beyond: int, at_least: int = 0, timeout: float = 0.5) -> int:
        """The watermark, once it is ``at_least`` bytes past ``beyond`` (or the end)."""
        with self._lock:
            deadline_hit = False
            while not self.cancelled and not deadline_hit:
                mark = self._watermark()
                if mark >= min(self.size, beyond + max(1, at_least)):
                    break
                deadline_hit = not self._lock.wait(timeout)
            return self._watermark()

    def wait_for_range(self, start: int, stop: int, timeout: float = 0.5) -> bool:
        """Whether ``[start, stop)`` is all on disk, waiting up to ``timeout`` for it."""
        with self._lock:
            self._range_waiters += 1
            try:
                return (
                    self._lock.wait_for(
                        lambda: self.cancelled or self._covered(start, stop), timeout
                    )
                    and not self.cancelled
                )
            finally:
                self._range_waiters -= 1

    def _covered(self, start: int, stop: int) -> bool:
        return all(
            s.pos >= min(stop, s.end) for s in self.segments if s.start < stop and s.end > start
        )

    def cancel(self) -> None:
        with self._lock:
            self.cancelled = True
            self._lock.notify_all()

    def all_done(self) -> bool:
        with self._lock:
            return all(s.done for s in self.segments)

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        rows: Any = self.state()
        return f"SegmentPlan(size={self.size}, segments={rows})"


def tail_start(size: int, tail_first: int) -> int:
    """Where a fresh plan's tail segment begins (``size``: the file is too small for one)."""
    if tail_first and size >= 2 * MIN_SPLIT:
        return (size - tail_first) // ALIGN * ALIGN
    return size


def probe_range(size: int | None, tail_first: int) -> tuple[int, int] | None:
    """The bytes ``[start, stop)`` the probe asks for, besides proving ranges, size and
    validators: the tail segment a fresh plan hands out first (a zip's member list), or a
    whole file too small for one, so that the first bytes a reader waits for take no
    request of their own; None (one byte) without a tail to fetch first or a size the
    index gave."""
    if not tail_first or not size:
        return None
    start = tail_start(size, tail_first)
    return (start if start < size else 0), size


def _smoothed(previous: float | None, sample: float) -> float:
    return sample if previous is None else previous + SMOOTHING * (sample - previous)
