"""What a failed run says and exits with: the one error handler of the command line.

Every :class:`~cudaup.errors.CudaupError` becomes one sentence on stderr and its exit
code, its hint (what gets round it) on a ``hint:`` line, and the error object on stdout
under ``--json``; Ctrl-C says whether the same
command resumes; a full disk or a refusal that no handler translated still names
the path (exit 10 or 14), and so does a path no handler worded that cannot be used as
it is (a file where a directory must be, a name too long: exit 2); anything else is a
bug (exit 1, its error object under ``--json`` too), with a traceback only under
``--debug``.  Loaded only when a run fails, so that every start stays light.
"""

from __future__ import annotations

import difflib
import errno
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from cudaup.cli import output
from cudaup.cli.argv import OFFLINE_COMMANDS, command_name
from cudaup.cli.commands import COMMANDS
from cudaup.cli.output import emit_json
from cudaup.errors import CudaupError, HostUnreachableError, UsageError
from cudaup.util.faults import explain, known_places


def answer(exc: BaseException, argv: list[str], json_wanted: bool, debug: bool) -> int:
    """The exit code for ``exc``, after saying what happened (``debug``: raise it)."""
    if isinstance(exc, CudaupError):
        return _fail(exc, argv, json_wanted, debug)
    if isinstance(exc, KeyboardInterrupt):
        advice = output.current().ledger.after_interrupt()
        sys.stderr.write(f"cudaup: interrupted{'; ' + advice if advice else ''}\n")
        return 130
    if isinstance(exc, OSError):
        where = Path(os.fsdecode(exc.filename)) if exc.filename is not None else Path.cwd()
        translated = explain(exc, "cudaup cannot go on", where, known_places())
        if translated is None and exc.filename is not None and exc.errno in _NOT_USABLE:
            translated = UsageError(
                f"cannot use {os.fsdecode(exc.filename)}: {exc.strerror or exc}; check the "
                "path (an argument, or a CUDAUP_*, HOME or XDG_* variable, names it)"
            )
        if translated is not None:
            return _fail(translated, argv, json_wanted, debug)
    if not isinstance(exc, Exception):
        raise exc  # SystemExit, GeneratorExit: not errors of cudaup's to word
    return _internal(exc, json_wanted, debug)


#: What a path the user named (an argument, a variable) can be that no handler worded:
#: a file where a directory must be, a name too long, a loop of links.  Bad input (exit
#: 2), whichever path it was, since the sentence names it.
_NOT_USABLE = frozenset(
    {errno.ENAMETOOLONG, errno.ENOTDIR, errno.EISDIR, errno.EEXIST, errno.ELOOP, errno.ENXIO}
)


def unknown_command(name: str) -> UsageError:
    """A usage error naming the nearest command (\"did you mean `install`?\")."""
    close = difflib.get_close_matches(name, COMMANDS, n=1)
    hint = f"; did you mean `{close[0]}`?" if close else "; `cudaup --help` lists them"
    return UsageError(f"unknown command {name!r}{hint}")


def _fail(exc: CudaupError, argv: list[str], json_wanted: bool, debug: bool) -> int:
    """One sentence on stderr (and the hint's line), the error object under ``--json``,
    the exit code."""
    if debug:
        raise exc
    hint = hint_for(exc, argv)
    if json_wanted:
        error = exc.to_json()
        if hint is not None:
            error["hint"] = hint
        emit_json({"error": error})
    sys.stderr.write(f"{output.error_prefix(sys.stderr)} {exc}\n")
    if hint is not None:
        sys.stderr.write(f"cudaup: hint: {hint}\n")
    return exc.exit_code


def hint_for(exc: CudaupError, argv: Sequence[str]) -> str | None:
    """What may get round ``exc``, only where something does: the error's own hint, or for
    a host that could not be reached at all, the ways the command line offers:
    ``--mirror`` for NVIDIA's or PyPI's own hosts (a mirror can stand in for them, not for
    a host the user chose), ``--offline`` for the commands that answer from cudaup's
    shipped snapshot."""
    if exc.hint is not None or not isinstance(exc, HostUnreachableError):
        return exc.hint
    ways = []
    if exc.public and "--mirror" not in argv:
        ways.append("--mirror URL fetches from a mirror")
    if command_name(argv) in OFFLINE_COMMANDS and "--offline" not in argv:
        ways.append("--offline answers from cudaup's shipped snapshot")
    return f"no network here? {'; '.join(ways)}" if ways else None


def _internal(exc: Exception, json_wanted: bool, debug: bool) -> int:
    """A bug (exit 1): said on stderr, and under ``--json`` as an error object too."""
    if debug:
        raise exc
    if json_wanted:
        message = f"internal error: {exc!r}"
        emit_json({"error": {"kind": "internal", "message": message, "exit_code": 1}})
    sys.stderr.write(f"cudaup: internal error: {exc!r} (rerun with --debug for a traceback)\n")
    return 1
