"""The libraries a shared object links, read from its bytes (pure).

A wheel that names no CUDA dependency can still be built for one CUDA major:
its extension modules link ``libcudart.so.12``.  That name lives in the ELF
dynamic string table, which linkers place in the first, read-only segment,
right after the program headers, while the ``.dynamic`` section that points at
it sits behind the code (hundreds of megabytes into a kernel library).  So this
reads what it can from a prefix: the ``DT_NEEDED`` entries when ``.dynamic``
and the string table are both inside it, else every ``lib….so.N`` string of the
first segment (the dynamic string table holds the needed names, version needs
and the object's own soname; nothing else there looks like a soname).

:func:`scan` says how many bytes from the start it needs for a complete answer,
so a reader fetches only that much.  When the first segment also holds code, only
``.dynamic`` says which of its strings are needed names, and it may lie anywhere
(890 MB into ``libmxnet.so``): :func:`layout` locates it from the program headers,
and :class:`NeededStream` reads it (and the names it points at) from a sequential
pass over the bytes, keeping only the soname-like strings and the section itself.
:func:`loaded_by_name` finds the CUDA libraries a binary loads by name (``dlopen``).
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

PT_LOAD, PT_DYNAMIC = 1, 2
DT_NULL, DT_NEEDED, DT_STRTAB, DT_STRSZ = 0, 1, 5, 10
PF_X = 1
_SONAME = re.compile(rb"(?<=\x00)(lib[A-Za-z0-9_+.-]*?\.so(?:\.\d+)+)\x00")
#: Any string a DT_NEEDED entry can name (``ld-linux-x86-64.so.2`` too), at its offset.
_NEEDED_NAME = re.compile(rb"(?<=\x00)([A-Za-z0-9_+.-]{1,200}\.so(?:\.[0-9]+)*)\x00")
#: A CUDA library named in a string, as a ``dlopen`` call names it.
_LOADED = re.compile(rb"(lib(?:cudart|nvrtc|nvJitLink)\.so\.[0-9]+)\x00")
#: Bytes kept across chunk boundaries so that no name is cut in two.
_CARRY = 256


class NotElfError(ValueError):
    """The bytes are not an ELF shared object cudaup can read."""


@dataclass(frozen=True, slots=True)
class ElfScan:
    libraries: tuple[str, ...]
    #: Whether the answer covers every library the object links.
    complete: bool
    #: Bytes from the start a complete answer needs (the reader fetches up to this).
    needed: int


@dataclass(frozen=True, slots=True)
class _Segment:
    kind: int
    flags: int
    offset: int
    vaddr: int
    filesz: int


def _header(data: bytes) -> tuple[str, int, int, int]:
    """(struct byte order, program header offset, entry size, count)."""
    if len(data) < 64:
        raise NotElfError("shorter than an ELF header")
    if data[:4] != b"\x7fELF":
        raise NotElfError("no ELF magic")
    width, order = data[4], data[5]
    if width not in {1, 2} or order not in {1, 2}:
        raise NotElfError("unknown ELF class or byte order")
    endian = "<" if order == 1 else ">"
    if width == 2:
        (phoff,) = struct.unpack_from(endian + "Q", data, 0x20)
        phentsize, phnum = struct.unpack_from(endian + "HH", data, 0x36)
    else:
        (phoff,) = struct.unpack_from(endian + "I", data, 0x1C)
        phentsize, phnum = struct.unpack_from(endian + "HH", data, 0x2A)
    if phnum == 0 or phentsize < (56 if width == 2 else 32):
        raise NotElfError("no program headers")
    return endian + ("Q" if width == 2 else "I"), phoff, phentsize, phnum


def _segments(data: bytes, word: str, phoff: int, size: int, count: int) -> list[_Segment]:
    wide = word.endswith("Q")
    segments = []
    for index in range(count):
        at = phoff + index * size
        if wide:
            kind, flags, offset, vaddr, _paddr, filesz = struct.unpack_from(
                word[0] + "IIQQQQ", data, at
            )
        else:
            kind, offset, vaddr, _paddr, filesz, _memsz, flags = struct.unpack_from(
                word[0] + "IIIIIII", data, at
            )
        segments.append(_Segment(kind, flags, offset, vaddr, filesz))
    return segments


def _to_offset(segments: list[_Segment], vaddr: int) -> int | None:
    for segment in segments:
        if segment.kind == PT_LOAD and segment.vaddr <= vaddr < segment.vaddr + segment.filesz:
            return segment.offset + (vaddr - segment.vaddr)
    return None


def _needed(data: bytes, word: str, segments: list[_Segment]) -> tuple[list[str] | None, int]:
    """DT_NEEDED names when ``.dynamic`` and the string table are in ``data``; else the
    bytes that would take (0: this object cannot be read this way)."""
    dynamic = next((s for s in segments if s.kind == PT_DYNAMIC), None)
    if dynamic is None:
        return None, 0
    end = dynamic.offset + dynamic.filesz
    if len(data) < end:
        return None, end
    step = struct.calcsize(word) * 2
    entries: list[tuple[int, int]] = []
    for at in range(dynamic.offset, end - step + 1, step):
        tag, value = struct.unpack_from(word[0] + word[1] * 2, data, at)
        if tag == DT_NULL:
            break
        entries.append((tag, value))
    table = next((v for t, v in entries if t == DT_STRTAB), None)
    size = next((v for t, v in entries if t == DT_STRSZ), None)
    start = _to_offset(segments, table) if table is not None else None
    if start is None or size is None:
        return None, 0
    if len(data) < start + size:
        return None, max(end, start + size)
    strings = data[start : start + size]
    names = []
    for tag, value in entries:
        if tag == DT_NEEDED and value < size:
            stop = strings.find(b"\0", value)
            names.append(strings[value : stop if stop >= 0 else size].decode("ascii", "replace"))
    return names, max(end, start + size)


def scan(data: bytes) -> ElfScan:
    """The libraries ``data`` (a prefix of a shared object) shows it links."""
    word, phoff, size, count = _header(data)
    headers_end = phoff + size * count
    if len(data) < headers_end:
        return ElfScan((), False, headers_end)
    segments = _segments(data, word, phoff, size, count)
    names, exact_need = _needed(data, word, segments)
    if names is not None:
        return ElfScan(tuple(sorted(set(names))), True, exact_need)
    first = next((s for s in segments if s.kind == PT_LOAD and s.offset == 0), None)
    if first is None:
        raise NotElfError("no loadable segment at the start")
    region = data[: min(len(data), first.filesz)]
    found = tuple(sorted({m.group(1).decode("ascii") for m in _SONAME.finditer(region)}))
    # The first segment is the dynamic string table's home only when it holds no code.
    whole = first.filesz if not first.flags & PF_X else None
    need_candidates = [n for n in (exact_need, whole) if n]
    need = min(need_candidates) if need_candidates else first.filesz
    complete = whole is not None and len(data) >= whole
    return ElfScan(found, complete, need)


# ----------------------------------------------------------------------------
# The whole dynamic section, wherever it lies
# ----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Layout:
    """Where an object's ``.dynamic`` lies (file offset and size), from its program headers."""

    word: str
    segments: tuple[_Segment, ...]
    dynamic: tuple[int, int] | None


