"""Reading tar archives (.tar.xz, .tar.gz, .tar) front to back, decompressing ahead."""

from __future__ import annotations

import contextlib
import gzip
import io
import lzma
import queue
import sys
import tarfile
import threading
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import IO

from cudaup.errors import IntegrityError
from cudaup.install.extract.policy import CHUNK, Kind, Member, Opener, Stream, refusal

#: Bytes tolerated after a tar's end marker (record padding is 10 KiB).
MAX_TRAILER = 64 * 2**20
_TAR_KINDS: dict[bytes, Kind] = {
    tarfile.REGTYPE: "file",
    tarfile.AREGTYPE: "file",
    tarfile.CONTTYPE: "file",
    tarfile.DIRTYPE: "dir",
    tarfile.SYMTYPE: "symlink",
}
_TAR_REFUSED = {
    tarfile.LNKTYPE: "hard link",
    tarfile.CHRTYPE: "character device",
    tarfile.BLKTYPE: "block device",
    tarfile.FIFOTYPE: "FIFO",
    tarfile.GNUTYPE_SPARSE: "sparse file",
}


class _Tap:
    """A decompressed tar stream that remembers its last read.

    tarfile ends the member list silently at a truncated or garbled header;
    only the block it last read tells that apart from the real end marker.
    """

    def __init__(self, raw: Stream) -> None:
        self.raw = raw
        self.last = b""

    def read(self, size: int = -1, /) -> bytes:
        self.last = self.raw.read(size)
        return self.last

    def write(self, data: bytes, /) -> int:
        raise io.UnsupportedOperation("read-only")

    def tell(self) -> int:
        return self.raw.tell()

    def seek(self, pos: int, whence: int = 0, /) -> int:
        return self.raw.seek(pos, whence)

    def close(self) -> None:
        self.raw.close()


def _xz_chunks(opener: Opener) -> Generator[bytes, None, None]:
    """The decompressed bytes of a .xz file (all its streams), in blocks of up to 4 MiB.

    LZMAFile feeds the decompressor 8 KiB at a time and returns each small result:
    thousands of GIL hand-offs per archive.  Reading 1 MiB per call keeps liblzma
    busy without the GIL for longer stretches.  As with ``xz -d``, streams may be
    concatenated and padded with null bytes; other trailing bytes end the data (as
    LZMAFile does), and the tar's own end marker is checked later.
    """
    with opener() as source:
        decompressor = lzma.LZMADecompressor()
        while True:
            if decompressor.eof:
                # Null bytes between and after streams are xz's stream padding.
                rest = decompressor.unused_data.lstrip(b"\0")
                while not rest:
                    block = source.read(CHUNK)
                    if not block:
                        return
                    rest = block.lstrip(b"\0")
                decompressor = lzma.LZMADecompressor()
                try:
                    data = decompressor.decompress(rest, 4 * CHUNK)
                except lzma.LZMAError:
                    return  # trailing bytes that are not another stream: the end
            else:
                if decompressor.needs_input:
                    block = source.read(CHUNK)
                    if not block:
                        raise EOFError("the compressed file ended before its end-of-stream marker")
                else:
                    block = b""
                data = decompressor.decompress(block, 4 * CHUNK)
            if data:
                yield data


def _gzip_chunks(opener: Opener) -> Generator[bytes, None, None]:
    with opener() as source, gzip.GzipFile(fileobj=source) as stream:
        while chunk := stream.read(CHUNK):
            yield chunk


