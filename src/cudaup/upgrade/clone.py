"""Whole environment trees: a hard-linked clone, its fingerprint, and an atomic exchange.

A clone recreates every directory and symbolic link of a tree and hard-links every
file (a copy where no link can be made: another filesystem, a file the kernel will
not let this user link), keeping modes, owners and times, so the clone is the tree
byte for byte at the cost of its directory entries.  Installers replace files rather
than write into them (uv links or renames a new file over the old), so the clone
stays what the tree was while the tree is changed; its :class:`Fingerprint` (type,
mode, size, mtime and inode of every entry) proves it, since a write into a shared
file moves its mtime and size.

:func:`exchange` swaps two directories in one step (``renameat2(RENAME_EXCHANGE)``,
Linux 3.15+ on ext4, xfs, btrfs, tmpfs and most local filesystems): at every instant
each path names one whole tree.
"""

# os on strings, not pathlib, for the entries of a tree: see clone_tree.
# ruff: noqa: PTH101, PTH102, PTH115, PTH211

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cudaup.errors import ConflictError, SourceFormatError
from cudaup.util.libc import libc

_NO_LINK = {errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP, errno.EACCES}
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
#: What ``renameat2`` answers where the kernel or the filesystem cannot exchange.
_NO_EXCHANGE = {errno.EINVAL, errno.ENOSYS, errno.ENOTSUP}
_KINDS = {"dir", "file", "symlink"}


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry of a tree, relative to its root ("" is the root itself)."""

    path: str
    kind: str
    mode: int
    size: int
    mtime_ns: int
    inode: int
    target: str | None = None

    def to_json(self) -> list[Any]:
        return [self.path, self.kind, self.mode, self.size, self.mtime_ns, self.inode, self.target]

    @classmethod
    def from_json(cls, row: Any, what: str) -> Entry:
        if not (
            isinstance(row, list)
            and len(row) == 7
            and isinstance(row[0], str)
            and row[1] in _KINDS
            and all(type(v) is int and v >= 0 for v in row[2:6])
            and (row[6] is None or isinstance(row[6], str))
        ):
            raise SourceFormatError(f"{what} holds an entry cudaup did not write: {row!r:.200}")
        parts = Path(row[0]).parts
        if row[0] and (Path(row[0]).is_absolute() or ".." in parts or "." in parts):
            raise SourceFormatError(f"{what} names {row[0]!r}, which is not inside the tree")
        return cls(*row)

    def describe_difference(self, now: os.stat_result | None) -> str | None:
        """How the entry on disk differs from this record (None: it does not)."""
        if now is None:
            return "is gone"
        kind = _kind(now.st_mode)
        if kind != self.kind:
            return f"is a {kind}, was a {self.kind}"
        if stat.S_IMODE(now.st_mode) != self.mode:
            return f"mode {stat.S_IMODE(now.st_mode):o}, was {self.mode:o}"
        if kind == "file" and (now.st_size, now.st_ino) != (self.size, self.inode):
            return "was replaced or written"
        if kind != "dir" and now.st_mtime_ns != self.mtime_ns:
            return "was written after the snapshot"
        return None


@dataclass(frozen=True)
class Fingerprint:
    entries: tuple[Entry, ...]

    @property
    def files(self) -> int:
        return sum(e.kind == "file" for e in self.entries)

    @property
    def bytes(self) -> int:
        return sum(e.size for e in self.entries if e.kind == "file")

    def differences(self, root: Path, limit: int = 5) -> list[str]:
        """What differs between ``root`` now and this fingerprint (at most ``limit``)."""
        found: list[str] = []
        recorded = {e.path for e in self.entries}
        top = str(root)
        for entry in self.entries:
            path = f"{top}/{entry.path}" if entry.path else top  # strings: see clone_tree
            try:
                now: os.stat_result | None = os.lstat(path)
            except FileNotFoundError:
                now = None
            difference = entry.describe_difference(now)
            if (
                entry.kind == "symlink"
                and now is not None
                and _kind(now.st_mode) == "symlink"
                and os.readlink(path) != entry.target
            ):
                difference = "points elsewhere"
            if difference is not None:
                found.append(f"{entry.path or '.'} {difference}")
            if len(found) >= limit:
                return found
        for relative, _status in walk(root):
            if relative not in recorded:
                found.append(f"{relative} was added")
                if len(found) >= limit:
                    break
        return found


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISLNK(mode):
        return "symlink"
    return "special"


def walk(root: Path) -> Iterator[tuple[str, os.stat_result]]:
    """Every entry below ``root`` (not the root), parents before children, never
    following a symbolic link."""
    stack = [""]
    while stack:
        relative = stack.pop()
        directory = root / relative if relative else root
        with os.scandir(directory) as entries:
            for item in sorted(entries, key=lambda e: e.name):
                path = f"{relative}/{item.name}" if relative else item.name
                status = item.stat(follow_symlinks=False)
                yield path, status
                if stat.S_ISDIR(status.st_mode):
                    stack.append(path)


def fingerprint(root: Path) -> Fingerprint:
    top = str(root)
    entries = [_entry("", root.lstat(), top)]
    entries += [_entry(path, status, f"{top}/{path}") for path, status in walk(root)]
    return Fingerprint(tuple(entries))


def _entry(relative: str, status: os.stat_result, path: str) -> Entry:
    kind = _kind(status.st_mode)
    if kind == "special":
        raise ConflictError(
            f"{path} is neither a file, a directory nor a link; an environment holds none"
        )
    target = os.readlink(path) if kind == "symlink" else None
    size = status.st_size if kind == "file" else 0
    return Entry(
        relative,
        kind,
        stat.S_IMODE(status.st_mode),
        size,
        status.st_mtime_ns,
        status.st_ino,
        target,
    )


def clone_tree(source: Path, destination: Path) -> Fingerprint:
    """A hard-linked clone of ``source`` at the new ``destination``; its fingerprint."""
    root = source.lstat()
    destination.mkdir(0o700)
    # Paths as strings: pathlib's joins were most of the Python time of a clone of a
    # torch environment (37,000 entries, two joins each).
    top, copy = str(source), str(destination)
    directories: list[tuple[str, os.stat_result]] = [(copy, root)]
    entries = [_entry("", root, top)]
    owner = os.geteuid() == 0
    for relative, found in walk(source):
        src, dst = f"{top}/{relative}", f"{copy}/{relative}"
        kind = _kind(found.st_mode)
        status = found
        if kind == "dir":
            os.mkdir(dst, 0o700)
            directories.append((dst, found))
        elif kind == "file":
            try:
                os.link(src, dst, follow_symlinks=False)
            except OSError as exc:
                if exc.errno not in _NO_LINK:
                    raise
                shutil.copy2(src, dst, follow_symlinks=False)
                if owner:
                    os.chown(dst, found.st_uid, found.st_gid)
                status = os.lstat(dst)
        elif kind == "symlink":
            os.symlink(os.readlink(src), dst)
            if owner:
                os.lchown(dst, found.st_uid, found.st_gid)
            os.utime(dst, ns=(found.st_atime_ns, found.st_mtime_ns), follow_symlinks=False)
            status = os.lstat(dst)
        entries.append(_entry(relative, status, src))
    # Directories last, deepest first: their times and modes once nothing more goes in.
    for path, status in reversed(directories):
        if owner:
            os.chown(path, status.st_uid, status.st_gid)
        os.chmod(path, stat.S_IMODE(status.st_mode))
        os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns))
    return Fingerprint(tuple(entries))


def exchange(first: Path, second: Path) -> bool:
    """Swap two directories atomically; False where the kernel or filesystem cannot
    (the caller then moves them one after the other)."""
    function = getattr(libc(), "renameat2", None)
    if function is None:
        return False
    result = function(
        _AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), _RENAME_EXCHANGE
    )
    if result == 0:
        return True
    code = ctypes.get_errno()
    if code in _NO_EXCHANGE:
        return False
    raise OSError(code, os.strerror(code), str(first))
