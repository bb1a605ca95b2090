"""Where one download's bytes live: the final name, the part file, its resume state."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cudaup.errors import (
    CudaupError,
    DownloadTooLargeError,
    InsufficientSpaceError,
    UntrustedPathError,
    UsageError,
)
from cudaup.util.atomic import atomic_write
from cudaup.util.faults import Place, explain, explained, output_place
from cudaup.util.paths import inside
from cudaup.util.reading import read_small
from cudaup.util.trust import OTHERS_WRITE, directories_problem, file_problem, trusted_uids, who

if TYPE_CHECKING:
    from cudaup.download.remote import Remote
    from cudaup.download.request import DownloadRequest

#: A download whose size no source states re-checks the free space each time it has
#: grown by this much: it fails (exit 10) while this much is still free, not at a full disk.
SPACE_STEP = 64 * 2**20
_RAISE_IT = "--max-size or CUDAUP_MAX_SIZE raises it"


class DownloadPaths:
    """Paths of one download: the final name, the part file and its resume state.

    ``place`` says what to do when the directory refuses a write (another ``-o``, or
    another ``CUDAUP_CACHE_DIR`` when the directory is in the cache).
    """

    def __init__(self, directory: Path, filename: str, place: Place | None = None) -> None:
        # The name comes from a URL or a source document: it must stay a plain name.
        self.final, self.part, self.state = (
            inside(directory, name, field="file name", error=UsageError)
            for name in (filename, filename + ".part", filename + ".part.json")
        )
        self.directory = directory
        self.place = place if place is not None else output_place(directory)

    def check_trusted(self, *above: Path) -> None:
        """Refuse to download where another user could change the bytes between their
        check and their use (exit 22): a directory (this one, and ``above``: the cache
        that holds it) that another user owns or may write (the sticky bit aside: there
        others may add entries, never rename or remove ours), or a part file, resume state
        or earlier download under this file's names that another user owns, which cudaup
        neither uses nor removes.  Ours that is no regular file, or that others may
        write, is removed: the download starts afresh.  Call it holding the download's
        lock, before any of those files is read."""
        problem = directories_problem((str(d), True) for d in (*above, self.directory))
        if problem is not None:
            raise UntrustedPathError(
                f"cudaup does not download into {self.directory}: {problem}, so another "
                f"user could replace the file between its check and its use; "
                f"{self.place.remedy}"
            )
        for path in (self.final, self.part, self.state):
            try:
                info = path.lstat()
            except FileNotFoundError:
                continue
            if info.st_uid not in trusted_uids():
                raise UntrustedPathError(
                    f"{path} belongs to {who(info.st_uid)}: cudaup neither uses nor removes "
                    f"another user's file; remove it, or {self.place.remedy}"
                )
            if path == self.final or (
                stat.S_ISREG(info.st_mode) and not info.st_mode & OTHERS_WRITE
            ):
                continue
            if stat.S_ISDIR(info.st_mode):
                raise UsageError(
                    f"{path} is a directory; cudaup will not download {self.final.name} "
                    f"beside it (remove it, or {self.place.remedy})"
                )
            with self.explained(path, "remove"):
                path.unlink()

    def create_part(self, size: int) -> int:
        """A new part file of ``size`` bytes, created here (never a file found under its
        name, nor through a link): its descriptor, open for reading and writing."""
        self.discard()
        with self.explained(self.part, "create", size):
            try:
                flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
                fd = os.open(self.part, flags, 0o644)
            except FileExistsError:
                raise UntrustedPathError(
                    f"{self.part} appeared again as soon as cudaup removed it: another process "
                    f"is writing in {self.directory}; {self.place.remedy}"
                ) from None
            try:
                os.ftruncate(fd, size)
            except BaseException:
                os.close(fd)
                raise
        return fd

    def load_state(self) -> dict[str, Any] | None:
        try:
            document = json.loads(read_small(self.state))
        except (OSError, ValueError):
            return None
        return document if isinstance(document, dict) and document.get("schema") == 1 else None

    def save_state(self, document: dict[str, Any], needed: int, *, durable: bool = True) -> None:
        """Rewrite the resume state atomically, and durably unless told not to (``needed``:
        bytes still to come)."""
        data = json.dumps(document)
        with self.explained(self.state, "write", needed + len(data)):
            atomic_write(self.state, data, durable=durable)

    def discard(self) -> None:
        with self.explained(self.part, "remove"):
            for path in (self.part, self.state):
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()

    def explained(
        self, path: Path, doing: str, needed: int | None = None
    ) -> contextlib.AbstractContextManager[None]:
        """A full disk or a refused write at ``path`` inside the block as the error that
        names it (see :mod:`cudaup.util.faults`)."""
        return explained(f"cannot {doing} {path}", self.directory, [self.place], needed)

    def explain(
        self, exc: OSError, path: Path, doing: str, needed: int | None = None
    ) -> CudaupError | None:
        """What :meth:`explained` makes of ``exc``, for a loop too hot for a context manager."""
        return explain(exc, f"cannot {doing} {path}", self.directory, [self.place], needed)


class PartFile:
    """The part file's descriptor, shared by the writers and the hasher.

    It is closed only once no thread is using it, and refused to every use after, so a
    worker that is still finishing a write when the download stops can never write
    through a descriptor number the process has since given to another file.
    """

    def __init__(self, path: Path) -> None:
        try:
            self.fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
            raise UntrustedPathError(f"{path} became a symbolic link while it downloaded") from None
        info = os.fstat(self.fd)
        problem = file_problem(str(path), info)
        if problem is not None or not stat.S_ISREG(info.st_mode):
            os.close(self.fd)
            raise UntrustedPathError(
                f"{problem or f'{path} is not a regular file'}: cudaup does not write a "
                "download into a file another user could change"
            )
        self._users = 0
        self._closed = False
        self._changed = threading.Condition()

    @contextlib.contextmanager
    def use(self) -> Iterator[int]:
        with self._changed:
            if self._closed:
                raise PartFileClosedError("the download stopped")
            self._users += 1
        try:
            yield self.fd
        finally:
            with self._changed:
                self._users -= 1
                self._changed.notify_all()

    def close(self) -> None:
        with self._changed:
            if self._closed:
                return
            self._closed = True
            self._changed.wait_for(lambda: self._users == 0)
        os.close(self.fd)


class PartFileClosedError(Exception):
    """A worker tried to use the part file after the download stopped."""


def check_space(directory: Path, needed: int, what: str, *, plural: bool = False) -> None:
    """Refuse when ``directory`` has less than ``needed`` bytes free; ``what`` (several
    things when ``plural``) names what needs them."""
    free = shutil.disk_usage(directory).free
    if needed > free:
        raise InsufficientSpaceError(
            f"{what} need{'' if plural else 's'} {needed} more bytes "
            f"({needed / 2**30:.2f} GiB) in {directory}, "
            f"but only {free} bytes ({free / 2**30:.2f} GiB) are free"
        )


def check_ceiling(request: DownloadRequest, remote: Remote, ceiling: int) -> None:
    """Refuse, before any byte of the body, a file whose stated size passes ``ceiling``."""
    stated = remote.size if remote.size is not None else request.size
    if stated is not None and stated > ceiling:
        raise DownloadTooLargeError(
            f"{remote.url} is {stated} bytes ({stated / 2**30:.2f} GiB), more than the "
            f"download size ceiling of {ceiling} bytes ({ceiling / 2**30:.2f} GiB); "
            f"refusing it ({_RAISE_IT})"
        )


def passed_ceiling(url: str, ceiling: int) -> DownloadTooLargeError:
    """The error for a body with no stated size that grew past ``ceiling``."""
    return DownloadTooLargeError(
        f"{url} sent more than the download size ceiling of {ceiling} bytes "
        f"({ceiling / 2**30:.2f} GiB) and no source states its size; refusing it ({_RAISE_IT})"
    )


def fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
