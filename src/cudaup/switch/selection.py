"""Which CUDA toolkit is active here, and why.

Selection order (the first that names something wins; a name that matches
nothing is an error, never a silent fall-through):

1. ``cudaup run VERSION -- cmd`` (the run sets ``CUDAUP_TOOLKIT`` for ``cmd``);
2. ``CUDAUP_TOOLKIT``;
3. the nearest ``.cuda-version`` file, from the current directory upwards;
4. ``cudaup default`` (``$CUDAUP_HOME/default``).

A value is a version request (``13.0``, ``12.8.1``, ``cu128``: the newest
*installed* toolkit that matches and has the tool asked for, ``nvcc`` when none
is, :meth:`Store.find`) or a path to a toolkit directory.  ``cudaup default 12.8`` also accepts a system toolkit that
identifies as 12.8 when the store has none, and records its path.  The rules
themselves live in :mod:`cudaup.switch.shim` (standard library only, so that a
shim starts fast); this module gives them the store's view.  A pin or a toolkit
directory another user could have written does not choose
(:mod:`cudaup.util.trust`): the pin is skipped (``Active.warnings`` says so) and
the toolkit refused (:class:`UntrustedPathError`, exit 22).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from packaging.version import InvalidVersion, Version

from cudaup.core.tools import TOOL_COMPONENTS, is_toolkit_tool
from cudaup.core.versions import parse_request
from cudaup.errors import (
    ArtifactNotFoundError,
    CommandNotRunError,
    ReleaseNotFoundError,
    UntrustedPathError,
    UsageError,
)
from cudaup.install.store import Store
from cudaup.machine.host import host_platform
from cudaup.machine.sysroot import SystemRoot
from cudaup.machine.toolkits import Lookup, Toolkit, find_toolkits, not_a_toolkit
from cudaup.switch import shim

Source = Literal["run", "env", "file", "default", "none"]
_SOURCES: dict[str, Source] = {s: s for s in ("run", "env", "file", "default", "none")}

PIN_FILE = shim.PIN_FILE
TOOLKIT_ENV = shim.TOOLKIT_ENV
HOW_TO_CHOOSE = shim.HOW_TO_CHOOSE


# -- the active toolkit ----------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Active:
    """The toolkit in effect and why; ``path`` is ``None`` when none is usable."""

    source: Source
    request: str | None = None
    origin: Path | None = None  # the .cuda-version file
    version: str | None = None  # the store's version; None for a path outside the store
    path: Path | None = None
    failure: str | None = None
    problem: str | None = None
    #: the pins skipped on the way, each a sentence naming it and its owner
    warnings: tuple[str, ...] = ()

    @property
    def reason(self) -> str:
        """``from /work/.cuda-version``, ``from CUDAUP_TOOLKIT``, ``the default``, ``none: …``."""
        if self.path is None:
            return f"none: {self.problem}"
        return {
            "run": "from the command line",
            "env": f"from {TOOLKIT_ENV}",
            "file": f"from {self.origin}",
            "default": "the default",
        }.get(self.source, self.source)

    def describe(self) -> str:
        """``CUDA 12.8.1 (/path)``, or ``the toolkit at /path``."""
        if self.version:
            return f"CUDA {self.version} ({self.path})"
        return f"the toolkit at {self.path}"

    def require(self) -> Path:
        """The toolkit's directory, or the error that explains why there is none."""
        if self.path is not None:
            return self.path
        message = self.problem or "no CUDA toolkit is chosen here"
        if self.failure == "not-installed":
            raise ReleaseNotFoundError(message)
        if self.failure == "untrusted":
            raise UntrustedPathError(message)
        # Nothing chosen ("none") is the user's to fix too: exit 1 is kept for bugs.
        raise UsageError(message)

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "reason": self.reason,
            "request": self.request,
            "origin": str(self.origin) if self.origin else None,
            "version": self.version,
            "path": str(self.path) if self.path else None,
            "problem": self.problem,
            "warnings": list(self.warnings),
        }


def _home(store: Store) -> str:
    return str(store.home.absolute())


def _store_finder(store: Store) -> shim.Finder:
    """:meth:`Store.find` in the shape :mod:`cudaup.switch.shim` takes."""

    def find(_home: str, request: str, tool: str) -> tuple[str, str] | None:
        try:
            toolkit = store.find(request, tool)
        except UsageError:
            return None
        return (toolkit.version, str(toolkit.path)) if toolkit else None

    return find


