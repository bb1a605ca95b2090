"""Safe extraction of NVIDIA redist archives (.tar.xz, .zip) and PyPI wheels.

A matching checksum only says the archive is the one the index published; it
says nothing about what the archive does when unpacked, so every member is
checked before it is written (reliability.md, item 22).  A zip's central
directory lists every member up front, so all are checked before the first
write; a tar is read once, front to back (decompressing it twice would double
the time), so each member is checked against all before it, and symlinks are
created only after the last member has been checked:

* names are relative, with no ``..``, no NUL and no drive letter; a backslash
  counts as a separator, because Windows reads it as one;
* only files, directories and symlinks: hard links, devices, FIFOs, sockets
  and sparse files are refused (NVIDIA archives and wheels have none);
* a symlink is relative and, followed from its own directory through any other
  symlink of the archive, stays inside the tree; no member lies below a symlink
  (the two-step attack: ``escape -> ..``, then ``escape/evil``);
* no setuid, setgid or sticky bit;
* member count, uncompressed total, expansion over the archive's own size
  (zip and xz bombs) and free disk space are all checked up front.

Writing then never follows or replaces anything: files are opened with
``O_CREAT | O_EXCL | O_NOFOLLOW`` inside directories made here, in a
destination that must start empty.  A failure while writing (corrupt data,
disk full, Ctrl-C) removes what was written, so the destination is left empty.
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import io
import lzma
import os
import queue
import re
import shutil
import stat
import sys
import tarfile
import threading
import zipfile
import zlib
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any, BinaryIO, Literal, Protocol

from cudaup.errors import CudaupError, InsufficientSpaceError, IntegrityError, UsageError
from cudaup.parallel import check as check_cancelled
from cudaup.parallel import map_concurrently

_isal: Any
try:  # ISA-L's inflate: the same deflate, 2-3x faster than CPython's zlib
    from isal import isal_zlib as _isal
except ImportError:  # pragma: no cover - platforms without its wheels fall back to zipfile
    _isal = None
_INFLATE_ERROR: type[Exception] = getattr(_isal, "error", zlib.error)

CHUNK = 1024 * 1024
#: Symlinks followed while resolving one target; Linux's own limit per lookup.
MAX_SYMLINK_HOPS = 40
MAX_TARGET_BYTES = 4095
#: Bytes tolerated after a tar's end marker (record padding is 10 KiB).
MAX_TRAILER = 64 * 2**20

Kind = Literal["file", "dir", "symlink"]

_DRIVE = re.compile(r"^[A-Za-z]:")
_SPECIAL_BITS = (
    (stat.S_ISUID, "setuid bit"),
    (stat.S_ISGID, "setgid bit"),
    (stat.S_ISVTX, "sticky bit"),
)
#: What a damaged archive raises while being read; all become IntegrityError.
_CORRUPT = (
    tarfile.TarError,
    zipfile.BadZipFile,
    EOFError,
    lzma.LZMAError,
    zlib.error,
    gzip.BadGzipFile,
)
_DISK_FULL = {errno.ENOSPC, errno.EDQUOT}
#: Opens the archive's bytes for reading: its file, or a download still arriving.
Opener = Callable[[], BinaryIO]
_TAR_SUFFIXES = {".tar.xz": "xz", ".txz": "xz", ".tar.gz": "gz", ".tgz": "gz", ".tar": ""}
_ZIP_SUFFIXES = (".zip", ".whl")
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
_ZIP_METHODS = {zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA}
_ZIP_REFUSED = {
    stat.S_IFCHR: "character device",
    stat.S_IFBLK: "block device",
    stat.S_IFIFO: "FIFO",
    stat.S_IFSOCK: "socket",
}
_OPEN_FLAGS = (
    os.O_WRONLY
    | os.O_CREAT
    | os.O_EXCL
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)


@dataclass(frozen=True, slots=True)
class Limits:
    """Caps on what one archive may expand to; over any of them it is refused whole."""

    max_members: int = 200_000
    #: Uncompressed bytes of all files together.
    max_total_bytes: int = 64 * 2**30
    #: Uncompressed bytes over the archive file's size (zip bombs, xz bombs).
    max_ratio: float = 200.0


DEFAULT_LIMITS = Limits()


def extract_archive(
    archive: Path,
    destination: Path,
    *,
    limits: Limits = DEFAULT_LIMITS,
    strip_top: bool = False,
    opener: Opener | None = None,
    cancel: threading.Event | None = None,
) -> list[Path]:
    """Extract a .tar.xz/.tar.gz/.tar/.zip/.whl into ``destination``, safely.

    ``destination`` must exist and be empty.  Returns the top-level entries
    created in it.  With ``strip_top`` the archive must hold exactly one top
    directory, whose contents land directly in ``destination`` (NVIDIA redist
    archives: ``cuda_nvcc-linux-x86_64-13.0.48-archive/bin/...``).  A hostile
    or damaged archive raises :class:`IntegrityError` and leaves it empty.

    ``opener`` reads the archive from elsewhere than the file ``archive`` (whose
    name still tells the format): a file still downloading, whose reads wait for
    their bytes (:class:`cudaup.download.Arrival`).  Setting ``cancel`` stops it between
    members (:class:`cudaup.parallel.CancelledError`), the destination cleared.
    """
    _require_empty(archive, destination)
    with _reading(archive, opener) as reader:
        try:
            if isinstance(reader, _TarReader):
                planned = _extract_in_one_pass(
                    reader, archive, destination, limits, strip_top, cancel
                )
            else:
                planned = _plan(reader, archive, limits, strip_top)
                _check_space(archive, destination, sum(member.size for member in planned))
                _write(reader, planned, archive, destination, cancel)
        except BaseException:
            _clear(destination)
            raise
    return [destination / top for top in dict.fromkeys(member.parts[0] for member in planned)]


def archive_members(
    archive: Path, *, strip_top: bool = False, limits: Limits = DEFAULT_LIMITS
) -> list[str]:
    """The normalized paths (``bin/nvcc``; directories too) the archive would create.

    The archive passes the same checks as :func:`extract_archive`, so a caller
    can plan around these names (conflicts between components, records).
    """
    with _reading(archive) as reader:
        return ["/".join(member.parts) for member in _plan(reader, archive, limits, strip_top)]


# ---------------------------------------------------------------------------
# Reading: one member list for both formats
# ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Member:
    name: str  # as stored in the archive, for messages
    kind: Kind
    mode: int  # permission bits as stored, special bits included
    size: int = 0  # uncompressed bytes, files only
    target: str = ""  # symlinks only
    ref: Any = None  # the TarInfo or ZipInfo to read the data back with
    parts: tuple[str, ...] = ()  # the path below the destination, set by _plan


class _UnsafeMemberError(Exception):
    """A member breaks a rule; the message is the reason, the caller adds the names."""


def _refusal(archive: Path, member: str, reason: str) -> IntegrityError:
    shown = member if member.isprintable() else repr(member)
    return IntegrityError(f"{archive.name}: {shown}: {reason}")


class _Reader(Protocol):
    size: int  # of the archive file, for the compression-ratio limit

    def members(self) -> Iterator[_Member]: ...
    def open(self, member: _Member) -> IO[bytes]: ...
    def close(self) -> None: ...


class _Stream(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...
    def tell(self) -> int: ...
    def seek(self, pos: int, whence: int = 0, /) -> int: ...
    def close(self) -> None: ...


class _Tap:
    """A decompressed tar stream that remembers its last read.

    tarfile ends the member list silently at a truncated or garbled header;
    only the block it last read tells that apart from the real end marker.
    """

    def __init__(self, raw: _Stream) -> None:
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


class _TarReader:
    def __init__(self, archive: Path, compression: str, opener: Opener) -> None:
        self.archive = archive
        self.size = _size_of(opener)
        raw: _Stream
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

    def members(self) -> Iterator[_Member]:
        # Lazily: a refusal stops before tarfile decompresses the next member.
        for info in self.tar:
            kind = None if info.issparse() else _TAR_KINDS.get(info.type)
            if kind is None:
                reason = "sparse file" if info.issparse() else _TAR_REFUSED.get(info.type)
                raise _refusal(self.archive, info.name, reason or f"member type {info.type!r}")
            size = info.size if kind == "file" else 0
            yield _Member(info.name, kind, info.mode, size, info.linkname, info)
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

    def open(self, member: _Member) -> IO[bytes]:
        data = self.tar.extractfile(member.ref)
        if data is None:  # pragma: no cover - only files are opened
            raise _refusal(self.archive, member.name, "has no data")
        return data

    def close(self) -> None:
        self.tar.close()
        self.stream.close()


class _ZipReader:
    def __init__(self, archive: Path, opener: Opener) -> None:
        self.archive = archive
        self.opener = opener
        self.source = opener()
        try:
            self.size = self.source.seek(0, io.SEEK_END)
            self.zip = zipfile.ZipFile(self.source)
        except BaseException:
            self.source.close()
            raise

    def members(self) -> Iterator[_Member]:
        for info in self.zip.infolist():
            yield self._member(info)

    def _member(self, info: zipfile.ZipInfo) -> _Member:
        name = info.filename
        if info.flag_bits & 0x1:
            raise _refusal(self.archive, name, "encrypted member")
        if info.compress_type not in _ZIP_METHODS:
            raise _refusal(self.archive, name, f"compression method {info.compress_type}")
        unix = info.external_attr >> 16  # 0: made on Windows, no unix mode
        file_type = stat.S_IFMT(unix)
        if file_type == stat.S_IFLNK:
            return _Member(name, "symlink", stat.S_IMODE(unix), target=self._target(info), ref=info)
        if file_type not in {0, stat.S_IFREG, stat.S_IFDIR}:
            reason = _ZIP_REFUSED.get(file_type, f"file type {file_type:#o}")
            raise _refusal(self.archive, name, reason)
        is_dir = file_type == stat.S_IFDIR or name.replace("\\", "/").endswith("/")
        mode = stat.S_IMODE(unix) if unix else (0o755 if is_dir else 0o644)
        if is_dir:
            return _Member(name, "dir", mode, ref=info)
        return _Member(name, "file", mode, info.file_size, ref=info)

    def _target(self, info: zipfile.ZipInfo) -> str:
        """A zip symlink keeps its target as the entry's content."""
        if info.file_size > MAX_TARGET_BYTES:
            raise _refusal(self.archive, info.filename, "symlink target too long")
        try:
            return self.zip.read(info).decode()
        except UnicodeDecodeError:
            raise _refusal(self.archive, info.filename, "symlink target is not UTF-8") from None

    def open(self, member: _Member) -> IO[bytes]:
        info = member.ref
        if (
            _isal is not None
            and isinstance(info, zipfile.ZipInfo)
            and info.compress_type == zipfile.ZIP_DEFLATED
        ):
            return _Inflater(self.opener, info)  # type: ignore[return-value]
        return self.zip.open(info)

    def close(self) -> None:
        self.zip.close()
        self.source.close()


