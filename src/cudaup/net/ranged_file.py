"""A remote file read by HTTP range requests, seekable, for :mod:`zipfile` (as pip's
``network/lazy_wheel.py`` reads a wheel's metadata without downloading it).

:class:`RangedFile` learns the file's size from its first request, the tail (where a
zip keeps its central directory, so opening the archive usually costs one request);
reads that continue where the last range ended ask for ranges that grow, doubling up
to :data:`STREAM_CHUNK`, so streaming a member costs a few requests, not one per read.
Every answer is checked: a 206 must carry the range asked for and exactly its bytes
(a 200, from a server that ignores ``Range``, is refused: it would send the whole file).
No single read asks for more than :data:`MAX_READ` bytes (a hostile directory that
claims gigabytes is refused, not fetched).  :attr:`RangedFile.fetched` counts the bytes
received; a ``watch`` is told of each range before it is asked for and of its answer (the
index memo serves uv from what it reads ahead).  :meth:`RangedFile.prefetch` asks for
several known spans at once (a wheel's small members, scattered over it), so that the
reads that follow find them kept instead of waiting one round trip each; a file's end
read already (the index memo's, for a plan's read-back) is handed in as its tail.  Range
reads cannot be checked against the file's hash (that needs every byte): they are evidence,
never bytes installed.
"""

from __future__ import annotations

import io
import re
import threading
import zipfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import IO, TYPE_CHECKING, Any

from cudaup.errors import CudaupError, SourceFormatError

if TYPE_CHECKING:  # binaries/read.py opens local wheels with wheel_archive, without urllib3
    from cudaup.net.http import HttpClient
    from cudaup.util.parallel import Stop

#: Bytes asked for by default by a read that does not continue the last one, and for
#: the tail (which then usually holds a wheel's whole central directory).
CHUNK = 256 * 1024
#: The largest range asked for by a run of reads that continue each other.
STREAM_CHUNK = 8 * 1024 * 1024
#: The most one read may ask for (a central directory, a whole small member).
MAX_READ = 64 * 1024 * 1024
#: Spans handed to :meth:`RangedFile.prefetch` this close are asked for as one range.
PREFETCH_GAP = 256 * 1024
#: Ranges :meth:`RangedFile.prefetch` asks for at once (the HTTP client's pool per host).
PREFETCH_WORKERS = 8
_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+)")
#: Told of a range before it is asked for: its first byte (None: the file's last ``last``
#: bytes) and its last; what it returns is told the answer, ``(first, body, file size)``,
#: or None when there is none (it failed, or was refused as not what was asked).
RangeWatch = Callable[[int | None, int], Callable[[tuple[int, bytes, int] | None], None]]


