"""One plain stream from byte 0, for servers that do not honour ranges."""

from __future__ import annotations

import errno
import hashlib
import os
import threading
import time

import urllib3

from cudaup.download.publish import publish
from cudaup.download.remote import MAX_FAILURES, Remote, read_body
from cudaup.download.request import DownloadRequest, DownloadResult, Progress, ProgressEvent, emit
from cudaup.download.segmented import PROGRESS_INTERVAL
from cudaup.download.target import Target, check_space
from cudaup.errors import (
    InsufficientSpaceError,
    IntegrityError,
    NetworkError,
    RemoteFileMissingError,
)
from cudaup.net.http import HttpClient
from cudaup.util.parallel import check as check_cancelled


def fetch_single_stream(
    request: DownloadRequest,
    target: Target,
    http: HttpClient,
    remote: Remote,
    progress: Progress | None,
    started: float,
    cancel: threading.Event | None = None,
) -> DownloadResult:
    """One plain GET from byte 0 into a fresh part file, hashing inline."""
    if target.load_state() is not None or target.part.exists():
        emit(
            progress,
            ProgressEvent(
                request.filename,
                "notice",
                0,
                remote.size,
                "the server does not support ranges: starting over",
            ),
        )
    target.discard()
    if remote.size is not None:
        check_space(target.directory, remote.size, request.filename)
    checksum = request.checksum
    limit = remote.size if remote.size is not None else request.size
    emit(progress, ProgressEvent(request.filename, "start", 0, limit))
    for failures in range(MAX_FAILURES + 1):
        digest = hashlib.new(checksum[0]) if checksum else None
        written = 0
        raw = http.open("GET", remote.url, {"Accept-Encoding": "identity"})
        try:
            if raw.status != 200:
                if 400 <= raw.status < 500:
                    raise RemoteFileMissingError(
                        f"{remote.url} answered HTTP {raw.status}", remote.url, raw.status
                    )
                raise NetworkError(f"{remote.url} answered HTTP {raw.status}")
            last = time.monotonic()
            with target.part.open("wb") as handle:
                try:
                    for chunk in read_body(raw):
                        check_cancelled(cancel)
                        written += len(chunk)
                        if limit is not None and written > limit:
                            raise IntegrityError(
                                f"{request.filename}: the server sent more than the expected {limit} bytes; refusing it"
                            )
                        handle.write(chunk)
                        if digest is not None:
                            digest.update(chunk)
                        if time.monotonic() - last >= PROGRESS_INTERVAL:
                            last = time.monotonic()
                            emit(
                                progress, ProgressEvent(request.filename, "advance", written, limit)
                            )
                except OSError as exc:
                    if exc.errno == errno.ENOSPC:
                        target.discard()
                        raise InsufficientSpaceError(
                            f"the disk filled up while writing {request.filename}"
                        ) from None
                    raise
                handle.flush()
                os.fsync(handle.fileno())
        except (urllib3.exceptions.HTTPError, ConnectionError) as exc:
            raw.close()
            if failures == MAX_FAILURES:
                raise NetworkError(
                    f"{remote.url}: the download failed {failures + 1} times ({exc})"
                ) from None
            http.backoff.wait(failures)
            continue
        except BaseException:
            raw.close()
            target.discard()
            raise
        raw.release_conn()
        if limit is not None and written != limit:
            if failures == MAX_FAILURES:
                raise NetworkError(f"{remote.url}: the body ended at byte {written} of {limit}")
            http.backoff.wait(failures)
            continue
        break
    actual = digest.hexdigest() if digest is not None else None
    publish(target, request, actual)
    emit(progress, ProgressEvent(request.filename, "done", written, written))
    return DownloadResult(
        path=target.final,
        url=request.url,
        size=written,
        algorithm=checksum[0] if checksum else None,
        digest=actual,
        resumed_from=0,
        fetched=written,
        seconds=time.monotonic() - started,
        skipped=False,
        connections=1,
    )