def _active(choice: shim.Choice, store: Store) -> Active:
    foreign = foreign_problem(store, Path(choice.path)) if choice.path else None
    return Active(
        source=_SOURCES.get(choice.source, "none"),
        request=choice.request,
        origin=Path(choice.origin) if choice.origin else None,
        version=choice.version,
        path=Path(choice.path) if choice.path and foreign is None else None,
        failure="foreign" if foreign else choice.failure,
        problem=foreign or choice.problem,
        warnings=tuple(choice.warnings),
    )


def foreign_problem(store: Store, path: Path) -> str | None:
    """Why the toolkit at ``path`` is never selected, when cudaup installed it for another
    platform (``install --platform linux-sbsa --prefix DIR``): its tools cannot run here.
    The one check behind ``default``, ``pin``, ``run``, ``env``, ``which`` and ``show``."""
    toolkit = store.at(path)
    if toolkit is None or toolkit.foreign is None:
        return None
    return (
        f"{toolkit.path} holds CUDA {toolkit.version} for {toolkit.foreign} (installed with "
        f"--platform {toolkit.foreign}), which cannot run on this {host_platform()} machine; "
        "cudaup never selects it: name a toolkit for this machine"
    )


def select(
    store: Store,
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    request: str | None = None,
    tool: str = shim.COMPILER,
) -> Active:
    """The active toolkit for ``tool``: ``request`` (``cudaup run``), else
    ``CUDAUP_TOOLKIT``, else the nearest ``.cuda-version``, else the default.  Never
    raises for a missing toolkit: see :meth:`Active.require`."""
    env = os.environ if env is None else env
    where = str(cwd if cwd is not None else Path.cwd())
    find = _store_finder(store)
    home = _home(store)
    if request is not None:
        return _active(
            shim.resolve(home, request.strip(), "run", None, where, find, tool, env), store
        )
    return _active(shim.choose(home, env, where, find, tool), store)


def resolve_default(store: Store) -> Active | None:
    """What ``cudaup default`` names, resolved on its own; ``None`` when there is none."""
    value = store.default()
    if not value:
        return None
    home = _home(store)
    choice = shim.resolve(home, value, "default", None, home, _store_finder(store), env=os.environ)
    return _active(choice, store)


@dataclass(frozen=True, slots=True)
class FoundTool:
    """``cudaup which TOOL``'s answer: the executable (:func:`tool_in`), and the toolkit
    it is in and why."""

    tool: str
    path: Path
    active: Active

    def to_json(self) -> dict[str, Any]:
        return {"tool": self.tool, "path": str(self.path), "toolkit": self.active.to_json()}


def tool_in(active: Active, tool: str, store: Store) -> Path:
    """The executable ``tool`` in the active toolkit; raises when there is none (exit
    127, as ``cudaup run`` and the shims answer for the same tool), or when ``tool`` is
    not one of NVIDIA's tools (:mod:`cudaup.core.tools`)."""
    if not is_toolkit_tool(tool):
        raise ArtifactNotFoundError(f"cannot run {tool}: {shim.not_a_toolkit_tool(tool)}")
    toolkit = active.require()
    found = shim.tool_path(str(toolkit), tool)
    if found is None:
        raise CommandNotRunError(missing_tool(active, tool, store), 127)
    return Path(found)


def missing_tool(active: Active, tool: str, store: Store) -> str:
    """``nvcc is not in CUDA 12.8.1 (…), chosen by …; it comes with the cuda_nvcc component …``

    When that component is installed already, it says so instead of suggesting it."""
    said = (
        f"{tool} is not in {active.describe()}, chosen by "
        f"{shim.asker(active.source, str(active.origin))}; "
    )
    advice = shim.missing_tool(tool, str(active.path), active.version)
    component = TOOL_COMPONENTS.get(tool)
    installed = store.at(active.path) if active.path is not None else None
    suggests_it = advice.startswith("it comes with the")  # not the PyPI-nvcc case
    if suggests_it and installed is not None and component in installed.components:
        if (installed.record or {}).get("channel") == "pypi":
            return said + (
                f"its {component} is installed, but PyPI's {component} has no {tool}; "
                f"NVIDIA's may: `cudaup install {installed.version} --channel redist "
                f"--components {component}`"
            )
        return said + f"its {component} is installed but holds no {tool}: reinstall it"
    return said + advice


