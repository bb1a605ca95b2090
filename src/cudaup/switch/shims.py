"""The shims in ``$CUDAUP_HOME/bin``: one small ``sh`` script per tool that execs
``python -P -c 'from cudaup.switch.shim import main; …'``, which runs the tool of
the active toolkit (:mod:`cudaup.switch.shim`).  Files cudaup did not write are
never touched."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from cudaup.errors import (
    UsageError,
)
from cudaup.install.store import Store
from cudaup.switch import shim
from cudaup.util.atomic import atomic_write

# -- shims -----------------------------------------------------------------------------
#: Tools that always get a shim, so that ``nvcc`` says which toolkit to choose
#: even before the first install.
CORE_TOOLS: tuple[str, ...] = (
    "nvcc",
    "ptxas",
    "cuobjdump",
    "nvdisasm",
    "fatbinary",
    "nvlink",
    "cu++filt",
    "nvprune",
    "compute-sanitizer",
    "cuda-gdb",
    "cuda-gdbserver",
    "cudafe++",
    "bin2c",
    "nsys",
    "ncu",
)
SHIM_MARK = "# cudaup shim"
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_+][A-Za-z0-9._+-]*$")


#: What a shim runs: ``-c`` rather than ``-m cudaup.switch.shim`` saves runpy's imports
#: (about 3.5 of the shim's 13 ms); ``-P`` keeps the current directory off sys.path.
SHIM_CODE = "import sys; from cudaup.switch.shim import main; sys.exit(main())"


def shim_text(tool: str, home: Path, python: str | None = None) -> str:
    """The ``sh`` script for one tool: exec ``python -P -c SHIM_CODE HOME TOOL "$@"``."""
    python = python or sys.executable
    return (
        "#!/bin/sh\n"
        f"{SHIM_MARK}: runs {tool} from the active CUDA toolkit (see `cudaup show`).\n"
        "# Written by cudaup, which rewrites or removes this file; do not edit.\n"
        f"exec {shlex.quote(python)} -P -c {shlex.quote(SHIM_CODE)} "
        f'{shlex.quote(str(home.absolute()))} {shlex.quote(tool)} "$@"\n'
    )


def is_shim(path: Path) -> bool:
    """Whether a file in ``bin/`` is one cudaup wrote (foreign files are never touched)."""
    try:
        with path.open("rb") as handle:
            head = handle.read(256)
    except OSError:
        return False
    return any(line.startswith(SHIM_MARK.encode()) for line in head.splitlines()[1:3])


def toolkit_tools(toolkit: Path) -> set[str]:
    """Names of the executables in a toolkit's ``bin``."""
    try:
        entries = list((toolkit / "bin").iterdir())
    except OSError:
        return set()
    return {
        entry.name
        for entry in entries
        if _TOOL_NAME.match(entry.name) and entry.is_file() and os.access(entry, os.X_OK)
    }


def available_tools(store: Store) -> list[str]:
    """The tools that get a shim: :data:`CORE_TOOLS`, everything in an installed toolkit's
    ``bin``, and in the default toolkit's when it is a path."""
    tools = set(CORE_TOOLS)
    for toolkit in store.installed():
        tools |= toolkit_tools(toolkit.path)
    default = store.default()
    if default and shim.is_path_request(default):
        tools |= toolkit_tools(Path(default).expanduser())
    return sorted(tools)


def write_shims(store: Store, tools: Iterable[str], *, python: str | None = None) -> list[Path]:
    """Make ``$CUDAUP_HOME/bin`` hold exactly one shim per tool; the shims' paths.

    Each shim is replaced atomically; shims cudaup wrote for tools no longer
    listed are removed; files cudaup did not write are left alone (no shim is
    written over them).
    """
    wanted = sorted(set(tools))
    for tool in wanted:
        if not _TOOL_NAME.match(tool):
            raise UsageError(f"{tool!r} is not a tool name")
    store.bin_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for tool in wanted:
        path = store.bin_dir / tool
        if (path.exists() or path.is_symlink()) and not is_shim(path):
            continue  # someone else's file
        text = shim_text(tool, store.home, python)
        with contextlib.suppress(OSError):
            if path.read_text() == text:
                written.append(path)
                continue
        atomic_write(path, text, mode=0o755)
        written.append(path)
    for entry in store.bin_dir.iterdir():
        if entry.name not in wanted and not entry.is_symlink() and is_shim(entry):
            entry.unlink()
    return written


def refresh_shims(store: Store) -> list[Path]:
    """:func:`write_shims` for :func:`available_tools`: call after installing or removing."""
    return write_shims(store, available_tools(store))


def shims_on_path(store: Store, env: Mapping[str, str] | None = None) -> bool:
    """Whether ``$CUDAUP_HOME/bin`` is on ``PATH``."""
    env = os.environ if env is None else env
    wanted = os.path.normpath(store.bin_dir.absolute())
    return any(os.path.normpath(entry) == wanted for entry in env.get("PATH", "").split(os.pathsep))
