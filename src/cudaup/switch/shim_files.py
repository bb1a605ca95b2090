"""The shims in ``$CUDAUP_HOME/bin``: one small ``sh`` script per tool that execs
``python -I -S -c '…from cudaup.switch.shim import main; …'``, which runs the tool of
the active toolkit (:mod:`cudaup.switch.shim`).

Shims exist for ``nvcc`` (always: even before the first install it says how to
choose a toolkit) and for every tool of NVIDIA's (:mod:`cudaup.core.tools`) some
installed toolkit, or the default toolkit, has in its ``bin``; none for a tool no
toolkit has (``nsys``, ``ncu`` from a system install stay visible), none for a name
that is not one of NVIDIA's tools (an archive's ``ls``, ``sudo`` or ``python3`` must
never shadow the system's: :func:`foreign_programs` names them), and none for
toolkits built for another platform.  Files cudaup did not write are never touched."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cudaup
from cudaup.core.tools import is_toolkit_tool
from cudaup.errors import UsageError
from cudaup.install.store import Store
from cudaup.machine.toolkits import SHIM_MARK, is_shim
from cudaup.switch import shim
from cudaup.util.atomic import atomic_write
from cudaup.util.reading import read_small

# -- shims -----------------------------------------------------------------------------
#: Tools that always get a shim: ``nvcc`` says which toolkit to choose even before the
#: first install (and never falls through to another nvcc on PATH).
CORE_TOOLS: tuple[str, ...] = ("nvcc",)
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_+][A-Za-z0-9._+-]*$")


#: What a shim runs, its first argument being the directory cudaup is imported from.
#: ``-I -S`` skip ``site`` (and every ``.pth`` file) and ignore ``PYTHON*`` variables:
#: ~1 ms less than ``-P``, and the shim runs the cudaup that wrote it whatever the
#: environment says.
SHIM_CODE = (
    "import sys; sys.path.append(sys.argv.pop(1)); "
    "from cudaup.switch.shim import main; sys.exit(main())"
)


def package_root() -> str:
    """The ``sys.path`` entry cudaup is imported from (site-packages, or ``src``)."""
    return str(Path(cudaup.__file__).resolve().parent.parent)


def shim_text(tool: str, home: Path, python: str | None = None) -> str:
    """The ``sh`` script for one tool: exec ``python -I -S -c CODE ROOT HOME TOOL "$@"``.

    A shim names the interpreter and the cudaup that wrote it; when either is gone (the
    checkout or virtual environment moved) it says so, and how to rewrite it, and
    exits 127 rather than letting ``sh`` say "not found"."""
    python = python or sys.executable
    root = package_root()
    gone = (
        f"cudaup: the {tool} shim's cudaup ({python}, {root}) is gone (moved?); "
        "run `cudaup shims --rebuild` with the cudaup you use now"
    )
    return (
        "#!/bin/sh\n"
        f"{SHIM_MARK}: runs {tool} from the active CUDA toolkit (see `cudaup show`).\n"
        "# Written by cudaup, which rewrites or removes this file; do not edit.\n"
        f"[ -x {shlex.quote(python)} ] && [ -d {shlex.quote(root)} ] || "
        f"{{ echo {shlex.quote(gone)} >&2; exit 127; }}\n"
        f"exec {shlex.quote(python)} -I -S -c {shlex.quote(SHIM_CODE)} "
        f"{shlex.quote(root)} {shlex.quote(str(home.absolute()))} "
        f'{shlex.quote(tool)} "$@"\n'
    )


def stale_shims(store: Store) -> list[Path]:
    """The shims in ``$CUDAUP_HOME/bin`` that another cudaup (another interpreter or
    location, such as a checkout since moved) wrote: :func:`refresh_shims` rewrites them."""
    if not store.bin_dir.is_dir():
        return []
    stale = []
    for entry in sorted(store.bin_dir.iterdir()):
        if entry.is_symlink() or not is_shim(entry):
            continue
        with contextlib.suppress(OSError):
            if read_small(entry) != shim_text(entry.name, store.home).encode():
                stale.append(entry)
    return stale


def _programs(toolkit: Path) -> set[str]:
    """Names of the executable files in a toolkit's ``bin``."""
    try:
        entries = list((toolkit / "bin").iterdir())
    except OSError:
        return set()
    return {entry.name for entry in entries if entry.is_file() and os.access(entry, os.X_OK)}


def toolkit_tools(toolkit: Path) -> set[str]:
    """The tools of NVIDIA's in a toolkit's ``bin``: the names that may get a shim."""
    return {name for name in _programs(toolkit) if is_toolkit_tool(name)}


def foreign_programs(toolkit: Path) -> list[str]:
    """The programs in a toolkit's ``bin`` that are not NVIDIA's tools, sorted: no shim
    is written for them (``ls``, ``sudo``, ``python3`` in a hostile archive)."""
    return sorted(name for name in _programs(toolkit) if not is_toolkit_tool(name))


def available_tools(store: Store) -> list[str]:
    """The tools that get a shim: :data:`CORE_TOOLS`, and NVIDIA's tools in the ``bin``
    of each installed toolkit that runs here, and of the default toolkit when it is a
    path."""
    tools = set(CORE_TOOLS)
    for toolkit in store.runnable():
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
        if not _TOOL_NAME.match(tool) or not is_toolkit_tool(tool):
            raise UsageError(f"{tool!r} is not one of the tools NVIDIA's toolkits ship")
    store.bin_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for tool in wanted:
        path = store.bin_dir / tool
        if (path.exists() or path.is_symlink()) and not is_shim(path):
            continue  # someone else's file
        text = shim_text(tool, store.home, python)
        with contextlib.suppress(OSError):
            if read_small(path) == text.encode():
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


@dataclass(frozen=True, slots=True)
class ShimsReport:
    """What ``cudaup shims`` found (and, with ``--rebuild``, rewrote) in ``$CUDAUP_HOME/bin``."""

    directory: Path
    shims: tuple[str, ...]
    #: shims another cudaup wrote, left as they are
    stale: tuple[str, ...]
    #: shims another cudaup wrote, rewritten for this one
    rebuilt: tuple[str, ...]
    on_path: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "dir": str(self.directory),
            "shims": list(self.shims),
            "stale": list(self.stale),
            "rebuilt": list(self.rebuilt),
            "on_path": self.on_path,
        }


def review_shims(store: Store, *, rebuild: bool) -> ShimsReport:
    """The shims there, which another cudaup wrote, and (``rebuild``) those rewritten."""
    stale = [p.name for p in stale_shims(store)]
    if rebuild:
        refresh_shims(store)
    listed = store.bin_dir.iterdir() if store.bin_dir.is_dir() else iter(())
    written = tuple(sorted(p.name for p in listed if is_shim(p)))
    return ShimsReport(
        directory=store.bin_dir,
        shims=written,
        stale=() if rebuild else tuple(stale),
        rebuilt=tuple(stale) if rebuild else (),
        on_path=shims_on_path(store),
    )
