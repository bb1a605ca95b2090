"""``cudaup``'s argument parser, built from :data:`cudaup.cli.commands.COMMANDS`.

Only the module of the command being run is imported, so ``cudaup --help`` imports
no network, packaging or archive code.  Global options work before and after the
command (``cudaup --json resolve 13.0`` and ``cudaup resolve 13.0 --json``): the
root parser owns their defaults, and each command's copy of them is ``SUPPRESS``-ed
so that it never overwrites what was typed before the command.

Its own module so that ``cudaup --version``, answered by :mod:`cudaup.cli.main`
before any parsing, does not import argparse (with re, gettext, shutil and
textwrap it doubles the interpreter's start).
"""

from __future__ import annotations

import argparse
import importlib

from cudaup.cli import output
from cudaup.cli.commands import COMMANDS
from cudaup.cli.version import VERSION
from cudaup.errors import UsageError

TYPE_CHECKING = False  # importing typing costs ~2 ms of every start; these are annotations
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, NoReturn


class _Parser(argparse.ArgumentParser):
    """argparse, with usage errors raised as :class:`UsageError` (one handler, JSON too):
    named by the command (``install: …``; the ``cudaup: error:`` prefix comes once, from
    the handler), with the nearest option for a mistyped one."""

    def error(self, message: str) -> NoReturn:
        where = self.prog.removeprefix("cudaup").strip()
        raise UsageError(
            f"{where}: {message}{self._nearest(message)}"
            if where
            else message + self._nearest(message)
        )

    def _nearest(self, message: str) -> str:
        """``; did you mean --channel?`` for ``unrecognized arguments: --chanel``."""
        if not message.startswith("unrecognized arguments:"):
            return ""
        import difflib  # noqa: PLC0415 - only a mistyped command line pays for it

        known = set(self._option_string_actions)
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    known |= set(sub._option_string_actions)
        typed = [w.split("=", 1)[0] for w in message.split()[2:] if w.startswith("--")]
        for word in typed:
            close = difflib.get_close_matches(word, sorted(known), n=1, cutoff=0.7)
            if close:
                return f"; did you mean {close[0]}?"
        return ""


def _global_options(parser: argparse.ArgumentParser, *, copy: bool) -> None:
    """The options every command takes; ``copy``: hidden, ``SUPPRESS``-ed (see module doc)."""

    def add(*names: str, **kwargs: Any) -> None:
        if copy:
            kwargs["default"] = argparse.SUPPRESS
            kwargs["help"] = argparse.SUPPRESS
        target.add_argument(*names, **kwargs)

    target: Any = parser.add_argument_group("global options (before or after the command)")
    add("--json", action="store_true", default=False, help="print one JSON object")
    add("--debug", action="store_true", default=False, help="show tracebacks on errors")
    add("-q", "--quiet", action="store_true", default=False, help="no progress output")
    # The copies count into their own field: argparse would let a subcommand's count
    # replace the one made before the command (`-v install -v` is -vv).
    target.add_argument(
        "-v",
        "--verbose",
        action="count",
        dest="verbose_after" if copy else "verbose",
        default=argparse.SUPPRESS if copy else 0,
        help=argparse.SUPPRESS
        if copy
        else "log requests, cache use, redirects and retries on stderr (-vv: headers too)",
    )
    add(
        "--color",
        choices=output.COLOR_CHOICES,
        default="auto",
        help="colour on stderr: auto (a terminal, unless NO_COLOR is set), always or never",
    )
    add("--refresh", action="store_true", default=False, help="bypass the HTTP cache")
    add(
        "--offline",
        action="store_true",
        default=False,
        help="answer from the shipped snapshot (resolve, versions, compat)",
    )
    add("--no-probe", action="store_true", default=False, help="skip the HEAD probe of each file")
    target = parser.add_argument_group(
        "hosts (also CUDAUP_NVIDIA_DOWNLOAD_URL, _ARCHIVE_URL, _PRERELEASE_URL, CUDAUP_PYPI_URL)"
    )
    add("--download-url", metavar="URL", default=None, help="NVIDIA file host or mirror")
    add("--archive-url", metavar="URL", default=None, help="NVIDIA archive-page host")
    add("--prerelease-url", metavar="URL", default=None, help="NVIDIA preview host")
    add("--pypi-url", metavar="URL", default=None, help="simple index (default PyPI)")
    add(
        "--mirror",
        metavar="URL",
        default=None,
        help="a cudaup mirror: every host and the PyPI index at one root",
    )


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; the arguments of ``command`` only (importing only its module)."""
    parser = _Parser(
        prog="cudaup",
        description="Find, verify, install and switch NVIDIA CUDA toolkits.",
        epilog="`cudaup COMMAND --help` shows a command's options and an example.",
    )
    parser.add_argument("--version", action="version", version=VERSION)
    _global_options(parser, copy=False)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, info in COMMANDS.items():
        sub = commands.add_parser(
            name,
            help=info.summary,
            description=info.summary,
            epilog=f"example:\n  {info.example}\n\nglobal options: see `cudaup --help`",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        if name == command:
            _global_options(sub, copy=True)
            module = importlib.import_module(info.module)
            add: Callable[[argparse.ArgumentParser], None] = getattr(
                module, "add_" + name.replace("-", "_")
            )
            add(sub)
    return parser
