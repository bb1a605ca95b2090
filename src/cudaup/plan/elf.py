"""The libraries a shared object links, read from its bytes (pure).

A wheel that names no CUDA dependency can still be built for one CUDA major:
its extension modules link ``libcudart.so.12``.  That name lives in the ELF
dynamic string table, which linkers place in the first, read-only segment,
right after the program headers, while the ``.dynamic`` section that points at
it sits behind the code (hundreds of megabytes into a kernel library).  So this
reads what it can from a prefix: the ``DT_NEEDED`` entries when ``.dynamic``
and the string table are both inside it, else every ``lib….so.N`` string of the
first segment (the dynamic string table holds the needed names, version needs
and the object's own soname; nothing else there looks like a soname, versioned or not).

:func:`scan` says how many bytes from the start it needs for a complete answer,
so a reader fetches only that much.  When the first segment also holds code, only
``.dynamic`` says which of its strings are needed names, and it may lie anywhere
(890 MB into ``libmxnet.so``): :func:`layout` locates it from the program headers,
and :class:`NeededStream` reads it (and the names it points at) from a sequential
pass over the bytes, keeping only the soname-like strings and the section itself.
:func:`loaded_by_name` finds the CUDA libraries a binary loads by name (``dlopen``), and
:func:`loaded_in` in a binary read piece by piece.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

PT_LOAD, PT_DYNAMIC = 1, 2
DT_NULL, DT_NEEDED, DT_STRTAB, DT_STRSZ = 0, 1, 5, 10
PF_X = 1
#: A soname in the dynamic string table: versioned (``libcudart.so.12``) or not
#: (``libtorch.so``, ``libc10.so``: what extensions built against torch link).
_SONAME = re.compile(rb"(?<=\x00)(lib[A-Za-z0-9_+.-]*?\.so(?:\.\d+)*)\x00")
#: Any string a DT_NEEDED entry can name (``ld-linux-x86-64.so.2`` too), at its offset.
_NEEDED_NAME = re.compile(rb"(?<=\x00)([A-Za-z0-9_+.-]{1,200}\.so(?:\.[0-9]+)*)\x00")
#: A CUDA library named in a string, as a ``dlopen`` call names it.
_LOADED = re.compile(rb"(lib(?:cudart|nvrtc|nvJitLink|cublas|cublasLt)\.so\.[0-9]+)\x00")
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


def _dynamic_entries(
    data: Any, word: str, segments: list[_Segment], dynamic: _Segment
) -> tuple[list[tuple[int, int]], int | None, int | None]:
    """The ``.dynamic`` entries up to ``DT_NULL`` (all inside ``data``), and where the
    dynamic string table starts in the file and its size (None: not found)."""
    step = struct.calcsize(word) * 2
    entries: list[tuple[int, int]] = []
    for at in range(dynamic.offset, dynamic.offset + dynamic.filesz - step + 1, step):
        tag, value = struct.unpack_from(word[0] + word[1] * 2, data, at)
        if tag == DT_NULL:
            break
        entries.append((tag, value))
    table = next((v for t, v in entries if t == DT_STRTAB), None)
    size = next((v for t, v in entries if t == DT_STRSZ), None)
    return entries, _to_offset(segments, table) if table is not None else None, size


def _needed(data: bytes, word: str, segments: list[_Segment]) -> tuple[list[str] | None, int]:
    """DT_NEEDED names when ``.dynamic`` and the string table are in ``data``; else the
    bytes that would take (0: this object cannot be read this way)."""
    dynamic = next((s for s in segments if s.kind == PT_DYNAMIC), None)
    if dynamic is None:
        return None, 0
    end = dynamic.offset + dynamic.filesz
    if len(data) < end:
        return None, end
    entries, start, size = _dynamic_entries(data, word, segments, dynamic)
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


# -- the dynamic section and symbol table of a whole object ---------------------------------
#
# Reading symbols needs the section headers, which sit at the end of the file, so these take
# the whole object (an ``mmap`` does: only the pages read are loaded) rather than a prefix.

DT_SONAME, DT_RPATH, DT_RUNPATH = 14, 15, 29
SHT_DYNSYM, SHT_GNU_VERDEF, SHT_GNU_VERNEED, SHT_GNU_VERSYM = 11, 0x6FFFFFFD, 0x6FFFFFFE, 0x6FFFFFFF
STB_GLOBAL, STB_WEAK, STB_GNU_UNIQUE = 1, 2, 10
STV_DEFAULT, STV_PROTECTED = 0, 3
_VERSION_HIDDEN = 0x8000


@dataclass(frozen=True, slots=True)
class Dynamic:
    """What the loader reads first: the libraries needed, the object's own name, and where
    it looks (``DT_RPATH`` before ``LD_LIBRARY_PATH``, ``DT_RUNPATH`` after it)."""

    needed: tuple[str, ...]
    soname: str | None
    rpath: tuple[str, ...]
    runpath: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class UndefinedSymbol:
    name: str
    #: The version asked for (``GLIBC_2.34``) and the library named with it (``libc.so.6``).
    version: str | None
    library: str | None
    weak: bool


@dataclass(frozen=True, slots=True)
class DynamicSymbols:
    #: Exported definitions: (name, version or None).  A hidden, non-default version
    #: (``name@V``) still satisfies a reference that asks for it by that version.
    defined: frozenset[tuple[str, str | None]]
    undefined: tuple[UndefinedSymbol, ...]
    #: Whether the object versions its definitions (an unversioned definition then
    #: satisfies no versioned reference).
    versioned: bool

    def defines(self, symbol: UndefinedSymbol) -> bool:
        """Whether a reference to ``symbol`` binds here, as ``ld.so`` matches versions: by
        its version where it names one (an object that versions nothing answers any), else
        to the default version."""
        if symbol.version is not None and (symbol.name, symbol.version) in self.defined:
            return True
        if symbol.version is not None and self.versioned:
            return False
        return (symbol.name, None) in self.defined


def _text_at(data: Any, start: int, size: int, offset: int) -> str:
    if offset >= size:
        raise NotElfError("a name points past its string table")
    stop = data.find(b"\0", start + offset, start + size)
    end = stop if stop >= 0 else start + size
    return bytes(data[start + offset : end]).decode("utf-8", "replace")


@dataclass(frozen=True, slots=True)
class _Section:
    kind: int
    offset: int
    size: int
    link: int
    info: int
    entsize: int


def _sections(data: Any) -> tuple[str, list[_Section]]:
    """(struct byte order + word, the section headers) of a whole object."""
    word, _phoff, _size, _count = _header(bytes(data[:64]))
    wide = word.endswith("Q")
    endian = word[0]
    if wide:
        (shoff,) = struct.unpack_from(endian + "Q", data, 0x28)
        shentsize, shnum = struct.unpack_from(endian + "HH", data, 0x3A)
        layout, minimum = endian + "IIQQQQIIQQ", 64
    else:
        (shoff,) = struct.unpack_from(endian + "I", data, 0x20)
        shentsize, shnum = struct.unpack_from(endian + "HH", data, 0x2E)
        layout, minimum = endian + "IIIIIIIIII", 40
    if shoff == 0 or shnum == 0 or shentsize < minimum:
        raise NotElfError("no section headers")
    if shoff + shentsize * shnum > len(data):
        raise NotElfError("the section headers lie past the end of the file")
    sections = []
    for index in range(shnum):
        fields = struct.unpack_from(layout, data, shoff + index * shentsize)
        _name, kind, _flags, _addr, offset, size, link, info, _align, entsize = fields
        sections.append(_Section(kind, offset, size, link, info, entsize))
    for section in sections:
        if section.kind != 8 and section.offset + section.size > len(data):  # 8: SHT_NOBITS
            raise NotElfError("a section lies past the end of the file")
    return word, sections


def read_dynamic(data: Any) -> Dynamic:
    """The ``DT_NEEDED``, ``DT_SONAME``, ``DT_RPATH`` and ``DT_RUNPATH`` of a whole object."""
    word, phoff, size, count = _header(bytes(data[:64]))
    if len(data) < phoff + size * count:
        raise NotElfError("the program headers lie past the end of the file")
    segments = _segments(data, word, phoff, size, count)
    dynamic = next((s for s in segments if s.kind == PT_DYNAMIC), None)
    if dynamic is None:
        return Dynamic((), None, (), ())
    if dynamic.offset + dynamic.filesz > len(data):
        raise NotElfError("the dynamic section lies past the end of the file")
    entries, start, strsz = _dynamic_entries(data, word, segments, dynamic)
    if start is None or strsz is None or start + strsz > len(data):
        raise NotElfError("the dynamic string table cannot be found")

    def text(tag: int) -> list[str]:
        return [_text_at(data, start, strsz, value) for t, value in entries if t == tag]

    def paths(tag: int) -> tuple[str, ...]:
        return tuple(p for value in text(tag) for p in value.split(":") if p)

    sonames = text(DT_SONAME)
    return Dynamic(
        tuple(text(DT_NEEDED)), sonames[0] if sonames else None, paths(DT_RPATH), paths(DT_RUNPATH)
    )


def _version_names(
    data: Any, endian: str, sections: list[_Section], kind: int
) -> dict[int, tuple[str, str | None]]:
    """Version index → (version name, the library it is needed from; None for a definition)."""
    found: dict[int, tuple[str, str | None]] = {}
    for section in (s for s in sections if s.kind == kind):
        if section.link >= len(sections):
            raise NotElfError("a version section names no string table")
        strings = sections[section.link]
        at, end = section.offset, section.offset + section.size
        for _ in range(section.info):  # sh_info: how many entries
            if at + 16 > end:
                raise NotElfError("a version entry lies past its section")
            if kind == SHT_GNU_VERDEF:
                _ver, _flags, index, auxes, _hash, aux, following = struct.unpack_from(
                    endian + "HHHHIII", data, at
                )
                if auxes:
                    (name, _next) = struct.unpack_from(endian + "II", data, at + aux)
                    found[index] = (_text_at(data, strings.offset, strings.size, name), None)
            else:
                _ver, auxes, library_at, aux, following = struct.unpack_from(
                    endian + "HHIII", data, at
                )
                library = _text_at(data, strings.offset, strings.size, library_at)
                here = at + aux
                for _ in range(auxes):
                    _hash, _flags, index, name, step = struct.unpack_from(
                        endian + "IHHII", data, here
                    )
                    found[index] = (_text_at(data, strings.offset, strings.size, name), library)
                    here += step
                    if not step:
                        break
            if not following:
                break
            at += following
    return found


def dynamic_symbols(data: Any) -> DynamicSymbols:
    """The exported and the undefined symbols of a whole object's ``.dynsym``, with their
    versions (``.gnu.version``, ``.gnu.version_d``, ``.gnu.version_r``)."""
    word, sections = _sections(data)
    endian, wide = word[0], word.endswith("Q")
    table = next((s for s in sections if s.kind == SHT_DYNSYM), None)
    if table is None:
        return DynamicSymbols(frozenset(), (), False)
    if table.link >= len(sections):
        raise NotElfError("the symbol table names no string table")
    strings = sections[table.link]
    entry = table.entsize or (24 if wide else 16)
    count = table.size // entry
    versym = next((s for s in sections if s.kind == SHT_GNU_VERSYM), None)
    definitions = _version_names(data, endian, sections, SHT_GNU_VERDEF)
    needs = _version_names(data, endian, sections, SHT_GNU_VERNEED)
    defined: set[tuple[str, str | None]] = set()
    undefined: list[UndefinedSymbol] = []
    layout = endian + ("IBBHQQ" if wide else "IIIBBH")
    for index in range(1, count):
        fields = struct.unpack_from(layout, data, table.offset + index * entry)
        if wide:
            name_at, info, other, shndx = fields[0], fields[1], fields[2], fields[3]
        else:
            name_at, info, other, shndx = fields[0], fields[3], fields[4], fields[5]
        bind = info >> 4
        if bind not in {STB_GLOBAL, STB_WEAK, STB_GNU_UNIQUE} or not name_at:
            continue
        name = _text_at(data, strings.offset, strings.size, name_at)
        version_index = 0
        if versym is not None and versym.offset + 2 * index + 2 <= versym.offset + versym.size:
            (version_index,) = struct.unpack_from(endian + "H", data, versym.offset + 2 * index)
        hidden, version_index = version_index & _VERSION_HIDDEN, version_index & 0x7FFF
        if shndx == 0:
            version, library = needs.get(version_index, (None, None))
            undefined.append(UndefinedSymbol(name, version, library, bind == STB_WEAK))
            continue
        if other & 3 not in {STV_DEFAULT, STV_PROTECTED}:
            continue
        version = definitions.get(version_index, (None, None))[0] if version_index > 1 else None
        defined.add((name, version))
        if not hidden:
            defined.add((name, None))  # the default version answers an unversioned reference
    return DynamicSymbols(frozenset(defined), tuple(undefined), bool(definitions))


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


def loaded_in(pieces: Iterable[bytes]) -> tuple[str, ...]:
    """:func:`loaded_by_name` of a binary read in ``pieces``, in order, a name cut between
    two of them too."""
    carry, found = b"", set[str]()
    for piece in pieces:
        data = carry + piece
        found.update(loaded_by_name(data))
        carry = data[-_CARRY:]
    return tuple(sorted(found))
