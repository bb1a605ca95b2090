"""Reading a file while it downloads: reads wait for their bytes to be on disk.

The bytes are not verified yet: what a reader makes of them counts only once
the download's checksum matched, and if the download fails or starts over the
reader gets :class:`~cudaup.errors.ArrivalLostError`.
"""

from __future__ import annotations

import io
import os
import threading
from pathlib import Path
from typing import Any, BinaryIO

from cudaup.download.range_plan import SegmentPlan
from cudaup.errors import ArrivalLostError


class Arrival:
    """Lets a reader use a file's bytes while it is still downloading.

    Pass one to :func:`~cudaup.download.download` and call :meth:`open` from another thread: reads
    block until the bytes they ask for are on disk, in whatever order the
    connections bring them.  ``tail_first`` asks for the file's last bytes
    before the rest (a zip's member list).  The bytes are not verified yet: a
    reader must treat what it made from them as provisional until ``download``
    returns, and if the download fails or starts over, reads raise
    :class:`ArrivalLostError`.
    """

    def __init__(self, tail_first: int = 0) -> None:
        self.tail_first = tail_first
        self._changed = threading.Condition()
        self._path: Path | None = None
        self._plan: SegmentPlan | None = None
        self._complete = False
        self._lost = False

    # -- the downloader's side --------------------------------------------------
    def _attach(self, path: Path, plan: SegmentPlan) -> None:
        """The part file exists; ``plan`` says what is on disk."""
        with self._changed:
            if not self._lost:
                self._path, self._plan = path, plan
                self._changed.notify_all()

    def _finish(self, path: Path) -> None:
        with self._changed:
            self._path = path  # readers opened from now on open the final name
            self._complete = True
            self._changed.notify_all()

    def _lose(self) -> None:
        with self._changed:
            if not self._complete:
                self._lost = True
                if self._plan is not None:
                    self._plan.cancel()
                self._changed.notify_all()

    @property
    def lost(self) -> bool:
        """Whether the download failed or started over after readers could begin."""
        with self._changed:
            return self._lost

    # -- the reader's side ------------------------------------------------------
    def open(self) -> BinaryIO:
        """A new buffered reader over the file (waits for the download to start)."""
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._path is not None or self._lost)
                if self._lost or self._path is None:
                    raise ArrivalLostError("the download stopped before it began")
                path, complete = self._path, self._complete
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            except FileNotFoundError:
                if complete:
                    raise
                # Renamed to its final name a moment ago: wait to be told that name.
                with self._changed:
                    self._changed.wait_for(lambda: self._complete or self._lost, 1.0)
                continue
            return io.BufferedReader(ArrivingFile(self, fd), buffer_size=64 * 1024)

    def _wait(self, start: int, stop: int) -> None:
        while True:
            with self._changed:
                if self._lost:
                    raise ArrivalLostError("the download failed or started over")
                if self._complete:
                    return
                # A reader exists only once the part file was attached with its plan
                # (a single-stream download attaches nothing: readers open the final file).
                plan = self._plan
                assert plan is not None
            if plan.wait_for_range(start, stop):
                return
            if plan.cancelled:  # a failure the downloader is about to report
                with self._changed:
                    self._changed.wait_for(lambda: self._lost or self._complete, 0.5)


class ArrivingFile(io.RawIOBase):
    """A seekable, read-only view of a file being downloaded; reads wait for their bytes."""

    def __init__(self, arrival: Arrival, fd: int) -> None:
        self._arrival = arrival
        self._fd = fd
        self._size = os.fstat(fd).st_size  # the part file is allocated at its full size
        self._position = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self._size}[whence]
        if base + offset < 0:
            raise ValueError("negative seek position")
        self._position = base + offset
        return self._position

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        stop = min(self._size, self._position + len(view))
        if stop <= self._position:
            return 0
        self._arrival._wait(self._position, stop)
        count = os.preadv(self._fd, [view[: stop - self._position]], self._position)
        self._position += count
        return count

    def close(self) -> None:
        if not self.closed:
            os.close(self._fd)
        super().close()
