"""GitHub Actions' file commands: how a step hands variables, PATH entries and outputs on.

The runner names three files in a step's environment and reads them once the
step has ended:

* ``$GITHUB_ENV``: variables for the later steps, each as ``NAME<<DELIMITER``, the
  value's lines, then ``DELIMITER`` alone on a line (the form that carries any value,
  newlines included; ``NAME=value`` is the one-line form);
* ``$GITHUB_PATH``: one directory a line, each put in front of ``PATH`` for the later
  steps (the runner splits this file at ``\\r`` too, and ``:`` separates ``PATH``);
* ``$GITHUB_OUTPUT``: the step's outputs, in ``$GITHUB_ENV``'s format.

The runner reads them as UTF-8 and splits lines at ``\\n``.  Every block is
built and checked before anything is written, each file is opened before any is
written to, and a failure part way truncates the files already written back to
their sizes before: a step that fails leaves no half variable behind.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cudaup.errors import CudaupError, InsufficientSpaceError, PermissionDeniedError, UsageError

#: The file each kind of command goes to: the variable that names it.
ENV_FILE = "GITHUB_ENV"
PATH_FILE = "GITHUB_PATH"
OUTPUT_FILE = "GITHUB_OUTPUT"

_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_OUTPUT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*\Z")
_DISK_FULL = {errno.ENOSPC, errno.EDQUOT}
_REFUSED = {errno.EACCES, errno.EPERM, errno.EROFS}


def command_file(variable: str, environ: Mapping[str, str] | None = None) -> Path:
    """The file the runner named in ``variable``; :class:`UsageError` outside a workflow."""
    environ = os.environ if environ is None else environ
    value = environ.get(variable, "")
    if not value:
        raise UsageError(
            f"${variable} is not set: --shell github writes to the files the GitHub Actions "
            "runner names in $GITHUB_ENV, $GITHUB_PATH and $GITHUB_OUTPUT, so run it in a "
            "workflow step"
        )
    return Path(value)


def utf8(what: str, value: str, reader: str = "the runner") -> bytes:
    """``value`` as UTF-8; a path that is not (bytes ``os.fsdecode`` kept) is refused."""
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError:
        shown = value.encode("utf-8", "backslashreplace").decode()
        raise UsageError(f"{what} {shown} is not valid UTF-8, which {reader} needs") from None


def _delimiter(value: str) -> str:
    """A random ``ghadelimiter_…`` (the runner's own toolkit's form) that ``value`` lacks."""
    while True:
        candidate = f"ghadelimiter_{secrets.token_hex(16)}"
        if candidate not in value:
            return candidate


def key_value(name: str, value: str, *, output: bool = False) -> bytes:
    """One ``$GITHUB_ENV`` (or, with ``output``, ``$GITHUB_OUTPUT``) entry, any value."""
    pattern = _OUTPUT_NAME if output else _VARIABLE_NAME
    if not pattern.match(name):
        kind = "an output" if output else "a variable"
        raise UsageError(f"{name!r} cannot be {kind} name in GitHub Actions")
    data = utf8(f"{name}'s value", value)
    delimiter = _delimiter(value)
    return b"%s<<%s\n%s\n%s\n" % (name.encode(), delimiter.encode(), data, delimiter.encode())


def path_entry(directory: str) -> bytes:
    """One ``$GITHUB_PATH`` line; a directory the format cannot carry is refused."""
    if not directory or any(c in directory for c in "\n\r" + os.pathsep):
        raise UsageError(
            f"{directory!r} cannot go on PATH through $GITHUB_PATH (one directory a line, "
            f"no line breaks or {os.pathsep!r}); install the toolkit under a plainer path"
        )
    return utf8("the PATH entry", directory) + b"\n"


@dataclass(frozen=True, slots=True)
class Append:
    """Bytes to append to the file that ``variable`` names."""

    variable: str
    path: Path
    data: bytes


def _fault(exc: OSError, append: Append) -> CudaupError:
    where = f"${append.variable} ({append.path})"
    reason = exc.strerror or str(exc)
    if exc.errno in _DISK_FULL:
        return InsufficientSpaceError(
            f"no space left on the device of {where}: {len(append.data)} bytes could not be written"
        )
    if exc.errno in _REFUSED:
        return PermissionDeniedError(f"cannot write to {where}: {reason}")
    if exc.errno == errno.ENOENT:
        return UsageError(
            f"{where} does not exist: the runner creates it for each step, so run this in one"
        )
    return UsageError(f"cannot append to {where}: {reason}")


@contextlib.contextmanager
def _opened(appends: Sequence[Append]) -> Iterator[list[tuple[int, int]]]:
    """Each file opened for appending, with its size before; all closed afterwards."""
    opened: list[tuple[int, int]] = []
    try:
        for append in appends:
            try:
                fd = os.open(append.path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
            except OSError as exc:
                raise _fault(exc, append) from None
            opened.append((fd, os.fstat(fd).st_size))
        yield opened
    finally:
        for fd, _ in opened:
            with contextlib.suppress(OSError):
                os.close(fd)


def append_all(appends: Sequence[Append]) -> None:
    """Append each block to its file (one block a file): all of them, or (on a failure)
    none of them."""
    with _opened(appends) as opened:
        written: list[tuple[int, int]] = []
        for append, (fd, size) in zip(appends, opened, strict=True):
            written.append((fd, size))
            try:
                view = memoryview(append.data)
                while view:
                    view = view[os.write(fd, view) :]
            except OSError as exc:
                for done_fd, done_size in written:
                    with contextlib.suppress(OSError):
                        os.ftruncate(done_fd, done_size)
                raise _fault(exc, append) from None
