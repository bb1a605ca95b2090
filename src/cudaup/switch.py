"""Which CUDA toolkit is active, and switching it: shims, environments, pins, the system link.

Selection order (the first that names something wins; a name that matches
nothing is an error, never a silent fall-through):

1. ``cudaup run VERSION -- cmd`` (the run sets ``CUDAUP_TOOLKIT`` for ``cmd``);
2. ``CUDAUP_TOOLKIT``;
3. the nearest ``.cuda-version`` file, from the current directory upwards;
4. ``cudaup default`` (``$CUDAUP_HOME/default``).

A value is a version request (``13.0``, ``12.8.1``, ``cu128``: the newest
*installed* toolkit that matches, :meth:`Store.find`) or a path to a toolkit
directory.  ``cudaup default 12.8`` also accepts a system toolkit that
identifies as 12.8 when the store has none, and records its path.

The shims in ``$CUDAUP_HOME/bin`` are ``sh`` scripts that exec
``python -P -c 'from cudaup.shim import main; ...'``, which applies the same
rules with the standard library only (:mod:`cudaup.shim`).

``default --system`` points ``/usr/local/cuda`` (under
:class:`~cudaup.sysroot.SystemRoot`) at a toolkit, through
``update-alternatives`` when it manages the link, and records the previous
state in ``$CUDAUP_HOME/system-link.json`` so that ``cudaup undo`` restores it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from packaging.version import InvalidVersion, Version

from cudaup import shim
from cudaup.atomic import atomic_write
from cudaup.errors import (
    ArtifactNotFoundError,
    CudaupError,
    ReleaseNotFoundError,
    UsageError,
)
from cudaup.install.store import Store
from cudaup.sysroot import SystemRoot
from cudaup.versions import parse_request

if TYPE_CHECKING:
    from cudaup.toolkits import Toolkit

Source = Literal["run", "env", "file", "default", "none"]
Shell = Literal["bash", "zsh", "fish", "sh"]
SHELLS: tuple[Shell, ...] = ("bash", "zsh", "fish", "sh")
_SOURCES: dict[str, Source] = {s: s for s in ("run", "env", "file", "default", "none")}

PIN_FILE = shim.PIN_FILE
TOOLKIT_ENV = shim.TOOLKIT_ENV
HOW_TO_CHOOSE = shim.HOW_TO_CHOOSE
#: The variables ``cudaup env`` sets, in the order it prints them.
ENV_VARIABLES = ("CUDA_HOME", "CUDA_PATH", "PATH", "LD_LIBRARY_PATH")


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
        if self.failure in {"not-a-request", "not-a-directory", "empty"}:
            raise UsageError(message)
        raise CudaupError(message)

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "reason": self.reason,
            "request": self.request,
            "origin": str(self.origin) if self.origin else None,
            "version": self.version,
            "path": str(self.path) if self.path else None,
            "problem": self.problem,
        }


def _home(store: Store) -> str:
    return str(store.home.absolute())


def _store_finder(store: Store) -> shim.Finder:
    """:meth:`Store.find` in the shape :mod:`cudaup.shim` takes."""

    def find(_home: str, request: str) -> tuple[str, str] | None:
        try:
            toolkit = store.find(request)
        except UsageError:
            return None
        return (toolkit.version, str(toolkit.path)) if toolkit else None

    return find


def _active(choice: shim.Choice) -> Active:
    return Active(
        source=_SOURCES.get(choice.source, "none"),
        request=choice.request,
        origin=Path(choice.origin) if choice.origin else None,
        version=choice.version,
        path=Path(choice.path) if choice.path else None,
        failure=choice.failure,
        problem=choice.problem,
    )


def select(
    store: Store,
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    request: str | None = None,
) -> Active:
    """The active toolkit: ``request`` (``cudaup run``), else ``CUDAUP_TOOLKIT``, else the
    nearest ``.cuda-version``, else the default.  Never raises for a missing toolkit:
    see :meth:`Active.require`."""
    env = os.environ if env is None else env
    where = str(cwd if cwd is not None else Path.cwd())
    find = _store_finder(store)
    if request is not None:
        return _active(shim.resolve(_home(store), request.strip(), "run", None, where, find))
    return _active(shim.choose(_home(store), env, where, find))


def resolve_default(store: Store) -> Active | None:
    """What ``cudaup default`` names, resolved on its own; ``None`` when there is none."""
    value = store.default()
    if not value:
        return None
    home = _home(store)
    return _active(shim.resolve(home, value, "default", None, home, _store_finder(store)))


def tool_in(active: Active, tool: str) -> Path:
    """The executable ``tool`` in the active toolkit; raises when there is none."""
    toolkit = active.require()
    found = shim.tool_path(str(toolkit), tool)
    if found is None:
        raise ArtifactNotFoundError(
            f"{tool} is not in {active.describe()}, chosen by "
            f"{shim.asker(active.source, str(active.origin))}"
        )
    return Path(found)


# -- environments ----------------------------------------------------------------------
def toolkit_env(
    toolkit: Path, store: Store, env: Mapping[str, str] | None = None
) -> dict[str, str]:
    """``CUDA_HOME``, ``CUDA_PATH``, ``PATH`` and ``LD_LIBRARY_PATH`` with ``toolkit`` active.

    The toolkit's ``bin`` (and ``lib64``) go first; the directories of other
    cudaup toolkits and of the ``CUDA_HOME`` being replaced are removed.
    """
    env = os.environ if env is None else env
    full = shim.toolkit_environ(str(toolkit), env, _home(store))
    return {name: full[name] for name in ENV_VARIABLES}


def detect_shell(env: Mapping[str, str] | None = None) -> Shell:
    """The shell named by ``$SHELL`` (bash when unknown: its syntax is POSIX ``sh``'s)."""
    env = os.environ if env is None else env
    name = Path(env.get("SHELL", "")).name
    for shell in SHELLS:
        if name == shell:
            return shell
    return "bash"


def _fish_quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def render_env(variables: Mapping[str, str], shell: Shell) -> str:
    """Lines that set ``variables`` when ``eval``-ed by ``shell`` (fish: ``set -gx``)."""
    lines = []
    for name, value in variables.items():
        if shell == "fish":
            # fish keeps PATH-like variables as lists and joins them with ':' on export.
            items = value.split(os.pathsep) if name.endswith("PATH") else [value]
            lines.append(f"set -gx {name} {' '.join(_fish_quote(item) for item in items)};")
        else:
            lines.append(f"export {name}={shlex.quote(value)}")
    return "\n".join(lines) + "\n"


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


#: What a shim runs: ``-c`` rather than ``-m cudaup.shim`` saves runpy's imports
#: (about 3.5 of the shim's 13 ms); ``-P`` keeps the current directory off sys.path.
SHIM_CODE = "import sys; from cudaup.shim import main; sys.exit(main())"


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
    from cudaup.toolkits import Lookup, find_toolkits  # noqa: PLC0415 - runs tools, slow

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
        _require_bin(path)
        version = shim.version_at(_home(store), str(path))
        return DefaultChoice(str(path), path, version)
    toolkit = store.find(value)
    if toolkit is not None:
        return DefaultChoice(value, toolkit.path, toolkit.version)
    candidates = system_toolkits(value, root, env, store)
    if not candidates:
        raise ReleaseNotFoundError(
            f"no installed toolkit matches {value} (installed: {_installed(store)}), and no "
            "toolkit elsewhere on this machine identifies as it; install it with "
            f"`cudaup install {value}` or name a toolkit directory"
        )
    chosen = candidates[0]
    shown = root.display(chosen.real)
    note = (
        f"cudaup has not installed CUDA {value}; the default is the system toolkit {shown} "
        f"(CUDA {chosen.identity.describe()})"
    )
    return DefaultChoice(str(chosen.real), chosen.real, None, note)


def _require_bin(path: Path) -> None:
    if not (path / "bin").is_dir():
        raise UsageError(f"{path} has no bin/ directory: it is not a CUDA toolkit")


def _installed(store: Store) -> str:
    return ", ".join(t.version for t in store.installed()) or "none"


# -- pins ------------------------------------------------------------------------------------
def write_pin(directory: Path, request: str) -> Path:
    """Write ``directory/.cuda-version`` holding ``request``; its path."""
    value = check_request(request)
    path = directory / PIN_FILE
    atomic_write(path, value + "\n")
    return path


def remove_pin(directory: Path) -> Path | None:
    """Remove ``directory/.cuda-version``; its path, or ``None`` if there was none."""
    path = directory / PIN_FILE
    try:
        path.unlink()
    except FileNotFoundError:
        return None
    return path


def find_pin(start: Path) -> Path | None:
    """The nearest ``.cuda-version`` in ``start`` or above."""
    found = shim.find_pin(str(start))
    return Path(found) if found else None


# -- the system link (/usr/local/cuda) ---------------------------------------------------------
LINK = "/usr/local/cuda"
_ADMIN_DIRS = ("/var/lib/dpkg/alternatives", "/var/lib/alternatives")
_LINE = re.compile(r"(\d+)\.(\d+)")
LinkKind = Literal["absent", "link", "directory", "file"]


@dataclass(frozen=True, slots=True)
class LinkState:
    """``/usr/local/cuda`` at one moment: what it is, and whether alternatives manage it."""

    kind: LinkKind
    target: str | None = None  # the link's text
    alternative: str | None = None  # the update-alternatives name (``cuda``) if it manages it
    status: str | None = None  # ``auto`` or ``manual``
    value: str | None = None  # what the alternative points at

    @property
    def points_at(self) -> str | None:
        """The toolkit the link leads to (through the alternative, if any)."""
        return self.value if self.alternative else self.target

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "target": self.target,
            "alternative": self.alternative,
            "status": self.status,
            "value": self.value,
        }

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> LinkState:
        kind = document.get("kind")
        if kind not in {"absent", "link", "directory", "file"}:
            raise CudaupError(f"system-link.json holds an unknown link kind {kind!r}")
        return cls(
            kind=kind,
            target=document.get("target"),
            alternative=document.get("alternative"),
            status=document.get("status"),
            value=document.get("value"),
        )


