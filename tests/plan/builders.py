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
    needed: list[str], soname: str, *, code: int = 256 * 1024, seed: int = 1
) -> bytes:
    """A 64-bit little-endian ELF shared object laid out as linkers do: headers and the
    dynamic string table in a first read-only segment, then ``code`` bytes of code that
    do not compress, then ``.dynamic`` in a writable segment at the end."""
    strings = b"\0"
    offsets = {}
    for name in [soname, *needed, "cuda_kernel_entry"]:
        offsets[name] = len(strings)
        strings += name.encode() + b"\0"
    phnum, strtab = 3, 0x200
    first_size = strtab + len(strings)
    code_at = 0x1000
    dynamic_at = code_at + code
    entries = [(14, offsets[soname])]  # DT_SONAME
    entries += [(1, offsets[n]) for n in needed]  # DT_NEEDED
    entries += [(5, strtab), (10, len(strings)), (0, 0)]  # DT_STRTAB, DT_STRSZ, DT_NULL
    dynamic = b"".join(struct.pack("<qQ", tag, value) for tag, value in entries)
    header = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
    header += struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 64, 0, 0, 64, 56, phnum, 64, 0, 0)
    programs = struct.pack("<IIQQQQQQ", 1, 4, 0, 0, 0, first_size, first_size, 0x1000)
    programs += struct.pack(
        "<IIQQQQQQ", 1, 6, dynamic_at, dynamic_at, dynamic_at, len(dynamic), len(dynamic), 0x1000
    )
    programs += struct.pack(
        "<IIQQQQQQ", 2, 6, dynamic_at, dynamic_at, dynamic_at, len(dynamic), len(dynamic), 8
    )
    image = bytearray(dynamic_at + len(dynamic))
    image[: len(header)] = header
    image[64 : 64 + len(programs)] = programs
    image[strtab : strtab + len(strings)] = strings
    image[code_at:dynamic_at] = random.Random(seed).randbytes(code)
    image[dynamic_at:] = dynamic
    return bytes(image)
