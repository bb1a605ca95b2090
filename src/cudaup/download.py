"""Verified, resumable, parallel downloads of multi-GB files.

How one file is fetched (:func:`fetch`):

1. A lock (in cudaup's cache, not beside the file) keeps two processes from
   writing the same target; the second waits, then finds the finished file.
2. One ranged probe (``GET bytes=0-0``) learns the size, the validators
   (``ETag``/``Last-Modified``) and whether the server honours ranges.
3. The data goes to ``NAME.part``; ``NAME.part.json`` records which byte
   ranges are on disk, rewritten atomically about once a second.  A re-run
   with matching validators continues where the last one stopped; a changed
   remote (ETag, Last-Modified or size) restarts cleanly, with a message.
4. N connections fetch byte ranges (:mod:`cudaup.segments`); an idle worker
   steals half of the busiest segment.  Every range request carries
   ``If-Range``, and a 206 must carry the ``Content-Range`` that was asked for.
   A server that ignores ranges (200) gets one plain stream from byte 0 into a
   fresh file: a 200 body is never written at a range offset.
5. A hashing thread follows the contiguous prefix on disk (hashlib and pread
   release the GIL), so verification overlaps the transfer.
6. fsync, compare with the authoritative checksum, then ``os.replace`` to the
   final name.  A mismatch deletes the part file and names both digests.

Transient failures (connection errors, resets, short bodies, read stalls, 5xx,
408, 429 with ``Retry-After``) are retried per segment with exponential backoff
and jitter, keeping the bytes already written; other 4xx fail at once.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import json
import os
import random
import re
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Literal, Protocol

import urllib3

from cudaup.atomic import atomic_write
from cudaup.errors import (
    CudaupError,
    InsufficientSpaceError,
    IntegrityError,
    LockedError,
    NetworkError,
    RemoteFileMissingError,
    UsageError,
)
from cudaup.http import HttpClient
from cudaup.model import Artifact
from cudaup.parallel import check as check_cancelled
from cudaup.parallel import map_concurrently
from cudaup.segments import Segment, SegmentPlan

#: Socket reads adapt between these sizes (see :func:`_body`).
MIN_READ = 64 * 1024
MAX_READ = 1024 * 1024
HASH_BLOCK = 4 * 1024 * 1024
MAX_CONNECTIONS_PER_HOST = 16
STATE_INTERVAL = 1.0
PROGRESS_INTERVAL = 0.1
MAX_FAILURES = 6
_CONTENT_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)")


# ---------------------------------------------------------------------------
# What to fetch, what happened
# ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class DownloadRequest:
    url: str
    filename: str
    size: int | None = None
    sha256: str | None = None
    md5: str | None = None

    @classmethod
    def from_artifact(cls, artifact: Artifact) -> DownloadRequest:
        return cls(artifact.url, artifact.filename, artifact.size, artifact.sha256, artifact.md5)

    @classmethod
    def from_url(
        cls, url: str, *, sha256: str | None = None, md5: str | None = None
    ) -> DownloadRequest:
        name = url.split("?", 1)[0].split("#", 1)[0].rstrip("/").rsplit("/", 1)[-1]
        if not name:
            raise UsageError(f"{url} names no file; give a URL that ends with a file name")
        for value, length, flag in ((sha256, 64, "--sha256"), (md5, 32, "--md5")):
            if value is not None and not re.fullmatch(rf"[0-9a-fA-F]{{{length}}}", value):
                raise UsageError(f"{flag} takes {length} hex digits, not {value!r}")
        return cls(
            url, name, None, sha256.lower() if sha256 else None, md5.lower() if md5 else None
        )

    @property
    def checksum(self) -> tuple[str, str] | None:
        """The strongest authoritative checksum: ``("sha256", hex)`` or ``("md5", hex)``."""
        if self.sha256:
            return "sha256", self.sha256
        if self.md5:
            return "md5", self.md5
        return None


@dataclass(frozen=True, slots=True)
class ProgressEvent:
    filename: str
    #: "unpacked" comes from installs: the file's archive is extracted too.
    kind: Literal["start", "advance", "notice", "done", "unpacked"]
    done: int
    total: int | None
    message: str | None = None


Progress = Callable[[ProgressEvent], None]


@dataclass(frozen=True, slots=True)
class DownloadResult:
    path: Path
    url: str
    size: int
    algorithm: str | None
    digest: str | None
    resumed_from: int
    fetched: int
    seconds: float
    skipped: bool
    connections: int

    def to_json(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "url": self.url,
            "size": self.size,
            "checksum": {"algorithm": self.algorithm, "digest": self.digest}
            if self.algorithm
            else None,
            "verified": self.algorithm is not None,
            "resumed_from": self.resumed_from,
            "fetched": self.fetched,
            "seconds": round(self.seconds, 3),
            "skipped": self.skipped,
            "connections": self.connections,
        }


class _RemoteChangedError(Exception):
    """The server's copy is not the one the part file holds (If-Range failed, 416)."""