# -- requests: versions, paths, system toolkits ------------------------------------------
def check_request(text: str) -> str:
    """``text`` stripped, if it is a version request or a path; else :class:`UsageError`."""
    value = text.strip()
    if not value:
        raise UsageError("name a CUDA version (13.0, 12.8.1, cu128) or a toolkit directory")
    if not shim.is_path_request(value):
        parse_request(value)  # raises UsageError with the accepted forms
    return value


def real_path(root: SystemRoot, text: str, cwd: Path | None = None) -> Path:
    """The directory a typed path names: absolute system paths go through ``root``."""
    typed = Path(text).expanduser()
    path = Path(os.path.normpath((cwd or Path.cwd()) / typed))
    if root.is_real or not typed.is_absolute() or path.is_relative_to(root.root):
        return path
    final, exists = root.resolve(str(path))
    return root.path(final) if exists else path


def system_toolkits(
    request: str, root: SystemRoot, env: Mapping[str, str], store: Store
) -> list[Toolkit]:
    """Toolkits outside the store that identify as ``request``, newest first."""

    wanted = parse_request(request)
    found = find_toolkits(Lookup(root=root, env=dict(env), store=store.toolkits_dir))

    def versions(toolkit: Toolkit) -> list[Version]:
        labels = list(toolkit.identity.candidates) or (
            [toolkit.identity.line] if toolkit.identity.line and wanted.kind != "exact" else []
        )
        parsed = []
        for label in labels:
            with contextlib.suppress(InvalidVersion):
                parsed.append(Version(label))
        return parsed

    matching = [
        t
        for t in found
        if "cudaup store" not in t.found_via
        and t.layout == "toolkit"
        and (t.real / "bin").is_dir()
        and any(wanted.matches(v) for v in versions(t))
    ]
    return sorted(matching, key=lambda t: max(versions(t)), reverse=True)


# -- the default ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class DefaultChoice:
    """What ``cudaup default VALUE`` recorded, and what it resolves to now."""

    value: str  # what the default file holds: a version request or an absolute path
    path: Path
    version: str | None
    note: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "path": str(self.path),
            "version": self.version,
            "note": self.note,
        }


def choose_default(
    store: Store,
    text: str,
    *,
    root: SystemRoot | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> DefaultChoice:
    """Work out what ``cudaup default TEXT`` records; writes nothing.

    A version request stays a request (``13.0`` follows the newest installed
    13.0.x).  A version the store lacks may name a system toolkit that
    identifies as it; its path is recorded instead, and ``note`` says so.
    """
    root = SystemRoot.from_env() if root is None else root
    env = os.environ if env is None else env
    value = check_request(text)
    if shim.is_path_request(value):
        path = real_path(root, value, cwd)
        if not path.is_dir():
            raise UsageError(f"{value} is not a directory")
        if (problem := not_a_toolkit(path)) is not None:
            raise UsageError(problem)
        _require_trusted(store, path, env)
        problem = foreign_problem(store, path)
        if problem is not None:
            raise UsageError(problem)
        version = shim.version_at(_home(store), str(path))
        return DefaultChoice(str(path), path, version)
    toolkit = store.find(value)
    if toolkit is not None:
        return DefaultChoice(value, toolkit.path, toolkit.version)
    candidates = system_toolkits(value, root, env, store)
    if not candidates:
        raise ReleaseNotFoundError(
            f"no installed toolkit matches {value} (installed: {installed_names(store)}), and no "
            "toolkit elsewhere on this machine identifies as it; install it with "
            f"`cudaup install {value}` or name a toolkit directory"
        )
    chosen = candidates[0]
    _require_trusted(store, chosen.real, env)
    shown = root.display(chosen.real)
    note = (
        f"cudaup has not installed CUDA {value}; the default is the system toolkit {shown} "
        f"(CUDA {chosen.identity.describe()})"
    )
    return DefaultChoice(str(chosen.real), chosen.real, None, note)


def _require_trusted(store: Store, path: Path, env: Mapping[str, str]) -> None:
    """:class:`UntrustedPathError` when another user could change the toolkit at ``path``."""
    checked = shim.resolve(_home(store), str(path), "default", None, str(path), env=env)
    if checked.failure == "untrusted":
        raise UntrustedPathError(str(checked.problem))


def installed_names(store: Store) -> str:
    return ", ".join(t.version for t in store.installed()) or "none"
