"""``cudaup``'s entry point: the run of one command.

The parser (:mod:`cudaup.cli.parser`) is built for the command being run, which
imports only that command's module.  ``cudaup --version`` alone is answered
before it: argparse, with the re, gettext, shutil and textwrap it loads, would
double the interpreter's start for one line that needs no parsing
(``tests/cli/test_startup.py`` pins what it loads).

A run that fails is answered by :mod:`cudaup.cli.failure` (one sentence, a
documented exit code, the error object under ``--json``; exit code 1 is reserved
for bugs), loaded only then.
"""

from __future__ import annotations

import codecs
import io
import os
import sys

from cudaup.cli.version import VERSION

TYPE_CHECKING = False  # importing typing costs ~2 ms of every start; these are annotations
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import NoReturn

    from _typeshed import ReadableBuffer

#: What cudaup prints beyond ASCII, and what a terminal that cannot show it gets instead.
_ASCII = {"✓": "ok", "✗": "x", "≥": ">=", "≤": "<=", "·": "-", "→": "->", "…": "...", "—": "-"}


def _transliterate(error: UnicodeError) -> tuple[str, int]:
    if not isinstance(error, UnicodeEncodeError):
        raise error
    text = error.object[error.start : error.end]
    return "".join(_ASCII.get(char, "?") for char in text), error.end


codecs.register_error("cudaup-ascii", _transliterate)


class _Stream(io.RawIOBase):
    """The process's fd 1 or 2, written directly, so that a write that fails is told apart
    from any other failure.  On standard error (advice, progress, the error's sentence)
    it is lost, with what follows, and the command's exit code stands (it was Python's: 1
    when the error's sentence could not be written, 120 when the exit's flush failed).  On
    standard output a full disk (``>/dev/full``, a quota) is
    :class:`~cudaup.errors.InsufficientSpaceError` naming it, and what follows is lost
    too, so that the error's JSON and the exit do not fail again."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self.fd, self.lost = fd, False

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.fd

    def isatty(self) -> bool:
        return os.isatty(self.fd)

    def write(self, data: ReadableBuffer) -> int:
        if self.lost:
            return memoryview(data).nbytes
        try:
            return os.write(self.fd, data)
        except OSError as exc:
            if self.fd == 1 and not _full(exc):
                raise  # a reader that went away (BrokenPipeError) is answered by main
            self.lost = True
            if self.fd == 1:
                raise _stdout_full(exc) from None
            return memoryview(data).nbytes


def _full(exc: OSError) -> bool:
    import errno  # noqa: PLC0415 - built in, and only here

    return exc.errno in {errno.ENOSPC, errno.EDQUOT}


def _stdout_full(exc: OSError) -> Exception:
    from cudaup.errors import InsufficientSpaceError  # noqa: PLC0415 - see _run

    return InsufficientSpaceError(
        f"cannot write cudaup's output to standard output: {exc.strerror} (where it is "
        "redirected: free space there, or redirect it elsewhere)"
    )


def _tolerant_output() -> None:
    """Print on any terminal: characters its encoding lacks become ASCII (``✓`` → ``ok``).
    A stream closed before cudaup started (``>&-``: Python then has none) takes
    ``/dev/null``: what would go there goes nowhere, and the command still runs.  The
    process's own streams are written through :class:`_Stream`."""
    if sys.stdout is None:
        sys.stdout = open(os.devnull, "w")  # noqa: PTH123, SIM115 - the process's, for its life
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w")  # noqa: PTH123, SIM115 - the process's, for its life
    if isinstance(sys.stdout, io.TextIOWrapper) and sys.stdout is sys.__stdout__:
        sys.stdout = _direct(sys.stdout)
    if isinstance(sys.stderr, io.TextIOWrapper) and sys.stderr is sys.__stderr__:
        sys.stderr = _direct(sys.stderr)
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="cudaup-ascii")


def _direct(stream: io.TextIOWrapper) -> io.TextIOWrapper:
    """``stream`` (the process's stdout or stderr) anew, over :class:`_Stream`."""
    if stream.fileno() not in (1, 2):
        return stream
    stream.flush()
    return io.TextIOWrapper(
        io.BufferedWriter(_Stream(stream.fileno())),
        encoding=stream.encoding,
        line_buffering=stream.line_buffering or stream.fileno() == 2,
    )


def _output_closed() -> int:
    """stdout's reader went away: say nothing more, and keep Python from complaining
    when it flushes stdout at exit."""
    from cudaup.errors import OutputClosedError  # noqa: PLC0415 - see _run

    _discard_stdout()
    return OutputClosedError.exit_code


