"""What can be read from a command line before it is parsed: the command's name, and
whether ``--offline`` could answer it.  Both the entry point (:mod:`cudaup.cli.main`) and the
error handler (:mod:`cudaup.cli.failure`) ask, so it sits below both.
"""

from __future__ import annotations

from collections.abc import Sequence

#: Global options that take a value, so that the command can be found without parsing.
VALUED_GLOBALS = (
    "--download-url",
    "--archive-url",
    "--prerelease-url",
    "--pypi-url",
    "--mirror",
    "--color",
)
#: The commands ``--offline`` answers (from the shipped snapshot and tables).
OFFLINE_COMMANDS = frozenset({"resolve", "versions", "compat"})


def command_name(argv: Sequence[str]) -> str | None:
    """The command in ``argv`` (the first word that is neither an option nor its value)."""
    skip = False
    for word in argv:
        if skip:
            skip = False
        elif word == "--":
            return None
        elif word in VALUED_GLOBALS:
            skip = True
        elif not word.startswith("-"):
            return word
    return None
