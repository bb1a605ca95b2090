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

from cudaup.errors import from_os_error


def atomic_write(
    path: Path, data: bytes | str, *, mode: int = 0o644, durable: bool = False
) -> None:
    """Replace ``path`` with ``data``; a full disk or a refusal names ``path`` (exit 10, 14)."""
    try:
        _write(path, data, mode, durable)
    except OSError as exc:
        translated = from_os_error(exc, path=path)
        if translated is None:
            raise
        raise translated from None


def _write(path: Path, data: bytes | str, mode: int, durable: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data.encode() if isinstance(data, str) else data)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        Path(tmp).chmod(mode)  # mkstemp creates 0600; these are ordinary files
        Path(tmp).replace(path)
    except BaseException:
        with contextlib.suppress(OSError):
            Path(tmp).unlink()
        raise
