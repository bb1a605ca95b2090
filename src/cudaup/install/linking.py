"""A toolkit's own copy of an unpacked tree: hard links into the cache, or copies.

Hard links (the default, as uv does) cost no disk and no time, and every
toolkit installed from one archive shares the same inodes with the cache: a
change to one of those files is a change to all of them, which is why cudaup
never modifies an installed file in place and checks the cached tree against
its manifest before each use.  ``copy`` gives the toolkit files of its own
(link count 1), for toolkits someone will modify, or a cache that will be
cleaned by other means; across filesystems, where no hard link can be made,
files are copied anyway.
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path
from typing import Literal

from cudaup.install.tree import TreeEntry, TreeManifest

LinkMode = Literal["hardlink", "copy"]
#: What ``link(2)`` answers where a hard link cannot be made: another filesystem, a
#: filesystem without links, a file with too many links already.
_NO_LINK = {errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP}
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC


def materialize(source: Path, destination: Path, manifest: TreeManifest, mode: LinkMode) -> bool:
    """Recreate the manifest's tree, found at ``source``, as the new ``destination``.

    Only what the manifest lists is made (directories first, symlinks last, each
    directory's mode set once its entries are in).  Returns whether every file is a
    hard link (False with ``copy``, or where links could not be made).
    """
    destination.mkdir(0o755)
    # Plain strings, not Paths: a toolkit is thousands of entries, and joining a Path
    # costs more than the link(2) it names.  Each entry's path is a checked relative
    # path ("/"-joined plain names: TreeManifest.from_bytes), so this is joinpath's result.
    into, out = os.fspath(source), os.fspath(destination)
    ordered = sorted(manifest.entries, key=lambda entry: entry.parts)
    directories = [(f"{out}/{entry.path}", entry.mode) for entry in ordered if entry.kind == "dir"]
    for directory, _mode in directories:
        os.mkdir(directory, 0o700)  # noqa: PTH102 - strings: see above
    linking = mode == "hardlink"
    for entry in ordered:
        if entry.kind != "file":
            continue
        src, dst = f"{into}/{entry.path}", f"{out}/{entry.path}"
        if linking:
            try:
                os.link(src, dst, follow_symlinks=False)
                continue
            except OSError as exc:
                if exc.errno not in _NO_LINK:
                    raise
                linking = False
        copy_file(src, dst, entry)
    for entry in ordered:
        if entry.kind == "symlink":
            os.symlink(entry.target, f"{out}/{entry.path}")  # noqa: PTH211
    for directory, final in reversed(directories):
        os.chmod(directory, final)  # noqa: PTH101
    return linking and mode == "hardlink"


def copy_file(source: str | Path, destination: str | Path, entry: TreeEntry) -> None:
    """A new file at ``destination`` with ``source``'s bytes and the manifest's mode."""
    src = os.open(source, _OPEN)
    try:
        dst = os.open(destination, _CREATE, 0o600)
        try:
            _copy_bytes(src, dst)
            os.fchmod(dst, entry.mode)
        finally:
            os.close(dst)
    finally:
        os.close(src)


def _copy_bytes(src: int, dst: int) -> None:
    offset = 0
    try:
        while sent := os.sendfile(dst, src, offset, 2**30):
            offset += sent
    except OSError as exc:  # sendfile cannot copy between these two: read and write instead
        if exc.errno not in {errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP} or offset:
            raise
        with open(src, "rb", closefd=False) as reader, open(dst, "wb", closefd=False) as writer:
            shutil.copyfileobj(reader, writer, 2**20)
