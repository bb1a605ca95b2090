"""The byte-range plan of one parallel download: segments, work stealing, watermark.

Pure and thread-safe: the downloader's workers ask :meth:`SegmentPlan.take`
for work, report bytes with :meth:`SegmentPlan.advance`, and the hashing
thread waits on :meth:`SegmentPlan.wait_for_prefix`.  The segments always
partition ``[0, size)``; each segment's ``[start, pos)`` is on disk.  When a
worker runs out of work it steals the second half of the segment with the
most bytes left, so one slow connection cannot hold the end of the download.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass
from typing import Any

#: Never split a segment into pieces smaller than this: a new connection costs a round trip.
MIN_SPLIT = 1024 * 1024
ALIGN = 64 * 1024


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
    def __init__(self, size: int, segments: list[Segment]) -> None:
        self.size = size
        self.segments = segments
        self._lock = threading.Condition()
        self.cancelled = False
        self._range_waiters = 0

    @classmethod
    def split(cls, size: int, parts: int, tail_first: int = 0) -> SegmentPlan:
        """``parts`` equal segments (aligned), fewer for small files.

        With ``tail_first``, the file's last bytes (at least that many, aligned) form
        a segment of their own that is handed out first: a zip lists its members at
        its end, so an unpacker can plan while the rest arrives.
        """
        parts = max(1, min(parts, size // MIN_SPLIT or 1))
        head = size
        if tail_first and size >= 2 * MIN_SPLIT:
            head = (size - tail_first) // ALIGN * ALIGN
        bounds = [0]
        for index in range(1, parts):
            bounds.append((head * index // parts) // ALIGN * ALIGN)
        bounds.append(head)
        segments = [Segment(a, a, b) for a, b in itertools.pairwise(bounds) if b > a]
        if head < size:
            segments.append(Segment(head, head, size, first=True))
        return cls(size, segments or [Segment(0, 0, 0)])

    @classmethod
    def from_state(cls, size: int, rows: list[list[int]]) -> SegmentPlan:
        """The plan a resume state file recorded (read from disk: checked, never trusted)."""
        if not all(type(value) is int for row in rows for value in row):
            raise ValueError("segments in the state file are not whole numbers")
        segments = sorted((Segment(a, p, b) for a, p, b in rows), key=lambda s: s.start)
        covered = 0
        for segment in segments:
            if segment.start != covered or not segment.start <= segment.pos <= segment.end:
                raise ValueError("segments in the state file do not partition the file")
            covered = segment.end
        if covered != size:
            raise ValueError("segments in the state file do not cover the file")
        return cls(size, segments)

    def state(self) -> list[list[int]]:
        with self._lock:
            return [[s.start, s.pos, s.end] for s in self.segments]

    @property
    def completed(self) -> int:
        with self._lock:
            return sum(s.pos - s.start for s in self.segments)

    def take(self) -> Segment | None:
        """An idle unfinished segment, or the stolen second half of the busiest one."""
        with self._lock:
            if self.cancelled:
                return None
            idle = [s for s in self.segments if not s.active and not s.done]
            if idle:
                segment = min(idle, key=lambda s: (not s.first, s.start))
                segment.active = True
                return segment
            victim = max(
                (s for s in self.segments if s.active and not s.done),
                key=lambda s: s.end - max(s.pos, s.reserved),
                default=None,
            )
            if victim is None:
                return None
            floor = max(victim.pos, victim.reserved)
            if victim.end - floor < 2 * MIN_SPLIT:
                return None
            middle = (floor + (victim.end - floor) // 2) // ALIGN * ALIGN
            if middle <= floor or victim.end - middle < MIN_SPLIT:
                return None
            stolen = Segment(middle, middle, victim.end, active=True)
            victim.end = middle
            self.segments.append(stolen)
            self.segments.sort(key=lambda s: s.start)
            return stolen

    def reserve(self, segment: Segment, length: int) -> int:
        """How many of ``length`` bytes at ``segment.pos`` still belong to this segment."""
        with self._lock:
            allowed = max(0, min(length, segment.end - segment.pos))
            segment.reserved = segment.pos + allowed
            return allowed

    def advance(self, segment: Segment, length: int) -> None:
        with self._lock:
            at_watermark = segment.pos == self._watermark()
            segment.pos = min(segment.end, segment.pos + length)
            # Only the segment at the watermark can move it; waking the hasher for
            # every other chunk costs a context switch for nothing (unless a reader
            # waits for a range elsewhere).
            if at_watermark or self._range_waiters:
                self._lock.notify_all()

    def release(self, segment: Segment) -> None:
        with self._lock:
            segment.active = False
            segment.reserved = segment.pos
            self._lock.notify_all()

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
