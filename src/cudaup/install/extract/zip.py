"""Reading zip archives and wheels: members inflated in bounded steps, by ISA-L where present.

A zip's central directory says how big each member is, and nothing makes it
true: a member listed as 1 KiB may inflate to a gigabyte.  So each member is
read by :class:`_MemberReader`, which inflates at most one block (1 MiB) per
call (``max_length``, the rest of the input kept as ``unconsumed_tail``) and
stops at the first byte beyond the listed size: memory stays bounded whatever
the archive claims, and a lying listing is refused as soon as it shows.  Only
the two methods wheels and NVIDIA's archives use are read: stored and deflate.
"""

from __future__ import annotations

import io
import stat
import threading
import zipfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, BinaryIO, Protocol

from cudaup.install.extract.policy import CHUNK, MAX_TARGET_BYTES, Member, Opener, refusal

_isal: Any
try:  # ISA-L's inflate: the same deflate, 2-3x faster than CPython's zlib
    from isal import isal_zlib as _isal
except ImportError:  # pragma: no cover - platforms without its wheels use zlib
    _isal = None
_ZIP_METHODS = {zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED}
_METHOD_NAMES = {zipfile.ZIP_BZIP2: "bzip2", zipfile.ZIP_LZMA: "lzma", 9: "deflate64"}
_ZIP_REFUSED = {
    stat.S_IFCHR: "character device",
    stat.S_IFBLK: "block device",
    stat.S_IFIFO: "FIFO",
    stat.S_IFSOCK: "socket",
}
_LOCAL_HEADER = 30
#: A member this small (compressed and as listed) is read whole through the archive's
#: own handle, not a handle of its own: NVIDIA's header wheels hold thousands of
#: them, and opening (and, while downloading, waiting on) a file per member cost more
#: than inflating it.  (A worker writing a batch of members reads them through a handle
#: of its own instead: :meth:`ZipReader.open`.)
SMALL_MEMBER = 256 * 1024


class ZipReader:
    def __init__(self, archive: Path, opener: Opener) -> None:
        self.archive = archive
        self.opener = opener
        self.source = opener()
        self._shared = threading.Lock()  # self.source's position, for small members
        try:
            self.size = self.source.seek(0, io.SEEK_END)
            self.zip = zipfile.ZipFile(self.source)
        except BaseException:
            self.source.close()
            raise

    def members(self) -> Iterator[Member]:
        for info in self.zip.infolist():
            yield self._member(info)

    def _member(self, info: zipfile.ZipInfo) -> Member:
        name = info.filename
        if info.flag_bits & 0x1:
            raise refusal(self.archive, name, "encrypted member")
        if info.compress_type not in _ZIP_METHODS:
            method = _METHOD_NAMES.get(info.compress_type, str(info.compress_type))
            raise refusal(
                self.archive,
                name,
                f"compression method {method} (wheels and NVIDIA archives use stored or deflate)",
            )
        unix = info.external_attr >> 16  # 0: made on Windows, no unix mode
        file_type = stat.S_IFMT(unix)
        if file_type == stat.S_IFLNK:
            return Member(name, "symlink", stat.S_IMODE(unix), target=self._target(info), ref=info)
        if file_type not in {0, stat.S_IFREG, stat.S_IFDIR}:
            reason = _ZIP_REFUSED.get(file_type, f"file type {file_type:#o}")
            raise refusal(self.archive, name, reason)
        is_dir = file_type == stat.S_IFDIR or name.replace("\\", "/").endswith("/")
        mode = stat.S_IMODE(unix) if unix else (0o755 if is_dir else 0o644)
        if is_dir:
            return Member(name, "dir", mode, ref=info)
        return Member(name, "file", mode, info.file_size, ref=info)

    def _target(self, info: zipfile.ZipInfo) -> str:
        """A zip symlink keeps its target as the entry's content."""
        if info.file_size > MAX_TARGET_BYTES:
            raise refusal(self.archive, info.filename, "symlink target too long")
        data = self._read_small(info)
        try:
            return data.decode()
        except UnicodeDecodeError:
            raise refusal(self.archive, info.filename, "symlink target is not UTF-8") from None

    def open(self, member: Member) -> IO[bytes]:
        """A reader of one member's bytes, checked as they are read: a small member read
        through the archive's shared handle, a bigger one through a handle of its own (so
        big ones can inflate side by side).  A worker's run of small members is read
        through its own handle by :meth:`read_run`.
        """
        info = member.ref
        assert isinstance(info, zipfile.ZipInfo)
        if info.compress_size <= SMALL_MEMBER and info.file_size <= SMALL_MEMBER:
            return io.BytesIO(self._read_small(info))
        return _MemberReader(self.opener(), info)  # type: ignore[return-value]

    def read_run(self, members: list[Member], through: BinaryIO) -> Iterator[bytes]:
        """The bytes of each of a run of members (each under :data:`RUN_MEMBER`, compressed
        and as listed; in archive order), checked as :meth:`open`'s reader checks them.

        The run is read through ``through`` with one read per window of up to a block
        (:data:`~cudaup.install.extract.policy.CHUNK`) where its members lie back to back,
        as a wheel's do: a worker writing NVIDIA's header wheel (CCCL: 1,718 files)
        otherwise spent more Python on each member (a reader object, five reads and
        seeks, two inflate calls) than on its bytes.  Each member is then a slice of the
        run, inflated by one call bounded by its listed size.  Nothing past the run's last
        byte is read: while the wheel downloads, those bytes may not be there yet.
        """
        start = stop = 0
        span = memoryview(b"")
        for member in members:
            info = member.ref
            assert isinstance(info, zipfile.ZipInfo)
            assert max(info.file_size, info.compress_size) < RUN_MEMBER, info.filename
            begin, end = info.header_offset, _end_guess(info)
            if begin < start or end > stop:
                # From this member to the run's end, at most a block past this member.
                start = begin
                stop = max(end, min(_end_guess(members[-1].ref), begin + CHUNK))
                span = _read_at(through, start, stop)
            at = begin - start + _data_offset(span[begin - start :], info)
            if start + at + info.compress_size > stop:  # its local header has an extra field
                stop = start + at + info.compress_size
                span = _read_at(through, start, stop)
            yield _checked_bytes(span[at : at + info.compress_size], info)

    def _read_small(self, info: zipfile.ZipInfo) -> bytes:
        """A small member's bytes (at most SMALL_MEMBER + 1 are ever held), checked alike."""
        with self._shared, _MemberReader(self.source, info, owned=False) as reader:
            return b"".join(iter(lambda: reader.read(CHUNK), b""))

    def close(self) -> None:
        self.zip.close()
        self.source.close()


