"""What one run of the command line decided about its output on stderr.

Colour (``--color auto|always|never``, ``NO_COLOR``), the verbose log (``-v``,
``-vv``), and a record of what the run's downloads left on disk, so that Ctrl-C
is answered truthfully ("resume" only when something resumable was kept).  And the one writer
of the ``--json`` document on stdout (:func:`emit_json`, which puts ``"schema"`` first).  Set
once per run by :func:`begin` (``cudaup.cli.main``); read by the progress
displays and the error handler.  Light on purpose: ``cudaup --version`` imports it.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading

TYPE_CHECKING = False  # importing typing costs ~2 ms of every start; these are annotations
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import IO, Any, Literal

    from cudaup.download import ProgressEvent

    ColorChoice = Literal["auto", "always", "never"]

COLOR_CHOICES: tuple[ColorChoice, ...] = ("auto", "always", "never")
#: The logger every verbose line comes through (``cudaup.http`` is below it).
LOGGER = "cudaup"


def color_wanted(choice: str, stream: IO[str], env: Mapping[str, str] | None = None) -> bool:
    """Whether to colour what goes to ``stream``: ``always``/``never`` as asked; ``auto``:
    only a terminal, and neither ``NO_COLOR`` (set and not empty, as no-color.org says)
    nor ``TERM=dumb``.  The flag wins over ``NO_COLOR``."""
    env = os.environ if env is None else env
    if choice in {"always", "never"}:
        return choice == "always"
    if env.get("NO_COLOR") or env.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # closed, or not a real stream
        return False


#: The version of the ``--json`` documents' shape (README, "Output for scripts").
SCHEMA = 1


def emit_json(document: Mapping[str, Any]) -> None:
    """Print ``document`` as this command's ``--json`` answer: ``"schema"`` first (the one
    place that key is written; a document with a shape of its own, the plan's, keeps its
    number), then its keys in order."""
    import json  # noqa: PLC0415 - only a --json run needs it

    sys.stdout.write(json.dumps({"schema": SCHEMA, **document}, indent=2) + "\n")


class Ledger:
    """What the downloads of this run did to their files, from their progress events."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.started: set[str] = set()
        self.finished: set[str] = set()
        #: partial files deleted because nothing could resume them (the server ignores ranges)
        self.discarded: set[str] = set()

    def record(self, event: ProgressEvent) -> None:
        with self._lock:
            if event.kind == "start":
                self.started.add(event.filename)
                self.discarded.discard(event.filename)
            elif event.kind == "done":
                self.finished.add(event.filename)
            elif event.kind == "discarded":
                self.discarded.add(event.filename)

    def after_interrupt(self) -> str | None:
        """What to say after Ctrl-C ("resume" only when a partial download was kept);
        None when no download started."""
        with self._lock:
            kept = sorted(self.started - self.finished - self.discarded)
            lost = sorted(self.discarded - self.finished)
            done = len(self.finished)
        if kept:
            also = f"; {_names(lost)} starts over" if lost else ""
            return f"run the same command again to resume (kept: the partial {_names(kept)}{also})"
        if lost:
            return (
                f"{_names(lost)}: the partial download was deleted (a later run cannot "
                "resume it); run the same command again to start over"
            )
        if done:
            return f"the {done} finished download(s) are kept; run the same command again to go on"
        return None


def _names(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{names[0]} and {len(names) - 1} more"


class Run:  # not a dataclass: making one costs a millisecond of every start
    """The output decisions of one run."""

    def __init__(self, color: ColorChoice = "auto", verbosity: int = 0) -> None:
        self.color: ColorChoice = color
        self.verbosity = verbosity
        self.ledger = Ledger()
        #: while a progress bar is drawn: how a line goes above it unbroken (the
        #: terminal, not the bar, wraps a long one)
        self.print_above: Callable[[str], None] | None = None

    def say(self, line: str) -> None:
        """Write ``line`` to stderr: above the progress bar when one is drawn."""
        if self.print_above is not None:
            self.print_above(line)
            return
        sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def colors(self, stream: IO[str]) -> bool:
        return color_wanted(self.color, stream)


class _Session:
    """This process's run, and the log handler a verbose run installed (logging is
    imported only then)."""

    run = Run()
    handler: Any = None


def current() -> Run:
    return _Session.run


def begin(color: str = "auto", verbosity: int = 0) -> Run:
    """Start a run: its colour choice, its verbose log (on stderr), a fresh ledger."""
    chosen: ColorChoice = next((c for c in COLOR_CHOICES if c == color), "auto")
    _Session.run = Run(chosen, verbosity)
    _configure_log(verbosity)
    return _Session.run


def _stderr_handler() -> Any:
    import logging  # noqa: PLC0415 - only a verbose run needs it

    class StderrHandler(logging.Handler):
        """Writes through :meth:`Run.say`: above a progress bar, or to stderr."""

        def emit(self, record: logging.LogRecord) -> None:
            # stderr closed: the log is best effort
            with contextlib.suppress(OSError, ValueError):
                current().say(self.format(record))

    handler = StderrHandler()
    handler.setFormatter(logging.Formatter("cudaup: %(message)s"))
    return handler


def _configure_log(verbosity: int) -> None:
    """``-v``: requests, cache decisions, redirects, retries; ``-vv``: headers and proxy
    choices too; ``-vvv``: urllib3's own connection log as well."""
    if verbosity <= 0 and _Session.handler is None:
        return
    import logging  # noqa: PLC0415 - see _Session

    logger = logging.getLogger(LOGGER)
    urllib3_log = logging.getLogger("urllib3")
    if _Session.handler is None:
        _Session.handler = _stderr_handler()
    handler = _Session.handler
    for each in (logger, urllib3_log):
        if handler in each.handlers:
            each.removeHandler(handler)
    if verbosity <= 0:
        logger.setLevel(logging.NOTSET)
        urllib3_log.setLevel(logging.NOTSET)
        return
    logger.setLevel(logging.INFO if verbosity == 1 else logging.DEBUG)
    logger.addHandler(handler)
    if verbosity >= 3:
        urllib3_log.setLevel(logging.DEBUG)
        urllib3_log.addHandler(handler)


def error_prefix(stream: IO[str]) -> str:
    """``cudaup: error:``, in bold red when this run colours ``stream``."""
    if current().colors(stream):
        return "cudaup: \x1b[1;31merror:\x1b[0m"
    return "cudaup: error:"
