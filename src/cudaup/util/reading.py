"""Reading a file a user or another program named, without trusting what it is.

A path given on the command line, or kept beside an environment, can name a FIFO (an
open that blocks for ever), a device that never ends (``/dev/zero``) or a link to
either: :func:`read_regular` reads only a regular file, and no more than its caller's
limit allows; :func:`read_small` reads one whole, or not at all.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

#: The most a file read whole by :func:`read_small` may hold: a record, a version file,
#: a shim or a resume state is kilobytes; a header (``cuda_runtime_api.h``) 600 KB.
SMALL_FILE = 16 * 1024 * 1024


def read_regular(path: Path, limit: int, *, follow: bool = True) -> bytes:
    """At most ``limit + 1`` bytes of the regular file ``path`` (so that a caller's size
    check sees one that is too large), opened without blocking, and without following a
    final link unless ``follow``.  ``OSError`` as ``open`` raises it (``ELOOP`` for a
    link not followed), or ``EINVAL`` when ``path`` is no regular file."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    fd = os.open(path, flags)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        return handle.read(limit + 1)


def read_small(path: Path) -> bytes:
    """The whole regular file ``path``, which a program wrote and keeps small (a record, a
    version file, a shim): ``OSError`` as :func:`read_regular` raises it, or ``EFBIG``
    when it holds more than :data:`SMALL_FILE` bytes."""
    data = read_regular(path, SMALL_FILE)
    if len(data) > SMALL_FILE:
        raise OSError(errno.EFBIG, f"larger than {SMALL_FILE} bytes", str(path))
    return data
