"""The C library's calls that Python's ``os`` module lacks, where this system has them."""

from __future__ import annotations

import ctypes
import functools
import sys
from typing import Any

#: ``sync_file_range``'s flag: start writing the dirty pages of the range, do not wait.
_SYNC_FILE_RANGE_WRITE = 2


@functools.cache
def libc() -> ctypes.CDLL:
    """This process's C library (its functions release the GIL while they run)."""
    return ctypes.CDLL(None, use_errno=True)


@functools.cache
def _sync_file_range() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    function = getattr(libc(), "sync_file_range", None)
    if function is not None:
        function.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
        function.restype = ctypes.c_int
    return function


def can_start_writeback() -> bool:
    """Whether :func:`start_writeback` does anything here (Linux's ``sync_file_range``)."""
    return _sync_file_range() is not None


def start_writeback(fd: int, offset: int, length: int) -> None:
    """Start writing the dirty pages of ``length`` bytes at ``offset`` of ``fd`` to disk,
    without waiting for them (``sync_file_range(SYNC_FILE_RANGE_WRITE)``).

    Only a head start: it makes nothing durable (the file's ``fdatasync`` still does, and
    it is quick once the pages are written).  Its failure is not raised: a write-out
    that fails marks the file, and the next ``fdatasync`` reports it.
    """
    function = _sync_file_range()
    if function is not None and length > 0:
        function(fd, offset, length, _SYNC_FILE_RANGE_WRITE)
