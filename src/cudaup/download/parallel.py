"""Parallel ranged connections into one part file, hashed while it fills.

Each worker thread takes a segment of the plan and asks for its bytes, again and
again until the segment is done: a shorter 206 than asked is written and the rest
asked for; a failure keeps what was written.  A segment's retries are budgeted on
progress: :data:`~cudaup.download.remote.MAX_FAILURES` requests in a row that bring
nothing end the download, any that brings bytes resets the count.  A 503 or 429 means
the server wants fewer connections: the download lowers its count for good to one
fewer than were running, and the worker that was refused stops (the last one waits
``Retry-After`` instead).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from urllib.parse import urlsplit

import urllib3

from cudaup.core.units import binary_size
from cudaup.download.digest import PrefixHasher
from cudaup.download.job import DownloadJob
from cudaup.download.publish import publish
from cudaup.download.ramp import DEFAULT_CONNECTIONS, ConnectionRamp
from cudaup.download.range_plan import ASSUMED_HASH_SPEED, Segment, SegmentPlan
from cudaup.download.remote import (
    Budget,
    BusyError,
    ReadBuffer,
    Remote,
    RemoteChangedError,
    RetryableError,
    answered_range,
    ask,
    body_of,
    read_body,
    refuse_status,
)
from cudaup.download.request import (
    DownloadRequest,
    DownloadResult,
    Progress,
    ProgressEvent,
    emit,
    notice,
)
from cudaup.download.target import DownloadPaths, PartFile, PartFileClosedError, check_space
from cudaup.download.watch import TICK, Flow, Watchdog, join_all, supervise
from cudaup.errors import CudaupError, NetworkError
from cudaup.net.http import HttpClient
from cudaup.util.boot import boot_id
from cudaup.util.parallel import CancelledError, usable_cpus

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


class Transfer:
    """The state shared by the workers, the hasher and the supervising thread."""

    def __init__(
        self,
        http: HttpClient,
        request: DownloadRequest,
        remote: Remote,
        target: DownloadPaths,
        part: PartFile,
        plan: SegmentPlan,
        slots: threading.Semaphore | None,
        watchdog: Watchdog,
        connections: int,
        hasher: PrefixHasher | None,
    ) -> None:
        self.http = http
        self.request = request
        self.remote = remote
        self.target = target
        self.part = part
        self.plan = plan
        self.slots = slots
        self.watchdog = watchdog
        self.errors: list[BaseException] = []
        #: connections this download may use; lowered for good by each 503/429
        self.connections = connections
        #: connections wanted now (see :mod:`cudaup.download.ramp`), at most the above
        self.wanted = connections
        #: why the server asked for fewer connections, for the supervisor to tell
        self.lowered_by = ""
        #: hashes the file's prefix as it fills (None: no checksum to compare with)
        self.hasher = hasher
        self._workers = 0
        self._lock = threading.Lock()
        #: each worker's CPU seconds at its last write (by thread name: unique per download)
        self._thread_cpu: dict[str, float] = {}
        #: workers started that have neither written a byte nor ended (by thread name)
        self._connecting: set[str] = set()

    def widen(self, threads: list[threading.Thread]) -> None:
        """Start workers until :attr:`wanted` run (each appended to ``threads``)."""
        with self._lock:
            missing = min(self.wanted, self.connections) - self._workers
            self._workers += max(0, missing)
        for _ in range(missing):
            thread = threading.Thread(
                target=self.work, daemon=True, name=f"cudaup-dl-{len(threads)}"
            )
            self._connecting.add(thread.name)
            threads.append(thread)
            thread.start()

    def cpu(self) -> float:
        """CPU seconds the connections' threads have used, as of each one's last write:
        what tells the ramp whether the CPU or the link holds them back."""
        return sum(self._thread_cpu.copy().values())

    def connecting(self) -> int:
        """Workers started that have neither brought a byte nor ended: a count the ramp
        cannot measure yet."""
        return len(self._connecting)

    def _surplus(self) -> bool:
        """Whether this worker is one too many now (then it stops, counted out)."""
        with self._lock:
            if self._workers <= min(self.wanted, self.connections):
                return False
            self._workers -= 1
            return True

    @contextlib.contextmanager
    def slot(self) -> Iterator[None]:
        """One of the connections shared by every download of a ``download_many``."""
        if self.slots is None:
            yield
            return
        while not self.slots.acquire(timeout=TICK):
            if self.plan.cancelled:
                raise CancelledError("the download stopped while waiting for a connection")
        try:
            yield
        finally:
            self.slots.release()

    def stop(self) -> None:
        """Stop every worker and the hasher, and unblock their reads."""
        self.plan.cancel()
        if self.hasher is not None:
            self.hasher.stop()
        self.watchdog.drop_all("the download stopped")

    def report(self, exc: BaseException) -> None:
        """A thread's failure, for the supervisor to raise; the others stop."""
        if not self.plan.cancelled:
            with self._lock:
                self.errors.append(exc)
        self.stop()

    # -- a worker ----------------------------------------------------------------
    def work(self) -> None:
        retired = False  # counted out already: one too many now, or refused by the server
        buffer = ReadBuffer()  # this worker's, for all its requests (swapped with the hasher)
        try:
            while not retired and not (retired := self._surplus()):
                segment = self.plan.take()
                if segment is None:
                    break
                try:
                    retired = self._fetch_segment(segment, buffer)
                finally:
                    self.plan.release(segment)
        except (CancelledError, PartFileClosedError):
            pass  # the download stopped around this worker: nothing to report
        except BaseException as exc:  # reported to the supervisor, which stops the others
            self.report(exc)
        finally:
            self._connecting.discard(threading.current_thread().name)
            if not retired:
                with self._lock:
                    self._workers -= 1

    def _retire(self, busy: BusyError) -> bool:
        """After a 503/429: one connection fewer than run now, from now on; whether this
        worker stops.  Counted from the workers running, not from the count allowed: the
        server refused that many (fewer than allowed when the ramp had not grown yet, or a
        worker found no segment left and ended), and a count above it kept the refused
        worker, which then waited out Retry-After and asked again."""
        with self._lock:
            self.connections = max(1, min(self.connections, self._workers) - 1)
            self.plan.connections = min(self.wanted, self.connections)
            self.lowered_by = str(busy)
            if self._workers <= self.connections:
                return False
            self._workers -= 1
            return True

    def _fetch_segment(self, segment: Segment, buffer: ReadBuffer) -> bool:
        """Fill ``segment`` (or until it is stolen); whether this worker was retired."""
        budget = Budget(self.http, self.watchdog, self.request.url)
        while not segment.done and not self.plan.cancelled:
            before = segment.pos
            try:
                with self.slot():
                    self._request_range(segment, buffer)
                budget.succeeded()
                continue  # done, stolen, or a shorter answer whose rest is asked for now
            except BusyError as exc:
                if self._retire(exc):
                    return True
                error: RetryableError = exc
            except RetryableError as exc:
                error = exc
            if self.plan.cancelled:
                break
            what = f"bytes {segment.pos}-{segment.end - 1}"
            budget.failed(error, progressed=segment.pos > before, what=what)
        return False

    def _request_range(self, segment: Segment, buffer: ReadBuffer) -> None:
        start, stop = segment.pos, segment.end
        sent = time.monotonic()

        def receive(raw: urllib3.BaseHTTPResponse, flow: Flow) -> tuple[None, bool]:
            answered = time.monotonic()
            # The round trip, known now (the ramp's first step needs it before the body ends).
            self.plan.observe(answered - sent, 0, 0.0)
            drained = self._receive(raw, segment, start, stop, flow, buffer)
            if drained:  # what this request cost sizes the next pieces (see segments)
                self.plan.observe(answered - sent, segment.pos - start, time.monotonic() - answered)
            return None, drained

        ask(
            self.http,
            self.watchdog,
            self.remote.url,
            self.remote.range_headers(start, stop),
            receive,
        )

    def _receive(
        self,
        raw: urllib3.BaseHTTPResponse,
        segment: Segment,
        start: int,
        stop: int,
        flow: Flow,
        buffer: ReadBuffer,
    ) -> bool:
        """Write the answer's bytes into ``segment``; whether the body was read to its end.

        The bytes that continue what the hasher has are handed to it with their buffer
        (see :mod:`cudaup.download.digest`): what the front connection brings is hashed from
        memory.
        """
        if raw.status == 200:
            raise self.remote.whole_file_answer(raw.headers)
        if raw.status == 416:
            raise RemoteChangedError("the server says the range is not satisfiable (416)")
        if raw.status != 206:
            raise refuse_status(self.remote.url, raw.status, raw.headers)
        end = answered_range(raw.headers, start, stop, self.plan.size)
        hasher, name = self.hasher, threading.current_thread().name
        for chunk in read_body(body_of(raw), buffer, flow=flow):
            allowed = self.plan.reserve(segment, len(chunk))
            if allowed:
                offset = segment.pos
                self._write(chunk[:allowed], offset)
                self.plan.advance(segment, allowed, time.monotonic())
                self.watchdog.progressed(allowed)
                self._thread_cpu[name] = time.thread_time()
                self._connecting.discard(name)
                spare = hasher.offer(offset, buffer.data, allowed) if hasher else None
                if spare is not None:
                    buffer.data = spare  # the hasher keeps the one just written
            if allowed < len(chunk) or self.plan.cancelled or (segment.done and segment.pos < end):
                return False  # stolen or stopped: drop the rest of this response
        if segment.pos < min(end, segment.end):
            raise RetryableError(f"the body ended at byte {segment.pos} of {end}")
        return True

    def _write(self, data: bytes | memoryview, offset: int) -> None:
        try:
            with self.part.use() as fd:
                written = os.pwrite(fd, data, offset)
        except OSError as exc:
            needed = self.plan.size - self.plan.completed
            error = self.target.explain(exc, self.target.part, "write", needed)
            if error is None:
                raise
            raise error from exc
        if written != len(data):  # pragma: no cover - pwrite on a regular file writes it all
            raise OSError(f"short write at {offset}")

    def hash_prefix(self, result: list[str]) -> None:
        """The hasher's thread: the digest into ``result`` (see :mod:`cudaup.download.digest`)."""
        assert self.hasher is not None
        try:
            digest = self.hasher.run()
            if digest is not None:
                result.append(digest)
        except PartFileClosedError:
            pass
        except BaseException as exc:
            self.report(exc)


