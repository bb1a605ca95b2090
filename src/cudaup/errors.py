"""Every error cudaup raises, under one root, each with its exit code.

The CLI turns any :class:`CudaupError` into one sentence on stderr and its
``exit_code``; library callers catch the class they care about.  The codes are
part of the command-line interface and are documented in the README.
"""

from __future__ import annotations

import errno


class CudaupError(Exception):
    """Root of cudaup's errors. ``exit_code`` is what the CLI exits with."""

    exit_code: int = 1
    #: A short machine-readable name, used in ``--json`` error output.
    kind: str = "error"


class UsageError(CudaupError):
    """The request itself is malformed: bad version syntax, platform or component name."""

    exit_code = 2
    kind = "usage"


class ReleaseNotFoundError(CudaupError):
    """No CUDA release matches the request; the message names the nearest real ones."""

    exit_code = 3
    kind = "release-not-found"

    def __init__(self, message: str, nearest: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.nearest = nearest


class ArtifactNotFoundError(CudaupError):
    """The release exists but publishes nothing for this platform, channel or component."""

    exit_code = 4
    kind = "artifact-not-found"


class NetworkError(CudaupError):
    """A source could not be reached (DNS, connection, TLS, timeout, 5xx)."""

    exit_code = 5
    kind = "network"


class ArrivalLostError(NetworkError):
    """A download that an early reader was following failed or started over.

    Readers of a file still arriving (``cudaup.download.arrival``) get this; the
    installer then works from the verified file instead.
    """

    kind = "arrival-lost"


class RemoteFileMissingError(CudaupError):
    """A URL answered 404/410 (or another client error): there is no such file."""

    exit_code = 6
    kind = "remote-file-missing"

    def __init__(self, message: str, url: str, status: int) -> None:
        super().__init__(message)
        self.url = url
        self.status = status


class IntegrityError(CudaupError):
    """Sizes or checksums disagree between sources, or with the bytes received."""

    exit_code = 7
    kind = "integrity"


class SourceFormatError(CudaupError):
    """An NVIDIA or PyPI document could not be parsed as the format it should be."""

    exit_code = 8
    kind = "source-format"


class OfflineError(CudaupError):
    """``--offline`` was asked for but the shipped snapshot cannot answer."""

    exit_code = 9
    kind = "offline"


class InsufficientSpaceError(CudaupError):
    """Not enough free disk space for what is about to be written."""

    exit_code = 10
    kind = "insufficient-space"


class LockedError(CudaupError):
    """Another cudaup process holds the lock on the same target for too long."""

    exit_code = 11
    kind = "locked"


class DriverTooOldError(CudaupError):
    """The machine's driver cannot run the toolkit asked for (``--force`` overrides)."""

    exit_code = 12
    kind = "driver-too-old"


class NoCommonLineError(CudaupError):
    """``plan``: no CUDA line satisfies every package, the driver and the GPUs."""

    exit_code = 13
    kind = "no-common-line"


class PermissionDeniedError(CudaupError):
    """The operating system refused a write or a read (EACCES, EPERM, EROFS); the
    message names the path and the way round it."""

    exit_code = 14
    kind = "permission-denied"


class ProblemsFoundError(CudaupError):
    """``doctor`` reported at least one error-level problem (its report is printed in full)."""

    exit_code = 15
    kind = "problems-found"


class ConflictError(CudaupError):
    """The machine is not in the state the command needs, and cudaup will not force it:
    a real directory where ``/usr/local/cuda`` should be a link, nothing to undo, a link
    now managed another way.  The message says what to do."""

    exit_code = 16
    kind = "conflict"


class ExternalToolError(CudaupError):
    """A program cudaup runs for the user failed or timed out (NVIDIA's runfile
    installer, ``update-alternatives``); the message names it and where its log is."""

    exit_code = 17
    kind = "external-tool"


class OutputClosedError(CudaupError):
    """Whoever read cudaup's output stopped reading (``cudaup versions | head -1``).

    Nothing else went wrong, so nothing more is said: the exit code is the shell's
    for a process stopped by SIGPIPE.
    """

    exit_code = 141
    kind = "output-closed"


class CommandNotRunError(CudaupError):
    """``cudaup run`` could not start the command (127: not found, 126: not executable)."""

    exit_code = 127
    kind = "command-not-run"

    def __init__(self, message: str, exit_code: int = 127) -> None:
        super().__init__(message)
        self.exit_code = exit_code


#: The errno values that mean "the disk is full" and "you may not".
_NO_SPACE = {errno.ENOSPC, errno.EDQUOT}
_NOT_ALLOWED = {errno.EACCES, errno.EPERM, errno.EROFS}


def from_os_error(
    exc: OSError, *, path: object = None, needed: int | None = None, hint: str = ""
) -> CudaupError | None:
    """The cudaup error for an operating-system refusal that is not a bug: a full disk
    (exit 10) or a permission (exit 14), naming the path; None for anything else.

    ``path`` defaults to the one the OS named; ``needed`` adds the bytes still to
    write; ``hint`` says what to do instead (another directory, a variable).
    """
    where = path if path is not None else (exc.filename or "a file")
    if exc.errno in _NO_SPACE:
        amount = f"; {needed} more bytes ({needed / 2**30:.2f} GiB) are needed" if needed else ""
        advice = f"; {hint}" if hint else "; free some space and run the same command again"
        return InsufficientSpaceError(f"the disk is full writing {where}{amount}{advice}")
    if exc.errno in _NOT_ALLOWED:
        why = "the file system is read-only" if exc.errno == errno.EROFS else "permission denied"
        advice = f"; {hint}" if hint else ""
        return PermissionDeniedError(f"{why}: {where}{advice}")
    return None


def _every(cls: type[CudaupError]) -> list[type[CudaupError]]:
    return [cls, *(sub for direct in cls.__subclasses__() for sub in _every(direct))]


#: Each error kind and its exit code: the table the README documents.
EXIT_CODES: dict[str, int] = {cls.kind: cls.exit_code for cls in _every(CudaupError)}