def read_link_state(root: SystemRoot) -> LinkState:
    """What ``/usr/local/cuda`` is now, under ``root``."""
    real = root.path(LINK)
    target = root.readlink(LINK)
    if target is None:
        if real.is_dir():
            return LinkState("directory")
        return LinkState("file") if real.exists() else LinkState("absent")
    name = _alternative_name(root, target)
    if name is None:
        return LinkState("link", target)
    admin = _admin_file(root, name)
    status = None
    if admin is not None:
        with contextlib.suppress(OSError, IndexError):
            status = admin.read_text().splitlines()[0].strip()
    return LinkState("link", target, name, status, root.readlink(f"/etc/alternatives/{name}"))


def _alternative_name(root: SystemRoot, target: str) -> str | None:
    if not target.startswith("/etc/alternatives/"):
        return None
    name = target.removeprefix("/etc/alternatives/")
    return name if name and "/" not in name and _admin_file(root, name) else None


def _admin_file(root: SystemRoot, name: str) -> Path | None:
    for directory in _ADMIN_DIRS:
        path = root.path(f"{directory}/{name}")
        if path.is_file():
            return path
    return None


def _registered(root: SystemRoot, name: str, target: str) -> bool:
    """Whether ``target`` is one of the alternatives for ``name`` (a path line, then a priority)."""
    admin = _admin_file(root, name)
    if admin is None:
        return False
    lines = admin.read_text().splitlines()
    for index in range(2, len(lines) - 1):
        if lines[index] == target:
            priority = lines[index + 1].split()
            if priority and priority[0].lstrip("-").isdigit():
                return True
    return False


