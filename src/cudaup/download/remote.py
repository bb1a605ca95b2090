"""The server's side of one download: the probe, response bodies, and the kinds of failure."""

from __future__ import annotations

import functools
import http.client
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol, TypeVar
from urllib.parse import urlsplit

import urllib3

from cudaup.download.watch import Flow, Watchdog, supervise
from cudaup.errors import HostUnreachableError, NetworkError, RemoteFileMissingError
from cudaup.net.deadline import cut_off
from cudaup.net.http import PUBLIC_HOSTS, HttpClient, describe, unresolved

T = TypeVar("T")

CONTENT_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)")
#: Socket reads adapt between these sizes (see :func:`read_body`).
MIN_READ = 64 * 1024
MAX_READ = 1024 * 1024
#: Requests that fail in a row without moving the download forward before it gives up.
MAX_FAILURES = 6
#: What a connection that fails raises (a request sent with ``retry=False``).
TRANSIENT = (urllib3.exceptions.HTTPError, ConnectionError)


class RemoteChangedError(Exception):
    """The server's copy is not the one the part file holds (If-Range failed, 416)."""


class NoRangesError(Exception):
    """The server answered a range request with the whole file, unchanged."""


class RetryableError(Exception):
    """A transient failure of one request: a broken connection, a short body, a bad
    range, 5xx; retried within the :class:`Budget`."""

    #: the server's ``Retry-After``, when it gave one
    retry_after: str | None = None
    #: the host's name did not resolve: retried once, not :data:`MAX_FAILURES` times
    unresolved: bool = False

    @classmethod
    def of(cls, exc: BaseException, flow: Flow | None = None) -> RetryableError:
        """``exc`` (one of :data:`TRANSIENT`) in words, or why the watchdog dropped ``flow``."""
        if flow is not None and flow.dropped:
            return cls(flow.dropped)
        error = cls(
            describe(exc)
            if isinstance(exc, urllib3.exceptions.HTTPError)
            else (str(exc) or type(exc).__name__)
        )
        error.unresolved = unresolved(exc)
        return error


class BusyError(RetryableError):
    """503 or 429: the server wants fewer connections, or to be asked again later."""

    def __init__(self, status: int, retry_after: str | None) -> None:
        super().__init__(
            f"HTTP {status}" + (f", Retry-After: {retry_after}" if retry_after else "")
        )
        self.status = status
        self.retry_after = retry_after


@dataclass(frozen=True, slots=True)
class Remote:
    url: str
    size: int | None
    etag: str | None
    last_modified: str | None
    #: whether the server answered the probe's range request with a 206
    ranges: bool
    #: the bytes the probe's answer carried beyond its first (see
    #: :func:`~cudaup.download.range_plan.probe_range`): where they start, and they
    prefetched: tuple[int, bytes] | None = None
    #: what the probe's request cost, as :meth:`SegmentPlan.observe` takes it: seconds
    #: from sending it to its answer, then the body bytes and the seconds they took; None
    #: from a probe that said nothing of the link (the default of a hand-made Remote)
    observed: tuple[float, int, float] | None = None

    @property
    def validator(self) -> str | None:
        """What If-Range may carry: a strong ETag, else Last-Modified."""
        if self.etag and not self.etag.startswith("W/"):
            return self.etag
        return self.last_modified

    def range_headers(self, start: int, stop: int | None = None) -> dict[str, str]:
        """``Range`` (to ``stop``, or to the end) with ``If-Range``, identity encoding."""
        wanted = f"bytes={start}-{stop - 1}" if stop is not None else f"bytes={start}-"
        headers = {"Range": wanted, "Accept-Encoding": "identity"}
        if self.validator:
            headers["If-Range"] = self.validator
        return headers

    def whole_file_answer(self, headers: Mapping[str, str]) -> Exception:
        """What a 200 to a range request means: another version of the file (its
        validators or size differ: :class:`RemoteChangedError`), or the same file from
        a server that stopped honouring ranges (:class:`NoRangesError`)."""
        changes = [
            f"{name} {old!r} → {new!r}"
            for name, old, new in (
                ("ETag", self.etag, headers.get("ETag")),
                ("Last-Modified", self.last_modified, headers.get("Last-Modified")),
            )
            if old and new and old != new
        ]
        length = headers.get("Content-Length", "")
        if self.size is not None and length.isdigit() and int(length) != self.size:
            changes.append(f"size {self.size} → {length}")
        if changes:
            return RemoteChangedError(f"the server sent another version: {'; '.join(changes)}")
        return NoRangesError("the server answered a range request with the whole file")


