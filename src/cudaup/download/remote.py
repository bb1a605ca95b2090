"""The server's side of one download: the probe, response bodies, and the kinds of failure."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

import urllib3

from cudaup.errors import (
    NetworkError,
    RemoteFileMissingError,
)
from cudaup.net.http import HttpClient

CONTENT_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)")
#: Socket reads adapt between these sizes (see :func:`read_body`).
MIN_READ = 64 * 1024
MAX_READ = 1024 * 1024
MAX_FAILURES = 6


class RemoteChangedError(Exception):
    """The server's copy is not the one the part file holds (If-Range failed, 416)."""


class NoRangesError(Exception):
    """The server answered a range request with the whole file."""


class RetryableError(Exception):
    """A transient failure of one request: short body, bad range, stall."""


@dataclass(frozen=True, slots=True)
class Remote:
    url: str
    size: int | None
    etag: str | None
    last_modified: str | None
    ranges: bool

    @property
    def validator(self) -> str | None:
        """What If-Range may carry: a strong ETag, else Last-Modified."""
        if self.etag and not self.etag.startswith("W/"):
            return self.etag
        return self.last_modified


def probe_remote(http: HttpClient, url: str) -> Remote:
    """The probe, retried like any request when the connection breaks under it."""
    for failures in range(MAX_FAILURES + 1):
        try:
            return _probe_once(http, url)
        except (urllib3.exceptions.HTTPError, ConnectionError) as exc:
            if failures == MAX_FAILURES:
                raise NetworkError(
                    f"{url}: the probe failed {failures + 1} times ({exc})"
                ) from None
            http.backoff.wait(failures)
    raise AssertionError("unreachable")  # pragma: no cover


def _probe_once(http: HttpClient, url: str) -> Remote:
    raw = http.open("GET", url, {"Range": "bytes=0-0", "Accept-Encoding": "identity"})
    try:
        status, headers = raw.status, raw.headers
        final_url = str(raw.url or url)
        if status == 206:
            match = CONTENT_RANGE.match(headers.get("Content-Range", ""))
            total = match.group(3) if match else "*"
            size = int(total) if total.isdigit() else None
            raw.read()
            ranges = size is not None
        elif status == 200:
            length = headers.get("Content-Length", "")
            size, ranges = (int(length) if length.isdigit() else None), False
        elif status == 416:
            total = headers.get("Content-Range", "").rsplit("/", 1)[-1]
            size, ranges = (int(total) if total.isdigit() else 0), True
        elif 400 <= status < 500:
            raise RemoteFileMissingError(f"{url} answered HTTP {status}", url, status)
        else:
            raise NetworkError(f"{url} answered HTTP {status}")
        return Remote(final_url, size, headers.get("ETag"), headers.get("Last-Modified"), ranges)
    finally:
        if raw.status == 206:
            raw.release_conn()
        else:
            raw.close()  # never read a whole 200 body just to reuse the connection


class Body(Protocol):
    def read(self, amt: int | None = None, decode_content: bool | None = None) -> bytes: ...


def read_body(raw: Body, clock: Callable[[], float] = time.monotonic) -> Iterator[bytes]:
    """The response body in reads sized to about a tenth of a second of transfer.

    Whatever-has-arrived reads (``read1``) hand over one TLS record (16 KiB) at a
    time: on a fast link that is thousands of wake-ups, writes and GIL hand-offs per
    file, which made Python the bottleneck (0.2 s of CPU per 60 MB).  Fixed large
    reads would make a slow link's progress and a stolen segment's stop lag.  So the
    size doubles while reads return quickly and halves when one takes long.
    """
    size = MIN_READ
    while True:
        began = clock()
        chunk = raw.read(size, decode_content=False)
        if not chunk:
            return
        elapsed = clock() - began
        if elapsed < 0.05:
            size = min(size * 2, MAX_READ)
        elif elapsed > 0.2:
            size = max(size // 2, MIN_READ)
        yield chunk
