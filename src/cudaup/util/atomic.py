"""Write a file so that readers see the old content or the new, never a part.

One temporary file in the same directory, then ``os.replace``; with
``durable`` the data is fsynced before the rename (resume state must survive a
crash, a cache entry need not).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def atomic_write(
    path: Path, data: bytes | str, *, mode: int = 0o644, durable: bool = False
) -> None:
    """Replace ``path`` with ``data``.

    An ``OSError`` names ``path`` (never the temporary file, which means nothing to a
    user); the caller, which knows what the file is for, explains it
    (:mod:`cudaup.util.faults`), and the CLI's last resort does for the others.
    """
    try:
        _write(path, data, mode, durable)
    except OSError as exc:
        if exc.filename is None:  # a failed write names no file: the caller knows where
            raise
        raise OSError(exc.errno, exc.strerror, str(path)) from exc


def _write(path: Path, data: bytes | str, mode: int, durable: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data.encode() if isinstance(data, str) else data)
            # mkstemp creates 0600; these are ordinary files.  On the descriptor: in a
            # shared directory the name could be another file by now.
            os.fchmod(handle.fileno(), mode)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        Path(tmp).replace(path)
    except BaseException:
        with contextlib.suppress(OSError):
            Path(tmp).unlink()
        raise