def headers_needed(data: bytes) -> int:
    """Bytes from the start that hold the ELF header and every program header."""
    _word, phoff, size, count = _header(data)
    return phoff + size * count


def layout(data: bytes) -> Layout:
    """The layout of an object whose header and program headers ``data`` holds."""
    word, phoff, size, count = _header(data)
    if len(data) < phoff + size * count:
        raise NotElfError("the program headers lie past the bytes given")
    segments = _segments(data, word, phoff, size, count)
    dynamic = next((s for s in segments if s.kind == PT_DYNAMIC), None)
    where = (dynamic.offset, dynamic.filesz) if dynamic is not None else None
    return Layout(word, tuple(segments), where)


@dataclass(frozen=True, slots=True)
class DynamicTable:
    #: Offsets of the needed names in the string table.
    needed: tuple[int, ...]
    #: The string table's file offset and size (None: the section names none).
    strtab: int | None
    strsz: int


def dynamic_table(shape: Layout, raw: bytes) -> DynamicTable:
    """The DT_NEEDED offsets and the string table of the ``.dynamic`` bytes ``raw``."""
    step = struct.calcsize(shape.word) * 2
    entries: list[tuple[int, int]] = []
    for at in range(0, len(raw) - step + 1, step):
        tag, value = struct.unpack_from(shape.word[0] + shape.word[1] * 2, raw, at)
        if tag == DT_NULL:
            break
        entries.append((tag, value))
    table = next((v for t, v in entries if t == DT_STRTAB), None)
    size = next((v for t, v in entries if t == DT_STRSZ), 0)
    start = _to_offset(list(shape.segments), table) if table is not None else None
    needed = tuple(v for t, v in entries if t == DT_NEEDED and v < size)
    return DynamicTable(needed, start, size)


