"""One stream from byte 0, for servers that do not honour ranges (or do not say the size).

The stream runs in a thread of its own, watched like the parallel download (speed
floor, stall limit, cancellation).  When a response breaks off, the next request
continues where it stopped if the server honours ranges (``Range: bytes=N-`` with
``If-Range``); otherwise it starts again from byte 0 into the same, truncated part
file: a 200 body is never written at an offset.  Retries are budgeted on progress:
an attempt that gets further than any before resets the count of failures, and
:data:`~cudaup.download.remote.MAX_FAILURES` attempts in a row that do not end it.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from typing import BinaryIO
from urllib.parse import urlsplit

import urllib3

from cudaup.download.job import DownloadJob
from cudaup.download.publish import publish
from cudaup.download.remote import (
    Budget,
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
    ProgressEvent,
    emit,
    notice,
)
from cudaup.download.target import SPACE_STEP, DownloadPaths, check_space, passed_ceiling
from cudaup.download.watch import Flow, Watchdog, join_all, supervise
from cudaup.errors import IntegrityError
from cudaup.net.http import HttpClient


class _Stream:
    """The state of one single-stream download, shared with the supervising thread."""

    def __init__(
        self,
        request: DownloadRequest,
        target: DownloadPaths,
        http: HttpClient,
        remote: Remote,
        watchdog: Watchdog,
        *,
        durable: bool = True,
    ) -> None:
        self.request = request
        self.durable = durable
        self.target = target
        self.http = http
        self.remote = remote
        self.watchdog = watchdog
        #: the expected size, if any source says it: more bytes than this are refused
        self.limit = remote.size if remote.size is not None else request.size
        #: with no size stated, the most bytes accepted (more: the download fails)
        self.ceiling = http.settings.max_size
        #: where the free space is checked next, when no size is stated
        self.space_checked_to = 0
        #: whether a broken response can be continued with a range request
        self.resumable = remote.ranges
        self.written = 0
        self.digest: hashlib._Hash | None = None
        self.error: BaseException | None = None
        self.stopped = False
        self.buffer = ReadBuffer()

    def run(self) -> None:
        try:
            with os.fdopen(self.target.create_part(self.limit or 0), "wb") as handle:
                self._run(handle)
        except BaseException as exc:  # handed to the supervising thread
            self.error = exc

    def _run(self, handle: BinaryIO) -> None:
        budget = Budget(self.http, self.watchdog, self.remote.url)
        best = 0  # the furthest any attempt got: a restart from 0 must pass it to count
        while not self.stopped:
            try:
                if self._attempt(handle):
                    with self.target.explained(self.target.part, "write", 0):
                        handle.flush()
                        if self.durable:
                            os.fsync(handle.fileno())
                    return
                continue  # a shorter answer than asked: the rest is asked for now
            except RetryableError as exc:
                if self.stopped:
                    return
                progressed, best = self.written > best, max(best, self.written)
                budget.failed(exc, progressed=progressed, what="the download")

    def _attempt(self, handle: BinaryIO) -> bool:
        """One request; whether the file is complete."""
        resume_at = self.written if self.resumable else 0
        headers = (
            self.remote.range_headers(resume_at) if resume_at else {"Accept-Encoding": "identity"}
        )

        def receive(raw: urllib3.BaseHTTPResponse, flow: Flow) -> tuple[bool, bool]:
            return self._receive(raw, handle, resume_at, flow)

        return ask(self.http, self.watchdog, self.remote.url, headers, receive)

    def _receive(
        self, raw: urllib3.BaseHTTPResponse, handle: BinaryIO, resume_at: int, flow: Flow
    ) -> tuple[bool, bool]:
        """Write the answer; (whether the file is complete, whether the body was read to its end)."""
        end: int | None = None
        if raw.status == 200:
            if resume_at:
                answer = self.remote.whole_file_answer(raw.headers)
                if isinstance(answer, RemoteChangedError):
                    raise answer
                self.resumable = False  # it stopped honouring ranges: from byte 0, for good
            start = 0
        elif raw.status == 206 and resume_at:
            end = answered_range(raw.headers, resume_at, None, self.limit)
            start = resume_at
        elif raw.status == 416:
            raise RemoteChangedError("the server says the range is not satisfiable (416)")
        else:
            raise refuse_status(self.remote.url, raw.status, raw.headers)
        self._rewind(handle, start)
        for chunk in read_body(body_of(raw), self.buffer, flow=flow):
            if self.stopped:
                return False, False
            if self.limit is not None and self.written + len(chunk) > self.limit:
                raise IntegrityError(
                    f"{self.request.filename}: the server sent more than the expected "
                    f"{self.limit} bytes; refusing it"
                )
            if self.limit is None:
                self._bounded(len(chunk))
            try:
                handle.write(chunk)
            except OSError as exc:
                needed = self.limit - self.written if self.limit is not None else None
                error = self.target.explain(exc, self.target.part, "write", needed)
                if error is None:
                    raise
                raise error from exc
            if self.digest is not None:
                self.digest.update(chunk)
            self.written += len(chunk)
            self.watchdog.progressed(len(chunk))
        if end is not None and self.written < end:
            raise RetryableError(f"the body ended at byte {self.written} of {end}")
        if self.limit is not None and self.written < self.limit:
            if end is not None:
                return False, True  # a shorter 206 than asked: ask for the rest
            raise RetryableError(f"the body ended at byte {self.written} of {self.limit}")
        return True, True

    def _bounded(self, coming: int) -> None:
        """Before ``coming`` more bytes of a body whose size no source states: refuse
        them past the ceiling, and re-check the free space each :data:`SPACE_STEP`."""
        if self.written + coming > self.ceiling:
            raise passed_ceiling(self.remote.url, self.ceiling)
        if self.written + coming > self.space_checked_to:
            what = f"{self.request.filename} (its size unknown, {self.written} bytes so far)"
            check_space(self.target.directory, SPACE_STEP, what)
            self.space_checked_to = self.written + SPACE_STEP

    def _rewind(self, handle: BinaryIO, start: int) -> None:
        """Continue at ``start``: the part file and the digest hold exactly bytes ``[0, start)``."""
        if start == 0:
            checksum = self.request.checksum
            self.digest = hashlib.new(checksum[0]) if checksum else None
        with self.target.explained(self.target.part, "write"):
            handle.seek(start)
            handle.truncate(start)
        self.written = start


def download_stream(job: DownloadJob, remote: Remote) -> DownloadResult:
    """One GET from byte 0 into a fresh part file, hashing inline (see the module docstring)."""
    request, target, http, watchdog = job.request, job.paths, job.http, job.watchdog
    progress, started, cancel = job.progress, job.started, job.cancel
    if target.load_state() is not None or target.part.exists():
        notice(progress, request, remote.size, "the server does not support ranges: starting over")
    target.discard()
    if remote.size is not None:
        check_space(target.directory, remote.size, request.filename)
    stream = _Stream(request, target, http, remote, watchdog, durable=job.durable)
    thread = threading.Thread(target=stream.run, daemon=True, name="cudaup-stream")
    emit(progress, ProgressEvent(request.filename, "start", 0, stream.limit))
    try:
        supervise(
            [thread],
            watchdog,
            what=urlsplit(remote.url).netloc,
            cancel=cancel,
            failed=lambda: stream.error is not None,
            finished=lambda: False,
            every_tick=lambda: emit(
                progress, ProgressEvent(request.filename, "advance", stream.written, stream.limit)
            ),
        )
        thread.join()
        if stream.error is not None:
            raise stream.error
    except BaseException:
        stream.stopped = True
        watchdog.drop_all("the download stopped")
        join_all([thread], within=0.5)
        target.discard()  # one stream cannot be resumed by a later run
        # (the server ignores ranges or does not say the size: nothing to resume from)
        message = "the partial file was deleted: a later run cannot resume this server's answer"
        emit(progress, ProgressEvent(request.filename, "discarded", 0, stream.limit, message))
        raise
    checksum = request.checksum
    digest = stream.digest.hexdigest() if stream.digest is not None else None
    publish(target, request, digest, durable=job.durable)
    emit(progress, ProgressEvent(request.filename, "done", stream.written, stream.written))
    return DownloadResult(
        path=target.final,
        url=request.url,
        size=stream.written,
        algorithm=checksum[0] if checksum else None,
        digest=digest,
        resumed_from=0,
        fetched=stream.written,
        seconds=time.monotonic() - started,
        skipped=False,
        connections=1,
    )