class _Inflater(io.RawIOBase):
    """A deflated zip member inflated by ISA-L (2-3x CPython's zlib), CRC-checked.

    Each member gets its own file handle, so members decompress in parallel without
    zipfile's shared-file lock.  Corruption raises ``zipfile.BadZipFile``, as zipfile would.
    """

    def __init__(self, opener: Opener, info: zipfile.ZipInfo) -> None:
        assert _isal is not None
        self._file = opener()
        self._file.seek(info.header_offset)
        header = self._file.read(30)
        if len(header) != 30 or header[:4] != b"PK\x03\x04":
            self._file.close()
            raise zipfile.BadZipFile(f"bad local header for {info.filename}")
        name_length, extra_length = (
            int.from_bytes(header[26:28], "little"),
            int.from_bytes(header[28:30], "little"),
        )
        self._file.seek(info.header_offset + 30 + name_length + extra_length)
        self._left = info.compress_size
        self._inflate = _isal.decompressobj(-15)
        self._crc = 0
        self._expected = info.CRC
        self._pending = b""
        self._done = False

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        assert _isal is not None
        while not self._pending and not self._done:
            chunk = self._file.read(min(self._left, CHUNK)) if self._left else b""
            self._left -= len(chunk)
            try:
                self._pending = self._inflate.decompress(chunk) if chunk else self._inflate.flush()
            except _INFLATE_ERROR as exc:
                raise zipfile.BadZipFile(f"corrupt deflate data ({exc})") from None
            self._crc = _isal.crc32(self._pending, self._crc)
            if not chunk:
                self._done = True
                if self._crc != self._expected:
                    raise zipfile.BadZipFile("CRC-32 mismatch")
        if size < 0 or size >= len(self._pending):
            data, self._pending = self._pending, b""
        else:
            data, self._pending = self._pending[:size], self._pending[size:]
        return data

    def close(self) -> None:
        self._file.close()
        super().close()