def alternatives_priority(version: str | None) -> int:
    """NVIDIA's priority for a toolkit line: 12.8 → 128, 13.0 → 130 (1 when unknown)."""
    match = _LINE.search(version or "")
    return int(match.group(1)) * 10 + int(match.group(2)) if match else 1


@dataclass(frozen=True, slots=True)
class LinkChange:
    """One change of ``/usr/local/cuda``: before, after, and how."""

    before: LinkState
    after: LinkState
    method: Literal["symlink", "update-alternatives"]
    registered: str | None = None  # an alternative cudaup added (undo removes it)
    note: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "link": LINK,
            "before": self.before.to_json(),
            "after": self.after.to_json(),
            "method": self.method,
            "registered": self.registered,
            "note": self.note,
        }


def _history_path(store: Store) -> Path:
    return store.home / "system-link.json"


def read_history(store: Store) -> list[dict[str, Any]]:
    """The recorded changes of ``/usr/local/cuda``, oldest first."""
    try:
        document = json.loads(_history_path(store).read_text())
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        raise CudaupError(f"cannot read {_history_path(store)}: {exc}") from None
    history = document.get("history") if isinstance(document, dict) else None
    return [entry for entry in history or [] if isinstance(entry, dict)]


def _write_history(store: Store, history: list[dict[str, Any]]) -> None:
    document = {"schema": 1, "link": LINK, "history": history}
    atomic_write(_history_path(store), json.dumps(document, indent=1) + "\n")


