"""What ``plan`` reads from wheels themselves, cached by (URL, sha256).

The fact: the shared libraries a wheel's extension modules link, read with HTTP
range requests (the zip's tail for the central directory, then only the start
of a few compressed members, up to the ELF dynamic string table).  Range reads cannot be checked against the file's hash
(that needs every byte); they are evidence for a plan, never bytes installed.

A fact is stored under ``<cache>/plan/wheels/`` keyed by the file's URL and the
sha256 the index gave, so a warm plan asks nothing it has read before; an entry
that does not read back as written is ignored and read again.  Files the index
gives no sha256 for are read every time (their URL alone does not pin their bytes).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import struct
import threading
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cudaup.errors import SourceFormatError
from cudaup.net.http import HttpClient
from cudaup.plan.elf import NotElfError, scan
from cudaup.plan.lines import is_cuda_library
from cudaup.resolve.pypi import DistFile
from cudaup.util.atomic import atomic_write

SCHEMA = 1
#: A meta-package is a few KB; anything bigger is refused rather than downloaded.
SMALL_WHEEL_LIMIT = 1024 * 1024
#: Bytes asked for at a time; the tail read usually holds the whole central directory.
CHUNK = 256 * 1024
#: At most this many extension modules are read per wheel, and this much of each, inflated.
MEMBERS = 4
PREFIX_LIMIT = 16 * 1024 * 1024
_SHARED_OBJECT = re.compile(r"\.so(?:\.\d+)*$")
_BUNDLED_DIR = re.compile(r"(?:^|/)[^/]+\.libs/")


@dataclass(frozen=True, slots=True)
class LinkedLibraries:
    """The libraries the wheel's extension modules link, and how far that was read."""

    libraries: tuple[str, ...]
    members_read: tuple[str, ...]
    members_total: int
    complete: bool

    def describe(self) -> str:
        if not self.members_total:
            return "it ships no shared object"
        read = f"{len(self.members_read)} of {self.members_total} shared objects read"
        return (
            read if self.complete else read + ", not all of them to the end of their string tables"
        )


class WheelFacts:
    """The (URL, sha256)-keyed store of facts read from wheels, and the readers."""

    def __init__(self, http: HttpClient, root: Path) -> None:
        self.http = http
        self.root = root
        self._memory: dict[str, dict[str, Any]] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    # -- cache -----------------------------------------------------------------
    def _key(self, file: DistFile, kind: str) -> str:
        return hashlib.sha256(f"{kind}\n{file.url}\n{file.sha256}".encode()).hexdigest()

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def _cached(self, file: DistFile, kind: str, key: str) -> dict[str, Any] | None:
        if key in self._memory:
            return self._memory[key]
        if file.sha256 is None:
            return None
        try:
            entry = json.loads(self._path(key).read_text())
        except (OSError, ValueError):
            return None
        if (
            not isinstance(entry, dict)
            or entry.get("schema") != SCHEMA
            or entry.get("kind") != kind
            or entry.get("url") != file.url
            or entry.get("sha256") != file.sha256
            or not isinstance(entry.get("fact"), dict)
        ):
            return None
        fact: dict[str, Any] = entry["fact"]
        self._memory[key] = fact
        return fact

    def _remember(self, file: DistFile, kind: str, key: str, fact: dict[str, Any]) -> None:
        self._memory[key] = fact
        if file.sha256 is None:
            return
        entry = {"schema": SCHEMA, "kind": kind, "url": file.url, "sha256": file.sha256}
        # A cache that cannot be written costs a re-read next time, nothing more.
        with contextlib.suppress(OSError):
            atomic_write(self._path(key), json.dumps({**entry, "fact": fact}))

    def _lock(self, key: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())

    # -- facts -----------------------------------------------------------------
    def libraries(self, file: DistFile) -> LinkedLibraries:
        key = self._key(file, "libraries")
        with self._lock(key):
            fact = self._cached(file, "libraries", key)
            if fact is not None and (known := _linked(fact)) is not None:
                return known
            linked = _LibraryReader(self.http, file).read()
            self._remember(
                file,
                "libraries",
                key,
                {
                    "libraries": list(linked.libraries),
                    "members_read": list(linked.members_read),
                    "members_total": linked.members_total,
                    "complete": linked.complete,
                },
            )
            return linked