def _open(archive: Path, opener: Opener) -> _Reader:
    name = archive.name.lower()
    if name.endswith(_ZIP_SUFFIXES):
        return _ZipReader(archive, opener)
    for suffix, compression in _TAR_SUFFIXES.items():
        if name.endswith(suffix):
            return _TarReader(archive, compression, opener)
    raise UsageError(
        f"{archive.name}: unsupported archive type; expected .tar.xz, .tar.gz, .tar, .zip or .whl"
    )


def _file_opener(archive: Path) -> Opener:
    return lambda: archive.open("rb")


def _size_of(opener: Opener) -> int:
    with opener() as source:
        return source.seek(0, io.SEEK_END)


@contextlib.contextmanager
def _reading(archive: Path, opener: Opener | None = None) -> Iterator[_Reader]:
    """Open the archive; whatever a damaged one raises becomes an IntegrityError."""
    try:
        with contextlib.closing(_open(archive, opener or _file_opener(archive))) as reader:
            yield reader
    except _CORRUPT as exc:
        raise IntegrityError(f"{archive.name}: corrupt or truncated archive ({exc})") from exc


# ---------------------------------------------------------------------------
# Checking: every member, before it is written
# ---------------------------------------------------------------------------
class _Checker:
    """The checks of every member, fed one member at a time in archive order."""

    def __init__(self, archive: Path, size: int, limits: Limits, strip_top: bool) -> None:
        self.archive = archive
        self.archive_size = max(size, 1)
        self.limits = limits
        self.strip_top = strip_top
        self.kinds: dict[tuple[str, ...], Kind] = {}
        self.parents: set[tuple[str, ...]] = set()
        self.links: dict[tuple[str, ...], str] = {}
        self.link_names: dict[tuple[str, ...], str] = {}
        self.count = 0
        self.total = 0
        self.top: str | None = None

    def add(self, member: _Member) -> _Member | None:
        """The member with its path set, or None for one that creates nothing (``./``)."""
        self.count += 1
        self.total += member.size
        try:
            _check_limits(self.count, self.total, self.archive_size, self.limits)
            _check_mode(member.mode)
            parts = _split(member.name)
            if self.strip_top and parts:
                self.top = self.top or parts[0]
                parts = _strip(parts, self.top, member.kind)
            if not parts:
                if member.kind == "dir":
                    return None  # "./" or the stripped top directory itself
                raise _UnsafeMemberError("empty name")
            _check_place(parts, member.kind, self.kinds, self.parents)
        except _UnsafeMemberError as exc:
            raise _refusal(self.archive, member.name, str(exc)) from None
        if member.kind == "symlink":
            self.links[parts] = member.target
            self.link_names[parts] = member.name
        return replace(member, parts=parts)

    def finish(self) -> None:
        """The checks that need every member: where each symlink leads."""
        if self.strip_top and self.top is None:
            raise IntegrityError(
                f"{self.archive.name}: empty archive, expected one top-level directory"
            )
        for parts, target in self.links.items():
            try:
                _resolve(parts[:-1], target, self.links)
            except _UnsafeMemberError as exc:
                raise _refusal(self.archive, self.link_names[parts], str(exc)) from None


