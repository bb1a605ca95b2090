"""What ``plan`` reads from wheels themselves, cached by (URL, sha256).

The fact: every CUDA signal a wheel carries, read by :mod:`zipfile` over a
:class:`~cudaup.net.ranged_file.RangedFile` (HTTP range requests: the zip's tail
for the central directory, then only what each signal needs): the
shared libraries its extension modules link (the start of a few members, up to
the ELF dynamic string table; or on to ``.dynamic`` wherever it lies), the CUDA
libraries its small objects (else its bundled libraries) load by name, a bundled
CUDA toolchain, one object per CUDA runtime, and the CUDA its version module
declares.  Range reads cannot be checked against the file's hash (that needs every
byte); they are evidence for a plan, never bytes installed.

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
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cudaup.errors import SourceFormatError
from cudaup.net.http import HttpClient
from cudaup.net.ranged_file import RangedFile, wheel_archive
from cudaup.plan.lines import (
    Evidence,
    declared_evidence,
    is_cuda_library,
    library_evidence,
    loaded_evidence,
    per_runtime_line,
    runtimes_evidence,
    toolchain_evidence,
)
from cudaup.resolve.pypi import DistFile
from cudaup.util.atomic import atomic_write

if TYPE_CHECKING:  # the ELF reader loads where a wheel is read: a warm plan reads none
    from cudaup.plan.elf import Layout
    from cudaup.util.parallel import Stop

SCHEMA = 4
#: At most this many extension modules are read per wheel, and this much of each, inflated.
MEMBERS = 4
PREFIX_LIMIT = 16 * 1024 * 1024
#: Past the prefix, a member is read on to its ``.dynamic`` (in ranges that grow to
#: :data:`~cudaup.net.ranged_file.STREAM_CHUNK`), inflated at most this much at a time.
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
#: Libraries auditwheel bundles that are CPU code (``lib<name>-<hash>.so…``: numpy's
#: OpenBLAS, PyAV's FFmpeg, pillow's codecs, OpenMP): not read through for CUDA names.
#: Any other bundled library is (ctranslate2's ``libctranslate2-….so``).
_CPU_LIBRARY = re.compile(
    r"lib(?:scipy_openblas|openblas\w*|gfortran|quadmath|gomp|iomp|tbb|gcc_s|stdc\+\+|z|bz2"
    r"|lzma|zstd|lz4|brotli(?:common|dec|enc)|ssl|crypto|crypt|ffi|expat|xml2|png|jpeg"
    r"|turbojpeg|tiff|webp\w*|sharpyuv|openjp2|lcms2|freetype|harfbuzz|fribidi|xcb\w*|X\w*"
    r"|xkbcommon\w*|drm|asound|avif|aom|dav1d|SvtAv1\w+|vmaf|vpl"
    r"|av(?:codec|device|filter|format|util)|sw(?:resample|scale)|postproc|x26[45]|vpx"
    r"|opus|ogg|vorbis\w*|FLAC|mp3lame|sndfile|srt|Qt\d\w*|icu\w+|uuid|pcre\w*|glib\w*"
    r"|gobject\w*|yaml\w*|archive|hdf5\w*|sz|aec|geos\w*|gmp|gnutls|hogweed|nettle"
    r"|unistring|sodium|zmq|pq|ldap|lber|sasl2|krb5\w*|k5crypto|gssapi\w*|com_err"
    r"|keyutils|selinux)[-_.\d]"
)
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
            or loaded_evidence(project, version, self.loaded)
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
            entry = json.loads(self._path(key).read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
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
    def known(self, file: DistFile, through: bool = False) -> LinkedLibraries | None:
        """What :meth:`libraries` would answer without reading ``file``: its kept facts."""
        kind = _libraries_kind(through)
        key = self._key(file, kind)
        with self._lock(key):
            fact = self._cached(file, kind, key)
        return _linked(fact) if fact is not None else None

    def libraries(
        self,
        file: DistFile,
        *,
        through: bool = False,
        read: Callable[[str], tuple[int, bytes, int] | None] | None = None,
        stop: Stop | None = None,
        before_fetch: Callable[[], None] | None = None,
    ) -> LinkedLibraries:
        """Every CUDA signal ``file`` (a wheel) carries.  When its small objects name no
        CUDA library, the libraries auditwheel bundled beside them (but CPU ones) are
        read through for the ones they load by name; ``through``: its larger objects too
        (a request's own wheel).  ``read``: where the file's end may have been read
        already (the plan's index memo, for uv: ``ReadAhead.end_of``), asked only when
        the facts are not kept.  Once ``stop`` is set the range under way is cut off and no
        other is asked for: the read ends with :class:`~cudaup.errors.CudaupError`, and
        nothing is kept of it.  ``before_fetch`` is called before the facts are read over
        the network, when they are not kept (a line waits there for its turn), outside the
        file's lock: another line may read the same wheel meanwhile."""
        if before_fetch is not None:
            kept = self.known(file, through)
            if kept is not None:
                return kept
            before_fetch()
        kind = _libraries_kind(through)
        key = self._key(file, kind)
        with self._lock(key):
            fact = self._cached(file, kind, key)
            if fact is not None and (kept := _linked(fact)) is not None:
                return kept
            end = read(file.url) if read is not None else None
            ranged = RangedFile(self.http, file.url, end=end, stop=stop)
            with wheel_archive(ranged, file.url) as archive:
                linked = _LibraryReader(ranged, archive, through=through).read()
            self._remember(
                file,
                kind,
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


def _libraries_kind(through: bool) -> str:
    """The kind a wheel's libraries are kept under: read through, or not."""
    return "libraries-through" if through else "libraries"


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
class _LibraryReader:
    """One wheel's signals, read through :mod:`zipfile` over a :class:`RangedFile`."""

    def __init__(self, ranged: RangedFile, archive: zipfile.ZipFile, *, through: bool) -> None:
        self.ranged, self.archive, self.url = ranged, archive, ranged.url
        self.through = through

    @property
    def fetched(self) -> int:
        """Bytes this wheel's reads have fetched (bounded by :data:`READ_BUDGET`)."""
        return self.ranged.fetched

    def _inflated(self, member: zipfile.ZipInfo) -> Iterator[bytes]:
        """``member``'s bytes from its start, inflated, in order, in pieces that grow to
        :data:`INFLATE_CHUNK` (bounded: a member that inflates a thousandfold stays in
        chunks; one that inflates past its directory entry's size fails its CRC)."""
        if member.compress_type not in {zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED}:
            raise SourceFormatError(
                f"{self.url}: {member.filename} uses zip method {member.compress_type}"
            )
        step = 64 * 1024
        try:
            with self.archive.open(member) as stream:
                while piece := stream.read(step):
                    yield piece
                    step = min(step * 2, INFLATE_CHUNK)
        except zipfile.BadZipFile as exc:  # its CRC, its local header
            raise SourceFormatError(
                f"{self.url}: {member.filename} is not the {member.file_size} bytes its "
                f"directory entry gives ({exc})"
            ) from None

    def _needed(self, member: zipfile.ZipInfo) -> tuple[tuple[str, ...], bool, bytes]:
        """The libraries ``member`` links, whether that is all of them, and the bytes read
        (the start: the dynamic string table in the first segment when it is there alone;
        else the whole ``.dynamic`` section and the names it points at, wherever they lie)."""
        from cudaup.plan.elf import NeededStream, NotElfError, layout, scan  # noqa: PLC0415

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
        if member.compress_type == zipfile.ZIP_STORED:
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

    def _stored_needed(self, member: zipfile.ZipInfo, shape: Layout) -> tuple[str, ...] | None:
        """A stored member's needed names, read exactly: ``.dynamic``, then the strings."""
        from cudaup.plan.elf import dynamic_table, names_at  # noqa: PLC0415

        assert shape.dynamic is not None
        # The member's bytes start after its local header (30 bytes, then its name and
        # extra field, whose lengths the header gives at offset 26).
        head = self.ranged.exactly(member.header_offset, 30)
        name_length, extra_length = struct.unpack_from("<HH", head, 26)
        start = member.header_offset + 30 + name_length + extra_length
        offset, size = shape.dynamic
        if size == 0 or offset + size > member.file_size:
            return None
        table = dynamic_table(shape, self.ranged.exactly(start + offset, size))
        if table.strtab is None:
            return None
        if not table.needed:
            return ()
        low = table.strtab + min(table.needed)
        high = min(member.file_size, table.strtab + max(table.needed) + NAME_LIMIT)
        if not low < high:
            return None
        return names_at(self.ranged.exactly(start + low, high - low), low, table)

    def _whole(self, member: zipfile.ZipInfo) -> bytes:
        return b"".join(self._inflated(member))

    def read(self) -> LinkedLibraries:
        """Every signal, strongest first; the objects are read only when the wheel does not
        say its line itself."""
        members = self.archive.infolist()
        shared = [m for m in members if _SHARED_OBJECT.search(m.filename) and m.file_size > 0]
        bundled = [m for m in shared if _BUNDLED_DIR.search(m.filename)]
        own = sorted((m for m in shared if m not in bundled), key=lambda m: m.file_size)
        tools = tuple(m.filename for m in members if _CUDA_TOOL.search(m.filename))
        runtimes = tuple(m.filename for m in own if per_runtime_line(m.filename))
        declared = self._declared(members)
        # A bundled CUDA runtime (auditwheel's sgl_kernel.libs/libcudart-….so.12) names itself.
        found = {base for m in bundled if is_cuda_library(base := m.filename.rsplit("/", 1)[-1])}
        if declared or runtimes:
            # The package says its line itself (or one object per line): the objects need
            # not be read (paddle's libpaddle.so is 466 MB).
            return LinkedLibraries(
                tuple(sorted(found)), (), len(own), False, (), tools, runtimes, declared
            )
        read, complete, starts = self._link_all(own, found)
        loaded: set[str] = set()
        if not tools and not any(is_cuda_library(name) for name in found):
            loaded = self._loaded_by_name(own, starts)
            if not loaded:
                loaded = self._loaded_through(own, bundled)
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

    def _declared(self, members: list[zipfile.ZipInfo]) -> str:
        """What the package's version module says its CUDA is (``cuda_version = '11.8'``)."""
        versions = [
            m for m in members if _VERSION_FILE.match(m.filename) and m.file_size <= 64 * 1024
        ]
        for member in versions[:2]:
            text = self._whole(member).decode("utf-8", "replace")
            if match := _DECLARED_CUDA.search(text):
                return f"{member.filename} says {match.group(0).strip()}"
        return ""

    def _link_all(
        self, own: list[zipfile.ZipInfo], found: set[str]
    ) -> tuple[list[str], bool, dict[str, bytes]]:
        """The libraries the first few extension modules link, added to ``found`` (until a
        CUDA runtime is among them); the members read, whether that was all of it, and the
        bytes read of each."""
        read: list[str] = []
        complete = True
        starts: dict[str, bytes] = {}
        self._prefetch([m for m in own[:MEMBERS] if m.file_size <= LOADED_MEMBER_LIMIT])
        for member in own[:MEMBERS]:
            libraries, whole, start = self._needed(member)
            read.append(member.filename)
            starts[member.filename] = start
            found.update(libraries)
            complete = complete and whole
            if any(is_cuda_library(name) for name in found):
                return read, complete, starts
        return read, complete and len(own) <= MEMBERS, starts

    def _prefetch(self, members: list[zipfile.ZipInfo]) -> None:
        """Fetch small ``members`` whole at once, not one round trip after another
        (cuda-python's 12 scattered objects took 1.1 s of a plan that way): each one's
        local header, name and extra field (the directory's lengths, with room for a
        longer local extra) and its compressed bytes.  The sizes are the directory's word:
        a member that claims more compressed bytes than a small one can have is left to
        the reads that stop where its data ends, so a hostile directory costs no more."""
        self.ranged.prefetch(
            [
                (m.header_offset, m.header_offset + _local_span(m))
                for m in members
                if m.compress_size <= LOADED_MEMBER_LIMIT
            ]
        )

    def _loaded_by_name(self, own: list[zipfile.ZipInfo], starts: dict[str, bytes]) -> set[str]:
        """With no CUDA runtime linked and no toolchain of its own: the runtimes its small
        objects load by name (cuda-bindings dlopens libnvrtc.so.12), read whole."""
        from cudaup.plan.elf import loaded_by_name  # noqa: PLC0415

        loaded: set[str] = set()
        small = [m for m in own if m.file_size <= LOADED_MEMBER_LIMIT][:LOADED_MEMBERS]
        self._prefetch([m for m in small if len(starts.get(m.filename, b"")) < m.file_size])
        for member in small:
            data = starts.get(member.filename, b"")
            if len(data) < member.file_size:
                data = self._whole(member)
            loaded.update(loaded_by_name(data))
        return loaded

    def _loaded_through(
        self, own: list[zipfile.ZipInfo], bundled: list[zipfile.ZipInfo]
    ) -> set[str]:
        """When no small object names a CUDA library: the libraries bundled beside them
        (auditwheel's ``….libs/``) but CPU ones (:data:`_CPU_LIBRARY`), and with
        ``through`` the larger objects, smallest first, each read through (within
        :data:`READ_BUDGET`) for every name it holds, up to the first that holds one.
        ctranslate2's wheel links no CUDA runtime and its small objects load none; its
        bundled ``libctranslate2-….so`` (80 MB) carries CUDA kernels with the runtime
        linked in, and dlopens ``libcublas.so.12``.  Read through, not to the first name:
        an object that loads either major (cudnn-frontend's) names both.  Bundled
        libraries are read for a meta-package's children too (faster-whisper pulls in
        ctranslate2); larger objects only for a request's own wheel (reading
        flashinfer-python's children's cost 70 MB and 1-5 s a cold plan)."""
        from cudaup.plan.elf import loaded_in  # noqa: PLC0415

        large = [m for m in own if m.file_size > LOADED_MEMBER_LIMIT] if self.through else []
        large += [
            m
            for m in bundled
            if not is_cuda_library(base := m.filename.rsplit("/", 1)[-1])
            and not _CPU_LIBRARY.match(base)
        ]
        for member in sorted(large, key=lambda m: m.file_size)[:LOADED_MEMBERS]:
            if self.fetched > READ_BUDGET:
                break
            if found := loaded_in(self._within_budget(self._inflated(member))):
                return set(found)
        return set()

    def _within_budget(self, pieces: Iterator[bytes]) -> Iterator[bytes]:
        for piece in pieces:
            yield piece
            if self.fetched > READ_BUDGET:
                return


def _local_span(member: zipfile.ZipInfo) -> int:
    """Bytes from ``member``'s local header to the end of its compressed data, as the
    central directory suggests them (a local extra field longer by more than 1 KiB just
    costs the read one more range)."""
    return 30 + len(member.filename.encode()) + len(member.extra) + 1024 + member.compress_size
