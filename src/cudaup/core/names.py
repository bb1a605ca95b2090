"""The one place where names from outside are checked before they may choose a path.

Manifests, lock files, package indexes, wheels and mirrors all hand cudaup
strings that end up as parts of paths: component keys (``cuda_nvcc``), file
names (``cuda_nvcc-linux-x86_64-13.0.88-archive.tar.xz``), relative paths
(``cuda_nvcc/linux-x86_64/…``), release numbers (``13.0.1``, a directory in
the store), project names (a directory of a plan's local index, a key of the family
table) and file URLs (whose path becomes a mirror's path and whose last
segment becomes a file name).  Each is checked here, before it is used, against
what such a name may look like; anything else (``..``, a separator where none
belongs, an absolute path, a drive letter, control characters, an empty or
overlong name) is refused with an error that names the field, the value and
where it came from.  Sizes (a number that decides how much is read or
allocated) and one-line labels (text that reaches a terminal) are checked here
too.  The caller chooses the error: a source document's is
:class:`~cudaup.errors.SourceFormatError` (exit 8), a lock's
:class:`~cudaup.errors.IntegrityError` (exit 7).

Pure: strings in, the same strings out (or an error).
"""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit

from cudaup.errors import CudaupError, SourceFormatError

#: The longest name one path component may have on Linux filesystems.
MAX_NAME = 255
#: The longest relative path a source may give (Linux's PATH_MAX).
MAX_PATH = 4095
#: The largest file size a source may state (1 PiB): larger is a lie, not a file.
MAX_SIZE = 2**50
#: The longest URL a source may give.
MAX_URL = 8192
#: The longest one-line label (a version, a release label, a driver).
MAX_LABEL = 200

_COMPONENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")
_RELEASE = re.compile(r"^\d{1,4}(?:\.\d{1,6}){1,3}$")
_DRIVE = re.compile(r"^[A-Za-z]:")
#: C0 controls and DEL: one regex search, not a Python test per character (an install
#: checks every member name of every archive: thousands of paths, several times).
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
#: A relative path every segment of which passes :func:`_segment_problem` whatever its
#: length: plain names without controls, separators other than ``/``, ``:`` (where a
#: drive letter would be) or ``.``/``..`` segments.  One match for the whole path, the
#: common case (an archive's member names); anything else is checked segment by segment.
_PLAIN_SEGMENT = r"(?!\.\.?(?:/|\Z))[^/\\:\x00-\x1f\x7f]+"
_PLAIN_PATH = re.compile(rf"{_PLAIN_SEGMENT}(?:/{_PLAIN_SEGMENT})*\Z")


#: A project name as canonicalize_name writes it (PEP 503): it names a directory of a
#: local index and a key of the family table.
_PROJECT = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


def is_project_name(name: str) -> bool:
    """Whether ``name`` is a canonical project name (``flashinfer-python``, not ``../x``)."""
    return _PROJECT.match(name) is not None


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
    if _CONTROL.search(segment):
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


def check_file_names(
    values: list[str], *, field: str, where: str = "", error: type[CudaupError] = SourceFormatError
) -> None:
    """Every one of ``values`` (strings) a plain file name, as :func:`check_file_name`
    checks one: one match for all of them (a project page lists thousands), then one by
    one only when that fails, to name the one refused."""
    joined = "/".join(values)
    if (
        joined.count("/") == len(values) - 1  # no name holds a separator of its own
        and joined.isascii()  # so a name's bytes are its characters
        and max(map(len, values), default=0) <= MAX_NAME
        and _PLAIN_PATH.match(joined)
    ):
        return
    for value in values:
        check_file_name(value, field=field, where=where, error=error)


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
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > MAX_PATH:
        raise _refuse(error, field, value, where, f"longer than {MAX_PATH} bytes")
    if "\\" in value:
        raise _refuse(error, field, value, where, "it contains a backslash")
    if size <= MAX_NAME and _PLAIN_PATH.match(value):
        return value  # no segment can be longer than the whole path
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


def check_size(
    value: object,
    *,
    field: str,
    where: str = "",
    error: type[CudaupError] = SourceFormatError,
    text: bool = True,
) -> int:
    """A byte count: a non-negative integer up to :data:`MAX_SIZE` (or, with ``text``,
    its decimal digits as a string, as NVIDIA's manifests write it)."""
    if isinstance(value, str) and text:
        digits = value.strip()
        # Counting digits first: int() of thousands of digits is refused (or slow).
        if not digits.isascii() or not digits.isdigit() or len(digits) > len(str(MAX_SIZE)):
            raise _refuse(error, field, value, where, f"not a size (0 to {MAX_SIZE} bytes)")
        number = int(digits)
    elif isinstance(value, int) and not isinstance(value, bool):
        number = value
    else:
        raise _refuse(error, field, value, where, "not an integer")
    if not 0 <= number <= MAX_SIZE:
        raise _refuse(error, field, value, where, f"not a size (0 to {MAX_SIZE} bytes)")
    return number


def check_label(
    value: object, *, field: str, where: str = "", error: type[CudaupError] = SourceFormatError
) -> str:
    """One line of printable text (``13.0.88``, ``CUDA 13.0 Update 1``, ``580.82.07``).

    Never a path; refused when it holds control characters (a terminal would act
    on them) or is empty or overlong."""
    if not isinstance(value, str):
        raise _refuse(error, field, value, where, "not a string")
    if not value or len(value) > MAX_LABEL:
        raise _refuse(error, field, value, where, f"empty or longer than {MAX_LABEL} characters")
    if not value.isprintable():
        raise _refuse(error, field, value, where, "it contains control characters")
    return value


def check_file_url(
    value: object, *, field: str, where: str = "", error: type[CudaupError] = SourceFormatError
) -> str:
    """An ``http(s)`` URL of one file: its path (percent-decoded) is plain names only,
    so that both the path (a mirror's layout) and its last segment (a file name) are
    safe to use on disk.  No query, no fragment, no whitespace."""
    if not isinstance(value, str):
        raise _refuse(error, field, value, where, "not a string")
    if len(value) > MAX_URL:
        raise _refuse(error, field, value, where, f"longer than {MAX_URL} characters")
    if any(c.isspace() or not c.isprintable() for c in value):
        raise _refuse(error, field, value, where, "it contains whitespace or control characters")
    try:
        parts = urlsplit(value)
    except ValueError:
        raise _refuse(error, field, value, where, "not a URL") from None
    if parts.scheme not in {"http", "https"} or not parts.netloc:
        raise _refuse(error, field, value, where, "not an http(s) URL")
    if parts.query or parts.fragment or value.endswith(("?", "#")):
        raise _refuse(error, field, value, where, "a file URL has no query or fragment")
    path = parts.path.removeprefix("/")
    for segment in path.split("/"):
        problem = _segment_problem(unquote(segment))
        if problem:
            raise _refuse(error, field, value, where, f"its path is unsafe: {problem}")
    return value