def _plan(reader: _Reader, archive: Path, limits: Limits, strip_top: bool) -> list[_Member]:
    """Check every member and return those to write, with their paths set."""
    checker = _Checker(archive, reader.size, limits, strip_top)
    planned = [
        checked for member in reader.members() if (checked := checker.add(member)) is not None
    ]
    checker.finish()
    return planned


def _check_limits(count: int, total: int, archive_size: int, limits: Limits) -> None:
    if count > limits.max_members:
        raise _UnsafeMemberError(
            f"more than {limits.max_members} members, over the limit (a zip bomb?)"
        )
    if total > limits.max_total_bytes:
        raise _UnsafeMemberError(
            f"more than {limits.max_total_bytes} bytes uncompressed, over the limit (a zip bomb?)"
        )
    if total > limits.max_ratio * archive_size:
        raise _UnsafeMemberError(
            f"expands to more than {limits.max_ratio:g} times the archive's {archive_size} "
            "bytes, over the compression-ratio limit (a zip bomb?)"
        )


def _check_mode(mode: int) -> None:
    for bit, name in _SPECIAL_BITS:
        if mode & bit:
            raise _UnsafeMemberError(name)


def _split(name: str) -> tuple[str, ...]:
    """The components of a member name; ``.`` and empty ones dropped."""
    if not name:
        raise _UnsafeMemberError("empty name")
    if "\x00" in name:
        raise _UnsafeMemberError("NUL in name")
    path = name.replace("\\", "/")
    if path.startswith("/"):
        raise _UnsafeMemberError("absolute path")
    parts = tuple(part for part in path.split("/") if part not in {"", "."})
    if ".." in parts:
        raise _UnsafeMemberError("'..' in path")
    if any(_DRIVE.match(part) for part in parts):
        # Windows joins "C:x" as a drive-relative path, anywhere in the name.
        raise _UnsafeMemberError("drive letter in path")
    return parts


