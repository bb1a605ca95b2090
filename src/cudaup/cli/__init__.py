"""The ``cudaup`` command line: a lazy command table (:mod:`cudaup.cli.commands`),
one module per group of commands, and one entry point (:func:`main`; :func:`run` for
the process, which exits through it).

Nothing outside this package imports it: the library below it knows nothing of
arguments, terminals or exit codes.
"""

from cudaup.cli.main import main, run

__all__ = ["main", "run"]
