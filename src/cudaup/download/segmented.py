"""Parallel ranged connections into one part file, hashed while it fills."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import threading
import time
from collections.abc import Iterator

import urllib3

from cudaup.download.arrival import Arrival
from cudaup.download.publish import HASH_BLOCK, publish
from cudaup.download.remote import (
    CONTENT_RANGE,
    MAX_FAILURES,
    Remote,
    RemoteChangedError,
    RetryableError,
    read_body,
)
from cudaup.download.request import DownloadRequest, DownloadResult, Progress, ProgressEvent, emit
from cudaup.download.segments import Segment, SegmentPlan
from cudaup.download.target import Target, check_space
from cudaup.errors import (
    InsufficientSpaceError,
    NetworkError,
    RemoteFileMissingError,
)
from cudaup.net.http import HttpClient
from cudaup.util.atomic import atomic_write
from cudaup.util.parallel import check as check_cancelled

STATE_INTERVAL = 1.0
PROGRESS_INTERVAL = 0.1


class Transfer:
    """The state shared by the workers, the hasher and the supervising thread."""

    def __init__(
        self,
        http: HttpClient,
        request: DownloadRequest,
        remote: Remote,
        fd: int,
        plan: SegmentPlan,
        slots: threading.Semaphore | None,
    ) -> None:
        self.http = http
        self.request = request
        self.remote = remote
        self.fd = fd
        self.plan = plan
        self.slots = slots
        self.errors: list[BaseException] = []
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def slot(self) -> Iterator[None]:
        if self.slots is None:
            yield
            return
        self.slots.acquire()
        try:
            yield
        finally:
            self.slots.release()

    # -- a worker ----------------------------------------------------------------
    def work(self) -> None:
        try:
            while (segment := self.plan.take()) is not None:
                try:
                    self._fetch_segment(segment)
                finally:
                    self.plan.release(segment)
        except BaseException as exc:  # reported to the supervisor, which stops the others
            with self._lock:
                self.errors.append(exc)
            self.plan.cancel()

    def _fetch_segment(self, segment: Segment) -> None:
        failures = 0
        while not segment.done and not self.plan.cancelled:
            before = segment.pos
            try:
                with self.slot():
                    self._request_range(segment)
                failures = 0
            except (
                RetryableError,
                urllib3.exceptions.HTTPError,
                NetworkError,
                ConnectionError,
            ) as exc:
                failures = 0 if segment.pos > before else failures + 1
                if failures > MAX_FAILURES:
                    raise NetworkError(
                        f"{self.request.url}: bytes {segment.pos}-{segment.end - 1} failed "
                        f"{failures} times in a row ({exc})"
                    ) from None
                self.http.backoff.wait(failures)

    def _request_range(self, segment: Segment) -> None:
        start, stop = segment.pos, segment.end
        headers = {"Range": f"bytes={start}-{stop - 1}", "Accept-Encoding": "identity"}
        if self.remote.validator:
            headers["If-Range"] = self.remote.validator
        raw = self.http.open("GET", self.remote.url, headers)
        complete = False
        try:
            if raw.status == 200:
                raise RemoteChangedError("the server sent the whole file to a range request")
            if raw.status == 416:
                raise RemoteChangedError("the server says the range is not satisfiable (416)")
            if raw.status != 206:
                if 400 <= raw.status < 500 and raw.status not in {408, 429}:
                    raise RemoteFileMissingError(
                        f"{self.remote.url} answered HTTP {raw.status}", self.remote.url, raw.status
                    )
                raise RetryableError(f"HTTP {raw.status}")
            match = CONTENT_RANGE.match(raw.headers.get("Content-Range", ""))
            if (
                match is None
                or int(match.group(1)) != start
                or int(match.group(2)) != stop - 1
                or match.group(3) not in {str(self.plan.size), "*"}
            ):
                raise RetryableError(
                    f"asked for bytes {start}-{stop - 1} but got "
                    f"{raw.headers.get('Content-Range') or 'no Content-Range'}"
                )
            for chunk in read_body(raw):
                allowed = self.plan.reserve(segment, len(chunk))
                if allowed:
                    self._write(
                        chunk if allowed == len(chunk) else memoryview(chunk)[:allowed], segment.pos
                    )
                    self.plan.advance(segment, allowed)
                if allowed < len(chunk) or segment.done or self.plan.cancelled:
                    return  # stolen or finished: drop the rest of this response
            complete = True
            if segment.pos < min(stop, segment.end):
                raise RetryableError(f"the body ended at byte {segment.pos} of {stop}")
        finally:
            if complete:
                raw.release_conn()
            else:
                raw.close()

    def _write(self, data: bytes | memoryview, offset: int) -> None:
        try:
            written = os.pwrite(self.fd, data, offset)
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                raise InsufficientSpaceError(
                    f"the disk filled up while writing {self.request.filename}; free some space "
                    "and run the same command again to resume"
                ) from None
            raise
        if written != len(data):  # pragma: no cover - pwrite on a regular file writes it all
            raise OSError(f"short write at {offset}")

    # -- the hasher --------------------------------------------------------------
    def hash_prefix(self, algorithm: str, result: list[str]) -> None:
        digest = hashlib.new(algorithm)
        position = 0
        view = memoryview(bytearray(HASH_BLOCK))
        try:
            while position < self.plan.size:
                # Hash in large blocks: fewer wake-ups, and pread+update release the GIL.
                mark = self.plan.wait_for_prefix(position, at_least=HASH_BLOCK)
                if self.plan.cancelled:
                    return
                while position < mark:
                    # One reused buffer: a fresh 4 MiB bytes per read would be a fresh
                    # mmap (and 1024 page faults) each time.
                    count = os.preadv(self.fd, [view[: min(HASH_BLOCK, mark - position)]], position)
                    if not count:
                        raise OSError(f"cannot read back byte {position} of the part file")
                    digest.update(view[:count])
                    position += count
            result.append(digest.hexdigest())
        except BaseException as exc:
            with self._lock:
                self.errors.append(exc)
            self.plan.cancel()


def resume_plan(
    target: Target, remote: Remote, progress: Progress | None, filename: str
) -> SegmentPlan | None:
    state = target.load_state()
    if state is None:
        return None
    size = remote.size
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
        return SegmentPlan.from_state(size, state["segments"])
    except (KeyError, TypeError, ValueError):
        return None


def fetch_segmented(
    request: DownloadRequest,
    target: Target,
    http: HttpClient,
    remote: Remote,
    connections: int,
    progress: Progress | None,
    slots: threading.Semaphore | None,
    started: float,
    arrival: Arrival | None = None,
    cancel: threading.Event | None = None,
) -> DownloadResult:
    assert remote.size is not None
    size = remote.size
    plan = resume_plan(target, remote, progress, request.filename)
    if plan is None:
        target.discard()
        check_space(target.directory, size, request.filename)
        with target.part.open("wb") as handle:
            handle.truncate(size)
        plan = SegmentPlan.split(size, connections, arrival.tail_first if arrival else 0)
    else:
        check_space(target.directory, size - plan.completed, request.filename)
    resumed_from = plan.completed
    if resumed_from:
        emit(
            progress,
            ProgressEvent(
                request.filename,
                "notice",
                resumed_from,
                size,
                f"resuming at {resumed_from} of {size} bytes",
            ),
        )

    def save_state() -> None:
        atomic_write(target.state, json.dumps({
            "schema": 1, "url": request.url, "size": size, "etag": remote.etag,
            "last_modified": remote.last_modified, "segments": plan.state(),
        }), durable=True)  # fmt: skip

    save_state()
    fd = os.open(target.part, os.O_RDWR)
    if arrival is not None:
        arrival._attach(target.part, plan)
    transfer = Transfer(http, request, remote, fd, plan, slots)
    checksum = request.checksum
    digests: list[str] = []
    threads = [
        threading.Thread(target=transfer.work, daemon=True, name=f"cudaup-dl-{i}")
        for i in range(connections)
    ]
    if checksum is not None:
        threads.append(
            threading.Thread(
                target=transfer.hash_prefix,
                args=(checksum[0], digests),
                daemon=True,
                name="cudaup-hash",
            )
        )
    emit(progress, ProgressEvent(request.filename, "start", resumed_from, size))
    try:
        for thread in threads:
            thread.start()
        last_state = last_progress = time.monotonic()
        while alive := [t for t in threads if t.is_alive()]:
            alive[0].join(PROGRESS_INTERVAL)
            check_cancelled(cancel)  # saves the state on the way out, below
            now = time.monotonic()
            if now - last_progress >= PROGRESS_INTERVAL:
                last_progress = now
                emit(progress, ProgressEvent(request.filename, "advance", plan.completed, size))
            if now - last_state >= STATE_INTERVAL:
                last_state = now
                os.fdatasync(fd)
                save_state()
            if transfer.errors:
                plan.cancel()
            if plan.all_done() and (checksum is None or digests or transfer.errors):
                break
        for thread in threads:
            thread.join(timeout=5)
    except BaseException:
        plan.cancel()
        for thread in threads:
            thread.join(timeout=2)
        with contextlib.suppress(OSError):
            os.fdatasync(fd)
        save_state()
        os.close(fd)
        raise
    if transfer.errors:
        os.fdatasync(fd)
        save_state()
        os.close(fd)
        raise transfer.errors[0]
    os.fsync(fd)
    os.close(fd)
    algorithm = checksum[0] if checksum else None
    digest = digests[0] if digests else None
    publish(target, request, digest)
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
        connections=connections,
    )
