"""The hash of a parallel download's part file, taken in order while the file fills.

The connection that fills the front of the file hands the hasher the buffer it just
wrote (:meth:`PrefixHasher.offer`) and gets a spare one back, so the bytes of an
in-order transfer are hashed from memory, on the hasher's own thread (hashlib releases
the GIL for large buffers), never read back.  What is not handed over (bytes that
arrived out of order, or while the hasher was behind by all its spares; a resumed
download's prefix) is read back from the part file once the contiguous prefix on disk
covers it.  Both are claimed under one lock against :attr:`PrefixHasher.claimed`, the
end of what is hashed, queued or being read back, so every byte is hashed once and in
order, whichever way it comes.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections import deque

from cudaup.download.publish import HASH_BLOCK
from cudaup.download.range_plan import SegmentPlan
from cudaup.download.remote import MAX_READ
from cudaup.download.target import PartFile

#: Buffers the hasher may hold: how far the hash may lag the connection at the front
#: (16 MiB of :data:`MAX_READ` buffers) before that connection waits for it.
SPARES = 16
#: How long the connection at the front waits for a spare before it leaves its bytes
#: to be read back, in seconds (the hash of all the spares takes ~20 ms).
PATIENCE = 0.2
#: How long the hasher waits before it looks at cancellation again, in seconds.
WAKE = 0.25


class PrefixHasher:
    """Hashes ``[0, plan.size)`` in order, from handed-over buffers or read back."""

    def __init__(self, algorithm: str, plan: SegmentPlan, part: PartFile) -> None:
        self.algorithm = algorithm
        self._plan = plan
        self._part = part
        self._changed = threading.Condition()
        #: (buffer, length) handed over, in file order, right after what is hashed
        self._queue: deque[tuple[bytearray, int]] = deque()
        self._spares: list[bytearray] = []
        self._made = 0
        #: the end of what is hashed, queued or being read back (the next byte to claim)
        self.claimed = 0
        #: bytes hashed so far (the verifying display shows it)
        self.hashed = 0
        self._stopped = False

    # -- the connections' side ------------------------------------------------------
    def offer(self, offset: int, buffer: bytearray, length: int) -> bytearray | None:
        """``buffer[:length]`` was just written at ``offset``.  When those are the next
        bytes to hash, the hasher keeps ``buffer`` and returns a spare for the next
        read; else None (the caller keeps its buffer; the bytes are read back later).

        When all the spares are queued, the connection at the front waits for one, up to
        :data:`PATIENCE`: the hash is behind, and a verified download cannot end before
        its hash, while reading these bytes back would cost the hasher's core a copy more.
        """
        with self._changed:
            if offset != self.claimed:
                self._changed.notify()  # the prefix on disk may have grown: look again
                return None
            # At most a moment: a hash held up longer (a loaded machine) reads them back.
            available = lambda: self._spares or self._made < SPARES or self._stopped  # noqa: E731
            if not self._changed.wait_for(available, PATIENCE):
                return None
            if self._stopped or offset != self.claimed:
                return None
            if self._spares:
                spare = self._spares.pop()
            else:
                self._made += 1
                spare = bytearray(MAX_READ)
            self._queue.append((buffer, length))
            self.claimed += length
            self._changed.notify_all()
            return spare

    def stop(self) -> None:
        """Wake the hasher to end (the download stopped)."""
        with self._changed:
            self._stopped = True
            self._changed.notify_all()

    # -- the hasher's thread --------------------------------------------------------
    def run(self) -> str | None:
        """The hex digest of the whole file, or None if the download stopped first."""
        digest = hashlib.new(self.algorithm)
        size = self._plan.size
        readback: memoryview | None = None  # made when first needed: most runs need none
        while self.hashed < size:
            job = self._next_job()
            if job is None:
                return None
            began, start = time.perf_counter(), self.hashed
            if isinstance(job, tuple):
                buffer, length = job
                digest.update(memoryview(buffer)[:length])
                with self._changed:
                    self._spares.append(buffer)
                    self._changed.notify_all()  # a connection may wait for a spare
                self.hashed += length
            else:
                if readback is None:
                    readback = memoryview(bytearray(HASH_BLOCK))
                self._read_back(digest, readback, job)
            # how fast the hash goes sizes the last pieces (see range_plan)
            self._plan.observe_hash(self.hashed - start, time.perf_counter() - began)
        return digest.hexdigest()

    def _next_job(self) -> tuple[bytearray, int] | int | None:
        """A handed-over buffer, or the end of a range to read back from ``hashed``;
        None once the download stopped."""
        with self._changed:
            while True:
                if self._stopped or self._plan.cancelled:
                    return None
                if self._queue:
                    return self._queue.popleft()
                # Nothing queued: ``claimed`` is ``hashed``.  Read back what is on disk
                # beyond it, once that is a block (or the rest of the file): a
                # connection that fills the front hands its bytes over meanwhile.
                mark = self._plan.watermark()
                if mark >= min(self._plan.size, self.claimed + HASH_BLOCK):
                    end = min(mark, self.claimed + HASH_BLOCK)
                    self.claimed = end
                    return end
                self._changed.wait(WAKE)

    def _read_back(self, digest: hashlib._Hash, view: memoryview, end: int) -> None:
        position = self.hashed
        while position < end:
            with self._part.use() as fd:
                count = os.preadv(fd, [view[: min(len(view), end - position)]], position)
            if not count:
                raise OSError(f"cannot read back byte {position} of the part file")
            digest.update(view[:count])
            position += count
            self.hashed = position