class Flusher:
    """Syncs the part file and rewrites the resume state while the download runs.

    In a thread of its own: a sync can take a while (a fast link leaves a GiB dirty in a
    second), and the supervising thread keeps its tick meanwhile.
    """

    def __init__(
        self, save: Callable[[], None], transfer: Transfer, *, writeback: bool = True
    ) -> None:
        self._save = save
        self._transfer = transfer
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

        plan = self._transfer.plan
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
            self._transfer.report(exc)

    def _start_writeback(self) -> None:
        """Hand the bytes on disk to the writeback, up to a page short of each segment's
        position (the page a connection writes next stays out of it)."""
        from cudaup.util.libc import start_writeback  # noqa: PLC0415

        with self._transfer.part.use() as fd:
            for start, position, _end in self._transfer.plan.state():
                start_writeback(fd, start, (position - start) // PAGE * PAGE)


def resume_plan(
    target: DownloadPaths,
    remote: Remote,
    progress: Progress | None,
    filename: str,
    connections: int,
) -> SegmentPlan | None:
    state = target.load_state()
    if state is None:
        return None
    size = remote.size
    boot = boot_id()
    if state.get("synced") is False and (boot is None or state.get("boot") != boot):
        # Its rows count bytes that were never synced: a restart since may have lost them.
        notice = "the partial file was not synced and the machine restarted since; restarting"
        emit(progress, ProgressEvent(filename, "notice", 0, size, notice))
        return None
    changes = [
        f"{name} {state.get(key)!r} → {now!r}"
        for name, key, now in (
            ("size", "size", size),
            ("ETag", "etag", remote.etag),
            ("Last-Modified", "last_modified", remote.last_modified),
        )
        if state.get(key) != now
    ]
    if changes:
        emit(
            progress,
            ProgressEvent(
                filename,
                "notice",
                0,
                size,
                f"the remote file changed ({'; '.join(changes)}); restarting",
            ),
        )
        return None
    if not target.part.is_file() or target.part.stat().st_size != size or size is None:
        return None
    try:
        return SegmentPlan.from_state(size, state["segments"], connections)
    except (KeyError, TypeError, ValueError):
        return None


def _prepare(
    request: DownloadRequest,
    target: DownloadPaths,
    remote: Remote,
    progress: Progress | None,
    connections: int,
    tail: int,
) -> SegmentPlan:
    """The plan to fill: the resume state's, or a fresh part file of the full size."""
    assert remote.size is not None
    size = remote.size
    plan = resume_plan(target, remote, progress, request.filename, connections)
    if plan is not None:
        check_space(target.directory, size - plan.completed, request.filename)
        return plan
    check_space(target.directory, size, request.filename)
    os.close(target.create_part(size))
    return SegmentPlan.split(size, connections, tail)


def _prefill(transfer: Transfer, remote: Remote) -> None:
    """Write the bytes the probe brought where the plan still lacks them (before any
    worker starts: nobody else writes there)."""
    if remote.prefetched is None:
        return
    start, data = remote.prefetched
    segment = transfer.plan.fresh_segment_at(start)
    if segment is None:  # a resumed plan that has them already
        return
    length = min(len(data), segment.end - start)
    transfer._write(memoryview(data)[:length], start)
    transfer.plan.advance(segment, length)
    transfer.watchdog.progressed(length)


def download_parallel(job: DownloadJob, remote: Remote) -> DownloadResult:
    """Fill the part file over ranged connections, hashing its prefix as it grows."""
    request, target, http, watchdog = job.request, job.paths, job.http, job.watchdog
    connections, progress, slots, arrival = job.connections, job.progress, job.slots, job.arrival
    started, cancel = job.started, job.cancel
    assert remote.size is not None
    size = remote.size
    tail = arrival.tail_first if arrival else 0
    most = connections if connections is not None else DEFAULT_CONNECTIONS
    plan = _prepare(request, target, remote, progress, most, tail)
    if remote.observed is not None:  # the first pieces are cut knowing the link
        plan.observe(*remote.observed)
    resumed_from = plan.completed
    if resumed_from:
        notice(
            progress,
            request,
            size,
            f"resuming at {binary_size(resumed_from)} of {binary_size(size)}",
            done=resumed_from,
        )

    def save_state() -> None:
        # The rows are taken before the part file is synced: every byte they count is
        # on disk before the state that counts it.  A file read once and deleted (not
        # durable) is not synced: its rows hold while this boot does, and the state says
        # which (resume_plan starts over after a restart).
        rows = plan.state()
        if job.durable:
            # A sync is where a file system that allocates late says the disk is full.
            explained = target.explained(target.part, "write", size - plan.completed)
            with contextlib.suppress(PartFileClosedError), part.use() as fd, explained:
                os.fdatasync(fd)
        document = {
            "schema": 1,
            "url": request.url,
            "size": size,
            "etag": remote.etag,
            "last_modified": remote.last_modified,
            "segments": rows,
            # Unsynced rows hold while this boot does (see resume_plan).
            **({} if job.durable else {"synced": False, "boot": boot_id()}),
        }
        target.save_state(document, size - plan.completed, durable=job.durable)

    with target.explained(target.part, "open"):
        part = PartFile(target.part)
    checksum = request.checksum
    hasher = PrefixHasher(checksum[0], plan, part) if checksum is not None else None
    transfer = Transfer(http, request, remote, target, part, plan, slots, watchdog, most, hasher)
    # An explicit count is used from the start; the default adapts (see ramp).
    ramp = ConnectionRamp(most, start=connections or 1, size=size, cores=usable_cpus())
    transfer.wanted = plan.connections = ramp.count
    plan.may_grow_to = ramp.may_grow_to
    digests: list[str] = []
    threads: list[threading.Thread] = []
    if checksum is not None:
        threads.append(
            threading.Thread(
                target=transfer.hash_prefix,
                args=(digests,),
                daemon=True,
                name="cudaup-hash",
            )
        )
    told = most
    flusher = Flusher(save_state, transfer, writeback=job.durable)

    def every_tick() -> None:
        nonlocal told
        completed, counted_at = plan.counted()
        if completed == size and hasher is not None:
            # The last byte is here, the verdict is not (it comes after the hash, the sync
            # and the comparison): say how far the hash is.
            emit(progress, ProgressEvent(request.filename, "verifying", hasher.hashed, size))
        else:
            emit(progress, ProgressEvent(request.filename, "advance", completed, size))
        if not ramp.settled:
            ramp.cap(transfer.connections)
            # Past the hash speed more connections cannot end a verified download sooner.
            ceiling = (plan.hash_speed or ASSUMED_HASH_SPEED) if checksum else None
            transfer.wanted = ramp.observe(
                time.monotonic(),
                completed,
                ceiling,
                transfer.cpu(),
                plan.round_trip,
                transfer.connecting(),
                counted_at,
                time.process_time(),
            )
            plan.connections = min(transfer.wanted, transfer.connections)
            plan.may_grow_to = ramp.may_grow_to
            transfer.widen(threads)
        if transfer.connections < told:
            told = transfer.connections
            host = urlsplit(remote.url).netloc
            notice(
                progress,
                request,
                size,
                f"{host} answered {transfer.lowered_by}; using {told} connection"
                f"{'s' if told > 1 else ''} from now on",
                done=plan.completed,
            )

    try:
        _prefill(transfer, remote)
        save_state()
        flusher.start()
        if arrival is not None:
            arrival._attach(target.part, plan)
        emit(progress, ProgressEvent(request.filename, "start", resumed_from, size))
        transfer.widen(threads)
        supervise(
            threads,
            watchdog,
            what=urlsplit(remote.url).netloc,
            cancel=cancel,
            failed=lambda: bool(transfer.errors),
            finished=lambda: plan.all_done() and (checksum is None or bool(digests)),
            every_tick=every_tick,
        )
        flusher.stop()  # before the final sync: after publishing, no state may be saved
        if transfer.errors:
            raise transfer.errors[0]
        join_all(threads, within=5)
        if not plan.all_done() or (checksum is not None and not digests):
            raise NetworkError(f"{request.url}: the download stopped before it was complete")
        if job.durable:
            with target.explained(target.part, "write", 0), part.use() as fd:
                os.fsync(fd)
    except BaseException:
        transfer.stop()
        flusher.stop()
        join_all(threads, within=0.5)  # their reads are unblocked: they end at once
        # Keep the error that stopped the download, even when the state cannot be saved
        # (the state on disk is older, so it counts fewer bytes: still true).
        with contextlib.suppress(CudaupError, OSError):
            save_state()
        part.close()
        raise
    part.close()
    algorithm = checksum[0] if checksum else None
    digest = digests[0] if digests else None
    publish(target, request, digest, durable=job.durable)
    emit(progress, ProgressEvent(request.filename, "done", size, size))
    return DownloadResult(
        path=target.final,
        url=request.url,
        size=size,
        algorithm=algorithm,
        digest=digest,
        resumed_from=resumed_from,
        fetched=size - resumed_from,
        seconds=time.monotonic() - started,
        skipped=False,
        connections=min(transfer.wanted, transfer.connections),
    )
