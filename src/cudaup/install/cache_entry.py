"""One entry of the unpacked cache, ``unpacked/<sha256>/``, and the checks on ``unpacked/``
itself (:mod:`cudaup.install.unpack_cache` fills and uses them).

An entry is trusted only as its owner left it: a tree, a manifest of every entry of the
tree, and a stamp saying when its digests were last found right
(:class:`CacheEntry`).  ``unpacked/`` is used only when it is this user's own directory that
no one else may write (:func:`refusal`); the staging directories a killed process left
there are swept (:func:`sweep`).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import stat
import time
from pathlib import Path

from cudaup.install.tree import (
    DamagedTreeError,
    ForeignTreeError,
    Seen,
    Stamp,
    TreeManifest,
    compare,
    fingerprint,
    foreign,
    read_owned,
    relinked,
    scan,
)
from cudaup.util.boot import boot_id
from cudaup.util.cachedir import STAGING_PREFIX

TREE, MANIFEST, STAMP = "tree", "manifest.json", "verified.json"


class CacheEntry:
    """``unpacked/<sha256>/``: its tree, manifest and stamp."""

    def __init__(self, path: Path, key: str) -> None:
        self.path, self.key = path, key
        self.tree = path / TREE
        self.inode: int | None = None  # of the directory last loaded: discard only that one
        self.seen: dict[str, Seen] = {}

    def load(self, uid: int) -> tuple[TreeManifest, bool] | None:
        """The manifest of a tree that matches it, and whether the stamp vouches for its
        digests; None when there is no entry.  :class:`ForeignTreeError`: another user's;
        :class:`DamagedTreeError`: ours, and not what its manifest says."""
        try:
            info = self.path.lstat()
        except FileNotFoundError:
            return None
        self.inode = info.st_ino
        if info.st_uid != uid:
            raise ForeignTreeError(f"it belongs to uid {info.st_uid}")
        if not stat.S_ISDIR(info.st_mode):
            raise DamagedTreeError("it is not a directory")
        if info.st_mode & 0o022:
            raise DamagedTreeError("it is writable by group or others")
        try:
            manifest = TreeManifest.from_bytes(read_owned(self.path / MANIFEST, uid))
        except FileNotFoundError:
            raise DamagedTreeError(
                "it has no manifest (an older cudaup made it, or it was cut short)"
            ) from None
        if manifest.sha256 != self.key:
            raise DamagedTreeError("its manifest is another archive's")
        try:
            top = self.tree.lstat()
        except FileNotFoundError:
            raise DamagedTreeError(f"it has no {TREE}/") from None
        if top.st_uid != uid:
            raise ForeignTreeError(f"{TREE}/ belongs to uid {top.st_uid}")
        if not stat.S_ISDIR(top.st_mode) or top.st_mode & 0o022:
            raise DamagedTreeError(f"{TREE}/ is not a directory only its owner may write")
        try:
            self.seen = scan(self.tree)
        except OSError as exc:
            raise DamagedTreeError(
                f"its tree cannot be read ({exc.strerror}: {exc.filename})"
            ) from None
        owner = foreign(self.seen.values(), uid)
        if owner is not None:
            raise ForeignTreeError(owner)
        problem = compare(self.seen, manifest)
        if problem is not None:
            raise DamagedTreeError(problem)
        return manifest, self._stamped(uid)

    def _stamped(self, uid: int) -> bool:
        """Whether the stamp vouches for the digests: this boot, these very files."""
        current = boot_id()
        try:
            stamp = Stamp.from_bytes(read_owned(self.path / STAMP, uid, 4096))
        except (OSError, DamagedTreeError, ForeignTreeError):
            return False
        return (
            stamp is not None
            and current is not None
            and stamp.boot == current
            and stamp.fingerprint == fingerprint(self.seen)
        )

    def stamp(self, boot: str | None, uid: int) -> None:
        """Record that the digests were found right, for the files as they are now.

        Called once the install that checked them is published (or a toolkit linked
        from them removed: :func:`stamps_kept`): linking, and then renaming those links
        into the toolkit (or removing them), moved each file's ctime, and the stamp
        must hold the ctimes the next use will find.  So the tree is scanned again and
        stamped only when those moves are all that changed since it was loaded.  A
        write meanwhile with its mtime put back goes unseen: only the cache's
        own user (or root) can write these files, and that user could as well rewrite
        the stamp; the stamp finds what tools and accidents do, not what that user means.
        """
        if boot is None or not self.seen:
            return
        with contextlib.suppress(OSError):  # without a stamp, the next use hashes again
            now = scan(self.tree)
            if relinked(self.seen, now) is not None:
                return
            path = self.path / STAMP
            temporary = self.path / f"{STAGING_PREFIX}{STAMP}-{secrets.token_hex(4)}"
            write_new(temporary, Stamp(boot, fingerprint(now)).to_bytes())
            if self.path.lstat().st_uid == uid:
                temporary.replace(path)

    def discard(self, root: Path, uid: int) -> None:
        """Move the entry loaded last out of the way and delete it (ours only)."""
        try:
            info = self.path.lstat()
        except FileNotFoundError:
            return
        if info.st_ino != self.inode or info.st_uid != uid:
            return  # another process replaced it meanwhile: that one is checked anew
        trash = root / f"{STAGING_PREFIX}{self.key[:16]}-{secrets.token_hex(4)}"
        try:
            self.path.rename(trash)
        except FileNotFoundError:
            return
        if stat.S_ISDIR(info.st_mode):
            shutil.rmtree(trash, ignore_errors=True)
        else:
            trash.unlink()


def refusal(root: Path, uid: int) -> str | None:
    """Why ``unpacked/`` itself may not be trusted, or None."""
    info = root.lstat()
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        return f"{root} is not a directory (a symbolic link?)"
    if info.st_uid != uid:
        return f"{root} belongs to uid {info.st_uid}, not to uid {uid} who installs"
    if info.st_mode & 0o022:
        return f"{root} is writable by group or others"
    return None


def write_new(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        os.fchmod(handle.fileno(), 0o644)  # whatever the umask


#: No unpack takes a day: a staging directory created that long ago was left by a process
#: killed mid-unpack (SIGKILL, power loss), never one still at work.
STALE_STAGING = 24 * 3600.0


def sweep(root: Path, uid: int) -> None:
    """Remove the staging directories our killed processes left (SIGKILL, power loss)."""
    now = time.time()
    for entry in root.glob(f"{STAGING_PREFIX}*"):
        with contextlib.suppress(OSError):
            info = entry.lstat()
            if info.st_uid == uid and now - info.st_mtime > STALE_STAGING:
                shutil.rmtree(entry)