def names_at(strings: bytes, base: int, table: DynamicTable) -> tuple[str, ...] | None:
    """The needed names from ``strings`` (bytes of the string table from file offset
    ``base``); None when one of them lies outside it."""
    if table.strtab is None:
        return None
    names = []
    for value in table.needed:
        at = table.strtab + value - base
        stop = strings.find(b"\0", at) if 0 <= at < len(strings) else -1
        if stop < 0:
            return None
        names.append(strings[at:stop].decode("ascii", "replace"))
    return tuple(sorted(set(names)))


class NeededStream:
    """The needed names of an object fed to it in order, chunk by chunk: soname-like
    strings are kept with their offsets, ``.dynamic`` is kept whole, and the names are
    the strings at the offsets it points at.  Memory stays small however far it lies."""

    def __init__(self, shape: Layout) -> None:
        if shape.dynamic is None:
            raise NotElfError("no dynamic section")
        self.shape = shape
        self.position = 0
        self._tail = b""
        self._strings: dict[int, str] = {}
        self._dynamic = bytearray()
        self.table: DynamicTable | None = None

    @property
    def wanted(self) -> int:
        """How far the stream must go for an answer."""
        assert self.shape.dynamic is not None
        start, size = self.shape.dynamic
        if self.table is None or self.table.strtab is None:
            return start + size
        last = max(self.table.needed, default=0)
        return max(start + size, self.table.strtab + last + _CARRY)

    def feed(self, chunk: bytes) -> None:
        assert self.shape.dynamic is not None
        start, size = self.shape.dynamic
        base = self.position - len(self._tail)
        window = self._tail + chunk
        for match in _NEEDED_NAME.finditer(window):
            self._strings.setdefault(base + match.start(1), match.group(1).decode("ascii"))
        low, high = max(start, self.position), min(start + size, self.position + len(chunk))
        if low < high:
            self._dynamic += chunk[low - self.position : high - self.position]
        self.position += len(chunk)
        self._tail = window[-_CARRY:]
        if self.table is None and len(self._dynamic) >= size:
            self.table = dynamic_table(self.shape, bytes(self._dynamic))

    def names(self) -> tuple[str, ...] | None:
        """The needed names, once the stream has passed them (None: not yet, or a needed
        offset holds no name)."""
        if self.table is None or self.table.strtab is None or self.position < self.wanted:
            return None
        found = [self._strings.get(self.table.strtab + v) for v in self.table.needed]
        if any(name is None for name in found):
            return None
        return tuple(sorted({name for name in found if name is not None}))


def loaded_by_name(data: bytes) -> tuple[str, ...]:
    """CUDA libraries a binary names as strings (``dlopen("libnvrtc.so.12")``)."""
    return tuple(sorted({m.group(1).decode("ascii") for m in _LOADED.finditer(data)}))
