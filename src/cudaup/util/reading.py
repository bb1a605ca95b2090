"""Reading a file a user or another program named, without trusting what it is.

A path given on the command line, or kept beside an environment, can name a FIFO (an
open that blocks for ever), a device that never ends (``/dev/zero``) or a link to
either: :func:`read_regular` reads only a regular file, and no more than its caller's
limit allows.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path


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