class RangedFile(io.RawIOBase):
    """A seekable, read-only view of the file at ``url``, fetched in ranges."""

    def __init__(
        self,
        http: HttpClient,
        url: str,
        *,
        chunk: int = CHUNK,
        watch: RangeWatch | None = None,
        end: tuple[int, bytes, int] | None = None,
        stop: Stop | None = None,
    ) -> None:
        """``end``: the file's last bytes, read already from the same URL (their first
        offset, the bytes, the file's size): kept as the tail, so that opening the archive
        asks for nothing when they hold its central directory.  Once ``stop`` is set, the
        range under way is cut off and no other is asked for: the read fails with
        :class:`~cudaup.errors.CudaupError` saying its answer is no longer wanted."""
        super().__init__()
        self._http, self.url, self._pos = http, url, 0
        self._watch, self._stop = watch, stop
        self.fetched = 0
        #: The ranges kept: the tail (the central directory) and the latest one read.
        self._tail = (0, b"")
        self._latest = (0, b"")
        #: Ranges :meth:`prefetch` fetched, kept for the reads that follow.
        self._prefetched: list[tuple[int, bytes]] = []
        self._counting = threading.Lock()  # prefetch's threads add to ``fetched`` at once
        self._chunk = self._step = chunk
        start, body = (end[0], end[1]) if end is not None else self._get(None, chunk)
        self.size = start + len(body)
        self._tail = (start, body)

    # -- io.RawIOBase ----------------------------------------------------------
    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self.size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def read(self, size: int | None = -1) -> bytes:
        """Up to ``size`` bytes from the position (all the rest for -1 or None)."""
        left = self.size - self._pos
        buffer = bytearray(max(0, left if size is None or size < 0 else min(size, left)))
        return bytes(buffer[: self.readinto(buffer)])

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        end = min(self._pos + len(view), self.size)
        if end <= self._pos:
            return 0
        if end - self._pos > MAX_READ:
            raise SourceFormatError(
                f"{self.url}: a read of {end - self._pos} bytes at {self._pos} asks for more "
                f"than {MAX_READ}"
            )
        data = self._bytes(self._pos, end)
        view[: len(data)] = data
        self._pos += len(data)
        return len(data)

    def exactly(self, start: int, length: int) -> bytes:
        """Bytes ``start`` up to ``start + length``, asked for exactly (no read-ahead: a
        section found from headers, wherever it lies)."""
        end = min(start + length, self.size)
        if not 0 <= start < end or end - start > MAX_READ:
            raise SourceFormatError(f"{self.url}: no {length} bytes at {start} to read")
        kept = self._kept(start, end)
        return kept if kept is not None else self._get(start, end - 1)[1]

    def prefetch(self, spans: Sequence[tuple[int, int]]) -> None:
        """Fetch the spans ``(start, end)`` (end exclusive) together, up to
        :data:`PREFETCH_WORKERS` ranges at once, spans closer than :data:`PREFETCH_GAP`
        joined into one; they are kept for the reads that follow.  Only a shortcut: a
        later read that is not wholly inside one of them asks for its own range.  Nothing
        here bounds the bytes beyond the file's size: the caller asks only for spans it
        has bounded."""
        from cudaup.util.parallel import map_concurrently  # noqa: PLC0415 - rarely needed

        joined: list[list[int]] = []
        for start, end in sorted((max(0, s), min(e, self.size)) for s, e in spans):
            if start >= end or self._kept(start, end) is not None:
                continue
            if joined and start - joined[-1][1] <= PREFETCH_GAP:
                joined[-1][1] = max(joined[-1][1], end)
            else:
                joined.append([start, end])
        ranges = []  # split so that no range asks for more than one read may
        for start, end in joined:
            ranges += [(at, min(end, at + MAX_READ)) for at in range(start, end, MAX_READ)]
        self._prefetched += map_concurrently(
            lambda span: self._get(span[0], span[1] - 1), ranges, PREFETCH_WORKERS
        )

    # -- ranges ------------------------------------------------------------------
    def _kept(self, start: int, end: int) -> bytes | None:
        for first, body in (self._latest, self._tail, *self._prefetched):
            if first <= start and end <= first + len(body):
                return body[start - first : end - first]
        return None

    def _bytes(self, start: int, end: int) -> bytes:
        """Bytes ``start`` up to ``end`` (exclusive), from a kept range or a new one."""
        kept = self._kept(start, end)
        if kept is not None:
            return kept
        latest_first, latest = self._latest
        latest_end = latest_first + len(latest)
        if latest and latest_first <= start <= latest_end:
            # A read that goes on past the last range streams: the kept part, then a
            # range twice as long as the last, from where it ended.
            self._step = min(self._step * 2, STREAM_CHUNK)
            head = latest[start - latest_first :]
            last = min(self.size, max(end, latest_end + self._step)) - 1
            got, body = self._get(latest_end, last)
            self._latest = (got, body)
            return head + body[: end - latest_end]
        self._step = self._chunk
        last = min(self.size, max(end, start + self._step)) - 1
        got, body = self._get(start, last)
        self._latest = (got, body)
        return body[: end - start]

    def _get(self, start: int | None, last: int) -> tuple[int, bytes]:
        """Bytes ``start..last`` (inclusive), or the file's last ``last`` bytes when ``start``
        is None; with the offset they start at."""
        from cudaup.net.deadline import ended_by  # noqa: PLC0415 - see the imports

        spec = f"bytes=-{last}" if start is None else f"bytes={start}-{last}"
        self._check_stop()
        landed = self._watch(start, last) if self._watch is not None else None
        answer: tuple[int, bytes, int] | None = None
        try:
            with ended_by(self._stop):
                answer = self._checked(start, last, spec)
            return answer[:2]
        except Exception:
            self._check_stop()  # cut off: that, not how the cut looked, is why it failed
            raise
        finally:
            if landed is not None:
                landed(answer)

    def _check_stop(self) -> None:
        if self._stop is not None and self._stop.is_set():
            raise CudaupError(f"the read of {self.url} stopped: its answer is no longer wanted")

    def _checked(self, start: int | None, last: int, spec: str) -> tuple[int, bytes, int]:
        raw = self._http.open("GET", self.url, {"Range": spec})
        done = False
        try:
            if raw.status == 200:
                raise SourceFormatError(f"{self.url} does not honour Range requests")
            if raw.status != 206:
                raise SourceFormatError(f"{self.url} answered HTTP {raw.status} to a range request")
            match = _CONTENT_RANGE.fullmatch(raw.headers.get("Content-Range", ""))
            if not match:
                raise SourceFormatError(f"{self.url} sent no usable Content-Range")
            first, final, total = (int(g) for g in match.groups())
            if start is None:  # a suffix: exactly the file's last bytes
                fits = final == total - 1 and final - first + 1 == min(last, total)
            else:
                fits = first == start and 0 <= final - first <= last - start
            if not fits or final >= total:
                raise SourceFormatError(f"{self.url} answered another range than asked")
            if start is not None and total != self.size:
                raise SourceFormatError(f"{self.url} changed size while it was read")
            body = raw.read(final - first + 2)
            if len(body) != final - first + 1:
                raise SourceFormatError(
                    f"{self.url} sent {len(body)} bytes for a range of {final - first + 1}"
                )
            done = True
            with self._counting:
                self.fetched += len(body)
            return first, body, total
        finally:
            if not done:
                raw.close()  # unread bytes must not reach the next request on this connection
            raw.release_conn()


@contextmanager
def wheel_archive(file: IO[bytes] | RangedFile, where: str) -> Iterator[zipfile.ZipFile]:
    """``file`` (a :class:`RangedFile`, a local file, bytes) opened as a zip; one that is
    not one, or a member that does not read as its directory entry says (a bad CRC, an
    unknown method, a damaged header), is :class:`~cudaup.errors.SourceFormatError`
    naming ``where``."""
    try:
        with file, zipfile.ZipFile(file) as archive:
            yield archive
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, NotImplementedError) as exc:
        raise SourceFormatError(f"{where} is not a readable wheel ({exc})") from None
    except (ValueError, RuntimeError) as exc:  # zipfile: bad offsets, encrypted members
        raise SourceFormatError(f"{where} is not a readable wheel ({exc})") from None