def refuse_status(url: str, status: int, headers: Mapping[str, str]) -> Exception:
    """What a status that is neither 200 nor 206 means for a download request."""
    if status in {429, 503}:
        return BusyError(status, headers.get("Retry-After"))
    if 400 <= status < 500 and status != 408:
        return RemoteFileMissingError(f"{url} answered HTTP {status}", url, status)
    return RetryableError(f"HTTP {status}")


def answered_range(
    headers: Mapping[str, str], start: int, stop: int | None, size: int | None
) -> int:
    """The end (exclusive) of the bytes a 206 carries, checked against what was asked.

    The answer must start where asked, end no later than asked (a server may send a
    shorter prefix, its own chunk limit: the rest is asked for next), and agree on the
    file's size.
    """
    header = headers.get("Content-Range", "")
    match = CONTENT_RANGE.match(header)
    if match is not None:
        first, last, total = int(match.group(1)), int(match.group(2)), match.group(3)
        if (
            first == start
            and first <= last
            and (stop is None or last < stop)
            and (total == "*" or size is None or int(total) == size)
            and (size is None or last < size)
        ):
            return last + 1
    asked = f"{start}-{stop - 1}" if stop is not None else f"{start}-"
    raise RetryableError(f"asked for bytes {asked} but got {header or 'no Content-Range'}")


class Budget:
    """How the requests of one download (or of one of its segments) are retried.

    At most :data:`MAX_FAILURES` failures in a row that bring no new byte, within the
    watchdog's stall limit, each followed by the wait the one retry policy says (the
    server's ``Retry-After`` when it gave one).
    """

    def __init__(self, http: HttpClient, watchdog: Watchdog, url: str) -> None:
        self._http = http
        self._watchdog = watchdog
        self._url = url
        self.failures = 0

    def succeeded(self) -> None:
        self.failures = 0

    def failed(self, error: RetryableError, *, progressed: bool, what: str) -> None:
        """After ``what`` failed: raise when the download must end, else wait for the next try."""
        self._watchdog.note_failure(error)
        if (stalled := self._watchdog.stall_error(urlsplit(self._url).netloc)) is not None:
            raise stalled
        self.failures = 0 if progressed else self.failures + 1
        if error.unresolved and self.failures > 1:
            # The same answer twice from the resolver: the host is out of reach from here
            # (no network, no DNS, a mistyped base), which backing off would not mend.
            host = urlsplit(self._url).hostname or ""
            raise HostUnreachableError(
                f"cannot reach {urlsplit(self._url).netloc} ({error}, twice) for {self._url}",
                self._url,
                public=host in PUBLIC_HOSTS,
            )
        if self.failures > MAX_FAILURES:
            raise NetworkError(
                f"{self._url}: {what} failed {self.failures} times in a row without progress "
                f"({error})"
            )
        self._http.wait_to_retry(self._url, self.failures, f"{what}: {error}", error.retry_after)


def probe_remote(
    http: HttpClient,
    url: str,
    watchdog: Watchdog,
    cancel: threading.Event | None = None,
    wanted: tuple[int, int] | None = None,
    size: int | None = None,
) -> Remote:
    """The probe, retried like any request of the download, within its stall limit.

    It asks for one byte, or for the bytes ``wanted`` of a file the index said is
    ``size`` bytes (then its answer also brings them: :attr:`Remote.prefetched`, kept
    only from a 206 whose ``Content-Range`` is the range asked for, of that size).
    It runs in a thread of its own, watched like the transfer: ``cancel`` and the stall
    limit end it even while a server dribbles out its headers.
    """
    outcome: list[Remote | BaseException] = []

    def probe() -> None:
        budget = Budget(http, watchdog, url)
        while True:
            try:
                outcome.append(_probe_once(http, url, watchdog, wanted, size))
                return
            except RetryableError as exc:
                budget.failed(exc, progressed=False, what="the probe")

    def run() -> None:
        try:
            probe()
        except BaseException as exc:  # handed to the watching thread
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True, name="cudaup-probe")
    supervise(
        [thread],
        watchdog,
        what=urlsplit(url).netloc,
        cancel=cancel,
        failed=lambda: False,
        finished=lambda: bool(outcome),
        every_tick=lambda: None,
    )
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    return outcome[0]


