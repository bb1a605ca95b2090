"""What ``cudaup run`` starts a command with: the toolkit's environment, ``PATH`` in the
order that keeps every tool the chosen toolkit's, and the refusals that stop a command
from running another toolkit's compiler.

The rules live here, not in the command line: ``cudaup run`` only reads its flags,
calls these, and ``exec``s.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from cudaup.core.tools import is_toolkit_tool
from cudaup.errors import CommandNotRunError
from cudaup.install.store import Store
from cudaup.machine.toolkits import is_shim
from cudaup.switch import environment, shim
from cudaup.switch.selection import TOOLKIT_ENV, Active, missing_tool


def run_environ(
    toolkit: Path,
    store: Store,
    environ: Mapping[str, str],
    *,
    extra: Mapping[str, str] | None = None,
    python_bin: Path | None = None,
) -> dict[str, str]:
    """The environment a command runs in under ``toolkit``: the toolkit's variables, then
    ``extra``; ``PATH`` as toolkit ``bin``, the shims, ``python_bin`` (an environment's own
    python and pip), then the rest.  Shims the command starts (a tool this toolkit lacks,
    a nested build) agree with it through :data:`TOOLKIT_ENV`."""
    result = dict(environ)
    result.update(environment.toolkit_env(toolkit, store))
    result.update(extra or {})
    result[TOOLKIT_ENV] = str(toolkit)
    result["PATH"] = with_shims(result["PATH"], toolkit, store)
    if python_bin is not None:
        result["PATH"] = _after_shims(result["PATH"], str(python_bin), store)
    return result


def with_shims(path: str, toolkit: Path, store: Store) -> str:
    """``PATH`` with the shims right after the toolkit's ``bin`` (when there are shims)."""
    if not store.bin_dir.is_dir():
        return path
    shim_dir = os.path.normpath(store.bin_dir.absolute())
    entries = [e for e in path.split(os.pathsep) if e and os.path.normpath(e) != shim_dir]
    own = str(toolkit / "bin")
    at = entries.index(own) + 1 if own in entries else 0
    return os.pathsep.join([*entries[:at], shim_dir, *entries[at:]])


def _after_shims(path: str, directory: str, store: Store) -> str:
    """``PATH`` with ``directory`` right after the shims (second when there are none)."""
    entries = [e for e in path.split(os.pathsep) if e != directory]
    at = next((i + 1 for i, e in enumerate(entries) if e == str(store.bin_dir.absolute())), 1)
    return os.pathsep.join([*entries[:at], directory, *entries[at:]])


def refuse_shadowed(program: str, toolkit: Path) -> None:
    """Exit 127 when ``program`` is a name no NVIDIA toolkit ships that the toolkit's
    ``bin`` holds anyway: PATH would find that one first, not the program meant."""
    if "/" in program or is_toolkit_tool(program) or not shim.tool_path(str(toolkit), program):
        return
    raise CommandNotRunError(
        f"cannot run {program}: {shim.not_a_toolkit_tool(program)}, and {toolkit / 'bin'} "
        "holds one, which PATH would find first; name the program you mean by its path",
        127,
    )


def refuse_other_toolkits(
    program: str, active: Active, toolkit: Path, path: str, store: Store
) -> None:
    """Exit 127 when ``program`` is a toolkit's tool (one cudaup knows, or one an installed
    toolkit has: it has a shim) that the chosen toolkit lacks: PATH would find another
    toolkit's (``/usr/local/bin/nvcc``), and a build with the wrong compiler that exits 0
    is worse than none."""
    if "/" in program or shim.tool_path(str(toolkit), program) is not None:
        return
    if not is_toolkit_tool(program):
        return  # make, cmake, python: no toolkit's tool
    shim_dir = os.path.normpath(store.bin_dir.absolute())
    beyond = os.pathsep.join(e for e in path.split(os.pathsep) if os.path.normpath(e) != shim_dir)
    found = shutil.which(program, path=beyond)  # what PATH would have run
    instead = f"; cudaup does not run {found} instead" if found and not is_shim(Path(found)) else ""
    raise CommandNotRunError(missing_tool(active, program, store) + instead, 127)
