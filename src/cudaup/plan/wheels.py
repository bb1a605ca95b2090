"""What ``plan`` reads from wheels themselves, cached by (URL, sha256).

The fact: every CUDA signal a wheel carries, read with HTTP range requests (the
zip's tail for the central directory, then only what each signal needs): the
shared libraries its extension modules link (the start of a few members, up to
the ELF dynamic string table; or on to ``.dynamic`` wherever it lies), the CUDA
libraries its small objects load by name, a bundled CUDA toolchain, one object
per CUDA runtime, and the CUDA its version module declares.  Range reads cannot be checked against the file's hash
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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cudaup.errors import SourceFormatError
from cudaup.net.http import HttpClient
from cudaup.plan.elf import (
    Layout,
    NeededStream,
    NotElfError,
    dynamic_table,
    layout,
    loaded_by_name,
    names_at,
    scan,
)
from cudaup.plan.lines import (
    Evidence,
    declared_evidence,
    is_cuda_library,
    library_evidence,
    per_runtime_line,
    runtimes_evidence,
    toolchain_evidence,
)
from cudaup.resolve.pypi import DistFile
from cudaup.util.atomic import atomic_write

SCHEMA = 2
#: Bytes asked for at a time; the tail read usually holds the whole central directory.
CHUNK = 256 * 1024
#: At most this many extension modules are read per wheel, and this much of each, inflated.
MEMBERS = 4
PREFIX_LIMIT = 16 * 1024 * 1024
#: Past the prefix, a member is read on to its ``.dynamic`` in ranges up to this size,
#: and inflated at most this much at a time.
STREAM_CHUNK = 8 * 1024 * 1024
INFLATE_CHUNK = 16 * 1024 * 1024
#: Bytes one wheel's reads may fetch: past it, an object's answer is what was read, said
#: to be incomplete (libmxnet.so's .dynamic lies behind 489 MB of compressed code).
READ_BUDGET = 1024 * 1024 * 1024
#: Objects this small are read whole for the CUDA libraries they load by name.
LOADED_MEMBER_LIMIT = 1024 * 1024
LOADED_MEMBERS = 32
#: The longest needed name read past the last needed offset.
NAME_LIMIT = 256
_SHARED_OBJECT = re.compile(r"\.so(?:\.\d+)*$")
_BUNDLED_DIR = re.compile(r"(?:^|/)[^/]+\.libs/")
#: A bundled CUDA toolchain (triton's backends/nvidia/bin/ptxas, include/cuda.h).
_CUDA_TOOL = re.compile(r"(?:^|/)(?:bin/(?:ptxas|cuobjdump|nvdisasm|nvcc)|include/cuda\.h)$")
#: A package's own version module (paddle/version/__init__.py).
_VERSION_FILE = re.compile(r"^[A-Za-z0-9_]+/(?:version/__init__|version|cuda_version)\.py$")
_DECLARED_CUDA = re.compile(
    r"^[ \t]*cuda(?:_version)?[ \t]*(?::[^=\n]*)?=[ \t]*['\"]\d+\.\d+(?:\.\d+)?['\"]", re.M
)


@dataclass(frozen=True, slots=True)
class LinkedLibraries:
    """The libraries the wheel's extension modules link, and how far that was read."""

    libraries: tuple[str, ...]
    members_read: tuple[str, ...]
    members_total: int
    complete: bool
    #: CUDA libraries its small objects load by name (``dlopen("libnvrtc.so.12")``).
    loaded: tuple[str, ...] = ()
    #: Bundled CUDA tools (``triton/backends/nvidia/bin/ptxas``, ``…/include/cuda.h``).
    tools: tuple[str, ...] = ()
    #: Objects built one per CUDA runtime (``libbitsandbytes_cuda128.so``).
    runtimes: tuple[str, ...] = ()
    #: What its version module says (``paddle/version/__init__.py says cuda_version = '11.8'``).
    declared: str = ""

    def evidence(self, project: str, version: str) -> Evidence | None:
        """The strongest CUDA signal read: what the package declares, one object per
        runtime, a linked runtime, a bundled toolchain (any line), a runtime loaded by name."""
        return (
            declared_evidence(project, version, self.declared)
            or runtimes_evidence(project, version, self.runtimes)
            or library_evidence(project, version, self.libraries)
            or toolchain_evidence(project, version, self.tools)
            or library_evidence(project, version, self.loaded, how="loads {} by name")
        )

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
                    "loaded": list(linked.loaded),
                    "tools": list(linked.tools),
                    "runtimes": list(linked.runtimes),
                    "declared": linked.declared,
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
    loaded, tools, runtimes = (_strings(fact.get(k)) for k in ("loaded", "tools", "runtimes"))
    declared = fact.get("declared")
    if not isinstance(complete, bool) or loaded is None or tools is None or runtimes is None:
        return None
    if not isinstance(declared, str):
        return None
    return LinkedLibraries(
        tuple(libraries),
        tuple(members),
        total,
        complete,
        tuple(loaded),
        tuple(tools),
        tuple(runtimes),
        declared,
    )


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
        #: Bytes this wheel's reads have fetched (bounded by :data:`READ_BUDGET`).
        self.fetched = 0

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
                self.fetched += len(body)
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
            self.fetched += len(body)
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

    def _inflated(self, member: _Member, first: int = CHUNK) -> Iterator[bytes]:
        """``member``'s bytes from its start, inflated, in order (the ranges asked for grow
        from ``first`` to :data:`STREAM_CHUNK`)."""
        head = self._range(member.offset, member.offset + max(first, 4096) - 1)
        if head[:4] != b"PK\x03\x04":
            raise SourceFormatError(f"{self.url}: no local header where {member.name} should start")
        if member.method not in {0, 8}:
            raise SourceFormatError(f"{self.url}: {member.name} uses zip method {member.method}")
        name_length, extra_length = struct.unpack_from("<HH", head, 26)
        start = member.offset + 30 + name_length + extra_length
        stop = start + member.compressed
        compressed = head[30 + name_length + extra_length : stop - member.offset]
        position = start + len(compressed)
        inflater = zlib.decompressobj(-15) if member.method == 8 else None
        produced, step = 0, CHUNK
        while True:
            pending = compressed
            while pending:
                if inflater is None:
                    piece, pending = pending, b""
                else:
                    try:
                        # Bounded: a member that inflates a thousandfold stays in chunks.
                        piece = inflater.decompress(pending, INFLATE_CHUNK)
                    except zlib.error as exc:
                        raise SourceFormatError(
                            f"{self.url}: {member.name} does not inflate ({exc})"
                        ) from None
                    pending = inflater.unconsumed_tail
                produced += len(piece)
                if produced > member.size:
                    raise SourceFormatError(
                        f"{self.url}: {member.name} inflates past the {member.size} bytes "
                        "its directory entry gives"
                    )
                if piece:
                    yield piece
                if inflater is not None and inflater.eof:
                    return
            if position >= stop:
                return
            step = min(step * 2, STREAM_CHUNK)
            compressed = self._range(position, min(stop, position + step) - 1)
            position += len(compressed)

    def _needed(self, member: _Member) -> tuple[tuple[str, ...], bool, bytes]:
        """The libraries ``member`` links, whether that is all of them, and the bytes read
        (the start: the dynamic string table in the first segment when it is there alone;
        else the whole ``.dynamic`` section and the names it points at, wherever they lie)."""
        chunks = self._inflated(member)
        data = b""
        want = 4096
        result = None
        for chunk in chunks:
            data += chunk
            if len(data) < want:
                continue
            try:
                result = scan(data)
            except NotElfError:
                return (), True, b""
            if result.complete:
                return result.libraries, True, data
            if len(data) >= result.needed or max(len(data), result.needed) > PREFIX_LIMIT:
                break  # .dynamic lies behind the code: find it from the headers, read on
            want = result.needed
        else:
            try:
                result = scan(data)
            except NotElfError:
                return (), True, b""
            return result.libraries, result.complete, data
        shape = layout(data)
        if shape.dynamic is None:
            return result.libraries, False, data
        if member.method == 0:
            names = self._stored_needed(member, shape)
            return (names, True, data) if names is not None else (result.libraries, False, data)
        stream = NeededStream(shape)
        stream.feed(data)
        names = stream.names()
        for chunk in chunks:
            if names is not None or self.fetched > READ_BUDGET:
                break
            stream.feed(chunk)
            names = stream.names()
        if names is None:
            return result.libraries, False, data
        return names, True, data

    def _stored_needed(self, member: _Member, shape: Layout) -> tuple[str, ...] | None:
        """A stored member's needed names, read exactly: ``.dynamic``, then the strings."""
        assert shape.dynamic is not None
        head = self._range(member.offset, member.offset + 29)
        name_length, extra_length = struct.unpack_from("<HH", head, 26)
        start = member.offset + 30 + name_length + extra_length
        offset, size = shape.dynamic
        if size == 0 or offset + size > member.size:
            return None
        table = dynamic_table(shape, self._range(start + offset, start + offset + size - 1))
        if table.strtab is None:
            return None
        if not table.needed:
            return ()
        low = table.strtab + min(table.needed)
        high = min(member.size, table.strtab + max(table.needed) + NAME_LIMIT)
        if not low < high:
            return None
        return names_at(self._range(start + low, start + high - 1), low, table)

    def _whole(self, member: _Member) -> bytes:
        return b"".join(self._inflated(member, member.compressed + 30 + 1024))

    def read(self) -> LinkedLibraries:
        members = self._directory()
        shared = [m for m in members if _SHARED_OBJECT.search(m.name) and m.size > 0]
        bundled = [m for m in shared if _BUNDLED_DIR.search(m.name)]
        own = sorted((m for m in shared if m not in bundled), key=lambda m: m.size)
        tools = tuple(m.name for m in members if _CUDA_TOOL.search(m.name))
        runtimes = tuple(m.name for m in own if per_runtime_line(m.name))
        declared = ""
        versions = [m for m in members if _VERSION_FILE.match(m.name) and m.size <= 64 * 1024]
        for member in versions[:2]:
            text = self._whole(member).decode("utf-8", "replace")
            if match := _DECLARED_CUDA.search(text):
                declared = f"{member.name} says {match.group(0).strip()}"
                break
        # A bundled CUDA runtime (auditwheel's sgl_kernel.libs/libcudart-….so.12) names itself.
        found = {
            m.name.rsplit("/", 1)[-1] for m in bundled if is_cuda_library(m.name.rsplit("/", 1)[-1])
        }
        if declared or runtimes:
            # The package says its line itself (or one object per line): the objects need
            # not be read (paddle's libpaddle.so is 466 MB).
            return LinkedLibraries(
                tuple(sorted(found)), (), len(own), False, (), tools, runtimes, declared
            )
        read: list[str] = []
        complete = True
        starts: dict[str, bytes] = {}
        for member in own[:MEMBERS]:
            libraries, whole, start = self._needed(member)
            read.append(member.name)
            starts[member.name] = start
            found.update(libraries)
            complete = complete and whole
            if any(is_cuda_library(name) for name in found):
                break
        else:
            complete = complete and len(own) <= MEMBERS
        loaded: set[str] = set()
        if not tools and not any(is_cuda_library(name) for name in found):
            # No CUDA runtime linked and no toolchain of its own: the ones it loads by name (cuda-bindings dlopens
            # libnvrtc.so.12), read from the small objects whole.
            small = [m for m in own if m.size <= LOADED_MEMBER_LIMIT][:LOADED_MEMBERS]
            for member in small:
                data = starts.get(member.name, b"")
                if len(data) < member.size:
                    data = self._whole(member)
                loaded.update(loaded_by_name(data))
        return LinkedLibraries(
            tuple(sorted(found)),
            tuple(read),
            len(own),
            complete,
            tuple(sorted(loaded)),
            tools,
            runtimes,
            declared,
        )


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