#: A member read whole as part of a run (:meth:`ZipReader.read_run`) is under this size,
#: compressed and as listed: what one inflate call may make at most.
RUN_MEMBER = 1024 * 1024


def _end_guess(info: object) -> int:
    """Where a member's data ends in the archive if its local header carries no extra
    field (wheels' do not; for one that does :meth:`ZipReader.read_run` reads on)."""
    assert isinstance(info, zipfile.ZipInfo)
    encoding = "utf-8" if info.flag_bits & 0x800 else "cp437"
    name_length = len(info.orig_filename.encode(encoding, "replace"))
    return info.header_offset + _LOCAL_HEADER + name_length + info.compress_size


def _read_at(through: BinaryIO, start: int, stop: int) -> memoryview:
    through.seek(start)
    return memoryview(through.read(max(0, stop - start)))


def _data_offset(local: memoryview, info: zipfile.ZipInfo) -> int:
    """Where a member's data starts, counted from its local header at the start of
    ``local`` (which holds at least the header and its name): the header must be one,
    naming the member as the central directory does."""
    header = bytes(local[:_LOCAL_HEADER])
    if len(header) != _LOCAL_HEADER or header[:4] != b"PK\x03\x04":
        raise zipfile.BadZipFile(f"bad local header for {info.filename}")
    name_length = int.from_bytes(header[26:28], "little")
    extra_length = int.from_bytes(header[28:30], "little")
    name = bytes(local[_LOCAL_HEADER : _LOCAL_HEADER + name_length])
    try:
        shown = name.decode("utf-8" if info.flag_bits & 0x800 else "cp437")
    except UnicodeDecodeError:
        shown = ""
    if shown != info.orig_filename:
        raise zipfile.BadZipFile(f"the name of {info.filename} differs in its local header")
    return _LOCAL_HEADER + name_length + extra_length


def _checked_bytes(data: memoryview, info: zipfile.ZipInfo) -> bytes:
    """A small member's bytes from its compressed ``data``, bounded and checked as
    :class:`_MemberReader` checks them (size, the end of the deflate stream, CRC-32)."""
    crc32: Callable[[bytes, int], int]
    if info.compress_type != zipfile.ZIP_DEFLATED:
        _check_stored(info)
        out, crc32, ended = bytes(data), zlib.crc32, len(data) == info.compress_size
    else:
        inflate, crc32, errors = _inflater()
        try:
            out = inflate.decompress(data, info.file_size + 1)
        except errors as exc:
            raise zipfile.BadZipFile(f"{info.filename}: corrupt deflate data ({exc})") from None
        if len(out) > info.file_size:
            raise _holds_more(info)
        ended = inflate.eof and len(data) == info.compress_size
    _check_end(info, len(out), crc32(out, 0), ended=ended)
    return out


def _check_stored(info: zipfile.ZipInfo) -> None:
    if info.compress_size != info.file_size:
        raise zipfile.BadZipFile(
            f"{info.filename}: stored with {info.compress_size} bytes but listed as {info.file_size}"
        )


def _holds_more(info: zipfile.ZipInfo) -> zipfile.BadZipFile:
    return zipfile.BadZipFile(
        f"{info.filename} holds more than the {info.file_size} bytes the zip's listing says"
    )