def ask(
    http: HttpClient,
    watchdog: Watchdog,
    url: str,
    headers: Mapping[str, str],
    receive: Callable[[urllib3.BaseHTTPResponse, Flow], tuple[T, bool]],
) -> T:
    """One request of a download, watched from before it is sent until its body is read.

    ``receive`` reads the answer and returns its result and whether it read the body to
    its end (the connection then goes back to the pool; else it is closed).  A broken
    connection, or one the watchdog dropped, raises :class:`RetryableError` saying why.
    """
    raw: urllib3.BaseHTTPResponse | None = None
    drained = False
    try:
        with watchdog.flow() as flow:
            try:
                raw = http.open(
                    "GET", url, headers, timeout=watchdog.request_timeout(), retry=False
                )
                watchdog.attach(flow, functools.partial(cut_off, socket_of(raw)))
                result, drained = receive(raw, flow)
                return result
            except TRANSIENT as exc:
                raise RetryableError.of(exc, flow) from None
            except RetryableError:
                if flow.dropped:  # a short body because the watchdog shut the socket
                    raise RetryableError(flow.dropped) from None
                raise
    finally:
        # After the flow is unregistered: a drop never shuts a socket another request took.
        if raw is not None:
            if drained:
                raw.release_conn()
            else:
                raw.close()


def _probe_once(
    http: HttpClient,
    url: str,
    watchdog: Watchdog,
    wanted: tuple[int, int] | None,
    expected: int | None,
) -> Remote:
    start, stop = wanted if wanted is not None and expected is not None else (0, 1)
    sent = time.monotonic()

    def receive(raw: urllib3.BaseHTTPResponse, flow: Flow) -> tuple[Remote, bool]:
        answered = time.monotonic()
        status, headers = raw.status, raw.headers
        prefetched = None
        if status == 206:
            match = CONTENT_RANGE.match(headers.get("Content-Range", ""))
            total = match.group(3) if match else "*"
            size = int(total) if total.isdigit() else None
            ranges = match is not None
            if ranges and size is not None and size == expected and stop > 1:
                # The range is checked as every later one is; a size other than the
                # index's is the caller's to refuse, with both sizes named.
                end = answered_range(headers, start, stop, size)
                watchdog.answered()
                prefetched = (start, _read_all(raw, flow, end - start))
            elif stop == 1:
                raw.read()
        elif status == 200:
            length = headers.get("Content-Length", "")
            size, ranges = (int(length) if length.isdigit() else None), False
        elif status == 416:
            total = headers.get("Content-Range", "").rsplit("/", 1)[-1]
            size, ranges = (int(total) if total.isdigit() else 0), True
        else:
            raise refuse_status(url, status, headers)
        watchdog.answered()
        remote = Remote(
            str(raw.url or url),
            size,
            headers.get("ETag"),
            headers.get("Last-Modified"),
            ranges,
            prefetched,
            # The download's first pieces are sized to the link with it (see
            # range_plan): without it they are cut before anything is known of it.
            (answered - sent, len(prefetched[1]) if prefetched else 0, time.monotonic() - answered),
        )
        # never read a whole 200 body just to reuse the connection
        return remote, status == 206 and (prefetched is not None or stop == 1)

    headers = {"Range": f"bytes={start}-{stop - 1}", "Accept-Encoding": "identity"}
    return ask(http, watchdog, url, headers, receive)


def _read_all(raw: urllib3.BaseHTTPResponse, flow: Flow, length: int) -> bytes:
    """The whole body of ``raw``, which the checked ``Content-Range`` says is ``length``
    bytes (a shorter one is a failed request, retried)."""
    data = bytearray()
    for chunk in read_body(body_of(raw), ReadBuffer(), flow=flow):
        data += chunk
        if len(data) > length:
            raise RetryableError(f"the body is longer than the {length} bytes of its range")
    if len(data) != length:
        raise RetryableError(f"the body ended at {len(data)} of {length} bytes")
    return bytes(data)


