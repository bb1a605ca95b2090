"""Which installed distributions carry a CUDA line, which depend on them, and what to ask
the resolver for on another line (pure: an :class:`Environment` in, values out).

A distribution carries a line (a :class:`Signal`) through, strongest first: the family
table (a release-versioned project's version, else the major its name is for), the
signals ``plan`` reads (``cuda-toolkit`` and the runtime's versions, a ``+cu128`` local
version, a ``-cu12``/``cuda12x`` name), and the CUDA runtime its shared objects link
(``libcudart.so.12``, read by the caller).  What requires such a distribution,
directly or not, is a *dependent* (torchvision through torch, a pure package through
torch): it moves with them.  The requests for a target major are the roots of both
sets, renamed for that major (``cupy-cuda12x`` → ``cupy-cuda13x``) with their
installed extras renamed too (``jax[cuda12]`` → ``jax[cuda13]``); everything else the
environment has installed is a *preference*, kept where the resolution allows.

Two kinds of distributions move with another whatever their own signals say: a
*companion* (the family table's ``[companions]``: ``flashinfer-cubin`` with
``flashinfer-python``) with its package, and one whose extension modules link libtorch
(``libtorch*.so``/``libc10*.so`` among their needed libraries: ``sglang-kernel``,
``torchvision``) with torch; the latter are :attr:`Census.torch_linked`, whose new build
must be proven to pair with the new torch.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from packaging.markers import UndefinedEnvironmentName
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from cudaup.errors import NoCommonLineError
from cudaup.plan.lines import TOOLKIT, Line, evidence_of, library_evidence, line_text
from cudaup.upgrade.environment import Distribution, Environment
from cudaup.upgrade.families import Family, FamilyTable

#: Reads the CUDA runtime libraries a distribution's shared objects link.
LinkedReader = Callable[[Distribution], Sequence[str]]


@dataclass(frozen=True, slots=True)
class Signal:
    """What ties one installed distribution to a CUDA line (``minor`` None: its major only)."""

    major: int
    minor: int | None
    how: str
    family: Family | None = None

    @property
    def line(self) -> Line | None:
        return None if self.minor is None else (self.major, self.minor)

    def fits(self, line: Line) -> bool:
        return self.major == line[0] and (self.minor is None or self.minor == line[1])

    def cuda(self) -> str:
        return f"CUDA {self.major}.x" if self.minor is None else f"CUDA {self.major}.{self.minor}"


@dataclass(frozen=True)
class Request:
    """One thing to ask the resolver for, and the installed distribution it stands for."""

    requirement: Requirement
    #: The installed distribution this request replaces (None: a requirement of a
    #: distribution installed from a URL, asked for on its behalf).
    source: Distribution | None
    held: bool = False


@dataclass
class Census:
    environment: Environment
    signals: dict[str, Signal]
    dependents: set[str]
    #: The extras each distribution was installed with (its extra's requirements all met).
    extras: dict[str, tuple[str, ...]]
    #: name → the installed names it requires (markers evaluated, installed extras included).
    edges: dict[str, set[str]]
    notes: list[str] = field(default_factory=list)
    #: What links libtorch (name → the libtorch libraries it needs), torch itself aside.
    torch_linked: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def moving(self) -> set[str]:
        """What carries a line or depends on something that does."""
        return set(self.signals) | self.dependents

    def roots(self) -> list[str]:
        """The moving distributions nothing installed requires (a cycle by its first name)."""
        moving = self.moving
        required = {child for name in moving for child in self.edges[name]}
        roots = sorted(moving - required)
        reached = self.reach(roots)
        for name in sorted(moving):
            if name not in reached:
                roots.append(name)
                reached |= self.reach([name])
        return roots

    def reach(self, starts: Sequence[str]) -> set[str]:
        """``starts`` and everything they require, directly or not."""
        reached = set(starts)
        stack = list(starts)
        while stack:
            for child in self.edges[stack.pop()]:
                if child not in reached:
                    reached.add(child)
                    stack.append(child)
        return reached

    def line(self) -> str | None:
        """The line the environment is on, from its strongest signals ("12.8", "12.x")."""
        by_strength = sorted(self.signals.items(), key=lambda item: _strength(*item))
        full = [s.line for _, s in by_strength if s.line is not None]
        if full:
            first = full[0]
            others = sorted({ln for ln in full if ln != first})
            text = line_text(first)
            if others:
                text += " (also " + ", ".join(line_text(ln) for ln in others) + ")"
            return text
        majors = Counter(s.major for s in self.signals.values())
        if not majors:
            return None
        return f"{majors.most_common(1)[0][0]}.x"

    def majors(self) -> set[int]:
        return {s.major for s in self.signals.values()}

    def requests(
        self, major: int, table: FamilyTable, per_line: Callable[[str], bool] = lambda _: False
    ) -> list[Request]:
        """What to resolve for ``major``: each root renamed for it, its extras kept; and
        what a per-line index publishes (``torch`` under ``torchvision``), so that it
        comes from that index from the first resolution on."""
        requests: list[Request] = []
        roots = self.roots()
        wanted = roots + sorted(n for n in self.moving if n not in roots and per_line(n))
        for name in wanted:
            dist = self.environment.distributions[name]
            if dist.direct_url:
                # No index serves it: its own requirements on what moves are asked for,
                # as written (it stays as installed).
                for requirement in self._applying(dist):
                    if canonicalize_name(requirement.name) in self.moving:
                        requests.append(Request(_without_marker(requirement), None))
                continue
            renamed = table.rename(name, major)
            if renamed is None:
                family = table.family_of(name)
                raise NoCommonLineError(
                    f"{dist} has no CUDA {major} build in the family table (family "
                    f"{family.name if family else '?'}): add one in families.toml, or remove it"
                )
            extras = sorted({table.rename_extra(name, e, major) for e in self.extras[name]})
            text = renamed + (f"[{','.join(extras)}]" if extras else "")
            family = table.family_of(renamed)
            held = bool(family and family.versioned_by_line and renamed != TOOLKIT)
            requests.append(Request(Requirement(text), dist, held))
        return requests

    def moved_extras(self, major: int, table: FamilyTable) -> dict[str, str]:
        """What only an extra that names another major required → why it may go
        (``flashinfer-python[cu12]`` becomes ``[cu13]``: what its ``cu12`` alone needed)."""
        found: dict[str, str] = {}
        for name in sorted(self.moving):
            dist = self.environment.distributions[name]
            for extra in self.extras.get(name, ()):
                renamed = table.rename_extra(name, extra, major)
                if renamed == extra:
                    continue
                for requirement in dist.requires:
                    needed = canonicalize_name(requirement.name)
                    markers = self.environment.markers
                    if (
                        requirement.marker is not None
                        and _applies(requirement, markers, (extra,))
                        and not _applies(requirement, markers, ())
                        and needed in self.environment.distributions
                    ):
                        found.setdefault(
                            needed, f"required by {dist.name}[{extra}], which becomes [{renamed}]"
                        )
        return found

    def preferences(self, per_line: Callable[[str], bool] = lambda _: False) -> list[str]:
        """``name==version`` of what carries no line: it stays unless the resolution must
        move it.  What a per-line index publishes is a CUDA build whatever its version
        says (PyPI's untagged torch), and moves to the newest that publishes the line."""
        return sorted(
            f"{d.name}=={d.version}"
            for d in self.environment.distributions.values()
            if d.name not in self.signals
            and not per_line(d.name)
            and d.version is not None
            and not d.direct_url
        )

    def _applying(self, dist: Distribution) -> list[Requirement]:
        return [
            r
            for r in dist.requires
            if _applies(r, self.environment.markers, self.extras.get(dist.name, ()))
        ]


def _strength(name: str, signal: Signal) -> tuple[int, str]:
    if name == TOOLKIT:
        return 0, name
    if signal.family is not None and signal.family.versioned_by_line:
        return (1 if "runtime" in name else 2), name
    return (3 if signal.line is not None else 4), name


def _without_marker(requirement: Requirement) -> Requirement:
    copy = Requirement(str(requirement))
    copy.marker = None
    return copy


def _applies(requirement: Requirement, markers: Mapping[str, str], extras: Sequence[str]) -> bool:
    if requirement.marker is None:
        return True
    try:
        return any(
            requirement.marker.evaluate({**markers, "extra": extra}) for extra in ("", *extras)
        )
    except UndefinedEnvironmentName:
        return False


def signal_of(dist: Distribution, table: FamilyTable, linked: Sequence[str]) -> Signal | None:
    """The strongest CUDA signal one installed distribution carries (None: none)."""
    family = table.family_of(dist.name)
    if family is not None:
        line = family.line_of(dist.version) if dist.version is not None else None
        if line is not None:
            return Signal(
                *line, f"{dist.name} {dist.version_text} is CUDA {line_text(line)}", family
            )
        majors = family.majors_of(dist.name)
        if len(majors) == 1:
            return Signal(majors[0], None, f"the name {dist.name} (family {family.name})", family)
    if dist.version is not None:
        found = evidence_of(dist.name, dist.version, None, None)
        if found is not None and found.kind != "cpu-only":
            return Signal(found.major, found.minor, found.how)
    found = library_evidence(dist.name, dist.version_text, linked)
    if found is not None and "mixed majors" not in found.how:
        return Signal(found.major, found.minor, found.how)
    return None


def take_census(
    environment: Environment, table: FamilyTable, linked: LinkedReader | None = None
) -> Census:
    """Classify every installed distribution (see the module docstring)."""
    dists = environment.distributions
    extras = {name: _installed_extras(dist, environment) for name, dist in dists.items()}
    edges: dict[str, set[str]] = {}
    for name, dist in dists.items():
        applying = [r for r in dist.requires if _applies(r, environment.markers, extras[name])]
        edges[name] = {str(canonicalize_name(r.name)) for r in applying} & set(dists) - {name}
    signals: dict[str, Signal] = {}
    libraries: dict[str, Sequence[str]] = {}
    for name, dist in dists.items():
        # Reading shared objects costs I/O: only for what says nothing otherwise, and for
        # what requires torch (its extension modules may link libtorch).
        if (
            linked is not None
            and dist.shared_objects
            and (TORCH in edges[name] or signal_of(dist, table, ()) is None)
        ):
            libraries[name] = linked(dist)
        signal = signal_of(dist, table, libraries.get(name, ()))
        if signal is not None:
            signals[name] = signal
    dependents: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name in dists:
            if name in signals or name in dependents:
                continue
            package = table.companions.get(name)
            if edges[name] & (set(signals) | dependents) or package in {*signals, *dependents}:
                dependents.add(name)
                changed = True
    torch_linked = {
        name: found
        for name, libs in sorted(libraries.items())
        if name != TORCH and (found := tuple(sorted(filter(is_torch_library, libs))))
    }
    return Census(
        environment, signals, dependents, extras, edges, list(environment.notes), torch_linked
    )


TORCH = "torch"
_TORCH_LIBRARY = re.compile(r"^lib(?:torch[A-Za-z0-9_]*|c10[A-Za-z0-9_]*)\.so(?:\.|$)")


def is_torch_library(name: str) -> bool:
    """``libtorch_cpu.so``, ``libtorch_python.so``, ``libc10_cuda.so``: torch's own libraries."""
    return _TORCH_LIBRARY.match(name) is not None


def _installed_extras(dist: Distribution, environment: Environment) -> tuple[str, ...]:
    """The extras whose every requirement is installed (``jax[cuda12]`` with its plugin)."""
    found = []
    for extra in dist.extras:
        needed = [
            r
            for r in dist.requires
            if r.marker is not None
            and _applies(r, environment.markers, (extra,))
            and not _applies(r, environment.markers, ())
        ]
        if needed and all(_installed(r, environment) for r in needed):
            found.append(extra)
    return tuple(sorted(found))


def _installed(requirement: Requirement, environment: Environment) -> bool:
    dist = environment.get(requirement.name)
    if dist is None:
        return False
    if dist.version is None:
        return True
    return requirement.specifier.contains(dist.version, prereleases=True)
