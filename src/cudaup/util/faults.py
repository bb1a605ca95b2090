"""What the operating system's refusals mean for the user: one sentence, a path, a way round.

A full disk (``ENOSPC``, ``EDQUOT``) becomes :class:`InsufficientSpaceError`
(exit 10) naming the directory, the bytes needed when the caller knows them and
what is free; a refused write (``EACCES``, ``EPERM``, ``EROFS``) becomes
:class:`PermissionDeniedError` (exit 14) naming the path and what to do, which
depends on where the path lies (the store, a ``--prefix``, the cache): each
:class:`Place` says.  Any other ``OSError`` is left alone: it is a bug to fix, not
a fault to explain.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cudaup.config import Settings
from cudaup.errors import CudaupError, InsufficientSpaceError, PermissionDeniedError

DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})
DENIED = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})


@dataclass(frozen=True, slots=True)
class Place:
    """A directory cudaup writes below, and what a user refused there can do instead."""

    root: Path
    remedy: str


def cache_place(root: Path) -> Place:
    return Place(root, "set CUDAUP_CACHE_DIR to a directory you can write, or fix its permissions")


def store_place(home: Path) -> Place:
    return Place(
        home,
        "set CUDAUP_HOME to a directory you can write, install elsewhere with --prefix DIR, "
        "or fix its permissions",
    )


def output_place(directory: Path) -> Place:
    """A directory the user chose for downloads (``-o``)."""
    return Place(directory, "choose another -o directory, or fix its permissions")


def prefix_place(prefix: Path) -> Place:
    return Place(prefix.parent, "choose a --prefix you can write, or fix its permissions")


def known_places(env: Mapping[str, str] | None = None) -> list[Place]:
    """The store and the cache as this environment names them: for a caller that does not
    know which of cudaup's directories a refused path lies in."""
    settings = Settings.from_env(env)
    return [store_place(settings.home_root), cache_place(settings.cache_root)]


def size_text(count: int) -> str:
    return f"{count} bytes ({count / 2**30:.2f} GiB)" if count >= 2**30 else f"{count} bytes"


def _existing_directory(path: Path) -> Path:
    """``path`` itself if it is a directory, else its nearest existing parent."""
    for candidate in (path, *path.parents):
        with contextlib.suppress(OSError):
            if candidate.is_dir():
                return candidate
    return path


def full_disk(
    action: str, directory: Path, needed: int | None, exc: OSError | None = None
) -> InsufficientSpaceError:
    """The error for a disk that filled up (or a quota reached) under ``directory``."""
    directory = _existing_directory(directory)
    try:
        free = f"{size_text(shutil.disk_usage(directory).free)} are free"
    except OSError:
        free = "its free space could not be measured"
    cause = (
        "the disk quota is exhausted" if exc and exc.errno == errno.EDQUOT else "the disk is full"
    )
    with contextlib.suppress(OSError):
        if os.statvfs(directory).f_favail == 0:
            cause = "the file system has no free inodes (room for new files) left"
    needs = f"it needs {size_text(needed)}" if needed is not None else "it needs more room"
    return InsufficientSpaceError(
        f"{action}: {cause} in {directory}: {needs}, {free}; "
        "free some space and run the same command again"
    )


def _place_of(path: Path, places: Sequence[Place]) -> Place | None:
    # The deepest root that holds the path: a --prefix inside the store is the prefix's.
    holding = [p for p in places if path == p.root or p.root in path.parents]
    return max(holding, key=lambda p: len(p.root.parts), default=None)


def denied(action: str, exc: OSError, places: Sequence[Place], fallback: Path) -> CudaupError:
    """The error for a write the operating system refused, naming the path and a way round."""
    path = Path(os.fsdecode(exc.filename)) if exc.filename is not None else fallback
    reason = "read-only file system" if exc.errno == errno.EROFS else "permission denied"
    place = _place_of(path, places) or _place_of(fallback, places)
    remedy = place.remedy if place is not None else "fix its permissions"
    return PermissionDeniedError(f"{action}: {reason}: {path}{_whose(path)}; {remedy}")


def _whose(path: Path) -> str:
    """Who owns ``path``, when not cudaup's user; for a path that does not exist, the
    nearest directory that does (which refused to hold it), and that the rest is missing."""
    euid = os.geteuid()
    runs = f"cudaup runs as uid {euid}"
    with contextlib.suppress(OSError):
        if os.path.lexists(path):
            uid = path.lstat().st_uid
            return f" (owned by uid {uid}; {runs})" if uid != euid else ""
        existing = _existing_directory(path.parent)
        uid = existing.stat().st_uid
        owner = f", owned by uid {uid}; {runs}" if uid != euid else ""
        return f" (it does not exist; {existing} is the nearest directory that does{owner})"
    return ""


def explain(
    exc: OSError, action: str, directory: Path, places: Sequence[Place], needed: int | None = None
) -> CudaupError | None:
    """The CudaupError ``exc`` stands for, or None when it is neither a full disk nor a refusal."""
    if exc.errno in DISK_FULL:
        where = Path(os.fsdecode(exc.filename)).parent if exc.filename is not None else directory
        return full_disk(action, where, needed, exc)
    if exc.errno in DENIED:
        return denied(action, exc, places, directory)
    return None


@contextlib.contextmanager
def explained(
    action: str, directory: Path, places: Sequence[Place], needed: int | None = None
) -> Iterator[None]:
    """Turn a full disk or a refused write in the block into cudaup's error for it."""
    try:
        yield
    except OSError as exc:
        error = explain(exc, action, directory, places, needed)
        if error is None:
            raise
        raise error from exc


def remove_tree(path: Path) -> None:
    """``shutil.rmtree``, whose errors name the full path of what could not be removed
    (its own name the entry relative to a directory descriptor, useless in a message)."""

    def named(_function: Callable[..., object], failed: str, exc: BaseException) -> None:
        if isinstance(exc, OSError) and exc.errno is not None:
            raise OSError(exc.errno, exc.strerror, failed) from exc
        raise exc

    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=named)
    else:
        shutil.rmtree(path, onerror=lambda function, failed, info: named(function, failed, info[1]))
