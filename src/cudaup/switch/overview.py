"""What ``cudaup show``, ``list`` and ``default`` report: the active toolkit, the default,
the installed toolkits (and, for ``list``, the others found on the machine), the shims and
the system link, read once, as data; and what
``cudaup default VALUE`` changes, with the notes that go with it.

The command line words them for people; each ``to_json`` is the command's ``--json``
document (README, "Switching").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cudaup.install.store import InstalledToolkit, Store
from cudaup.machine.sysroot import SystemRoot
from cudaup.machine.toolkits import Lookup, Toolkit, find_toolkits
from cudaup.switch import shim, shim_files, system_link
from cudaup.switch.selection import (
    Active,
    DefaultChoice,
    choose_default,
    resolve_default,
    select,
)


@dataclass(frozen=True, slots=True)
class DefaultState:
    """The store's default (``value``: what the default file holds) and what it resolves to."""

    value: str | None
    resolved: Active | None

    def to_json(self) -> dict[str, Any]:
        document = None
        if self.value is not None and self.resolved is not None:
            document = {
                "value": self.value,
                "path": str(self.resolved.path) if self.resolved.path else None,
                "version": self.resolved.version,
                "problem": self.resolved.problem,
            }
        return {"default": document}


def read_default(store: Store) -> DefaultState:
    return DefaultState(store.default(), resolve_default(store))


def unset_default(store: Store) -> DefaultState:
    """``cudaup default --unset``: no default from now on; returns the state that leaves."""
    store.set_default(None)
    return DefaultState(None, None)


@dataclass(frozen=True, slots=True)
class Overview:
    """Everything ``cudaup show`` reports, read at one moment."""

    active: Active
    default: DefaultState
    installed: tuple[InstalledToolkit, ...]
    shim_dir: Path
    shims_on_path: bool
    link: system_link.LinkState

    def marks(self, toolkit: InstalledToolkit) -> list[str]:
        """``active``, ``default``: which of the two ``toolkit`` is."""
        chosen = (("active", self.active), ("default", self.default.resolved))
        return [
            word
            for word, each in chosen
            if each is not None and each.path is not None and toolkit.path == each.path
        ]

    def to_json(self) -> dict[str, Any]:
        return {
            "active": self.active.to_json(),
            "default": self.default.value,
            "installed": [
                {
                    "version": t.version,
                    "path": str(t.path),
                    "external": t.external,
                    "active": self.active.path is not None and t.path == self.active.path,
                }
                for t in self.installed
            ],
            "shims": {"dir": str(self.shim_dir), "on_path": self.shims_on_path},
            "system_link": {"link": system_link.LINK, **self.link.to_json()},
        }


def overview(store: Store, root: SystemRoot, active: Active | None = None) -> Overview:
    """Read the state ``cudaup show`` reports (``active``: already selected, with its
    warnings said)."""
    return Overview(
        active=select(store) if active is None else active,
        default=read_default(store),
        installed=tuple(store.installed()),
        shim_dir=store.bin_dir,
        shims_on_path=shim_files.shims_on_path(store),
        link=system_link.read_link_state(root),
    )


@dataclass(frozen=True, slots=True)
class DefaultChange:
    """What ``cudaup default VALUE`` recorded, the toolkit active here now, and the notes:
    a system toolkit chosen for a release cudaup has not installed, something nearer
    than the default that decides here, shims that are not on PATH."""

    choice: DefaultChoice
    active: Active
    notes: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"default": self.choice.to_json(), "notes": list(self.notes)}


def set_default(store: Store, text: str, *, root: SystemRoot) -> DefaultChange:
    """Record ``text`` as the store's default (checked by :func:`choose_default`) and
    rewrite the shims for the toolkits it brings."""
    choice = choose_default(store, text, root=root)
    store.set_default(choice.value)
    shim_files.refresh_shims(store)
    active = select(store)
    notes = [n for n in (choice.note, override_note(active)) if n]
    if not shim_files.shims_on_path(store):
        notes.append(f"add {store.bin_dir} to PATH so that nvcc and friends run the active toolkit")
    return DefaultChange(choice, active, tuple(notes))


def override_note(active: Active) -> str | None:
    """A note when something above the default (``CUDAUP_TOOLKIT``, a pin) decides here."""
    if active.source in {"env", "file"}:
        return f"here, {shim.asker(active.source, str(active.origin))} takes precedence ({active.request})"
    return None


@dataclass(frozen=True, slots=True)
class ToolkitListing:
    """``cudaup list``: the toolkits cudaup installed, which the default names, and the
    others found on the machine."""

    default: str | None
    installed: tuple[InstalledToolkit, ...]
    #: the toolkit directory the default resolves to now (a request follows its newest match)
    default_path: Path | None
    others: tuple[Toolkit, ...]

    def is_default(self, toolkit: InstalledToolkit) -> bool:
        return toolkit.path.resolve() == self.default_path

    def to_json(self) -> dict[str, Any]:
        return {
            "default": self.default,
            "installed": [
                {
                    "version": t.version,
                    "path": str(t.path),
                    "components": t.components,
                    "channel": (t.record or {}).get("channel"),
                    "libraries": t.libraries,
                    "external": t.external,
                    "foreign_platform": t.foreign,
                    "default": self.is_default(t),
                }
                for t in self.installed
            ],
            "other": [t.to_json() for t in self.others],
        }


def list_toolkits(store: Store, root: SystemRoot, env: Mapping[str, str]) -> ToolkitListing:
    installed = tuple(store.installed())
    chosen = resolve_default(store)
    default_path = chosen.path.resolve() if chosen is not None and chosen.path else None
    mine = {t.path.resolve() for t in installed}
    found = find_toolkits(Lookup(root=root, env=dict(env), store=store.toolkits_dir))
    others = tuple(t for t in found if t.real.resolve() not in mine)
    return ToolkitListing(store.default(), installed, default_path, others)
