"""The one file lock: ``flock`` on a file any user sharing the directory can take.

Downloads, the cache and the store all lock through :func:`locked`.  The kernel
releases an ``flock`` when its holder's process ends, however it ends, so a lock
left by a killed process (any user's) never blocks; the lock file is made so that
another user can open it, and opened without following links or truncating.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from cudaup.errors import IntegrityError, LockedError
from cudaup.util.faults import Place, explained
from cudaup.util.parallel import check as check_cancelled

LOCK_MODE = 0o666
_BUSY = {errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK}


def _make_locks_dir(locks: Path) -> None:
    """Create ``locks/`` as writable as the cache that holds it.

    In a cache that other users share (its directory group- or world-writable) they
    may create lock files too, and the sticky bit keeps them from removing each
    other's; in a private cache it stays private.
    """
    try:
        locks.mkdir(parents=True)
    except FileExistsError:
        return
    mode = stat.S_IMODE(locks.parent.stat().st_mode) & 0o777
    if mode & 0o022:
        mode |= stat.S_ISVTX
    locks.chmod(mode)


def _open_lock(path: Path, mode: int = LOCK_MODE) -> int:
    """A descriptor on the lock file ``path``, created with ``mode`` when missing.

    It never follows a symbolic link and never truncates: in a directory other users
    may write, a planted link could point at a file that matters.  A lock file this
    user may only read (made by an older cudaup with mode 0o644) is opened read-only,
    which is all a local ``flock`` needs.
    """
    _make_locks_dir(path.parent)
    flags = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    while True:
        try:
            fd = os.open(path, os.O_RDWR | flags)
        except FileNotFoundError:
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | flags, mode)
            except FileExistsError:
                continue  # another process created it a moment ago: open that one
            os.fchmod(fd, mode)  # the mode given to os.open went through the umask
        except PermissionError:
            fd = os.open(path, os.O_RDONLY | flags)
        break
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise IntegrityError(f"{path} is not a regular file; cudaup's lock files are")
    return fd


@contextlib.contextmanager
def locked(
    path: Path,
    *,
    busy: str,
    wait: float,
    place: Place,
    exclusive: bool = True,
    on_wait: Callable[[], None] | None = None,
    cancel: threading.Event | None = None,
    mode: int = LOCK_MODE,
) -> Iterator[None]:
    """Hold the lock file ``path`` (``flock``, exclusive or shared) inside the block.

    The kernel releases an ``flock`` when its holder's process ends, however it ends, so
    a lock left by a killed process (any user's) never blocks.  A live holder is waited
    for: ``on_wait`` is called once when the wait begins, ``cancel`` ends it with
    :class:`CancelledError`, and after ``wait`` seconds :class:`LockedError` says
    ``busy``.  A lock directory or file that refuses this user raises
    :class:`PermissionDeniedError` naming it and ``place``'s way round.  ``mode``: the
    lock file's when this creates it (0o666 lets any user sharing the directory lock; a lock
    only one user's commands take is 0o644 or private, and others may still lock it
    read-only).
    """
    import fcntl  # noqa: PLC0415 - POSIX, like the downloader's pwrite and installing

    try:
        with explained(f"cannot open the lock file {path}", path.parent, [place]):
            fd = _open_lock(path, mode)
    except OSError as exc:
        if exc.errno in {errno.ELOOP, errno.EISDIR}:
            raise IntegrityError(
                f"{path} is not a regular file; cudaup's lock files are (remove it)"
            ) from None
        raise
    try:
        mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in _BUSY:
                    raise
            if on_wait is not None:
                on_wait()
                on_wait = None
            if time.monotonic() >= deadline:
                raise LockedError(busy)
            check_cancelled(cancel)
            time.sleep(0.1)
        yield
    finally:
        os.close(fd)  # releases the lock
