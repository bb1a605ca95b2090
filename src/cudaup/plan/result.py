"""What a plan answers, as data: the line, the release, each package and why, what was
excluded; the install commands that keep what the user asked; the no-line error."""

from __future__ import annotations

import re
import shlex
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from cudaup.core.compat import Compatibility, CompatTable
from cudaup.core.driver import CudaVersion, DriverVersion, GpuInfo
from cudaup.core.platforms import Platform
from cudaup.core.renames import shipped_renames
from cudaup.errors import NoCommonLineError
from cudaup.plan.closure import Closure, Resolved
from cudaup.plan.lines import Evidence, Line, describe_lines, line_text, release_line
from cudaup.plan.survey import Page
from cudaup.plan.uv import CompileJob
from cudaup.resolve.pypi import DistFile
from cudaup.resolve.releases import LiveReleases

#: uv's conclusion that a project has no usable version at all: what a line's failure
#: comes down to (every torch pins another line's cuda-toolkit), said before its causes.
_NO_VERSION = re.compile(
    r"we can conclude that all versions of (\S+?)(?:\[[^\]]*\])? cannot be used"
)

PYPI = "https://pypi.org/simple"


@dataclass(frozen=True, slots=True)
class PlanTarget:
    python: tuple[int, int]
    platform: Platform
    driver: DriverVersion | None
    reported: CudaVersion | None
    gpus: tuple[GpuInfo, ...] = ()
    #: An environment's own interpreter: uv resolves for exactly its tags and markers
    #: (``upgrade``), instead of ``python`` on the newest glibc of ``platform``.
    interpreter: str | None = None


@dataclass(frozen=True, slots=True)
class Origin:
    """The per-line index a project was taken from on one line."""

    index: str
    url: str
    line: Line


@dataclass(frozen=True, slots=True)
class Exclusion:
    """A line the plan did not choose, and why (``kind``: driver, gpu, index, resolution,
    inconsistent, extra, held-back, major: a request's extra names another major)."""

    line: Line
    kind: str
    message: str
    packages: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"{line_text(self.line)}: {self.message}"

    def summary(self) -> str:
        """One line for people: uv's explanation cut to its first sentence, after the first
        project it found no usable version of, when it says so."""
        text = self.message
        if self.kind == "resolution":
            cut = text.find(", we can conclude")
            first = text[:cut] if cut > 0 else text
            if (blocked := _NO_VERSION.search(text)) is not None and first.startswith("Because"):
                # uv's "Because …" goes on inside the parenthesis, in lower case.
                text = (
                    f"no resolution: no version of {blocked.group(1)} can be used (b{first[1:]}, …)"
                )
            else:
                text = f"no resolution ({first})" if first else "no resolution"
        if len(text) > 300:
            text = text[:297] + "…"
        return f"{line_text(self.line)}: {text}"

    def to_json(self) -> dict[str, Any]:
        return {
            "line": line_text(self.line),
            "kind": self.kind,
            "message": self.message,
            "packages": list(self.packages),
        }


