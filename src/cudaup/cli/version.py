"""What ``cudaup --version`` prints, in a module of its own.

Both answers of ``--version`` use it: :mod:`cudaup.cli.main`'s, given before any
parsing, and argparse's ``version`` action in :mod:`cudaup.cli.parser`.  Here, the
parser needs nothing from the entry point that imports it, and the entry point's
fast path loads one line more, not the parser.
"""

from __future__ import annotations

from cudaup import __version__

#: The line ``cudaup --version`` prints.
VERSION = f"cudaup {__version__}"
