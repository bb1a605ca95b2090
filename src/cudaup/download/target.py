"""Where one download's bytes live: the final name, the part file, its resume state."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cudaup.errors import CudaupError, DownloadTooLargeError, InsufficientSpaceError, UsageError
from cudaup.util.atomic import atomic_write
from cudaup.util.faults import Place, explain, explained, output_place
from cudaup.util.paths import inside

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

    def load_state(self) -> dict[str, Any] | None:
        try:
            document = json.loads(self.state.read_text())
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
        self.fd = os.open(path, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
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