@dataclass(frozen=True, slots=True)
class PackagePick:
    """One requested package in the plan: the version chosen and what fixed its line."""

    requirement: Requirement
    name: str
    version: str | None
    index: str | None
    index_url: str | None
    chain: tuple[str, ...]
    #: "CUDA 13.0", "CUDA 12.x" or "no CUDA"; None when nothing names a line.
    cuda: str | None
    #: What the end of the chain shows: "cuda-toolkit 13.0.3", "from https://…/cu130".
    evidence: str | None
    note: str | None
    #: Why the chosen version was yanked (PEP 592), when it was: an exact pin took it.
    yanked: str | None = None
    #: The pure-Python wheel the target installs, when the project's other versions ship
    #: compiled ones: it carries no compiled code (no kernels) of its own.
    pure_wheel: str | None = None

    @classmethod
    def absent(cls, requirement: Requirement) -> PackagePick:
        return cls(
            requirement,
            canonicalize_name(requirement.name),
            None,
            None,
            None,
            (),
            None,
            None,
            "its environment marker leaves it out on this target",
        )

    @classmethod
    def of(
        cls,
        requirement: Requirement,
        package: Resolved,
        index: str,
        index_url: str,
        chain: list[Resolved] | None,
        evidence: Mapping[str, Evidence],
    ) -> PackagePick:
        note = None
        found = evidence[chain[-1].name] if chain else None
        if found is None:
            note = "nothing it resolves to names a CUDA line: it constrains nothing"
        return cls(
            requirement,
            package.name,
            str(package.version),
            index,
            index_url,
            tuple(str(p) for p in chain or ()),
            found.cuda() if found else None,
            found.how if found else None,
            note,
        )

    @property
    def constrains(self) -> bool:
        return self.evidence is not None

    def pinned(self) -> str:
        """The requirement as asked, pinned: extras and marker kept."""
        if self.version is None:
            return str(self.requirement)
        extras = f"[{','.join(sorted(self.requirement.extras))}]" if self.requirement.extras else ""
        marker = f"; {self.requirement.marker}" if self.requirement.marker else ""
        return f"{self.requirement.name}{extras}=={self.version}{marker}"

    def to_json(self) -> dict[str, Any]:
        return {
            "requirement": str(self.requirement),
            "name": self.name,
            "version": self.version,
            "index": self.index,
            "index_url": self.index_url,
            "chain": list(self.chain),
            "cuda": self.cuda,
            "evidence": self.evidence,
            "constrains": self.constrains,
            "note": self.note,
            "yanked": self.yanked,
            "pure_wheel": self.pure_wheel,
        }


@dataclass
class PlanResult:
    line: Line
    release: str
    release_reason: str
    releases: LiveReleases
    driver: Compatibility | None
    packages: list[PackagePick]
    closure: Closure
    evidence: dict[str, Evidence]
    origins: dict[str, Origin]
    pages: dict[str, tuple[DistFile, ...]]
    excluded: list[Exclusion]
    notes: list[str]
    consulted: list[Page]
    target: PlanTarget
    job: CompileJob
    #: Closure packages pinned in the install lines so that they resolve to the closure
    #: without the plan's constraints (:mod:`cudaup.plan.install`).
    install_extra: list[str] = field(default_factory=list)
    #: Whether resolving the printed requirements, as printed, gave the closure.
    install_checked: bool = False

    def pins(self) -> list[str]:
        """What to install: each request pinned as asked, every package taken from a
        per-line index pinned to that build (``torch==2.14.0+cu130``), and the packages
        the line must pin to resolve to the plan's closure."""
        return [*self.base_pins(), *self.install_extra]

    def base_pins(self) -> list[str]:
        pins = [pick.pinned() for pick in self.packages]
        asked = {pick.name for pick in self.packages}
        for package in self.closure:
            if package.name in self.origins and package.name not in asked:
                pins.append(f"{package.name}=={package.version}")
        return pins

    def extra_index_urls(self) -> list[str]:
        """The per-line indexes the closure takes packages from."""
        return sorted({self.origins[p.name].url for p in self.closure if p.name in self.origins})

    def default_index(self) -> str:
        return self.job.default_index

    def pip_command(self) -> str:
        words = ["pip", "install", *(["--pre"] if self.job.prerelease else []), *self.pins()]
        if self.default_index().rstrip("/") != PYPI:
            words += ["--index-url", self.default_index()]
        for url in self.extra_index_urls():
            words += ["--extra-index-url", url]
        return " ".join(shlex.quote(w) for w in words)

    def uv_command(self) -> str:
        words = ["uv", "pip", "install", *self.pins()]
        if self.job.prerelease:
            words += ["--prerelease", "allow"]
        for url in self.extra_index_urls():
            words += ["--index", url]
        if self.default_index().rstrip("/") != PYPI:
            words += ["--default-index", self.default_index()]
        return " ".join(shlex.quote(w) for w in words)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": 2,
            "cuda_line": line_text(self.line),
            "release": self.release,
            "release_reason": self.release_reason,
            "releases": self.releases.to_json(),
            "driver": self.driver.to_json() if self.driver else None,
            "install": f"cudaup install {self.release} --components nvcc,cudart",
            "packages": [p.to_json() for p in self.packages],
            "closure": [
                {
                    "name": p.name,
                    "version": str(p.version),
                    "index_url": self.origins[p.name].url
                    if p.name in self.origins
                    else p.index_url,
                    "cuda": self.evidence[p.name].cuda() if p.name in self.evidence else None,
                }
                for p in self.closure
            ],
            "excluded": [e.to_json() for e in self.excluded],
            "notes": self.notes,
            "indexes": [page.to_json() for page in self.consulted],
            "pip": self.pip_command(),
            "uv": self.uv_command(),
            "install_checked": self.install_checked,
        }


