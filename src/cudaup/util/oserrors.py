"""An operating system's refusal as the cudaup error it means: the cause, the path, the way out.

A full disk (ENOSPC) or an exhausted quota (EDQUOT) is
:class:`~cudaup.errors.InsufficientSpaceError` (exit 10) with the directory and the
bytes still needed; a refused write (EACCES, EPERM) or a read-only file system
(EROFS) is :class:`~cudaup.errors.PermissionDeniedError` (exit 14) with the path and
what to do.  Any other ``OSError`` is left as it is.
"""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Iterator
from pathlib import Path

from cudaup.errors import CudaupError, InsufficientSpaceError, PermissionDeniedError

FULL = frozenset({errno.ENOSPC, errno.EDQUOT})
DENIED = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})

#: What to do when a directory the user chose with ``-o`` refuses a write.
OUTPUT_REMEDY = "choose another -o directory, or fix its permissions"
#: What to do when cudaup's cache refuses a write.
CACHE_REMEDY = "set CUDAUP_CACHE_DIR to a directory you can write, or fix its permissions"


def explain(
    exc: OSError,
    path: Path,
    *,
    doing: str,
    remedy: str,
    needed: int | None = None,
    room: Path | None = None,
) -> CudaupError | None:
    """The cudaup error ``exc`` means while ``doing`` (a verb: "write") ``path``, or None.

    ``needed`` is how many more bytes the work needs in ``room`` (default: ``path``'s
    directory), for the message of a full disk.
    """
    if exc.errno in FULL:
        cause = "the disk filled up" if exc.errno == errno.ENOSPC else "the disk quota ran out"
        amount = (
            f"{needed} more bytes ({needed / 2**30:.2f} GiB) are needed"
            if needed is not None
            else "more space is needed"
        )
        return InsufficientSpaceError(
            f"{cause} while trying to {doing} {path}: {amount} in {room or path.parent}; "
            "free some space and run the same command again to resume"
        )
    if exc.errno in DENIED:
        cause = "read-only file system" if exc.errno == errno.EROFS else "permission denied"
        return PermissionDeniedError(f"cannot {doing} {path} ({cause}): {remedy}")
    return None


@contextlib.contextmanager
def explained(
    path: Path,
    *,
    doing: str,
    remedy: str,
    needed: int | None = None,
    room: Path | None = None,
) -> Iterator[None]:
    """Turn an ``OSError`` raised inside into what :func:`explain` makes of it."""
    try:
        yield
    except OSError as exc:
        error = explain(exc, path, doing=doing, remedy=remedy, needed=needed, room=room)
        if error is None:
            raise
        raise error from exc
