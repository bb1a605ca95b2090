"""Where a wheel's zip directory and METADATA member lie, from its bytes (pure).

The index memo's read ahead (:mod:`cudaup.plan.read_ahead`) finds them by the zip's end
record and a byte search of the directory for the one ``*.dist-info/METADATA`` name, not
by :mod:`zipfile`, which parses every entry in Python first (tens of milliseconds for
torch's 25,000): uv, which asks for the member as soon as it has the directory, would
be first.
"""

from __future__ import annotations

import re
import struct
from typing import Any

_METADATA = b".dist-info/METADATA"
_METADATA_NAME = re.compile(rb"[^/]+\.dist-info/METADATA")
#: The zip's end record, its zip64 locator and record, a central directory entry.
_END = struct.Struct("<4s4H2LH")
_LOCATOR = struct.Struct("<4sLQL")
_END64 = struct.Struct("<4sQ2H2L4Q")
_ENTRY = struct.Struct("<4s6H3L5H2L")
_MAX32 = 0xFFFFFFFF


def directory_of(tail: bytes, size: int) -> tuple[int, int] | None:
    """Where a zip's central directory lies (offset, length), from the file's last bytes
    ``tail`` and its ``size``; None when the tail holds no end record that says."""
    at = tail.rfind(b"PK\x05\x06", max(0, len(tail) - _END.size - 0xFFFF))
    if at < 0 or at + _END.size > len(tail):
        return None
    length, offset = _END.unpack_from(tail, at)[5:7]
    if _MAX32 in (length, offset):  # zip64: the locator before the end record says where
        locator = at - _LOCATOR.size
        if locator < 0 or tail[locator : locator + 4] != b"PK\x06\x07":
            return None
        record = _LOCATOR.unpack_from(tail, locator)[2] - (size - len(tail))
        if (
            record < 0
            or record + _END64.size > len(tail)
            or tail[record : record + 4] != b"PK\x06\x06"
        ):
            return None
        length, offset = _END64.unpack_from(tail, record)[8:10]
    if offset + length > size:
        return None
    return offset, length


def metadata_member(directory: bytes) -> tuple[int, int] | None:
    """The ``*.dist-info/METADATA`` member's local header offset and the bytes that hold
    its header, name and data (without the local extra field), from a central directory;
    None when there is none, or its entry needs zip64."""
    fields = metadata_entry(directory)
    return None if fields is None else (fields[16], 30 + fields[10] + fields[8])


def metadata_entry(directory: bytes) -> tuple[Any, ...] | None:
    """The central directory entry of the ``*.dist-info/METADATA`` member (:data:`_ENTRY`'s
    fields), found by a byte search; None when there is none, or it needs zip64."""
    found = directory.find(_METADATA)
    while found >= 0:
        name_end = found + len(_METADATA)
        entry = directory.rfind(b"PK\x01\x02", max(0, found - _ENTRY.size - 0xFF), found)
        if entry >= 0 and entry + _ENTRY.size <= len(directory):
            fields = _ENTRY.unpack_from(directory, entry)
            compressed, name_length, offset = fields[8], fields[10], fields[16]
            start = entry + _ENTRY.size
            named = start + name_length == name_end
            if named and _METADATA_NAME.fullmatch(directory[start:name_end]):
                return None if _MAX32 in (compressed, offset) else fields
        found = directory.find(_METADATA, found + 1)
    return None
