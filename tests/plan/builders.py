"""Wheels and shared objects for the plan tests, laid out as the real ones are."""

from __future__ import annotations

import io
import random
import re
import struct
import zipfile

X86 = "cp312-cp312-manylinux_2_28_x86_64"
ARM = "cp312-cp312-manylinux_2_28_aarch64"
ABI3 = "cp310-abi3-manylinux2014_x86_64"
PURE = "py3-none-any"


def wheel(
    name: str,
    version: str,
    requires: list[str] | tuple[str, ...] = (),
    *,
    tag: str = X86,
    extras: tuple[str, ...] = (),
    shared: dict[str, bytes] | None = None,
    compress: int = zipfile.ZIP_DEFLATED,
) -> tuple[str, bytes]:
    """A wheel's file name and bytes: METADATA with ``requires``, and ``shared`` objects."""
    stem = re.sub(r"[-.]+", "_", name)
    buffer = io.BytesIO()
    info = f"{stem}-{version}.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    metadata += "".join(f"Provides-Extra: {e}\n" for e in extras)
    metadata += "".join(f"Requires-Dist: {r}\n" for r in requires)
    with zipfile.ZipFile(buffer, "w", compress) as archive:
        archive.writestr(f"{stem}/__init__.py", "")
        for path, data in (shared or {}).items():
            archive.writestr(path, data)
        archive.writestr(f"{info}/METADATA", metadata)
        archive.writestr(f"{info}/WHEEL", f"Wheel-Version: 1.0\nTag: {tag}\n")
        archive.writestr(f"{info}/RECORD", "")
    return f"{stem}-{version}-{tag}.whl", buffer.getvalue()


def shared_object(
    needed: list[str],
    soname: str,
    *,
    code: int = 256 * 1024,
    seed: int = 1,
    symbols: int = 0,
    old_layout: bool = False,
) -> bytes:
    """A 64-bit little-endian ELF shared object laid out as linkers do: headers and the
    dynamic string table in a first read-only segment, then ``code`` bytes of code that
    do not compress, then ``.dynamic`` in a writable segment at the end.

    ``symbols``: bytes of symbol table (that do not compress) before the string table;
    ``old_layout``: the first segment also holds the code (``-z noseparate-code``), so
    only ``.dynamic`` tells which of its strings are needed names."""
    strings = b"\0"
    offsets = {}
    # The old layout's first segment is code too: a soname-like string that is no needed
    # name (a decoy) must not be taken for one.
    decoy = ["libdecoy.so.9"] if old_layout else []
    for name in ["cuda_kernel_entry", *decoy, soname, *needed]:
        offsets[name] = len(strings)
        strings += name.encode() + b"\0"
    phnum, strtab = 3, 0x200 + symbols
    code_at = (strtab + len(strings) + 0xFFF) & ~0xFFF
    first_size = code_at + code if old_layout else strtab + len(strings)
    dynamic_at = code_at + code
    entries = [(14, offsets[soname])]  # DT_SONAME
    entries += [(1, offsets[n]) for n in needed]  # DT_NEEDED
    entries += [(5, strtab), (10, len(strings)), (0, 0)]  # DT_STRTAB, DT_STRSZ, DT_NULL
    dynamic = b"".join(struct.pack("<qQ", tag, value) for tag, value in entries)
    header = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
    header += struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 64, 0, 0, 64, 56, phnum, 64, 0, 0)
    first_flags = 5 if old_layout else 4
    programs = struct.pack("<IIQQQQQQ", 1, first_flags, 0, 0, 0, first_size, first_size, 0x1000)
    programs += struct.pack(
        "<IIQQQQQQ", 1, 6, dynamic_at, dynamic_at, dynamic_at, len(dynamic), len(dynamic), 0x1000
    )
    programs += struct.pack(
        "<IIQQQQQQ", 2, 6, dynamic_at, dynamic_at, dynamic_at, len(dynamic), len(dynamic), 8
    )
    image = bytearray(dynamic_at + len(dynamic))
    image[: len(header)] = header
    image[64 : 64 + len(programs)] = programs
    image[0x200:strtab] = random.Random(seed + 1).randbytes(symbols)
    image[strtab : strtab + len(strings)] = strings
    image[code_at:dynamic_at] = random.Random(seed).randbytes(code)
    image[dynamic_at:] = dynamic
    return bytes(image)