@dataclass(frozen=True, slots=True)
class Alone:
    """One requested package resolved by itself: the lines it resolves on, and the
    newest line's reason where it does not."""

    requirement: str
    lines: list[Line]
    failure: Exclusion | None


def explain(
    requirements: Sequence[Requirement],
    lines: Sequence[Line],
    excluded: Sequence[Exclusion],
    alone: Sequence[Alone],
    target: PlanTarget,
    live: LiveReleases,
    table: CompatTable,
) -> NoCommonLineError:
    """The no-line error: each package's lines, and what keeps them apart."""
    blocked = {e.line: e for e in excluded if e.kind in {"driver", "gpu", "major"}}
    runnable = {line for line in lines if line not in blocked}
    head, each = _headline(lines, excluded, alone, blocked, runnable)
    parts = [_package_part(package, lines) for package in alone] if each else []
    if target.driver is not None and any(e.kind == "driver" for e in blocked.values()):
        ran = sorted(runnable)
        parts.append(
            f"driver {target.driver} runs {describe_lines(ran, lines) if ran else 'none of them'}"
        )
    for requirement in requirements:
        renamed = shipped_renames().get(canonicalize_name(requirement.name))
        if renamed is not None:
            parts.append(f"{renamed.describe()}: ask for {renamed.new}")
    message = "no CUDA line fits every package and the driver: " + "; ".join([head, *parts])
    details = {
        "packages": [
            {
                "requirement": package.requirement,
                "lines": [line_text(ln) for ln in package.lines],
                "reason": package.failure.to_json()
                if package.failure and not package.lines
                else None,
            }
            for package in alone
        ],
        "excluded": [e.to_json() for e in excluded],
        "releases": live.to_json(),
        "driver": str(target.driver) if target.driver else None,
        "minor_version_floors": _driver_floor(table, lines),
        "requirements": [str(r) for r in requirements],
    }
    return NoCommonLineError(message, details)


def conflict_error(
    requirements: Sequence[Requirement],
    lines: Sequence[Line],
    candidates: Sequence[Line],
    excluded: Sequence[Exclusion],
    reason: str,
    target: PlanTarget,
    live: LiveReleases,
    table: CompatTable,
) -> NoCommonLineError:
    """The no-line error when the requests conflict among themselves: the reason, once,
    and every candidate line excluded for it (one resolution proved it of them all)."""
    known = {e.line for e in excluded}
    every = [
        *excluded,
        *(Exclusion(ln, "resolution", reason) for ln in candidates if ln not in known),
    ]
    message = (
        f"the requests conflict among themselves, whatever the CUDA line: {reason}"
        if len(requirements) > 1
        else f"{requirements[0]} resolves on no CUDA line, whatever the line: {reason}"
    )
    details: dict[str, object] = {
        # Not resolved alone, so no package's lines are known: none is listed.
        "packages": [],
        "excluded": [e.to_json() for e in every],
        "releases": live.to_json(),
        "driver": str(target.driver) if target.driver else None,
        "minor_version_floors": _driver_floor(table, lines),
        "requirements": [str(r) for r in requirements],
        "conflict": reason,
    }
    return NoCommonLineError(message, details)