def _require_privileges(root: SystemRoot, retry: str) -> None:
    if root.is_real and os.geteuid() != 0:
        raise CudaupError(f'changing {LINK} needs root; run: sudo "$(command -v cudaup)" {retry}')


def system_target(
    store: Store,
    text: str,
    *,
    root: SystemRoot | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> tuple[str, str | None]:
    """The system path ``/usr/local/cuda`` should point at for ``text``, and its version."""
    root = SystemRoot.from_env() if root is None else root
    env = os.environ if env is None else env
    value = check_request(text)
    version: str | None = None
    typed: Path | None = None
    if shim.is_path_request(value):
        typed = Path(value).expanduser()
        real = Path(os.path.normpath((cwd or Path.cwd()) / typed))
    elif (toolkit := store.find(value)) is not None:
        real, version = toolkit.path.absolute(), toolkit.version
    else:
        candidates = system_toolkits(value, root, env, store)
        if not candidates:
            raise ReleaseNotFoundError(
                f"no toolkit matches {value}: none installed by cudaup (installed: "
                f"{_installed(store)}) and none elsewhere on this machine identifies as it"
            )
        real, version = candidates[0].real, candidates[0].identity.newest
    if root.is_real:
        system = str(real)
    elif real.is_relative_to(root.root):
        system = "/" + str(real.relative_to(root.root))
    elif typed is not None and typed.is_absolute():
        system = str(real)  # a system path, inside the root
    else:
        raise UsageError(
            f"{real} is outside the system root {root.root}; /usr/local/cuda can only "
            "point inside it"
        )
    if system == LINK or system.startswith(LINK + "/"):
        raise UsageError(f"{system} is the link itself; name the toolkit it should point at")
    final, exists = root.resolve(system)
    if not exists or not root.path(final).is_dir():
        raise UsageError(f"{system} is not a directory")
    if not root.path(final).joinpath("bin").is_dir():
        raise UsageError(f"{system} has no bin/ directory: it is not a CUDA toolkit")
    return system, version or _version_from_name(system)


def _version_from_name(system: str) -> str | None:
    match = _LINE.search(Path(system).name)
    return match.group(0) if match else None


def _alternatives_tool(env: Mapping[str, str]) -> str:
    for name in ("update-alternatives", "alternatives"):
        found = shutil.which(name, path=env.get("PATH")) or shutil.which(
            name, path="/usr/sbin:/usr/bin:/sbin:/bin"
        )
        if found:
            return found
    raise CudaupError(
        f"{LINK} is managed by update-alternatives, but update-alternatives is not on PATH"
    )


def _alternatives(root: SystemRoot, env: Mapping[str, str], *args: str) -> None:
    argv = [_alternatives_tool(env)]
    if not root.is_real:
        argv += ["--root", str(root.root)]
    argv += list(args)
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip().splitlines()
        raise CudaupError(
            f"{shlex.join(argv)} failed: {detail[-1] if detail else f'exit {done.returncode}'}"
        )


def _replace_link(root: SystemRoot, target: str | None) -> None:
    """Point the link at ``target`` in one rename (``None``: remove the link)."""
    link = root.path(LINK)
    if target is None:
        if link.is_symlink():
            link.unlink()
        return
    link.parent.mkdir(parents=True, exist_ok=True)
    temporary = link.parent / f".cuda.cudaup-{secrets.token_hex(4)}"
    temporary.symlink_to(target)
    try:
        temporary.replace(link)
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise


def _refuse_real(state: LinkState, root: SystemRoot) -> None:
    if state.kind in {"directory", "file"}:
        what = "a real directory" if state.kind == "directory" else "a file"
        raise CudaupError(
            f"{root.display(root.path(LINK))} is {what}, not a link; cudaup will not replace "
            f"it (move it aside, e.g. to {LINK}-X.Y, and run this again)"
        )


def set_system_link(
    store: Store,
    target: str,
    *,
    version: str | None = None,
    root: SystemRoot | None = None,
    env: Mapping[str, str] | None = None,
) -> LinkChange:
    """Point ``/usr/local/cuda`` at the system path ``target``, recording the previous state.

    Through ``update-alternatives --set`` when it manages the link (after
    ``--install`` when ``target`` is not yet one of its alternatives), else by
    replacing the symlink atomically.  Refuses a real directory at the link.
    """
    root = SystemRoot.from_env() if root is None else root
    env = os.environ if env is None else env
    _require_privileges(root, f"default --system {target}")
    with store.lock("system-link", timeout=60):
        before = read_link_state(root)
        _refuse_real(before, root)
        method: Literal["symlink", "update-alternatives"] = (
            "update-alternatives" if before.alternative else "symlink"
        )
        name = before.alternative
        registered = None
        if name is not None and not _registered(root, name, target):
            registered = target
        entry = {
            "time": datetime.now(UTC).isoformat(timespec="seconds"),
            "target": target,
            "method": method,
            "registered": registered,
            "before": before.to_json(),
        }
        history = read_history(store)
        _write_history(store, [*history, entry])
        try:
            if name is not None:
                if registered is not None:
                    priority = str(alternatives_priority(version))
                    _alternatives(root, env, "--install", LINK, name, target, priority)
                _alternatives(root, env, "--set", name, target)
            else:
                _replace_link(root, target)
        except BaseException:
            if read_link_state(root) == before:
                _write_history(store, history)  # nothing changed: nothing to undo
            raise
        return LinkChange(before, read_link_state(root), method, registered)


def undo_system_link(
    store: Store, *, root: SystemRoot | None = None, env: Mapping[str, str] | None = None
) -> LinkChange:
    """Restore ``/usr/local/cuda`` as the last :func:`set_system_link` found it, and forget
    that change."""
    root = SystemRoot.from_env() if root is None else root
    env = os.environ if env is None else env
    _require_privileges(root, "undo")
    with store.lock("system-link", timeout=60):
        history = read_history(store)
        if not history:
            raise CudaupError(
                f"nothing to undo: cudaup has not changed {LINK} ({_history_path(store)} "
                "records no change)"
            )
        entry = history[-1]
        before = LinkState.from_json(entry.get("before") or {})
        current = read_link_state(root)
        _refuse_real(current, root)
        note = None
        if current.points_at != entry.get("target"):
            note = (
                f"{LINK} was changed since cudaup set it to {entry.get('target')} "
                f"(it led to {current.points_at}); restored anyway"
            )
        if entry.get("method") == "update-alternatives":
            name = before.alternative or current.alternative
            if name is None or current.alternative != name:
                raise CudaupError(
                    f"{LINK} is no longer managed by update-alternatives; cudaup will not "
                    f"guess how to restore it (it pointed at {before.points_at})"
                )
            if before.status == "auto" or not before.value:
                _alternatives(root, env, "--auto", name)
            else:
                _alternatives(root, env, "--set", name, before.value)
            registered = entry.get("registered")
            if isinstance(registered, str) and _registered(root, name, registered):
                _alternatives(root, env, "--remove", name, registered)
            method: Literal["symlink", "update-alternatives"] = "update-alternatives"
        else:
            _replace_link(root, before.target if before.kind == "link" else None)
            method = "symlink"
        _write_history(store, history[:-1])
        return LinkChange(current, read_link_state(root), method, note=note)
