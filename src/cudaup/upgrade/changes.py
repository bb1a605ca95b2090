"""The change set: what moving an environment to a line does to each package, and why
(pure: the census, the requests and the resolved closure in, changes out).

Each package of the closure is compared with what is installed: a new version
(``change``), a new name for an installed package (``rename``: ``cupy-cuda12x`` →
``cupy-cuda13x``), or a new package (``add``).  Every installed package that carries
another line and is no longer required is removed (``remove``), so two builds of one
package (two ``cupy``) never share the environment; so is what only an extra naming the
old major required (``flashinfer-python[cu12]`` → ``[cu13]``) once nothing needs it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from packaging.utils import canonicalize_name

from cudaup.plan.closure import Closure, Resolved
from cudaup.plan.lines import Evidence, Line, line_text
from cudaup.plan.result import Origin
from cudaup.upgrade.census import Census, Request

ChangeKind = Literal["change", "rename", "add", "remove"]


@dataclass(frozen=True, slots=True)
class Change:
    kind: ChangeKind
    old: str | None
    old_version: str | None
    new: str | None
    new_version: str | None
    index: str | None
    index_url: str | None
    reason: str

    @property
    def name(self) -> str:
        return self.new or self.old or "?"

    def describe(self) -> str:
        """``cupy-cuda12x 13.4.1 → cupy-cuda13x 14.0.0``, ``+ cuda-pathfinder 1.9.1``."""
        if self.kind == "change":
            return f"{self.old} {self.old_version} → {self.new_version}"
        if self.kind == "rename":
            return f"{self.old} {self.old_version} → {self.new} {self.new_version}"
        if self.kind == "add":
            return f"+ {self.new} {self.new_version}"
        return f"- {self.old} {self.old_version}"

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "old": {"name": self.old, "version": self.old_version} if self.old else None,
            "new": {"name": self.new, "version": self.new_version} if self.new else None,
            "index": self.index,
            "index_url": self.index_url,
            "reason": self.reason,
        }

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> Change:
        """A change as a snapshot record keeps it (the caller checked the record's shape)."""
        old, new = document.get("old") or {}, document.get("new") or {}
        return cls(
            document["kind"],
            old.get("name"),
            old.get("version"),
            new.get("name"),
            new.get("version"),
            document.get("index"),
            document.get("index_url"),
            document.get("reason", ""),
        )


def change_set(
    census: Census,
    line: Line,
    requests: Sequence[Request],
    closure: Closure,
    evidence: Mapping[str, Evidence],
    origins: Mapping[str, Origin],
    index_names: Mapping[str, str],
    rename: Callable[[str], str | None],
    moved_extras: Mapping[str, str] | None = None,
) -> list[Change]:
    """Every change moving ``census``'s environment onto ``line`` makes (see the module doc);
    ``rename`` names a project's build for the line's major (the family table's);
    ``moved_extras``: what only an extra that names the old major required, and why."""
    installed = census.environment.distributions
    renamed: dict[str, Request] = {
        canonicalize_name(r.requirement.name): r
        for r in requests
        if r.source is not None and r.source.name != canonicalize_name(r.requirement.name)
    }
    held: set[str] = {canonicalize_name(r.requirement.name) for r in requests if r.held}
    changes: list[Change] = []
    for package in closure:
        index, index_url = _index_of(package, origins, index_names)
        reason = _reason(package, closure, evidence, held, line)
        current = installed.get(package.name)
        if current is not None:
            if current.version_text == str(package.version) or (
                current.version is not None and current.version == package.version
            ):
                continue
            if package.name not in census.signals and package.name not in evidence:
                reason = f"the installed {current.version_text} does not fit: {reason}"
            changes.append(
                Change(
                    "change",
                    package.name,
                    current.version_text,
                    package.name,
                    str(package.version),
                    index,
                    index_url,
                    reason,
                )
            )
        elif (request := renamed.get(package.name)) is not None and request.source is not None:
            source = request.source
            changes.append(
                Change(
                    "rename",
                    source.name,
                    source.version_text,
                    package.name,
                    str(package.version),
                    index,
                    index_url,
                    f"the CUDA {line[0]} build of {source.name}; {reason}",
                )
            )
        else:
            changes.append(
                Change(
                    "add", None, None, package.name, str(package.version), index, index_url, reason
                )
            )
    moved = {c.old for c in changes if c.kind == "rename"}
    for name in sorted(census.signals):
        signal = census.signals[name]
        if signal.fits(line) or closure.get(name) is not None or name in moved:
            continue
        dist = installed[name]
        changes.append(
            Change(
                "remove",
                name,
                dist.version_text,
                None,
                None,
                None,
                None,
                f"{signal.cuda()} ({signal.how}); nothing on CUDA {line_text(line)} requires it",
            )
        )
    changes += _extras_left(census, closure, moved_extras or {}, {c.old for c in changes})
    changes = _pair(changes, rename, line[0])
    order = {"rename": 0, "change": 1, "add": 2, "remove": 3}
    return sorted(changes, key=lambda c: (order[c.kind], c.name))


def _extras_left(
    census: Census, closure: Closure, moved: Mapping[str, str], changed: set[str | None]
) -> list[Change]:
    """What an extra naming the old major alone required, that nothing needs any more: not
    in the new resolution and required by nothing that stays."""
    installed = census.environment.distributions
    staying = [n for n in installed if n not in census.moving and n not in moved]
    changes = []
    for name, why in sorted(moved.items()):
        if name in changed or closure.get(name) is not None:
            continue
        if any(name in census.edges[other] for other in staying):
            continue
        changes.append(
            Change(
                "remove",
                name,
                installed[name].version_text,
                None,
                None,
                None,
                None,
                f"{why}; nothing else requires it",
            )
        )
    return changes


def _pair(changes: list[Change], rename: Callable[[str], str | None], major: int) -> list[Change]:
    """A removed package and the added build of it for the new major are one rename
    (``nvidia-cuda-runtime-cu12`` under torch → ``nvidia-cuda-runtime``)."""
    added = {c.new: c for c in changes if c.kind == "add"}
    paired: list[Change] = []
    used: set[str] = set()
    for change in changes:
        new = rename(change.old) if change.kind == "remove" and change.old else None
        counterpart = added.get(new) if new else None
        if counterpart is None or new in used:
            paired.append(change)
            continue
        used.add(new or "")
        reason = f"the CUDA {major} build of {change.old}; {counterpart.reason}"
        paired.append(
            replace(
                counterpart,
                kind="rename",
                old=change.old,
                old_version=change.old_version,
                reason=reason,
            )
        )
    return [c for c in paired if not (c.kind == "add" and c.new in used)]


def removals(changes: Sequence[Change]) -> list[str]:
    """The installed names to uninstall before the new builds go in (renamed and removed)."""
    return sorted({c.old for c in changes if c.kind in {"rename", "remove"} and c.old})


def _index_of(
    package: Resolved, origins: Mapping[str, Origin], index_names: Mapping[str, str]
) -> tuple[str | None, str | None]:
    origin = origins.get(package.name)
    if origin is not None:
        return origin.index, origin.url
    url = (package.index_url or "").rstrip("/")
    return index_names.get(url), url or None


def _reason(
    package: Resolved,
    closure: Closure,
    evidence: Mapping[str, Evidence],
    held: set[str],
    line: Line,
) -> str:
    found = evidence.get(package.name)
    if package.name in held:
        return (
            f"CUDA {line_text(line)}: its version is its CUDA release (held to {line_text(line)}.*)"
        )
    if found is not None:
        return f"{found.cuda()}: {found.how}"
    parents = sorted(p for p in package.parents if p != "-r")
    if parents:
        by = ", ".join(str(closure.get(p) or p) for p in parents[:3])
        return f"required by {by}"
    return "asked for: it depends on a package that moves"