def _strip(parts: tuple[str, ...], top: str, kind: Kind) -> tuple[str, ...]:
    if parts[0] != top:
        raise _UnsafeMemberError(f"outside the single top-level directory {top}/")
    if len(parts) == 1 and kind != "dir":
        raise _UnsafeMemberError("the top-level entry is not a directory")
    return parts[1:]


def _check_place(
    parts: tuple[str, ...],
    kind: Kind,
    kinds: dict[tuple[str, ...], Kind],
    parents: set[tuple[str, ...]],
) -> None:
    """No duplicates, and every parent is a plain directory, in any member order."""
    if parts in kinds:
        raise _UnsafeMemberError("duplicate member")
    if parts in parents and kind != "dir":
        raise _UnsafeMemberError(f"is a {kind}, but other members lie inside it")
    for depth in range(1, len(parts)):
        prefix = parts[:depth]
        above = kinds.get(prefix, "dir")
        if above == "symlink":
            raise _UnsafeMemberError(f"path goes through the symlink {'/'.join(prefix)}")
        if above != "dir":
            raise _UnsafeMemberError(f"{'/'.join(prefix)} is not a directory")
        parents.add(prefix)
    kinds[parts] = kind


def _resolve(
    start: tuple[str, ...], target: str, links: dict[tuple[str, ...], str]
) -> tuple[str, ...]:
    """Follow ``target`` from directory ``start`` through the archive's own symlinks.

    Each link met on the way is expanded where it is met, as the kernel does,
    so ``up -> ..`` then ``x -> up/..`` is seen to leave the tree.  Purely
    lexical otherwise: a ``..`` that would climb above the root is refused even
    if the kernel would have stopped at a missing component first.
    """
    hops = 0

    def walk(at: list[str], target: str) -> list[str]:
        nonlocal hops
        if not target or "\x00" in target:
            raise _UnsafeMemberError("empty symlink target")
        path = target.replace("\\", "/")
        if path.startswith("/") or _DRIVE.match(path):
            raise _UnsafeMemberError(f"symlink to absolute path {target!r}")
        for part in path.split("/"):
            if part in {"", "."}:
                continue
            if part == "..":
                if not at:
                    raise _UnsafeMemberError(f"symlink to {target!r} leads outside the tree")
                at.pop()
                continue
            at.append(part)
            linked = links.get(tuple(at))
            if linked is not None:
                hops += 1
                if hops > MAX_SYMLINK_HOPS:
                    raise _UnsafeMemberError("too many levels of symbolic links")
                at = walk(at[:-1], linked)
        return at

    return tuple(walk(list(start), target))


