"""The libraries a shared object links, read from the first bytes of it (pure).

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
so a reader fetches only that much.

:func:`dynamic_symbols` reads an object's dynamic symbol table (what it defines, what it
needs from the libraries it links) through its section headers, reading only those parts:
the proof that an extension built against torch finds every symbol it needs in a torch.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from dataclasses import dataclass

PT_LOAD, PT_DYNAMIC = 1, 2
DT_NULL, DT_NEEDED, DT_STRTAB, DT_STRSZ = 0, 1, 5, 10
PF_X = 1
#: A soname in the dynamic string table: versioned (``libcudart.so.12``) or not
#: (``libtorch.so``, ``libc10.so``: what extensions built against torch link).
_SONAME = re.compile(rb"(?<=\x00)(lib[A-Za-z0-9_+.-]*?\.so(?:\.\d+)*)\x00")


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
# Dynamic symbols: what an object needs and what it exports
# ----------------------------------------------------------------------------
SHT_DYNSYM = 11
SHN_UNDEF = 0
STB_WEAK = 2
#: A symbol table of more than this many bytes is not read (libtorch_cpu's is ~10 MB).
MAX_SYMBOL_BYTES = 256 << 20

#: Reads ``size`` bytes at ``offset`` of one object (``os.pread`` on a file, by the caller).
Reader = Callable[[int, int], bytes]


@dataclass(frozen=True, slots=True)
class DynamicSymbols:
    """An object's dynamic symbol table: the names it defines, and those it needs from
    the libraries it links (weak references, which may stay unresolved, left out)."""

    defined: frozenset[str]
    undefined: frozenset[str]


def dynamic_symbols(read: Reader) -> DynamicSymbols:
    """The dynamic symbols of one ELF object, found through its section headers (the
    ``.dynsym`` section and the string table it links); only those parts are read."""
    head = read(0, 64)
    word, _phoff, _size, _count = _header(head)
    endian, wide = word[0], word.endswith("Q")
    if wide:
        (shoff,) = struct.unpack_from(endian + "Q", head, 0x28)
        shentsize, shnum = struct.unpack_from(endian + "HH", head, 0x3A)
    else:
        (shoff,) = struct.unpack_from(endian + "I", head, 0x20)
        shentsize, shnum = struct.unpack_from(endian + "HH", head, 0x2E)
    if shoff == 0 or shnum == 0 or shentsize < (64 if wide else 40):
        raise NotElfError("no section headers")
    table = read(shoff, shentsize * shnum)
    if len(table) < shentsize * shnum:
        raise NotElfError("section headers past the end of the file")
    sections = [_section(table, index * shentsize, endian, wide) for index in range(shnum)]
    dynsym = next((s for s in sections if s[0] == SHT_DYNSYM), None)
    if dynsym is None:
        return DynamicSymbols(frozenset(), frozenset())
    _kind, offset, size, link, entsize = dynsym
    if link >= len(sections) or not entsize or size > MAX_SYMBOL_BYTES:
        raise NotElfError("a dynamic symbol table cudaup cannot read")
    _k, str_offset, str_size, _l, _e = sections[link]
    if str_size > MAX_SYMBOL_BYTES:
        raise NotElfError("a dynamic string table larger than cudaup reads")
    symbols, strings = read(offset, size), read(str_offset, str_size)
    if len(symbols) < size or len(strings) < str_size:
        raise NotElfError("the dynamic symbol table runs past the end of the file")
    defined: set[str] = set()
    undefined: set[str] = set()
    for at in range(entsize, size - entsize + 1, entsize):  # entry 0 is the null symbol
        if wide:
            name, info, _other, shndx = struct.unpack_from(endian + "IBBH", symbols, at)
        else:
            name, _value, _sz, info, _other, shndx = struct.unpack_from(
                endian + "IIIBBH", symbols, at
            )
        if not name or name >= str_size:
            continue
        stop = strings.find(b"\0", name)
        text = strings[name : stop if stop >= 0 else str_size].decode("ascii", "replace")
        if shndx != SHN_UNDEF:
            defined.add(text)
        elif info >> 4 != STB_WEAK:
            undefined.add(text)
    return DynamicSymbols(frozenset(defined), frozenset(undefined))


def _section(table: bytes, at: int, endian: str, wide: bool) -> tuple[int, int, int, int, int]:
    """(type, offset, size, link, entry size) of one section header."""
    if wide:
        _name, kind, _flags, _addr, offset, size, link, _info, _align, entsize = struct.unpack_from(
            endian + "IIQQQQIIQQ", table, at
        )
    else:
        _name, kind, _flags, _addr, offset, size, link, _info, _align, entsize = struct.unpack_from(
            endian + "IIIIIIIIII", table, at
        )
    return kind, offset, size, link, entsize
