"""Reading zip archives and wheels; deflated members inflated by ISA-L where present."""

from __future__ import annotations

import io
import stat
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from cudaup.install.extract.policy import CHUNK, MAX_TARGET_BYTES, Member, Opener, refusal

_isal: Any
try:  # ISA-L's inflate: the same deflate, 2-3x faster than CPython's zlib
    from isal import isal_zlib as _isal
except ImportError:  # pragma: no cover - platforms without its wheels fall back to zipfile
    _isal = None
_INFLATE_ERROR: type[Exception] = getattr(_isal, "error", zlib.error)
_ZIP_METHODS = {zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA}
_ZIP_REFUSED = {
    stat.S_IFCHR: "character device",
    stat.S_IFBLK: "block device",
    stat.S_IFIFO: "FIFO",
    stat.S_IFSOCK: "socket",
}


class ZipReader:
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

    def members(self) -> Iterator[Member]:
        for info in self.zip.infolist():
            yield self._member(info)

    def _member(self, info: zipfile.ZipInfo) -> Member:
        name = info.filename
        if info.flag_bits & 0x1:
            raise refusal(self.archive, name, "encrypted member")
        if info.compress_type not in _ZIP_METHODS:
            raise refusal(self.archive, name, f"compression method {info.compress_type}")
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
        try:
            return self.zip.read(info).decode()
        except UnicodeDecodeError:
            raise refusal(self.archive, info.filename, "symlink target is not UTF-8") from None

    def open(self, member: Member) -> IO[bytes]:
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
