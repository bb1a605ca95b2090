"""Which GPU code a CUDA binary carries, read from its headers (pure).

A CUDA binary holds *fatbins*: a 16-byte header (magic ``0xBA55ED50``, version 1,
header size 16, the size of what follows) and then entries, each with its own
header (layout below) followed by its payload.  An entry says its kind (1: PTX,
2: an ELF cubin of SASS), the architecture (``90`` = compute capability 9.0),
flags (64-bit, compression, the ``a``/``f`` variant) and, for PTX, the PTX ISA
version.  So this reads headers and skips payloads: a compressed entry is
counted as what its header says it is, never decompressed.

Where fatbins live:

* host ELF objects (shared libraries, executables, ``.o``): the ``.nv_fatbin``
  section (and ``__nv_relfatbin`` in relocatable code), which
  ``cuobjdump --list-elf --list-ptx`` lists; and fatbins embedded elsewhere
  (libraries such as libcurand keep fatbins in ``.data`` for the driver API),
  found by scanning the loaded data sections (``.rodata``, ``.data``: not code, not
  debug information, which the loader never maps) for the magic, or the whole file
  when it has no section table; a hit there counts only when its header and every
  entry fit exactly (otherwise it is payload bytes that happen to match, not a fatbin);
* ``.fatbin`` files (one or more fatbins back to back);
* cubins: an ELF of machine ``EM_CUDA`` (190): its SASS architecture is in
  ``e_flags``; the ``a``/``f`` variant only in the ``-arch`` its ``.note.nv.tkinfo``
  records;
* PTX text: ``.version X.Y`` and ``.target sm_XX``.

Layout of an entry header, as nvcc 13.0 writes it (little-endian; observed on
objects nvcc built and checked against cuobjdump, see tests/core/test_fatbin.py)::

    0  u16 kind          4  u32 header size      8  u64 payload size
    16 u32 compressed    24 u16 minor            26 u16 major (PTX ISA of a PTX entry)
    28 u32 arch          40 u64 flags            56 u64 uncompressed size

Flags: ``0x1`` 64-bit, ``0x10`` Linux host, ``0x2000`` LZ4- and ``0x8000``
zstd-compressed payload, ``0x100000`` an architecture-specific (``a``) target,
``0x200000`` a family (``f``) target.

Malformed structure where a fatbin must be (a ``.nv_fatbin`` section, a
``.fatbin`` file, an ELF header) raises :class:`~cudaup.errors.SourceFormatError`
naming the file: exit 8, never a crash.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from cudaup.errors import SourceFormatError

if TYPE_CHECKING:
    import mmap

    #: what the parser reads: bytes, or a read-only map of a file (read lazily, by page)
    Data = bytes | mmap.mmap

FATBIN_MAGIC = 0xBA55ED50
MAGIC_BYTES = struct.pack("<I", FATBIN_MAGIC)
EM_CUDA = 190
KIND_PTX, KIND_ELF = 1, 2
FLAG_LZ4, FLAG_ZSTD = 0x2000, 0x8000
FLAG_ARCH_SPECIFIC, FLAG_FAMILY = 0x100000, 0x200000
#: the sections whose fatbins cuobjdump lists
FATBIN_SECTIONS = (".nv_fatbin", "__nv_relfatbin")
_ENTRY = struct.Struct("<HHIQII HH I II Q Q Q".replace(" ", ""))
_FATBIN = struct.Struct("<IHHQ")
#: an entry header is at least the 64 bytes above; nvcc writes 64 to 128
_MAX_ENTRY_HEADER = 1 << 16
_TKINFO_ARCH = re.compile(rb"-arch\s+sm_(\d+)([af]?)\b")
_PTX_VERSION = re.compile(rb"^\s*\.version\s+(\d+)\.(\d+)\s*$", re.M)
_PTX_TARGET = re.compile(rb"^\s*\.target\s+sm_(\d+)([af]?)\b", re.M)

Kind = Literal["sass", "ptx"]
Origin = Literal["section", "embedded", "fatbin", "cubin", "ptx"]


@dataclass(frozen=True, slots=True, order=True)
class FatbinTarget:
    """One kind of code for one architecture: ``sm_90a`` (SASS) or ``compute_90`` (PTX)."""

    kind: Kind
    #: the compute capability, ``(9, 0)``
    capability: tuple[int, int]
    #: ``""``, ``"a"`` (that exact architecture) or ``"f"`` (its family)
    variant: str = ""
    #: the PTX ISA version of a PTX target, ``(9, 0)``
    ptx_isa: tuple[int, int] | None = None

    @property
    def arch(self) -> str:
        """``sm_90a`` / ``sm_100f`` / ``sm_120``: the architecture, whatever the kind."""
        major, minor = self.capability
        return f"sm_{major}{minor}{self.variant}"

    @property
    def name(self) -> str:
        """``sm_90a`` for SASS, ``compute_90a`` for PTX (nvcc's spellings)."""
        return self.arch if self.kind == "sass" else "compute_" + self.arch[3:]

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "compute_capability": "{}.{}".format(*self.capability),
            "variant": self.variant or None,
            "ptx_isa": "{}.{}".format(*self.ptx_isa) if self.ptx_isa else None,
        }


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry of device code: its target, where it was found, and how it is stored."""

    target: FatbinTarget
    origin: Origin
    #: ``"zstd"``, ``"lz4"`` or None (stored as is)
    compression: str | None
    #: the payload's size in the file (compressed size when compressed)
    size: int


def capability_of(arch: int) -> tuple[int, int]:
    """``90`` → ``(9, 0)``, ``103`` → ``(10, 3)``: how fatbins and cubins number architectures."""
    return arch // 10, arch % 10


def read_entries(data: Data, where: str) -> list[Entry] | None:
    """Every entry of device code in ``data`` (a file's bytes), or None when it is no
    CUDA binary at all (a Python file, a library without device code is ``[]``)."""
    head = bytes(data[:64])
    if head[:4] == b"\x7fELF":
        return _elf(data, where)
    if head[:4] == MAGIC_BYTES:
        return _fatbin_file(data, where)
    if _looks_like_ptx(head):
        return _ptx(bytes(data[: 1 << 20]), where)
    return None


def may_hold_device_code(head: bytes) -> bool:
    """Whether a file starting with ``head`` (its first 64 bytes) is worth reading whole:
    an ELF, a fatbin or PTX text."""
    return head[:4] in {b"\x7fELF", MAGIC_BYTES} or _looks_like_ptx(head)


def _looks_like_ptx(head: bytes) -> bool:
    stripped = head.lstrip()
    return stripped.startswith((b"//", b".version"))


def _ptx(text: bytes, where: str) -> list[Entry] | None:
    version, target = _PTX_VERSION.search(text), _PTX_TARGET.search(text)
    if version is None or target is None:
        return None
    isa = (int(version[1]), int(version[2]))
    capability = capability_of(int(target[1]))
    return [Entry(FatbinTarget("ptx", capability, target[2].decode(), isa), "ptx", None, len(text))]


def _fatbin_file(data: Data, where: str) -> list[Entry]:
    entries: list[Entry] = []
    at = 0
    while at < len(data):
        if bytes(data[at : at + 4]) != MAGIC_BYTES:
            if not any(data[at : min(len(data), at + 16)]):
                at += 16  # padding between fatbins
                continue
            raise SourceFormatError(f"{where}: no fatbin header at byte {at}")
        found, end = _fatbin(data, at, where, "fatbin", strict=True)
        entries += found
        at = end
    return entries


def _fatbin(
    data: Data, at: int, where: str, origin: Origin, *, strict: bool
) -> tuple[list[Entry], int]:
    """The entries of the fatbin at ``at`` and where it ends.  Not ``strict`` (a magic
    found by scanning): a header that does not fit returns no entries and ``at + 4``."""

    def refuse(why: str) -> tuple[list[Entry], int]:
        if strict:
            raise SourceFormatError(f"{where}: the fatbin at byte {at} {why}")
        return [], at + 4

    if at + _FATBIN.size > len(data):
        return refuse("is cut short")
    _magic, version, header_size, size = _FATBIN.unpack_from(data, at)
    if version != 1 or header_size < _FATBIN.size or header_size > _MAX_ENTRY_HEADER:
        return refuse(f"has an unknown header (version {version}, header size {header_size})")
    start, end = at + header_size, at + header_size + size
    if end > len(data):
        return refuse(f"claims {size} bytes, past the end of the file ({len(data)} bytes)")
    entries: list[Entry] = []
    cursor = start
    while cursor < end:
        if cursor + _ENTRY.size > end:
            return refuse(f"has an entry header cut short at byte {cursor}")
        (kind, _ver, entry_header, payload, compressed, _pad, minor, major, arch,
         _name_at, _name_len, flags, _zero, _full) = _ENTRY.unpack_from(data, cursor)  # fmt: skip
        if entry_header < _ENTRY.size or entry_header > _MAX_ENTRY_HEADER:
            return refuse(f"has an entry at byte {cursor} with header size {entry_header}")
        following = cursor + entry_header + payload
        if following > end:
            return refuse(f"has an entry at byte {cursor} whose {payload} bytes run past its end")
        if arch == 0 or arch > 10_000:
            return refuse(f"has an entry at byte {cursor} for architecture {arch}")
        variant = "a" if flags & FLAG_ARCH_SPECIFIC else "f" if flags & FLAG_FAMILY else ""
        compression = "zstd" if flags & FLAG_ZSTD else "lz4" if flags & FLAG_LZ4 else None
        stored = compressed if compression and compressed else payload
        if kind == KIND_PTX:
            target = FatbinTarget("ptx", capability_of(arch), variant, (major, minor))
            entries.append(Entry(target, origin, compression, stored))
        elif kind == KIND_ELF:
            entries.append(
                Entry(
                    FatbinTarget("sass", capability_of(arch), variant), origin, compression, stored
                )
            )
        # other kinds (LTO IR for device link) are neither SASS nor PTX: not counted
        cursor = following
    return entries, end


@dataclass(frozen=True, slots=True)
class _Section:
    name: str
    kind: int
    flags: int
    offset: int
    size: int

    @property
    def loaded_data(self) -> bool:
        """Bytes the loader maps as data (``.rodata``, ``.data``): where a program keeps
        a fatbin it hands the driver.  Code and unloaded sections hold none it can use."""
        return (
            self.kind == _SHT_PROGBITS
            and bool(self.flags & _SHF_ALLOC)
            and not self.flags & _SHF_EXECINSTR
        )


_SHT_PROGBITS, _SHT_NOTE, _SHT_NOBITS = 1, 7, 8
_SHF_ALLOC, _SHF_EXECINSTR = 0x2, 0x4


def _elf(data: Data, where: str) -> list[Entry]:
    header = bytes(data[:64])
    if len(header) < 52:
        raise SourceFormatError(f"{where}: an ELF header cut short ({len(header)} bytes)")
    width, order = header[4], header[5]
    if width not in {1, 2} or order not in {1, 2} or len(header) < (64 if width == 2 else 52):
        raise SourceFormatError(f"{where}: an ELF header cudaup cannot read (class {width})")
    endian = "<" if order == 1 else ">"
    (machine,) = struct.unpack_from(endian + "H", header, 18)
    sections = _sections(data, header, endian, width, where)
    if machine == EM_CUDA:
        return _cubin(data, header, endian, width, sections, where)
    entries: list[Entry] = []
    for section in sections:
        if section.name not in FATBIN_SECTIONS or section.kind == _SHT_NOBITS:
            continue
        at, end = section.offset, section.offset + section.size
        while at < end:
            if bytes(data[at : at + 4]) != MAGIC_BYTES:
                if any(data[at : min(end, at + 8)]):
                    raise SourceFormatError(
                        f"{where}: {section.name} holds no fatbin header at byte {at}"
                    )
                at += 8  # fatbins in a section are 8-byte aligned
                continue
            found, at = _fatbin(data, at, where, "section", strict=True)
            if at > end:
                raise SourceFormatError(f"{where}: a fatbin runs past the end of {section.name}")
            entries += found
    # Without a section table (stripped of it) the whole file is scanned.
    spans = [
        (s.offset, s.offset + s.size)
        for s in sections
        if s.loaded_data and s.name not in FATBIN_SECTIONS
    ] if sections else [(0, len(data))]  # fmt: skip
    return entries + [e for start, end in spans for e in _embedded(data, start, end, where)]


def _embedded(data: Data, start: int, end: int, where: str) -> list[Entry]:
    """Fatbins in ``data[start:end]``, found by their magic (see the module doc)."""
    entries: list[Entry] = []
    at = data.find(MAGIC_BYTES, start, end)
    while at >= 0:
        found, after = _fatbin(data, at, where, "embedded", strict=False)
        entries += found
        at = data.find(MAGIC_BYTES, after, end)
    return entries


def _sections(data: Data, header: bytes, endian: str, width: int, where: str) -> list[_Section]:
    if width == 2:
        (shoff,) = struct.unpack_from(endian + "Q", header, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from(endian + "HHH", header, 0x3A)
        layout, minimum = endian + "IIQQQQIIQQ", 64
    else:
        (shoff,) = struct.unpack_from(endian + "I", header, 0x20)
        shentsize, shnum, shstrndx = struct.unpack_from(endian + "HHH", header, 0x2E)
        layout, minimum = endian + "IIIIIIIIII", 40
    if shoff == 0:
        return []  # no section table (a stripped executable): only the magic scan is left
    if shentsize < minimum:
        raise SourceFormatError(f"{where}: ELF section headers of {shentsize} bytes")

    def raw(index: int) -> tuple[int, ...]:
        at = shoff + index * shentsize
        if at + minimum > len(data):
            raise SourceFormatError(f"{where}: ELF section header {index} is past the end")
        return struct.unpack_from(layout, data, at)

    if shnum == 0:  # more than 0xff00 sections: the count is in section 0's size
        shnum = raw(0)[5]
    if shoff + shnum * shentsize > len(data):
        raise SourceFormatError(f"{where}: {shnum} ELF section headers run past the end")
    if shstrndx == 0xFFFF:
        shstrndx = raw(0)[7]
    rows = [raw(index) for index in range(shnum)]
    if shstrndx >= len(rows):
        raise SourceFormatError(f"{where}: the ELF section name table {shstrndx} does not exist")
    names_at, names_size = rows[shstrndx][4], rows[shstrndx][5]
    if names_at + names_size > len(data):
        raise SourceFormatError(f"{where}: the ELF section name table runs past the end")
    names = bytes(data[names_at : names_at + names_size])
    sections = []
    for name_at, kind, flags, _addr, offset, size, *_rest in rows:
        name = names[name_at : names.find(b"\x00", name_at)] if name_at < len(names) else b""
        if kind != _SHT_NOBITS and offset + size > len(data):
            raise SourceFormatError(
                f"{where}: ELF section {name.decode(errors='replace')!r} runs past the end"
            )
        sections.append(_Section(name.decode(errors="replace"), kind, flags, offset, size))
    return sections


def _cubin(
    data: Data, header: bytes, endian: str, width: int, sections: list[_Section], where: str
) -> list[Entry]:
    (flags,) = struct.unpack_from(endian + "I", header, 48 if width == 2 else 36)
    # ELF ABI version 8 (CUDA 12.8+ for Blackwell, every target from 13.0) moved the SM
    # number from bits 0-7 to 8-15 and the architecture-specific bit from 0x800 to 0x8.
    if header[8] >= 8:
        arch, specific = (flags >> 8) & 0xFF, flags & 0x8
    else:
        arch, specific = flags & 0xFF, flags & 0x800
    if arch == 0:
        raise SourceFormatError(f"{where}: a cubin whose ELF flags name no architecture")
    # nvcc 13.0 leaves that bit clear and records sm_100a / sm_100f only as the -arch of
    # the note below (the note is the compiler's own record, so it settles the variant).
    variant = "a" if specific else ""
    for section in sections:
        if section.name == ".note.nv.tkinfo" and section.kind == _SHT_NOTE:
            note = bytes(data[section.offset : section.offset + section.size])
            recorded = _TKINFO_ARCH.search(note)
            if recorded and int(recorded[1]) == arch:
                variant = recorded[2].decode()
    target = FatbinTarget("sass", capability_of(arch), variant)
    return [Entry(target, "cubin", None, len(data))]
