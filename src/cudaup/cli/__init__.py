"""The ``cudaup`` command line: a lazy command table (:mod:`cudaup.cli.commands`),
one module per group of commands, and one entry point (:func:`main`).

Nothing outside this package imports it: the library below it knows nothing of
arguments, terminals or exit codes.
"""

from cudaup.cli.main import main

__all__ = ["main"]