def _check_space(archive: Path, destination: Path, needed: int) -> None:
    free = shutil.disk_usage(destination).free
    if needed > free:
        raise InsufficientSpaceError(
            f"{archive.name}: extracting needs {needed} bytes ({needed / 2**30:.2f} GiB) "
            f"in {destination}, but only {free} bytes ({free / 2**30:.2f} GiB) are free"
        )


def _require_empty(archive: Path, destination: Path) -> None:
    try:
        with os.scandir(destination) as entries:
            if next(entries, None) is None:
                return
    except (FileNotFoundError, NotADirectoryError):
        raise CudaupError(
            f"cannot extract {archive.name}: {destination} is not an existing directory"
        ) from None
    raise CudaupError(f"cannot extract {archive.name} into {destination}: it is not empty")


# ---------------------------------------------------------------------------
# Writing: never following, never replacing
# ---------------------------------------------------------------------------
def _final_mode(member: _Member) -> int:
    """The archive's rwx bits, less group/other write; the owner can always rw(x)."""
    mode = member.mode & 0o755
    return mode | (0o700 if member.kind == "dir" else 0o600)


def _usable_cpus() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1  # pragma: no cover - macOS, Windows


#: Members at least this big are decompressed in parallel when the format allows it (zip):
#: inflating releases the GIL, and NVIDIA's wheels hold a few 30-80 MB binaries each.
PARALLEL_MEMBER = 1024 * 1024
#: One core is left to what runs beside an extraction (downloads: TLS, hashing, writes;
#: other archives): on 2 CPUs, inflating members side by side made a cold pypi install
#: ~10% slower, not faster (measured: 1.28 s with 4 workers, 1.14 s with 1).
PARALLEL_WORKERS = max(1, min(4, _usable_cpus() - 1))


def _extract_in_one_pass(
    reader: _TarReader,
    archive: Path,
    destination: Path,
    limits: Limits,
    strip_top: bool,
    cancel: threading.Event | None = None,
) -> list[_Member]:
    """A tar's members, each checked and then written as the stream reaches it.

    A compressed tar can only be read front to back: listing it first and then
    writing it would decompress it twice (twice the time for a .tar.xz).  Each
    member is checked against everything before it; symlinks, the one kind that
    could redirect a later member, are created last, after every member has been
    checked and each link's target resolved.  A refusal partway leaves what was
    written in the destination for :func:`extract_archive` to clear.
    """
    checker = _Checker(archive, reader.size, limits, strip_top)
    made: set[tuple[str, ...]] = set()
    planned: list[_Member] = []
    links: list[_Member] = []
    budget = -1  # bytes known to be free; measured again only when a member needs more
    for member in reader.members():
        check_cancelled(cancel)
        checked = checker.add(member)
        if checked is None:
            continue
        planned.append(checked)
        if checked.kind == "symlink":
            links.append(checked)
            continue
        if checked.size > budget:
            budget = shutil.disk_usage(destination).free
            if checked.size > budget:
                raise InsufficientSpaceError(
                    f"{archive.name}: {checked.name} needs {checked.size} bytes in "
                    f"{destination}, but only {budget} bytes ({budget / 2**30:.2f} GiB) are free"
                )
        budget -= checked.size
        with _explained(archive, destination, checked):
            _write_member(reader, checked, destination, made)
    checker.finish()
    for link in links:
        with _explained(archive, destination, link):
            _write_member(reader, link, destination, made)
    return planned


