"""The system link ``/usr/local/cuda``, changed only by ``default --system``.

Through ``update-alternatives`` where it manages the link (with ``--root`` under a
:class:`~cudaup.machine.sysroot.SystemRoot`, so tests never touch the real one),
else by an atomic symlink swap.  The previous state is pushed onto a history in
``$CUDAUP_HOME/system-link.json`` first, so that ``cudaup undo`` restores it.
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
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from cudaup.errors import (
    ConflictError,
    ExternalToolError,
    PermissionDeniedError,
    ReleaseNotFoundError,
    SourceFormatError,
    UsageError,
)
from cudaup.install.store import Store
from cudaup.machine.sysroot import SystemRoot
from cudaup.machine.toolkits import not_a_toolkit
from cudaup.switch import shim
from cudaup.switch.selection import check_request, installed_names, system_toolkits
from cudaup.util import processes
from cudaup.util.atomic import atomic_write
from cudaup.util.faults import explain, known_places
from cudaup.util.reading import read_small

# -- the system link (/usr/local/cuda) ---------------------------------------------------------
LINK = "/usr/local/cuda"
_ADMIN_DIRS = ("/var/lib/dpkg/alternatives", "/var/lib/alternatives")
_LINE = re.compile(r"(\d+)\.(\d+)")
LinkKind = Literal["absent", "link", "directory", "file"]
#: How long one ``update-alternatives`` run may take.  It edits a few small files; one that
#: runs this long waits on something that may never answer (a frozen or hung filesystem
#: under ``/etc`` or ``/var/lib``), and ``default --system`` and ``undo`` would wait with it.
ALTERNATIVES_TIMEOUT = 60.0


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

    def words(self) -> str:
        """``→ /usr/local/cuda-12.8``, ``does not exist``, … (after the link's name)."""
        if self.kind == "absent":
            return "does not exist"
        if self.kind != "link":
            return f"is a real {self.kind}, not a link"
        if self.alternative:
            return (
                f"→ {self.value} (update-alternatives '{self.alternative}', "
                f"{self.status or 'unknown'} mode)"
            )
        return f"→ {self.target}"

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "target": self.target,
            "alternative": self.alternative,
            "status": self.status,
            "value": self.value,
        }

    def report_json(self) -> dict[str, Any]:
        """``cudaup default --system``'s document: the link's path, and this state."""
        return {"link": LINK, "state": self.to_json()}

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> LinkState:
        kind = document.get("kind")
        if kind not in {"absent", "link", "directory", "file"}:
            raise SourceFormatError(f"system-link.json holds an unknown link kind {kind!r}")
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
        with contextlib.suppress(OSError, IndexError, ValueError):
            status = read_small(admin).decode().splitlines()[0].strip()
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
    lines = admin.read_text(encoding="utf-8").splitlines()
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
        document = json.loads(read_small(_history_path(store)))
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise explain(
            exc, f"cannot read {_history_path(store)}", store.home, known_places()
        ) or SourceFormatError(f"cannot read {_history_path(store)}: {exc.strerror}") from None
    except (ValueError, RecursionError) as exc:
        raise SourceFormatError(f"{_history_path(store)} is not valid JSON ({exc})") from None
    history = document.get("history") if isinstance(document, dict) else None
    return [entry for entry in history or [] if isinstance(entry, dict)]


def _write_history(store: Store, history: list[dict[str, Any]]) -> None:
    document = {"schema": 1, "link": LINK, "history": history}
    atomic_write(_history_path(store), json.dumps(document, indent=1) + "\n")


def _require_privileges(root: SystemRoot, retry: str) -> None:
    if root.is_real and os.geteuid() != 0:
        raise PermissionDeniedError(
            f'changing {LINK} needs root; run: sudo "$(command -v cudaup)" {retry}'
        )


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
                f"{installed_names(store)}) and none elsewhere on this machine identifies as it"
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
    if (problem := not_a_toolkit(root.path(final), system)) is not None:
        raise UsageError(problem)
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
    raise ExternalToolError(
        f"{LINK} is managed by update-alternatives, but update-alternatives is not on PATH"
    )


def _alternatives(root: SystemRoot, env: Mapping[str, str], *args: str) -> None:
    argv = [_alternatives_tool(env)]
    if not root.is_real:
        argv += ["--root", str(root.root)]
    argv += list(args)
    try:
        done = processes.run(argv, timeout=ALTERNATIVES_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise ExternalToolError(
            f"{shlex.join(argv)} did not finish within {ALTERNATIVES_TIMEOUT:g} s and was "
            "stopped (is a filesystem under /etc or /var/lib frozen or hung?)"
        ) from None
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip().splitlines()
        raise ExternalToolError(
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
        raise ConflictError(
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
            raise ConflictError(
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
                raise ConflictError(
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


def leads_to(root: SystemRoot, system: str | None, directory: Path) -> bool:
    """Whether the system path ``system`` (a link's target) ends at ``directory``."""
    if not system:
        return False
    final, exists = root.resolve(system)
    return exists and os.path.realpath(root.path(final)) == os.path.realpath(directory)


def release_link_to(
    store: Store,
    directory: Path,
    *,
    root: SystemRoot | None = None,
    env: Mapping[str, str] | None = None,
) -> tuple[list[LinkChange], str | None]:
    """Before ``directory`` (a toolkit) is removed: undo cudaup's changes of
    ``/usr/local/cuda`` that make it lead there, newest first, so the link is as it was
    before them.  The changes undone, and a note when the link still leads there because
    someone else set it (cudaup then leaves it, dangling once the toolkit is gone)."""
    root = SystemRoot.from_env() if root is None else root
    changes: list[LinkChange] = []
    while leads_to(root, read_link_state(root).points_at, directory):
        history = read_history(store)
        if not history or not leads_to(root, history[-1].get("target"), directory):
            return changes, (
                f"{LINK} leads to {directory} and cudaup did not set it so; it leads nowhere "
                "now: point it elsewhere with `cudaup default --system VERSION`"
            )
        changes.append(undo_system_link(store, root=root, env=env))
    return changes, None