class Body(Protocol):
    def readinto(self, buffer: memoryview, /) -> int: ...


class ReadBuffer:
    """Where :func:`read_body` puts each read: one buffer, reused, that its reader may swap.

    A reader that keeps the bytes of a chunk past the next read (the hasher does, see
    :mod:`cudaup.download.digest`) gives :attr:`data` another buffer of at least
    :data:`MAX_READ` bytes first.  Reusing one buffer is what keeps a fast link cheap: a
    fresh 1 MiB ``bytes`` per read is a fresh mapping, 256 page faults and a copy more.
    """

    __slots__ = ("data",)

    def __init__(self) -> None:
        self.data = bytearray(MAX_READ)


def body_of(raw: urllib3.BaseHTTPResponse) -> Body:
    """``raw``'s body as it was sent, read straight into the caller's buffer.

    urllib3's own ``readinto`` is a ``read`` and a copy; the ``http.client`` response under
    it reads with ``recv_into`` into the buffer itself (one copy, from the kernel), undoing
    chunked encoding and stopping at ``Content-Length``.  That is used while urllib3 has
    buffered none of the body itself (nothing read through it yet); a failure is raised as
    the urllib3 error its own read would raise (:data:`TRANSIENT` covers both).
    """
    inner = getattr(raw, "_fp", None)
    buffered = getattr(raw, "_decoded_buffer", None)
    if not isinstance(inner, http.client.HTTPResponse) or buffered is None or len(buffered):
        return raw
    return _DirectBody(inner)


def socket_of(raw: urllib3.BaseHTTPResponse) -> object | None:
    """The socket ``raw``'s body is read from: what the watchdog shuts to drop it.

    Found through the ``http.client`` response's reader, which holds it even where the
    connection let go of it (an answer that closes the connection); else the connection's.
    """
    reader = getattr(getattr(raw, "_fp", None), "fp", None)
    sock = getattr(getattr(reader, "raw", None), "_sock", None)
    return sock if sock is not None else getattr(raw.connection, "sock", None)


class _DirectBody:
    __slots__ = ("_inner", "_read")

    def __init__(self, inner: http.client.HTTPResponse) -> None:
        self._inner = inner
        self._read = 0

    def readinto(self, buffer: memoryview, /) -> int:
        try:
            count = self._inner.readinto(buffer)
        except TimeoutError as exc:
            raise urllib3.exceptions.ProtocolError("Read timed out.", exc) from None
        except (OSError, http.client.HTTPException, ValueError) as exc:
            # ValueError: the watchdog closed the response under the read
            raise urllib3.exceptions.ProtocolError(f"Connection broken: {exc!r}", exc) from exc
        self._read += count
        missing = self._inner.length
        if not count and len(buffer) and missing:
            # What urllib3 says of a body shorter than its Content-Length (http.client
            # only stops): a stream with no size from any source is never cut short.
            short = f"IncompleteRead({self._read} bytes read, {missing} more expected)"
            raise urllib3.exceptions.ProtocolError(f"Connection broken: {short}")
        return count


def read_body(
    raw: Body,
    buffer: ReadBuffer,
    clock: Callable[[], float] = time.monotonic,
    flow: Flow | None = None,
) -> Iterator[memoryview]:
    """The response body in reads sized to about a tenth of a second of transfer, each
    a view of ``buffer.data`` valid until the next one is asked for.

    Whatever-has-arrived reads (``read1``) hand over one TLS record (16 KiB) at a
    time: on a fast link that is thousands of wake-ups, writes and GIL hand-offs per
    file, which made Python the bottleneck (0.2 s of CPU per 60 MB).  Fixed large
    reads would make a slow link's progress and a stolen segment's stop lag.  So the
    size doubles while reads return quickly and halves when one takes long.  ``flow``
    learns each read's size and result (the speed floor measures it).
    """
    size = MIN_READ
    while True:
        began = clock()
        if flow is not None:
            flow.reading = size
        view = memoryview(buffer.data)[:size]
        count = raw.readinto(view)
        if flow is not None:
            flow.reading = 0
            flow.received += count
        if not count:
            return
        elapsed = clock() - began
        if elapsed < 0.05:
            size = min(size * 2, MAX_READ)
        elif elapsed > 0.2:
            size = max(size // 2, MIN_READ)
        yield view[:count]