def _write(
    reader: _Reader,
    planned: list[_Member],
    archive: Path,
    destination: Path,
    cancel: threading.Event | None = None,
) -> None:
    made: set[tuple[str, ...]] = set()
    deferred: list[_Member] = []
    parallel = isinstance(reader, _ZipReader)
    for member in planned:
        check_cancelled(cancel)
        if parallel and member.kind == "file" and member.size >= PARALLEL_MEMBER:
            with _explained(archive, destination, member):
                _make_dirs(destination, member.parts[:-1], made)
            deferred.append(member)
            continue
        with _explained(archive, destination, member):
            _write_member(reader, member, destination, made)
    if deferred:

        def one(member: _Member) -> None:
            check_cancelled(cancel)
            with _explained(archive, destination, member):
                _write_member(reader, member, destination, made)

        map_concurrently(one, deferred, workers=PARALLEL_WORKERS)


def _write_member(
    reader: _Reader, member: _Member, destination: Path, made: set[tuple[str, ...]]
) -> None:
    path = destination.joinpath(*member.parts)
    _make_dirs(destination, member.parts[:-1], made)
    if member.kind == "dir":
        _make_dirs(destination, member.parts, made)
        path.chmod(_final_mode(member))
    elif member.kind == "symlink":
        path.symlink_to(member.target)
    else:
        with reader.open(member) as source:
            _write_file(source, path, member)


@contextlib.contextmanager
def _explained(archive: Path, destination: Path, member: _Member) -> Iterator[None]:
    """Turn what can go wrong while writing one member into cudaup's errors."""
    try:
        yield
    except _UnsafeMemberError as exc:
        raise _refusal(archive, member.name, str(exc)) from None
    except FileExistsError:
        # Only possible where names collide that the checks saw as distinct
        # (a case-insensitive filesystem): never write through what is there.
        raise _refusal(archive, member.name, "already exists in the destination") from None
    except OSError as exc:
        if exc.errno in _DISK_FULL:
            raise InsufficientSpaceError(
                f"{archive.name}: the disk filled up while extracting {member.name} "
                f"into {destination}"
            ) from None
        raise


def _make_dirs(destination: Path, parts: tuple[str, ...], made: set[tuple[str, ...]]) -> None:
    """Create each level of ``parts``; an existing level must be a real directory."""
    for depth in range(1, len(parts) + 1):
        prefix = parts[:depth]
        if prefix in made:
            continue
        path = destination.joinpath(*prefix)
        try:
            path.mkdir(0o755)
        except FileExistsError:
            if not stat.S_ISDIR(path.lstat().st_mode):
                raise
        made.add(prefix)


def _write_file(source: IO[bytes], path: Path, member: _Member) -> None:
    """Stream one member into a new file; its size must match the header's."""
    fd = os.open(path, _OPEN_FLAGS, 0o600)
    with os.fdopen(fd, "wb") as out:
        written = 0
        while chunk := source.read(CHUNK):
            written += len(chunk)
            if written > member.size:
                raise _UnsafeMemberError(f"holds more than the {member.size} bytes its header says")
            out.write(chunk)
        if written != member.size:
            raise _UnsafeMemberError(f"truncated: {written} of {member.size} bytes")
        if hasattr(os, "fchmod"):
            os.fchmod(out.fileno(), _final_mode(member))
    if not hasattr(os, "fchmod"):  # pragma: no cover - Windows
        path.chmod(_final_mode(member))


def _clear(destination: Path) -> None:
    """Remove what a failed extraction wrote: the destination started empty."""
    for child in list(destination.iterdir()):
        with contextlib.suppress(OSError):
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
