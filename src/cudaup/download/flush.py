"""Keeping a parallel download's part file and resume state on disk while it runs: the
bytes handed to the writeback as they land, the state rewritten about once a second."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from cudaup.download.range_plan import SegmentPlan
from cudaup.download.target import PartFile, PartFileClosedError
from cudaup.download.watch import TICK

#: How often the resume state is rewritten while the download runs, in seconds (progress
#: is reported every :data:`~cudaup.download.watch.TICK`).  Each save first syncs the
#: part file, and a sync holds the connections' writes back while it runs (on this ext4,
#: a ``pwrite`` waited ~40 ms in each ~70 ms ``fdatasync``, the hasher idle meanwhile).
STATE_INTERVAL = 1.0
#: How often the bytes that arrived since are handed to the disk's writeback, in seconds
#: (:func:`~cudaup.util.libc.start_writeback`: it does not wait), so that a fast link's
#: writeback overlaps the transfer and each save's sync finds little left to write.
WRITEBACK_TICK = 0.05
#: Where writeback cannot be started without waiting (not Linux), the state is saved,
#: and so the part file synced, after this many new bytes too: the writeback then
#: overlaps the transfer, instead of all of it waiting for the sync before publishing.
FLUSH_BYTES = 32 * 1024 * 1024
#: Writeback starts a page short of where a piece is being written.
PAGE = 4096


class Flusher:
    """Syncs the part file and rewrites the resume state while the download runs.

    In a thread of its own: a sync can take a while (a fast link leaves a GiB dirty in a
    second), and the supervising thread keeps its tick meanwhile.
    """

    def __init__(
        self,
        save: Callable[[], None],
        plan: SegmentPlan,
        part: PartFile,
        report: Callable[[BaseException], None],
        *,
        writeback: bool = True,
    ) -> None:
        self._save = save
        self._plan = plan
        self._part = part
        #: how a failure to save (a full disk) becomes the download's error
        self._report = report
        #: False for a file read once and deleted: its bytes need not reach the disk, and
        #: each save is then a small write, not a sync
        self._writeback = writeback
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="cudaup-flush")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop, after the save in progress if any (then nothing saves the state again)."""
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join()

    def _run(self) -> None:
        # Imported here, after the first request is on its way (ctypes: ~2 ms).
        from cudaup.util.libc import can_start_writeback  # noqa: PLC0415

        plan = self._plan
        saved, when = plan.completed, time.monotonic()
        head_start = self._writeback and can_start_writeback()
        # Without a head start a durable file is synced every FLUSH_BYTES too.
        by_bytes = self._writeback and not head_start
        try:
            while not self._stop.wait(WRITEBACK_TICK if head_start else TICK):
                if plan.cancelled:
                    break
                if head_start:
                    self._start_writeback()
                done = plan.completed
                late = time.monotonic() - when >= STATE_INTERVAL
                if (done > saved and late) or (by_bytes and done - saved >= FLUSH_BYTES):
                    self._save()
                    saved, when = done, time.monotonic()
        except PartFileClosedError:
            pass  # the download stopped meanwhile
        except BaseException as exc:  # a full disk while saving: the download's error
            self._report(exc)

    def _start_writeback(self) -> None:
        """Hand the bytes on disk to the writeback, up to a page short of each segment's
        position (the page a connection writes next stays out of it)."""
        from cudaup.util.libc import start_writeback  # noqa: PLC0415

        with self._part.use() as fd:
            for start, position, _end in self._plan.state():
                start_writeback(fd, start, (position - start) // PAGE * PAGE)