def telling(failures: Sequence[Exclusion], theirs: Collection[Line]) -> Exclusion | None:
    """The failure that tells why a package does not fit (``failures`` newest line first):
    on a line the other packages resolve on, a build read as another line's (xformers
    0.0.33 links libcudart.so.13 where torch 2.9.0 is 12.8) before uv's own complaint."""
    if not failures:
        return None
    return max(
        failures,
        key=lambda f: (f.line in theirs, f.kind in {"inconsistent", "extra"}, -failures.index(f)),
    )


def _package_part(package: Alone, lines: Sequence[Line]) -> str:
    """``xformers==0.0.33 resolves on 13.0-13.2`` (or on no line, and why)."""
    if package.lines:
        return f"{package.requirement} resolves on {describe_lines(package.lines, lines)}"
    why = f" ({package.failure.summary()})" if package.failure else ""
    return f"{package.requirement} resolves on no CUDA line{why}"


def _headline(
    lines: Sequence[Line],
    excluded: Sequence[Exclusion],
    alone: Sequence[Alone],
    blocked: dict[Line, Exclusion],
    runnable: set[Line],
) -> tuple[str, bool]:
    """What keeps the packages apart, and whether each package's lines are worth saying
    too (not when one package's lines are the whole story)."""
    common = set(lines)
    for package in alone:
        common &= set(package.lines)
    if not lines:
        return "no CUDA release is known", True
    if any(not package.lines for package in alone):
        return "a package resolves on no CUDA line", True
    if len(alone) > 1 and not common:
        return "their CUDA lines do not meet", True
    if not common & runnable:
        newest = blocked[max(common)]
        if len(alone) == 1:
            head = f"{alone[0].requirement} resolves on {describe_lines(common, lines)}"
            return f"{head}, and {newest.message}", False
        return f"they meet only on {describe_lines(common, lines)}, and {newest.message}", True
    together = sorted(common & runnable)
    reason = next((e.summary() for e in excluded if e.line == together[-1]), "")
    return (
        f"each resolves alone on {describe_lines(together, lines)} but not together ({reason})",
        True,
    )


def _driver_floor(table: CompatTable, lines: Sequence[Line]) -> dict[str, str | None]:
    floors: dict[str, str | None] = {}
    for major in sorted({ln[0] for ln in lines}):
        floor = table.floor(f"{major}.0")
        floors[f"{major}.x"] = str(floor) if floor else None
    return floors


def line_support(
    lines: Sequence[Line], live: LiveReleases, table: CompatTable, target: PlanTarget
) -> dict[Line, str | None]:
    """How the target's driver runs each line, by its releases (None: no driver to ask)."""
    if target.driver is None:
        return dict.fromkeys(lines)
    support: dict[Line, str | None] = {}
    for line in lines:
        releases = [r for r in live.versions if release_line(r) == line]
        verdict = table.line_support(target.driver, releases, reported=target.reported)
        support[line] = verdict.verdict if verdict else None
    return support


def passed_over(
    chosen: Line, support: Mapping[Line, str | None], driver: DriverVersion | None
) -> list[Exclusion]:
    """The newer lines not taken because the driver runs them only under minor-version
    compatibility while it runs ``chosen`` fully (empty when ``chosen`` is such a line)."""
    if support.get(chosen) == "minor-version":
        return []
    return [
        Exclusion(
            line,
            "driver",
            f"driver {driver} runs it only under minor-version compatibility, and it runs "
            f"{line_text(chosen)} fully (--allow-minor-compat takes the newer line)",
        )
        for line, verdict in sorted(support.items(), reverse=True)
        if verdict == "minor-version" and line > chosen
    ]


def minor_compat_note(
    line: Line, driver: DriverVersion | None, *, asked: bool, allowed: bool
) -> str:
    """Why a line the driver runs under minor-version compatibility was taken: ``asked``
    (``--cuda``), ``allowed`` (``--allow-minor-compat``), else no fully run line fits."""
    why = (
        "as asked"
        if asked
        else "--allow-minor-compat"
        if allowed
        else "no line the driver runs fully fits"
    )
    return (
        f"CUDA {line_text(line)} is taken under minor-version compatibility ({why}): driver "
        f"{driver} runs it, but PTX JIT and features that need a newer driver do not"
    )
