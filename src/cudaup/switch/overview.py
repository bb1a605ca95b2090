"""What ``cudaup show`` and ``cudaup default`` (no value) report: the active toolkit, the
default, the installed toolkits, the shims and the system link, read once, as data.

The command line words them for people; :meth:`Overview.to_json` and
:meth:`DefaultState.to_json` are their ``--json`` documents (README, "cudaup show").
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cudaup.install.store import InstalledToolkit, Store
from cudaup.machine.sysroot import SystemRoot
from cudaup.switch import shim_files, system_link
from cudaup.switch.selection import Active, resolve_default, select


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