def _flush_output() -> None:
    """Write out what stdout holds; a full disk under it (``> /dev/full``, a quota) is
    :class:`InsufficientSpaceError` naming standard output, and what is left goes nowhere
    (so that the exit does not try again and fail in Python's words).  The process's own
    stdout says so itself (:class:`_Stream`); this is for another (``main`` called with
    one in place)."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as exc:
        if not _full(exc):
            raise
        _discard_stdout()
        raise _stdout_full(exc) from None


def _discard_stdout() -> None:
    """From now on, what is written to stdout (and what its buffer holds) goes nowhere."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def run() -> NoReturn:
    """The process's entry point (``cudaup``, ``python -m cudaup``): :func:`main`, then the
    exit, without the interpreter's teardown when nothing is left to finish.

    Tearing down a cold install's ~350 modules and their objects (a collection, then
    every dict and object freed one by one) took 36-67 ms of every run on the test
    machine (issue #27), for memory the kernel takes back at once.  So once the command
    has answered, its output is flushed, the exit hooks run (logging's, tempfile's) and
    the process ends; were any other thread still running that is not a daemon (work the
    normal exit would wait for), it exits the normal way.
    """
    code = main()
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except BrokenPipeError:
        code = _output_closed()
    except OSError:
        raise SystemExit(code) from None  # what the normal exit says of it (a full disk)
    except Exception as exc:  # the process's stdout on a full disk (_Stream), written late
        from cudaup.cli.failure import answer  # noqa: PLC0415 - see _run

        code = code or answer(exc, [], json_wanted=False, debug=False)
    threading = sys.modules.get("threading")
    if threading is not None and any(
        not thread.daemon and thread is not threading.current_thread()
        for thread in threading.enumerate()
    ):
        raise SystemExit(code)  # the interpreter's exit waits for them; not for daemons
    import atexit  # noqa: PLC0415 - built in: costs nothing, needed only here

    atexit._run_exitfuncs()  # what the interpreter's exit would run first
    os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    _tolerant_output()
    try:
        if argv == ["--version"]:  # the parser's answer, without loading the parser
            return _print_version()
        return _run(argv)
    except BrokenPipeError:
        return _output_closed()


def _print_version() -> int:
    try:
        sys.stdout.write(VERSION + "\n")
        _flush_output()
    except BrokenPipeError:
        raise
    except Exception as exc:  # a full disk under stdout: _Stream, _flush_output
        from cudaup.cli.failure import answer  # noqa: PLC0415 - see _run

        return answer(exc, ["--version"], json_wanted=False, debug=False)
    return 0


def _run(argv: list[str]) -> int:
    # Imported here, not above: ``cudaup --version`` needs none of them (see the module doc).
    from cudaup.cli import output  # noqa: PLC0415
    from cudaup.cli.argv import command_name  # noqa: PLC0415
    from cudaup.cli.commands import COMMANDS  # noqa: PLC0415
    from cudaup.cli.parser import build_parser  # noqa: PLC0415
    from cudaup.errors import UsageError  # noqa: PLC0415

    json_wanted = "--json" in argv
    debug = "--debug" in argv
    output.begin()  # a fresh run: no colour choice or log level left from an earlier one
    try:
        name = command_name(argv)
        if name is not None and name not in COMMANDS:
            from cudaup.cli.failure import unknown_command  # noqa: PLC0415 - see below

            raise unknown_command(name)
        if name is not None and COMMANDS[name].online and not {"-h", "--help"} & set(argv):
            # The certificates load (~25 ms, without the GIL) while the command's modules
            # import (~0.15 s for install), instead of before its first request.
            from cudaup.net.tls import warm_up  # noqa: PLC0415

            warm_up()
        parser = build_parser(name)
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return UsageError.exit_code
        json_wanted, debug = args.json, args.debug
        output.begin(args.color, args.verbose + getattr(args, "verbose_after", 0))
        result: int = args.handler(args)
        _flush_output()  # a closed pipe or a full disk shows here, inside the handlers below
    except (BrokenPipeError, SystemExit):
        raise
    except BaseException as exc:
        # Errors only: the translation of every failure into words and a code loads
        # when there is one (json, difflib, the fault table), not on every start.
        import contextlib  # noqa: PLC0415

        from cudaup.cli.failure import answer  # noqa: PLC0415
        from cudaup.errors import InsufficientSpaceError  # noqa: PLC0415

        code = answer(exc, argv, json_wanted, debug)
        # The error's JSON is written out here, not by the exit; if stdout's disk is full,
        # the error's code stands (its sentence is on stderr).
        with contextlib.suppress(InsufficientSpaceError):
            _flush_output()
        return code
    return result