def _strings(value: object) -> list[str] | None:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    return None


def _linked(fact: dict[str, Any]) -> LinkedLibraries | None:
    libraries, members = _strings(fact.get("libraries")), _strings(fact.get("members_read"))
    total, complete = fact.get("members_total"), fact.get("complete")
    if libraries is None or members is None or not isinstance(total, int):
        return None
    if not isinstance(complete, bool):
        return None
    return LinkedLibraries(tuple(libraries), tuple(members), total, complete)


# ----------------------------------------------------------------------------
# Reading a remote zip by ranges
# ----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Member:
    name: str
    method: int
    compressed: int
    size: int
    offset: int


class _LibraryReader:
    def __init__(self, http: HttpClient, file: DistFile) -> None:
        self.http, self.file, self.url = http, file, file.url
        self.size = 0

    def _range(self, start: int | None, end: int | None) -> bytes:
        """Bytes ``start..end`` (inclusive), or the last ``end`` bytes when ``start`` is None."""
        spec = f"bytes=-{end}" if start is None else f"bytes={start}-{end}"
        raw = self.http.open("GET", self.url, {"Range": spec})
        done = False
        try:
            if raw.status == 200:
                length = int(raw.headers.get("Content-Length") or 0)
                if not length or length > CHUNK:
                    raise SourceFormatError(f"{self.url} does not honour Range requests")
                body = raw.read()  # a file smaller than one range: the server sent it all
                self.size, done = len(body), True
                return body if start is None else body[start : (end or 0) + 1]
            if raw.status != 206:
                raise SourceFormatError(f"{self.url} answered HTTP {raw.status} to a range request")
            match = re.fullmatch(r"bytes (\d+)-(\d+)/(\d+)", raw.headers.get("Content-Range", ""))
            if not match:
                raise SourceFormatError(f"{self.url} sent no usable Content-Range")
            first, last, total = (int(g) for g in match.groups())
            asked = (end or 0) - (start or 0) + 1 if start is not None else (end or 0)
            if (start is not None and first != start) or not 0 <= last - first < asked:
                raise SourceFormatError(f"{self.url} answered another range than asked")
            body = raw.read(last - first + 2)
            if len(body) != last - first + 1:
                raise SourceFormatError(
                    f"{self.url} sent {len(body)} bytes for a range of {last - first + 1}"
                )
            self.size, done = total, True
            return body
        finally:
            if not done:
                raw.close()  # unread bytes must not reach the next request on this connection
            raw.release_conn()

    def _directory(self) -> list[_Member]:
        tail = self._range(None, 64 * 1024)
        tail_start = self.size - len(tail)
        end = tail.rfind(b"PK\x05\x06")
        if end < 0 or len(tail) - end < 22:
            raise SourceFormatError(f"{self.url} has no zip end-of-directory record in its tail")
        count, cd_size, cd_offset = struct.unpack_from("<HII", tail, end + 10)
        if 0xFFFFFFFF in (cd_size, cd_offset) or count == 0xFFFF:
            locator = tail.rfind(b"PK\x06\x07", 0, end)
            if locator < 0:
                raise SourceFormatError(f"{self.url} is a zip64 file without a locator")
            (record,) = struct.unpack_from("<Q", tail, locator + 8)
            data = self._slice(tail, tail_start, record, 56)
            count, cd_size, cd_offset = struct.unpack_from("<QQQ", data, 32)
        if cd_offset + cd_size > self.size or cd_size > 64 * 1024 * 1024:
            raise SourceFormatError(f"{self.url} has a central directory outside the file")
        directory = self._slice(tail, tail_start, cd_offset, cd_size)
        return _parse_directory(directory, count, self.url)

    def _slice(self, tail: bytes, tail_start: int, offset: int, length: int) -> bytes:
        if offset >= tail_start and offset + length <= tail_start + len(tail):
            return tail[offset - tail_start : offset - tail_start + length]
        return self._range(offset, offset + length - 1)

    def _prefix(self, member: _Member) -> tuple[bytes, bool]:
        """The start of ``member``, inflated as far as its string table needs."""
        head = self._range(member.offset, member.offset + CHUNK - 1)
        if head[:4] != b"PK\x03\x04":
            raise SourceFormatError(f"{self.url}: no local header where {member.name} should start")
        name_length, extra_length = struct.unpack_from("<HH", head, 26)
        start = member.offset + 30 + name_length + extra_length
        compressed = head[30 + name_length + extra_length :]
        position = start + len(compressed)
        inflater = zlib.decompressobj(-15) if member.method == 8 else None
        if member.method not in {0, 8}:
            raise SourceFormatError(f"{self.url}: {member.name} uses zip method {member.method}")
        data = b""
        want = 4096
        stop = start + member.compressed
        while True:
            piece = compressed[: max(0, stop - (position - len(compressed)))]
            try:
                data += inflater.decompress(piece, PREFIX_LIMIT - len(data)) if inflater else piece
            except zlib.error as exc:
                raise SourceFormatError(
                    f"{self.url}: {member.name} does not inflate ({exc})"
                ) from None
            if len(data) >= want:
                try:
                    result = scan(data)
                except NotElfError:
                    return b"", True
                if result.complete or len(data) >= result.needed:
                    return data, True
                want = result.needed
            if position >= stop or len(data) >= PREFIX_LIMIT or want > PREFIX_LIMIT:
                return data, False
            compressed = self._range(position, min(stop, position + CHUNK) - 1)
            position += len(compressed)

    def read(self) -> LinkedLibraries:
        members = self._directory()
        shared = [m for m in members if _SHARED_OBJECT.search(m.name) and m.size > 0]
        bundled = [m for m in shared if _BUNDLED_DIR.search(m.name)]
        # A bundled CUDA runtime (auditwheel's sgl_kernel.libs/libcudart-….so.12) names itself.
        found = {
            m.name.rsplit("/", 1)[-1] for m in bundled if is_cuda_library(m.name.rsplit("/", 1)[-1])
        }
        own = sorted((m for m in shared if m not in bundled), key=lambda m: m.size)
        read: list[str] = []
        complete = True
        for member in own[:MEMBERS]:
            data, whole = self._prefix(member)
            read.append(member.name)
            if data:
                try:
                    result = scan(data)
                except NotElfError:
                    continue
                found.update(result.libraries)
                whole = whole and result.complete
            complete = complete and whole
            if any(is_cuda_library(name) for name in found):
                break
        else:
            complete = complete and len(own) <= MEMBERS
        return LinkedLibraries(tuple(sorted(found)), tuple(read), len(own), complete)


