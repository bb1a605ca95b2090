"""The one place where names from outside are checked before they may choose a path.

Manifests, lock files, package indexes, wheels and mirrors all hand cudaup
strings that end up as parts of paths: component keys (``cuda_nvcc``), file
names (``cuda_nvcc-linux-x86_64-13.0.88-archive.tar.xz``), relative paths
(``cuda_nvcc/linux-x86_64/…``) and release numbers (``13.0.1``, a directory in
the store).  Each is checked here, before it is used, against what such a name
may look like; anything else (``..``, a separator where none belongs, an
absolute path, a drive letter, control characters, an empty or overlong name)
is refused with an error that names the field, the value and where it came
from.  The caller chooses the error: a source document's is
:class:`~cudaup.errors.SourceFormatError` (exit 8), a lock's
:class:`~cudaup.errors.IntegrityError` (exit 7).

Pure: strings in, the same strings out (or an error).
"""

from __future__ import annotations

import re

from cudaup.errors import CudaupError, SourceFormatError

#: The longest name one path component may have on Linux filesystems.
MAX_NAME = 255
#: The longest relative path a source may give (Linux's PATH_MAX).
MAX_PATH = 4095

_COMPONENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")
_RELEASE = re.compile(r"^\d{1,4}(?:\.\d{1,6}){1,3}$")
_DRIVE = re.compile(r"^[A-Za-z]:")


def _refuse(
    error: type[CudaupError], field: str, value: object, where: str, reason: str
) -> CudaupError:
    shown = (
        repr(value) if not isinstance(value, str) or len(value) <= 200 else repr(value[:200]) + "…"
    )
    origin = f" in {where}" if where else ""
    return error(f"{field} {shown}{origin} is refused: {reason}")


def _segment_problem(segment: str) -> str | None:
    """Why ``segment`` cannot be one component of a path, or None when it can."""
    if segment in {"", ".", ".."}:
        return "not a name" if segment != ".." else "'..' leaves the directory"
    if "/" in segment or "\\" in segment:
        return "it contains a path separator"
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in segment):
        return "it contains control characters"
    if _DRIVE.match(segment):
        return "it starts with a drive letter"
    if len(segment.encode("utf-8", "surrogatepass")) > MAX_NAME:
        return f"longer than {MAX_NAME} bytes"
    return None


def check_file_name(
    value: object, *, field: str, where: str = "", error: type[CudaupError] = SourceFormatError
) -> str:
    """One plain file name (``cuda_nvcc-linux-x86_64-13.0.88-archive.tar.xz``)."""
    if not isinstance(value, str):
        raise _refuse(error, field, value, where, "not a string")
    problem = _segment_problem(value)
    if problem:
        raise _refuse(error, field, value, where, problem)
    return value


def check_relative_path(
    value: object, *, field: str, where: str = "", error: type[CudaupError] = SourceFormatError
) -> str:
    """A relative path of plain names separated by ``/`` (``cuda_nvcc/linux-x86_64/x.tar.xz``)."""
    if not isinstance(value, str):
        raise _refuse(error, field, value, where, "not a string")
    if not value:
        raise _refuse(error, field, value, where, "empty")
    if value.startswith(("/", "\\")) or "://" in value:
        raise _refuse(error, field, value, where, "not a relative path")
    if len(value.encode("utf-8", "surrogatepass")) > MAX_PATH:
        raise _refuse(error, field, value, where, f"longer than {MAX_PATH} bytes")
    if "\\" in value:
        raise _refuse(error, field, value, where, "it contains a backslash")
    for segment in value.split("/"):
        problem = _segment_problem(segment)
        if problem:
            raise _refuse(error, field, value, where, problem)
    return value


def check_component(
    value: object, *, field: str, where: str = "", error: type[CudaupError] = SourceFormatError
) -> str:
    """An NVIDIA component key or a package-like name (``cuda_nvcc``, ``libcublas``)."""
    if not isinstance(value, str):
        raise _refuse(error, field, value, where, "not a string")
    if len(value) > 128 or not _COMPONENT.match(value):
        raise _refuse(
            error, field, value, where, "a component is letters, digits, '_', '.', '+' and '-'"
        )
    return value


def check_release(
    value: object, *, field: str, where: str = "", error: type[CudaupError] = SourceFormatError
) -> str:
    """A release number (``13.0.1``): it names a directory in the store."""
    if not isinstance(value, str):
        raise _refuse(error, field, value, where, "not a string")
    if not _RELEASE.match(value):
        raise _refuse(error, field, value, where, "a release is dotted numbers such as 13.0.1")
    return value
