"""Which release is this toolkit, honestly.

Component versions do not map one-to-one to releases: nvcc 13.0.88 ships in
13.0.1, 13.0.2 and 13.0.3, and a runfile's ``version.json`` carries a
date-based ``cuda.version`` (``12.6.20241114``).  So a toolkit is identified
from *all* the component versions it holds, against what each release ships
(``data/release_components.json``, made from PyPI's ``cuda-toolkit`` pins, plus
any live manifests), and the answer is a range when they do not pin one
release: "13.0.2 or 13.0.3".  Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from packaging.version import InvalidVersion, Version

ReleaseTable = Mapping[str, Mapping[str, str]]


@dataclass(frozen=True, slots=True)
class Identity:
    """The releases a toolkit can be, newest first, and what that rests on."""

    candidates: tuple[str, ...]
    line: str | None
    basis: tuple[str, ...]

    @property
    def exact(self) -> str | None:
        return self.candidates[0] if len(self.candidates) == 1 else None

    @property
    def newest(self) -> str | None:
        return self.candidates[0] if self.candidates else None

    def describe(self) -> str:
        if self.candidates:
            ordered = sorted(self.candidates, key=Version)
            if len(ordered) == 1:
                return ordered[0]
            return ", ".join(ordered[:-1]) + " or " + ordered[-1]
        if self.line:
            return f"{self.line}.x (release not identified)"
        return "unknown release"

    def to_json(self) -> dict[str, Any]:
        return {
            "release": self.exact,
            "candidates": list(self.candidates),
            "line": self.line,
            "description": self.describe(),
            "basis": list(self.basis),
        }


@cache
def shipped_table() -> dict[str, dict[str, str]]:
    """Component versions per release, shipped with cudaup (see data/README.md)."""
    try:
        text = (
            resources.files("cudaup")
            .joinpath("data/release_components.json")
            .read_text(encoding="utf-8")
        )
    except FileNotFoundError:
        return {}
    releases: dict[str, dict[str, str]] = json.loads(text)["releases"]
    return releases


def _same_version(observed: str, shipped: str) -> bool:
    """``13.0.88`` matches ``13.0.88``; a 3-part observation matches a 4-part pin's prefix."""
    a, b = observed.split("."), shipped.split(".")
    shortest = min(len(a), len(b))
    if shortest < 3:
        return False
    return a[:shortest] == b[:shortest]


def _line_of(version: str) -> str | None:
    try:
        parts = Version(version).release
    except InvalidVersion:
        return None
    return f"{parts[0]}.{parts[1]}" if len(parts) >= 2 else None


def identify(
    components: Mapping[str, str],
    table: ReleaseTable,
    *,
    declared: str | None = None,
) -> Identity:
    """Releases consistent with every observed component version.

    ``declared`` is a ``cuda.version`` from ``version.json`` or a package
    version: used as a release label only when it looks like one (a patch
    below 1000); a date-based one (``12.6.20241114``) only fixes the line.
    """
    basis = tuple(f"{name} {version}" for name, version in sorted(components.items()))
    declared_line: str | None = None
    declared_label: str | None = None
    if declared:
        declared_line = _line_of(declared)
        parts = declared.split(".")
        if len(parts) == 3 and parts[2].isdigit() and int(parts[2]) < 1000:
            declared_label = declared
        basis += (f"declared {declared}",)
    candidates: list[str] = []
    for release, shipped in table.items():
        if declared_label and release != declared_label:
            continue
        if declared_line and _line_of(release) != declared_line:
            continue
        overlap = [name for name in components if name in shipped]
        if not overlap:
            continue
        if all(_same_version(components[name], shipped[name]) for name in overlap):
            candidates.append(release)
    candidates.sort(key=Version, reverse=True)
    line = declared_line
    if line is None:
        for name in ("cuda_nvcc", "cuda_cudart", "cuda_nvrtc"):
            if name in components:
                line = _line_of(components[name])
                break
    if not candidates and declared_label:
        candidates = [declared_label]  # a package version is a release label
    return Identity(tuple(candidates), line, basis)
