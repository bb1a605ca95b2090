"""``.cuda-version`` pins: a directory's toolkit, read from the current directory upwards.

A pin another user owns or may write is skipped, with a warning naming it and its
owner (:func:`cudaup.switch.shim.read_pin`, :mod:`cudaup.util.trust`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cudaup.errors import UntrustedPathError, UsageError
from cudaup.install.store import Store
from cudaup.machine.sysroot import SystemRoot
from cudaup.switch import shim
from cudaup.switch.selection import (
    PIN_FILE,
    TOOLKIT_ENV,
    Active,
    check_request,
    foreign_problem,
    real_path,
    select,
)
from cudaup.util.atomic import atomic_write


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


def nearest_pin(start: Path) -> tuple[Path | None, str, list[str]]:
    """The nearest pin that may choose, its request, and a warning per pin skipped."""
    found, request, skipped = shim.nearest_pin(str(start), os.environ)
    return (Path(found) if found else None), request, skipped


def pinned_release(start: Path) -> tuple[Path, str, list[str]]:
    """The nearest ``.cuda-version`` and the release it asks for, for ``cudaup install``
    with no version (as rustup reads ``rust-toolchain.toml`` and uv ``.python-version``),
    and a warning for each nearer pin skipped because another user could have written it;
    :class:`UntrustedPathError` when every pin there is such a pin."""
    pin, request, skipped = nearest_pin(start)
    if pin is None and skipped:
        raise UntrustedPathError(skipped[0])
    if pin is None:
        raise UsageError(
            f"name a release to install (13.0.1, 13.0, cu130), give --lock FILE, or pin one "
            f"for this directory (`cudaup pin 13.0`): there is no {PIN_FILE} in {start} or above"
        )
    if not request:
        raise UsageError(f"{pin} names no toolkit; write a release in it (`cudaup pin 13.0`)")
    if shim.is_path_request(request):
        raise UsageError(
            f"{pin} names the directory {request}, not a release cudaup could install; "
            "name a release: cudaup install 13.0.1"
        )
    return pin, check_request(request), skipped


# -- what `cudaup pin` does and answers ------------------------------------------------------
@dataclass(frozen=True, slots=True)
class PinLookup:
    """The pin that chooses in a directory (``cudaup pin``), and the pins skipped on the way."""

    pin: Path | None
    request: str | None
    skipped: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"pin": str(self.pin) if self.pin else None, "request": self.request}


def look_up_pin(directory: Path) -> PinLookup:
    pin, request, skipped = nearest_pin(directory)
    return PinLookup(pin, request if pin else None, tuple(skipped))


@dataclass(frozen=True, slots=True)
class PinRemoval:
    """What ``cudaup pin --unset`` removed, and the pin above that applies now."""

    removed: Path | None
    applies_here: Path | None
    request: str

    def to_json(self) -> dict[str, Any]:
        return {
            "removed": str(self.removed) if self.removed else None,
            "applies_here": str(self.applies_here) if self.applies_here else None,
        }


def unpin(directory: Path) -> PinRemoval:
    removed = remove_pin(directory)
    still, request, _ = nearest_pin(directory)
    return PinRemoval(removed, still, request)


@dataclass(frozen=True, slots=True)
class PinChange:
    """What ``cudaup pin VALUE`` wrote, and the toolkit the pin chooses (``CUDAUP_TOOLKIT``
    aside: it would override the pin in this environment, and ``notes`` says so)."""

    pin: Path
    request: str
    toolkit: Active
    notes: tuple[str, ...] = ()

    @property
    def problem(self) -> str | None:
        """Why the pin chooses no toolkit yet (with the way out), or ``None``."""
        if self.toolkit.path is not None:
            return None
        fix = (
            f"; install it with `cudaup install {self.request}`"
            if self.toolkit.failure == "not-installed"
            else ""
        )
        return f"{self.toolkit.problem}{fix}"

    def to_json(self) -> dict[str, Any]:
        return {
            "pin": str(self.pin),
            "request": self.request,
            "toolkit": self.toolkit.to_json(),
            "notes": list(self.notes),
        }


def pin_directory(
    store: Store, directory: Path, text: str, *, root: SystemRoot, env: Mapping[str, str]
) -> PinChange:
    """Write ``directory``'s pin after the checks (a request cudaup reads; a toolkit
    directory that is not another tool's), and select what it chooses there."""
    request = check_request(text)
    if shim.is_path_request(request):
        problem = foreign_problem(store, real_path(root, request, directory))
        if problem is not None:
            raise UsageError(problem)
    path = write_pin(directory, text)
    without_override = {k: v for k, v in env.items() if k != TOOLKIT_ENV}
    pinned = select(store, env=without_override, cwd=directory)
    notes = []
    if env.get(TOOLKIT_ENV, "").strip():
        notes.append(f"{TOOLKIT_ENV}={env[TOOLKIT_ENV]} overrides it in this environment")
    return PinChange(path, request, pinned, tuple(notes))
