"""Every error cudaup raises, under one root, each with its exit code.

The CLI turns any :class:`CudaupError` into one sentence on stderr and its
``exit_code`` (with its ``hint``, when it has one, on a line of its own); library
callers catch the class they care about.  The codes are part of the command-line
interface and are documented in the README.
"""

from __future__ import annotations

from collections.abc import Mapping

TYPE_CHECKING = False  # importing typing costs ~2 ms of every start; these are annotations
if TYPE_CHECKING:
    from typing import Any


class CudaupError(Exception):
    """Root of cudaup's errors. ``exit_code`` is what the CLI exits with.

    The message says what went wrong and where; ``hint``, when given, what gets round it
    (``--allow-unverified downloads it anyway``), kept apart so that a library caller
    reads the cause alone and the command line words the way out (as pip's
    ``DiagnosticPipError`` keeps its hint)."""

    exit_code: int = 1
    #: A short machine-readable name, used in ``--json`` error output.
    kind: str = "error"
    hint: str | None = None
    #: What the error knows as data, for ``--json`` (``None``: nothing beyond the message).
    details: Mapping[str, object] | None = None

    def __init__(self, *args: object, hint: str | None = None) -> None:
        super().__init__(*args)
        if hint is not None:
            self.hint = hint

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` error object: ``kind``, ``message``, ``exit_code``, and ``hint``
        and ``details`` where there are any."""
        document: dict[str, Any] = {
            "kind": self.kind,
            "message": str(self),
            "exit_code": self.exit_code,
        }
        if self.hint is not None:
            document["hint"] = self.hint
        if self.details is not None:
            document["details"] = dict(self.details)
        return document


class UsageError(CudaupError):
    """The request itself is malformed: bad version syntax, platform or component name."""

    exit_code = 2
    kind = "usage"


class ReleaseNotFoundError(CudaupError):
    """No CUDA release matches the request; the message names the nearest real ones."""

    exit_code = 3
    kind = "release-not-found"

    def __init__(
        self, message: str, nearest: tuple[str, ...] = (), *, hint: str | None = None
    ) -> None:
        super().__init__(message, hint=hint)
        self.nearest = nearest


class ArtifactNotFoundError(CudaupError):
    """The release exists but publishes nothing for this platform, channel or component."""

    exit_code = 4
    kind = "artifact-not-found"


class NetworkError(CudaupError):
    """A source could not be reached (DNS, connection, TLS, timeout, 5xx)."""

    exit_code = 5
    kind = "network"


class HostUnreachableError(NetworkError):
    """No connection to a host could be made at all: its name did not resolve, it
    refused, or it did not answer the connection in time.  ``url`` is what was asked
    for; ``public`` says whether the host is one of NVIDIA's or PyPI's own, which a
    ``--mirror`` can stand in for."""

    def __init__(self, message: str, url: str, *, public: bool = False) -> None:
        super().__init__(message)
        self.url = url
        self.public = public


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
    """``plan``: no CUDA line satisfies every package, the driver and the GPUs.

    ``details`` carries the exclusions as data (each line and why, each package's
    lines), for ``--json``.
    """

    exit_code = 13
    kind = "no-common-line"

    def __init__(self, message: str, details: Mapping[str, object] | None = None) -> None:
        super().__init__(message)
        self.details: Mapping[str, object] = details or {}


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


class PackageNotFoundError(CudaupError):
    """``plan``: a requested project or version does not exist on the indexes consulted,
    or has no wheel for the target Python and platform."""

    exit_code = 18
    kind = "package-not-found"


class VerificationFailedError(CudaupError):
    """``upgrade``: the upgraded environment failed a check (broken requirements, an
    import, the CUDA line a framework reports, a kernel on the GPU), so it was rolled
    back; the message names the step and the package."""

    exit_code = 19
    kind = "verification-failed"

    def __init__(self, message: str, step: str, package: str | None) -> None:
        super().__init__(message)
        self.step = step
        self.package = package
        self.details: Mapping[str, object] = {"step": step, "package": package}


class GpuUnsupportedError(CudaupError):
    """The CUDA line asked for cannot target a GPU of this machine (CUDA 13 dropped
    sm_70); ``--force`` overrides."""

    exit_code = 20
    kind = "gpu-unsupported"


class NotKnownError(CudaupError):
    """No source cudaup reads answers the question: ``compat RELEASE --driver V`` for a
    release whose toolkit driver no source names for that OS, in a major with no known
    minor-version floor.  The answer is "unknown", never a guess either way."""

    exit_code = 21
    kind = "not-known"


class UntrustedPathError(CudaupError):
    """A file or directory that would decide what runs, or where cudaup writes, is not
    trusted: a pin or a toolkit named by path that another user owns or may write, or a
    symbolic link planted where cudaup builds a directory below its home, cache or a
    prefix.  The message names the path, its owner and the way out
    (``CUDAUP_SAFE_DIRECTORIES``, or removing the link)."""

    exit_code = 22
    kind = "untrusted-path"


class DownloadTooLargeError(CudaupError):
    """A download is, or grew, larger than its size ceiling (``--max-size``,
    ``CUDAUP_MAX_SIZE``): a body that never ends, or a source stating a size no real file
    has.  The message names the URL, the ceiling and how to raise it."""

    exit_code = 23
    kind = "too-large"


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


def _every(cls: type[CudaupError]) -> list[type[CudaupError]]:
    return [cls, *(sub for direct in cls.__subclasses__() for sub in _every(direct))]


#: Each error kind and its exit code: the table the README documents.
EXIT_CODES: dict[str, int] = {cls.kind: cls.exit_code for cls in _every(CudaupError)}
