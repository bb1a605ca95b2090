"""Verify, then publish: the one step from a part file to a file under its final name."""

from __future__ import annotations

import contextlib
import hashlib
import stat
from pathlib import Path

from cudaup.download.request import DownloadRequest
from cudaup.download.target import DownloadPaths, fsync_dir
from cudaup.errors import IntegrityError, UsageError
from cudaup.util.trust import file_problem

#: Bytes hashed per read, here and while a download fills its part file.
HASH_BLOCK = 4 * 1024 * 1024
#: What a rename may need on a full disk: one block for the directory's new entry.
PUBLISH_ROOM = 4096


def hash_file(path: Path, algorithm: str) -> str:
    digest = hashlib.new(algorithm)
    with path.open("rb") as handle:
        while block := handle.read(HASH_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def is_verified(path: Path, request: DownloadRequest) -> bool:
    """Whether ``path`` already holds the file: the known size and the strongest checksum,
    in a regular file (not a link) that no one but its owner, this user or root, may
    change (:meth:`DownloadPaths.check_trusted` refused one another user owns)."""
    checksum = request.checksum
    if checksum is None:
        return False
    try:
        info = path.lstat()
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(info.st_mode) or file_problem(str(path), info) is not None:
        return False
    if request.size is not None and info.st_size != request.size:
        return False
    return hash_file(path, checksum[0]) == checksum[1]


def publish(
    target: DownloadPaths, request: DownloadRequest, digest: str | None, *, durable: bool = True
) -> None:
    """Move a complete, fsynced part file to its final name, if its digest is the one
    expected; else delete it (its bytes are not the file the sources named).

    The only way a download gets its final name, whichever way its bytes came.
    """
    checksum = request.checksum
    if checksum is not None and digest != checksum[1]:
        target.discard()
        why = (
            f"the --{checksum[0]} given is not this file's: check it, and the URL"
            if request.checksum_given
            else "the published checksum or the server is wrong; try again later"
        )
        raise IntegrityError(
            f"{request.filename}: {checksum[0]} mismatch: expected {checksum[1]}, got {digest}; "
            f"the download was deleted ({why})"
        )
    if target.final.is_dir() and not target.final.is_symlink():
        raise UsageError(
            f"{target.final} is a directory; cudaup will not put {request.filename} in its "
            "place (remove it, or choose another -o directory)"
        )
    with target.explained(target.final, "create", PUBLISH_ROOM):
        target.part.replace(target.final)
    if durable:
        fsync_dir(target.directory)
    with contextlib.suppress(FileNotFoundError):
        target.state.unlink()