def _parse_directory(data: bytes, count: int, url: str) -> list[_Member]:
    members: list[_Member] = []
    at = 0
    for _ in range(count):
        if data[at : at + 4] != b"PK\x01\x02" or at + 46 > len(data):
            raise SourceFormatError(f"{url} has a damaged central directory")
        flags, method, compressed, size, name_length, extra_length, comment_length, offset = (
            struct.unpack_from("<HH8xIIHHH8xI", data, at + 8)
        )
        name_bytes = data[at + 46 : at + 46 + name_length]
        name = name_bytes.decode("utf-8" if flags & 0x800 else "cp437", "replace")
        extra = data[at + 46 + name_length : at + 46 + name_length + extra_length]
        compressed, size, offset = _zip64(extra, compressed, size, offset)
        members.append(_Member(name, method, compressed, size, offset))
        at += 46 + name_length + extra_length + comment_length
    return members


def _zip64(extra: bytes, compressed: int, size: int, offset: int) -> tuple[int, int, int]:
    at = 0
    while at + 4 <= len(extra):
        kind, length = struct.unpack_from("<HH", extra, at)
        if kind == 1:
            values = list(struct.unpack_from(f"<{length // 8}Q", extra, at + 4))
            if size == 0xFFFFFFFF and values:
                size = values.pop(0)
            if compressed == 0xFFFFFFFF and values:
                compressed = values.pop(0)
            if offset == 0xFFFFFFFF and values:
                offset = values.pop(0)
        at += 4 + length
    return compressed, size, offset