class _ReadAhead:
    """A decompressed stream produced ahead by a thread of its own, read forward only.

    lzma and zlib release the GIL while they work, so a .tar.xz decompresses on
    one core while tarfile and the file writes run on another, instead of taking
    turns.  tarfile reads a compressed tar front to back and only seeks forward.
    """

    DEPTH = 4  # blocks produced ahead: 16 MiB of memory at most

    def __init__(self, chunks: Generator[bytes, None, None]) -> None:
        self._chunks = chunks
        self._queue: queue.Queue[bytes | BaseException] = queue.Queue(self.DEPTH)
        self._chunk = b""
        self._offset = 0
        self._position = 0
        self._error: BaseException | None = None
        self._eof = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._fill, daemon=True, name="cudaup-unpack")
        self._thread.start()

    def _fill(self) -> None:
        try:
            for chunk in self._chunks:
                if not self._put(chunk):
                    return
            self._put(b"")
        except BaseException as exc:  # handed to the reader, which raises it
            self._put(exc)
        finally:
            with contextlib.suppress(Exception):
                self._chunks.close()

    def _put(self, item: bytes | BaseException) -> bool:
        while not self._stop.is_set():
            with contextlib.suppress(queue.Full):
                self._queue.put(item, timeout=0.1)
                return True
        return False

    def read(self, size: int = -1, /) -> bytes:
        wanted = size if size >= 0 else sys.maxsize
        parts: list[bytes] = []
        while wanted > 0:
            if self._offset >= len(self._chunk):
                if self._error is not None:
                    raise self._error
                if self._eof:
                    break
                item = self._queue.get()
                if isinstance(item, BaseException):
                    self._error = item
                    raise item
                if not item:
                    self._eof = True
                    break
                self._chunk, self._offset = item, 0
            take = min(wanted, len(self._chunk) - self._offset)
            if take == len(self._chunk) and self._offset == 0:
                parts.append(self._chunk)  # a whole chunk: no copy
            else:
                parts.append(self._chunk[self._offset : self._offset + take])
            self._offset += take
            self._position += take
            wanted -= take
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def tell(self) -> int:
        return self._position

    def seek(self, pos: int, whence: int = 0, /) -> int:
        target = pos if whence == io.SEEK_SET else self._position + pos
        if whence not in {io.SEEK_SET, io.SEEK_CUR} or target < self._position:
            raise io.UnsupportedOperation("a compressed tar is read forward only")
        while self._position < target and self.read(min(CHUNK, target - self._position)):
            pass
        return self._position

    def close(self) -> None:
        self._stop.set()
        with contextlib.suppress(queue.Empty):
            while True:
                self._queue.get_nowait()  # unblock a fill thread waiting to put
        self._thread.join(timeout=5)


class TarReader:
    def __init__(self, archive: Path, compression: str, opener: Opener) -> None:
        self.archive = archive
        self.size = size_of(opener)
        raw: Stream
        if compression == "xz":
            raw = _ReadAhead(_xz_chunks(opener))
        elif compression == "gz":
            raw = _ReadAhead(_gzip_chunks(opener))
        else:
            raw = opener()
        self.stream = _Tap(raw)
        try:
            self.tar = tarfile.open(fileobj=self.stream, mode="r:")  # noqa: SIM115
        except BaseException:
            self.stream.close()
            raise

    def members(self) -> Iterator[Member]:
        # Lazily: a refusal stops before tarfile decompresses the next member.
        for info in self.tar:
            kind = None if info.issparse() else _TAR_KINDS.get(info.type)
            if kind is None:
                reason = "sparse file" if info.issparse() else _TAR_REFUSED.get(info.type)
                raise refusal(self.archive, info.name, reason or f"member type {info.type!r}")
            size = info.size if kind == "file" else 0
            yield Member(info.name, kind, info.mode, size, info.linkname, info)
        self._check_end()

    def _check_end(self) -> None:
        """The member list must end at the end marker, and the stream must be whole."""
        if self.stream.last != bytes(tarfile.BLOCKSIZE):
            raise IntegrityError(
                f"{self.archive.name}: truncated or corrupt: the members end "
                "without the end-of-archive marker"
            )
        # Reading to the end makes xz and gzip verify their trailers and checksums.
        trailer = 0
        while chunk := self.stream.read(CHUNK):
            trailer += len(chunk)
            if trailer > MAX_TRAILER:
                raise IntegrityError(
                    f"{self.archive.name}: more than {MAX_TRAILER} bytes after the end of the archive"
                )

    def open(self, member: Member) -> IO[bytes]:
        data = self.tar.extractfile(member.ref)
        if data is None:  # pragma: no cover - only files are opened
            raise refusal(self.archive, member.name, "has no data")
        return data

    def close(self) -> None:
        self.tar.close()
        self.stream.close()


def size_of(opener: Opener) -> int:
    with opener() as source:
        return source.seek(0, io.SEEK_END)