class _NoRangesError(Exception):
    """The server answered a range request with the whole file."""


class _RetryableError(Exception):
    """A transient failure of one request: short body, bad range, stall."""


# ---------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------
def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _hash_file(path: Path, algorithm: str) -> str:
    digest = hashlib.new(algorithm)
    with path.open("rb") as handle:
        while block := handle.read(HASH_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def _check_space(directory: Path, needed: int, what: str) -> None:
    free = shutil.disk_usage(directory).free
    if needed > free:
        raise InsufficientSpaceError(
            f"{what} needs {needed} more bytes ({needed / 2**30:.2f} GiB) in {directory}, "
            f"but only {free} bytes ({free / 2**30:.2f} GiB) are free"
        )


def _backoff(attempt: int) -> float:
    return min(0.25 * 2.0**attempt, 10.0) * (0.5 + random.random())  # noqa: S311


@dataclass(frozen=True, slots=True)
class _Remote:
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


def _probe(http: HttpClient, url: str) -> _Remote:
    """The probe, retried like any request when the connection breaks under it."""
    for failures in range(MAX_FAILURES + 1):
        try:
            return _probe_once(http, url)
        except (urllib3.exceptions.HTTPError, ConnectionError) as exc:
            if failures == MAX_FAILURES:
                raise NetworkError(
                    f"{url}: the probe failed {failures + 1} times ({exc})"
                ) from None
            time.sleep(_backoff(failures))
    raise AssertionError("unreachable")  # pragma: no cover


def _probe_once(http: HttpClient, url: str) -> _Remote:
    raw = http.open("GET", url, {"Range": "bytes=0-0", "Accept-Encoding": "identity"})
    try:
        status, headers = raw.status, raw.headers
        final_url = str(raw.url or url)
        if status == 206:
            match = _CONTENT_RANGE.match(headers.get("Content-Range", ""))
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
        return _Remote(final_url, size, headers.get("ETag"), headers.get("Last-Modified"), ranges)
    finally:
        if raw.status == 206:
            raw.release_conn()
        else:
            raw.close()  # never read a whole 200 body just to reuse the connection


# ---------------------------------------------------------------------------
# One file
# ---------------------------------------------------------------------------
class _Transfer:
    """The state shared by the workers, the hasher and the supervising thread."""

    def __init__(
        self,
        http: HttpClient,
        request: DownloadRequest,
        remote: _Remote,
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
                _RetryableError,
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
                time.sleep(_backoff(failures))

    def _request_range(self, segment: Segment) -> None:
        start, stop = segment.pos, segment.end
        headers = {"Range": f"bytes={start}-{stop - 1}", "Accept-Encoding": "identity"}
        if self.remote.validator:
            headers["If-Range"] = self.remote.validator
        raw = self.http.open("GET", self.remote.url, headers)
        complete = False
        try:
            if raw.status == 200:
                raise _RemoteChangedError("the server sent the whole file to a range request")
            if raw.status == 416:
                raise _RemoteChangedError("the server says the range is not satisfiable (416)")
            if raw.status != 206:
                if 400 <= raw.status < 500 and raw.status not in {408, 429}:
                    raise RemoteFileMissingError(
                        f"{self.remote.url} answered HTTP {raw.status}", self.remote.url, raw.status
                    )
                raise _RetryableError(f"HTTP {raw.status}")
            match = _CONTENT_RANGE.match(raw.headers.get("Content-Range", ""))
            if (
                match is None
                or int(match.group(1)) != start
                or int(match.group(2)) != stop - 1
                or match.group(3) not in {str(self.plan.size), "*"}
            ):
                raise _RetryableError(
                    f"asked for bytes {start}-{stop - 1} but got "
                    f"{raw.headers.get('Content-Range') or 'no Content-Range'}"
                )
            for chunk in _body(raw):
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
                raise _RetryableError(f"the body ended at byte {segment.pos} of {stop}")
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


class _Target:
    """Paths of one download: the final name, the part file, its state, its lock."""

    def __init__(self, directory: Path, filename: str, lock_dir: Path) -> None:
        if "/" in filename or "\\" in filename or filename in {"", ".", ".."}:
            raise UsageError(f"refusing to write a file named {filename!r}")
        self.directory = directory
        self.final = directory / filename
        self.part = directory / (filename + ".part")
        self.state = directory / (filename + ".part.json")
        key = hashlib.sha256(str(self.final.resolve()).encode()).hexdigest()[:24]
        self.lock = lock_dir / f"{key}.lock"

    def load_state(self) -> dict[str, Any] | None:
        try:
            document = json.loads(self.state.read_text())
        except (OSError, ValueError):
            return None
        return document if isinstance(document, dict) and document.get("schema") == 1 else None

    def discard(self) -> None:
        for path in (self.part, self.state):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


class ArrivalLostError(CudaupError):
    """The download under an early reader failed or started over; read the verified file."""


class Arrival:
    """Lets a reader use a file's bytes while it is still downloading.

    Pass one to :func:`fetch` and call :meth:`open` from another thread: reads
    block until the bytes they ask for are on disk, in whatever order the
    connections bring them.  ``tail_first`` asks for the file's last bytes
    before the rest (a zip's member list).  The bytes are not verified yet: a
    reader must treat what it made from them as provisional until ``fetch``
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
                fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
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


def _check_connections(connections: int) -> None:
    if not 1 <= connections <= MAX_CONNECTIONS_PER_HOST:
        raise UsageError(f"--connections must be between 1 and {MAX_CONNECTIONS_PER_HOST}")


def _emit(progress: Progress | None, event: ProgressEvent) -> None:
    if progress is not None:
        progress(event)


def fetch(
    request: DownloadRequest | Artifact,
    directory: Path,
    *,
    http: HttpClient,
    connections: int = 8,
    progress: Progress | None = None,
    allow_unverified: bool = False,
    slots: threading.Semaphore | None = None,
    arrival: Arrival | None = None,
    cancel: threading.Event | None = None,
) -> DownloadResult:
    """Download one file into ``directory``; see the module docstring for how.

    With ``arrival``, another thread may read the bytes as they land (see :class:`Arrival`).
    Setting ``cancel`` stops the download within about a tenth of a second, its resumable
    state saved, with :class:`cudaup.parallel.CancelledError`.
    """
    if isinstance(request, Artifact):
        request = DownloadRequest.from_artifact(request)
    if request.checksum is None and not allow_unverified:
        raise IntegrityError(
            f"no checksum is known for {request.filename}, so it cannot be verified; "
            "pass --allow-unverified to download it anyway"
        )
    _check_connections(connections)
    directory.mkdir(parents=True, exist_ok=True)
    lock_dir = http.settings.cache_root / "locks"
    lock_dir.mkdir(parents=True, exist_ok=True)
    target = _Target(directory, request.filename, lock_dir)
    from filelock import FileLock, Timeout  # noqa: PLC0415 - only downloads need it

    lock = FileLock(str(target.lock))
    try:
        lock.acquire(timeout=1)
    except Timeout:
        _emit(
            progress,
            ProgressEvent(
                request.filename,
                "notice",
                0,
                request.size,
                "waiting for another cudaup process writing the same file",
            ),
        )
        try:
            lock.acquire(timeout=24 * 3600)
        except Timeout:
            raise LockedError(
                f"another process has held the lock on {target.final} for a day"
            ) from None
    try:
        result = _fetch_locked(request, target, http, connections, progress, slots, arrival, cancel)
    except BaseException:
        if arrival is not None:
            arrival._lose()
        raise
    finally:
        lock.release()
    if arrival is not None:
        arrival._finish(result.path)
    return result


def is_verified(path: Path, request: DownloadRequest) -> bool:
    """Whether ``path`` already holds the file: the known size and the strongest checksum."""
    checksum = request.checksum
    if checksum is None or not path.is_file():
        return False
    if request.size is not None and path.stat().st_size != request.size:
        return False
    return _hash_file(path, checksum[0]) == checksum[1]


def _existing(target: _Target, request: DownloadRequest) -> DownloadResult | None:
    if not is_verified(target.final, request):
        return None
    algorithm, expected = request.checksum or ("", "")
    size = target.final.stat().st_size
    return DownloadResult(target.final, request.url, size, algorithm, expected, 0, 0, 0.0, True, 0)


def _fetch_locked(
    request: DownloadRequest,
    target: _Target,
    http: HttpClient,
    connections: int,
    progress: Progress | None,
    slots: threading.Semaphore | None,
    arrival: Arrival | None = None,
    cancel: threading.Event | None = None,
) -> DownloadResult:
    started = time.monotonic()
    if (done := _existing(target, request)) is not None:
        _emit(
            progress,
            ProgressEvent(
                request.filename, "done", done.size, done.size, "already here and verified"
            ),
        )
        return done
    for attempt in range(3):
        check_cancelled(cancel)
        remote = _probe(http, request.url)
        if request.size is not None and remote.size is not None and remote.size != request.size:
            raise IntegrityError(
                f"{request.filename}: the source says {request.size} bytes but {remote.url} serves "
                f"{remote.size}; refusing a file whose sources disagree (a mirror out of sync?)"
            )
        try:
            if remote.size is None or not remote.ranges:
                return _single_stream(request, target, http, remote, progress, started, cancel)
            return _segmented(
                request, target, http, remote, connections, progress, slots, started, arrival,
                cancel,
            )  # fmt: skip
        except _RemoteChangedError as exc:
            if arrival is not None:
                arrival._lose()  # an early reader saw bytes of the old file
            if attempt == 2:
                raise NetworkError(
                    f"{request.url} keeps changing while it downloads ({exc})"
                ) from None
            _emit(
                progress,
                ProgressEvent(
                    request.filename,
                    "notice",
                    0,
                    remote.size,
                    f"the remote file changed ({exc}); restarting",
                ),
            )
            target.discard()
        except _NoRangesError:
            remote = _Remote(remote.url, remote.size, remote.etag, remote.last_modified, False)
            return _single_stream(request, target, http, remote, progress, started, cancel)
    raise AssertionError("unreachable")  # pragma: no cover


def _resume_plan(
    target: _Target, remote: _Remote, progress: Progress | None, filename: str
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
        _emit(
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


def _segmented(
    request: DownloadRequest,
    target: _Target,
    http: HttpClient,
    remote: _Remote,
    connections: int,
    progress: Progress | None,
    slots: threading.Semaphore | None,
    started: float,
    arrival: Arrival | None = None,
    cancel: threading.Event | None = None,
) -> DownloadResult:
    assert remote.size is not None
    size = remote.size
    plan = _resume_plan(target, remote, progress, request.filename)
    if plan is None:
        target.discard()
        _check_space(target.directory, size, request.filename)
        with target.part.open("wb") as handle:
            handle.truncate(size)
        plan = SegmentPlan.split(size, connections, arrival.tail_first if arrival else 0)
    else:
        _check_space(target.directory, size - plan.completed, request.filename)
    resumed_from = plan.completed
    if resumed_from:
        _emit(
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
    transfer = _Transfer(http, request, remote, fd, plan, slots)
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
    _emit(progress, ProgressEvent(request.filename, "start", resumed_from, size))
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
                _emit(progress, ProgressEvent(request.filename, "advance", plan.completed, size))
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
    if checksum is not None and digest != checksum[1]:
        target.discard()
        raise IntegrityError(
            f"{request.filename}: {checksum[0]} mismatch: expected {checksum[1]}, got {digest}; "
            "the download was deleted (the published checksum or the server is wrong; try again later)"
        )
    target.part.replace(target.final)
    _fsync_dir(target.directory)
    with contextlib.suppress(FileNotFoundError):
        target.state.unlink()
    _emit(progress, ProgressEvent(request.filename, "done", size, size))
    return DownloadResult(
        target.final, request.url, size, algorithm, digest, resumed_from, size - resumed_from,
        time.monotonic() - started, False, connections,
    )  # fmt: skip


class _Body(Protocol):
    def read(self, amt: int | None = None, decode_content: bool | None = None) -> bytes: ...


def _body(raw: _Body, clock: Callable[[], float] = time.monotonic) -> Iterator[bytes]:
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


def _single_stream(
    request: DownloadRequest,
    target: _Target,
    http: HttpClient,
    remote: _Remote,
    progress: Progress | None,
    started: float,
    cancel: threading.Event | None = None,
) -> DownloadResult:
    """One plain GET from byte 0 into a fresh part file, hashing inline."""
    if target.load_state() is not None or target.part.exists():
        _emit(
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
        _check_space(target.directory, remote.size, request.filename)
    checksum = request.checksum
    limit = remote.size if remote.size is not None else request.size
    _emit(progress, ProgressEvent(request.filename, "start", 0, limit))
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
                    for chunk in _body(raw):
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
                            _emit(
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
            time.sleep(_backoff(failures))
            continue
        except BaseException:
            raw.close()
            target.discard()
            raise
        raw.release_conn()
        if limit is not None and written != limit:
            if failures == MAX_FAILURES:
                raise NetworkError(f"{remote.url}: the body ended at byte {written} of {limit}")
            time.sleep(_backoff(failures))
            continue
        break
    actual = digest.hexdigest() if digest is not None else None
    if checksum is not None and actual != checksum[1]:
        target.discard()
        raise IntegrityError(
            f"{request.filename}: {checksum[0]} mismatch: expected {checksum[1]}, got {actual}; "
            "the download was deleted"
        )
    target.part.replace(target.final)
    _fsync_dir(target.directory)
    _emit(progress, ProgressEvent(request.filename, "done", written, written))
    return DownloadResult(
        target.final, request.url, written, checksum[0] if checksum else None, actual, 0, written,
        time.monotonic() - started, False, 1,
    )  # fmt: skip


# ---------------------------------------------------------------------------
# The library API the installer uses
# ---------------------------------------------------------------------------
def download(
    artifact: Artifact | DownloadRequest,
    dest: Path,
    *,
    http: HttpClient,
    connections: int = 8,
    progress: Progress | None = None,
    allow_unverified: bool = False,
) -> Path:
    """Fetch one artifact into directory ``dest``, verified; the final path."""
    return fetch(
        artifact, dest, http=http, connections=connections, progress=progress,
        allow_unverified=allow_unverified,
    ).path  # fmt: skip


def fetch_many(
    requests: Sequence[DownloadRequest | Artifact],
    directory: Path,
    *,
    http: HttpClient,
    connections: int = 8,
    total_connections: int = MAX_CONNECTIONS_PER_HOST,
    progress: Progress | None = None,
    allow_unverified: bool = False,
) -> list[DownloadResult]:
    """Several files at once, within one global connection cap."""
    _check_connections(connections)
    normalized = [
        r if isinstance(r, DownloadRequest) else DownloadRequest.from_artifact(r) for r in requests
    ]
    unverified = [r.filename for r in normalized if r.checksum is None]
    if unverified and not allow_unverified:
        raise IntegrityError(
            f"no checksum is known for {', '.join(unverified)}; pass --allow-unverified to download anyway"
        )
    directory.mkdir(parents=True, exist_ok=True)
    known = sum(r.size or 0 for r in normalized)
    _check_space(directory, known, f"{len(normalized)} files")
    slots = threading.BoundedSemaphore(max(1, min(total_connections, MAX_CONNECTIONS_PER_HOST)))
    per_file = max(1, min(connections, total_connections))

    cancel = threading.Event()  # the first failure (or Ctrl-C) stops the others

    def one(request: DownloadRequest) -> DownloadResult:
        return fetch(
            request, directory, http=http, connections=per_file, progress=progress,
            allow_unverified=allow_unverified, slots=slots, cancel=cancel,
        )  # fmt: skip

    return map_concurrently(one, normalized, workers=4, cancel=cancel)


__all__ = [
    "Arrival",
    "ArrivalLostError",
    "ArrivingFile",
    "CudaupError",
    "DownloadRequest",
    "DownloadResult",
    "ProgressEvent",
    "download",
    "fetch",
    "fetch_many",
]