def _check_end(info: zipfile.ZipInfo, produced: int, crc: int, *, ended: bool) -> None:
    """What a member must be once its data is read: a whole stream, of the listed size
    and CRC-32."""
    if not ended:
        raise zipfile.BadZipFile(f"{info.filename}: the compressed data ends early")
    if produced != info.file_size:
        raise zipfile.BadZipFile(
            f"{info.filename}: {produced} of the {info.file_size} bytes the zip's listing says"
        )
    if crc != info.CRC:
        raise zipfile.BadZipFile(f"{info.filename}: CRC-32 mismatch")


def compressed_size(member: Member) -> int:
    """The bytes a zip member takes in its archive (what reading it costs)."""
    info = member.ref
    assert isinstance(info, zipfile.ZipInfo)
    return info.compress_size


class _Inflate(Protocol):
    """What ISA-L's and zlib's raw-deflate decompressors both offer."""

    @property
    def eof(self) -> bool: ...
    @property
    def unconsumed_tail(self) -> bytes: ...
    def decompress(self, data: bytes | memoryview, max_length: int = 0, /) -> bytes: ...


def _inflater() -> tuple[_Inflate, Callable[[bytes, int], int], tuple[type[Exception], ...]]:
    """A raw-deflate decompressor, its CRC-32 function and the errors it raises."""
    if _isal is not None:
        return _isal.decompressobj(-15), _isal.crc32, (_isal.error, zlib.error)
    return zlib.decompressobj(-15), zlib.crc32, (zlib.error,)


class _MemberReader(io.RawIOBase):
    """One stored or deflated member, read with its own file handle, bounded and checked.

    Each call returns at most one block; inflating never produces more than one byte
    past the size the central directory lists, and that byte is refused.  At the end
    the size must be the listed one and the CRC-32 must match.  Own file handles let
    members decompress in parallel without zipfile's shared-file lock.  Damage raises
    ``zipfile.BadZipFile``, as zipfile would.
    """

    def __init__(self, source: BinaryIO, info: zipfile.ZipInfo, *, owned: bool = True) -> None:
        self._name = info.filename
        self._declared = info.file_size
        self._file = source
        self._owned = owned  # closed with this reader (else the caller's, left open)
        try:
            self._skip_local_header(info)
        except BaseException:
            self.close()
            raise
        self._left_in = info.compress_size
        self._left_out = info.file_size
        self._crc = 0
        self._inflate: _Inflate | None = None
        self._crc32: Callable[[bytes, int], int] = zlib.crc32
        self._errors: tuple[type[Exception], ...] = (zlib.error,)
        self._info = info
        if info.compress_type == zipfile.ZIP_DEFLATED:
            self._inflate, self._crc32, self._errors = _inflater()
        else:
            try:
                _check_stored(info)
            except BaseException:
                self.close()
                raise
        self._more = False  # the last inflate filled its limit: output may be pending
        self._done = False

    def _skip_local_header(self, info: zipfile.ZipInfo) -> None:
        self._file.seek(info.header_offset)
        header = self._file.read(_LOCAL_HEADER)
        name_length = int.from_bytes(header[26:28], "little") if len(header) >= 28 else 0
        local = memoryview(header + self._file.read(name_length))
        self._file.seek(info.header_offset + _data_offset(local, info))

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        want = CHUNK if size < 0 else min(size, CHUNK)
        while want and not self._done:
            data = self._stored(want) if self._inflate is None else self._inflated(want)
            if data:
                return data
        return b""

    def _compressed(self, size: int) -> bytes:
        data = self._file.read(min(size, self._left_in)) if self._left_in else b""
        self._left_in -= len(data)
        return data

    def _stored(self, want: int) -> bytes:
        data = self._compressed(want)
        if not data:
            self._finish(ended=self._left_in == 0)
        return self._account(data)

    def _inflated(self, want: int) -> bytes:
        assert self._inflate is not None
        inflate = self._inflate
        tail = inflate.unconsumed_tail
        data = tail or (b"" if self._more else self._compressed(CHUNK))
        if not data and not self._more:
            self._finish(ended=inflate.eof)
            return b""
        # One byte more than the listing allows is enough to prove it wrong.
        limit = min(want, self._left_out + 1)
        try:
            out = inflate.decompress(data, limit)
        except self._errors as exc:
            raise zipfile.BadZipFile(f"{self._name}: corrupt deflate data ({exc})") from None
        self._more = len(out) == limit
        out = self._account(out)
        if inflate.eof:
            self._finish(ended=True)
        return out

    def _account(self, data: bytes) -> bytes:
        self._left_out -= len(data)
        if self._left_out < 0:
            raise _holds_more(self._info)
        self._crc = self._crc32(data, self._crc)
        return data

    def _finish(self, *, ended: bool) -> None:
        self._done = True
        _check_end(self._info, self._declared - self._left_out, self._crc, ended=ended)

    def close(self) -> None:
        if self._owned:
            self._file.close()
        super().close()
