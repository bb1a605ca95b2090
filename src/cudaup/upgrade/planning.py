"""Planning a move: the environment read, the target line checked against the driver and
the GPUs, the stack resolved by ``plan``'s resolver, the change set and the toolkit.

Nothing here writes: ``--dry-run`` is this module's answer, printed.  For a line that
is given, the driver and the GPUs are checked first (compat's rule: a line no release
of which the driver runs, or that cannot target a GPU, is refused before anything
resolves; ``--force`` plans by the packages alone).  Without one, the majors are tried
newest first, each with the environment's packages renamed for it, and within a major
``plan`` searches the lines newest first: the answer is the newest line that the
driver, the GPUs and every CUDA package allow.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field, replace
from typing import Any

from packaging.requirements import Requirement

from cudaup.config import Settings
from cudaup.core.compat import CompatTable
from cudaup.core.driver import DriverInfo
from cudaup.core.platforms import Platform
from cudaup.errors import (
    ConflictError,
    CudaupError,
    DriverTooOldError,
    GpuUnsupportedError,
    NoCommonLineError,
    PackageNotFoundError,
    ReleaseNotFoundError,
)
from cudaup.install.installer import InstallChannel
from cudaup.install.store import Store
from cudaup.machine.driver_probe import detect_driver
from cudaup.machine.sysroot import SystemRoot
from cudaup.net.http import HttpClient
from cudaup.plan import Planner, PlanResult, PlanTarget
from cudaup.plan.indexes import Index
from cudaup.plan.lines import TOOLKIT, Line, line_text, line_tiers, release_line
from cudaup.plan.result import line_support, passed_over
from cudaup.resolve.releases import LiveReleases, learn_releases, live_releases
from cudaup.upgrade.blame import name_blocker
from cudaup.upgrade.census import Census, Request, take_census
from cudaup.upgrade.changes import Change, change_set, removals
from cudaup.upgrade.environment import Environment, read_environment, read_linked
from cudaup.upgrade.families import load_families
from cudaup.upgrade.pairing import IndexCatalog, settle
from cudaup.upgrade.toolkit import check_toolkit
from cudaup.util.cachedir import CacheLayout


@dataclass(frozen=True)
class UpgradeRequest:
    """What the user asked for."""

    python: str
    line: Line | None
    indexes: dict[str, Index]
    platform: Platform
    driver: str | None = None
    force: bool = False
    #: Take a line the driver runs only under minor-version compatibility like any other.
    allow_minor_compat: bool = False
    #: ``--pre``: the resolver may take pre-releases (a nightly built for a new line).
    pre: bool = False
    #: The toolkit's components (None: no toolkit, ``--no-toolkit``).
    components: tuple[str, ...] | None = ("nvcc", "cudart")
    channel: InstallChannel = "auto"
    #: ``--gpu``: the targets the kernels step checks where no GPU is present
    gpus: tuple[str, ...] = ()


@dataclass
class UpgradePlan:
    environment: Environment
    census: Census
    line: Line
    line_before: str | None
    result: PlanResult
    requests: list[Request]
    changes: list[Change]
    driver: DriverInfo
    toolkit_installed: bool
    notes: list[str] = field(default_factory=list)

    @property
    def release(self) -> str:
        return self.result.release

    @property
    def removals(self) -> list[str]:
        return removals(self.changes)

    def to_json(self) -> dict[str, Any]:
        return {
            "environment": str(self.environment.root),
            "python": self.environment.python_text,
            "line_before": self.line_before,
            "line_after": line_text(self.line),
            "release": self.release,
            "release_reason": self.result.release_reason,
            "toolkit_installed": self.toolkit_installed,
            "changes": [c.to_json() for c in self.changes],
            "excluded": [e.to_json() for e in self.result.excluded],
            "driver": self.result.driver.to_json() if self.result.driver else None,
            "notes": self.notes,
        }

    def dry_run_json(self, refusal: CudaupError | None = None) -> dict[str, Any]:
        """``upgrade --dry-run``'s document: the plan, said to be only that; ``refusal``:
        why it was not applied when it was asked for (no terminal to ask on, no ``--yes``)."""
        document = {**self.to_json(), "dry_run": True}
        if refusal is not None:
            document["error"] = refusal.to_json()
        return document


def plan_upgrade(
    settings: Settings,
    request: UpgradeRequest,
    *,
    planner: Planner | None = None,
    driver: DriverInfo | None = None,
) -> UpgradePlan:
    """Read the environment and plan its move (see the module docstring)."""
    environment = read_environment(request.python)
    families = load_families(settings.home_root / "families.toml")
    census = take_census(environment, families, read_linked)
    if not census.signals:
        raise ConflictError(
            f"nothing in {environment.root} carries a CUDA line (no CUDA build, runtime, "
            "toolkit or package of a CUDA family): there is nothing to move"
        )
    info = driver or detect_driver(
        root=SystemRoot.from_env(), override=request.driver, env=os.environ
    )
    # No retries for the release list: an unreachable NVIDIA host is a note, answered at once.
    live = live_releases(settings, HttpClient(settings, retries=0))
    compat = learn_releases(CompatTable.load(), live)
    target = PlanTarget(
        environment.python,
        request.platform,
        info.version,
        info.cuda_version,
        info.gpus,
        interpreter=str(environment.interpreter),
    )
    notes: list[str] = []
    if request.force and (info.version is not None or info.gpus):
        notes.append("--force: the driver and the GPUs were not checked")
        target = replace(target, driver=None, reported=None, gpus=())
    if request.line is not None:
        _check_line(request.line, live, compat, target)
        passes = [[ln for ln in live.lines() if ln[0] == request.line[0]]]
        support = line_support([request.line], live, compat, target)
    else:
        # The line rule (plan's): lines the driver runs fully first, across the majors.  A
        # line the driver or the GPUs rule out has no say (its major is skipped for it).
        support = line_support(_runnable(live, compat, target), live, compat, target)
        passes = line_tiers(live.lines(), support, request.allow_minor_compat)
    planner = planner or Planner(settings)
    cache = CacheLayout(settings.cache_root).plan
    tagged = [i for i in request.indexes.values() if not i.flat]

    def per_line(project: str) -> bool:
        return any(i.serves(project) for i in tagged)

    failures: list[CudaupError] = []
    for major, lines in _by_major(passes):
        skipped = _major_skipped(major, lines, live, compat, target)
        if skipped is not None:
            failures.append(skipped)
            continue
        requests = census.requests(major, families, per_line)

        def resolve(asked: list[Request], line: Line | None, among: list[Line]) -> PlanResult:
            return planner.plan(
                [r.requirement for r in asked],
                request.indexes,
                target,
                line=line,
                lines=among,
                held=_held(asked, families.versioned_by_line(major)),  # noqa: B023
                preferences=census.preferences(per_line),
                allow_minor_compat=request.allow_minor_compat,
                pre=request.pre,
            )

        try:
            result = resolve(requests, request.line, lines)
            linked = {
                renamed: libs
                for name, libs in census.torch_linked.items()
                if (renamed := families.rename(name, major)) is not None
            }
            catalog = IndexCatalog(
                planner.http, result, target, cache / "uv", cache, settings.timeout
            )
            requests, result, proven = settle(
                requests,
                result,
                families.companions,
                linked,
                catalog,
                lambda asked, line: resolve(asked, line, [line]),
                {n: d.version for n, d in environment.distributions.items()},
            )
        except (NoCommonLineError, PackageNotFoundError, ReleaseNotFoundError) as exc:
            if request.line is None:
                failures.append(exc)
                continue
            if not isinstance(exc, NoCommonLineError):
                raise
            wanted = request.line

            def alone(requirement: Requirement) -> CudaupError | None:
                try:
                    resolve([Request(requirement, None)], wanted, [wanted])  # noqa: B023
                except (NoCommonLineError, PackageNotFoundError) as failed:
                    return failed
                return None

            rename = functools.partial(families.rename, major=major)
            raise name_blocker(exc, census, requests, wanted, rename, alone) from None
        changes = change_set(
            census,
            result.line,
            requests,
            result.closure,
            result.evidence,
            result.origins,
            {i.urls[""]: i.name for i in request.indexes.values() if i.flat},
            functools.partial(families.rename, major=result.line[0]),
            census.moved_extras(result.line[0], families),
        )
        if failures:
            notes.append(f"newer majors did not fit: {'; '.join(map(str, failures))}")
        result.excluded = sorted(
            {
                e.line: e
                for e in [*result.excluded, *passed_over(result.line, support, info.version)]
            }.values(),
            key=lambda e: e.line,
            reverse=True,
        )
        installed = Store.from_env().get(result.release) is not None
        if request.components is not None and not installed:
            notes += check_toolkit(
                settings, result.release, request.components, request.platform, request.channel
            )
        return UpgradePlan(
            environment=environment,
            census=census,
            line=result.line,
            line_before=census.line(),
            result=result,
            requests=requests,
            changes=changes,
            driver=info,
            toolkit_installed=installed,
            notes=[*notes, *census.notes, *result.notes, *proven],
        )
    raise failures[0] if failures else ReleaseNotFoundError("no CUDA release is known")


def _held(requests: list[Request], versioned: list[str]) -> list[str]:
    """What is held to the line: the environment's release-versioned requests, and every
    release-versioned project of the major that the resolution may pull in (the toolkit
    meta-package is held by the line's own constraints)."""
    names = {r.requirement.name for r in requests if r.held} | set(versioned)
    return sorted(name for name in names if name != TOOLKIT)


def _runnable(live: LiveReleases, compat: CompatTable, target: PlanTarget) -> list[Line]:
    """The lines neither the driver nor the GPUs rule out."""
    runnable = []
    for line in live.lines():
        try:
            _check_line(line, live, compat, target)
        except (DriverTooOldError, GpuUnsupportedError):
            continue
        runnable.append(line)
    return runnable


def _by_major(passes: list[list[Line]]) -> list[tuple[int, list[Line]]]:
    """Each pass's lines grouped by major, newest major first: what one resolution tries
    (its packages are renamed for that major)."""
    return [
        (major, [line for line in lines if line[0] == major])
        for lines in passes
        for major in sorted({line[0] for line in lines}, reverse=True)
    ]


def _check_line(line: Line, live: LiveReleases, compat: CompatTable, target: PlanTarget) -> None:
    """A line asked for that the driver cannot run, or that drops a GPU, is refused here."""
    releases = [r for r in live.versions if release_line(r) == line]
    if not releases:
        raise ReleaseNotFoundError(f"no CUDA {line_text(line)} release is known ({live.described})")
    if target.driver is not None:
        verdicts = [compat.check(target.driver, r, reported=target.reported) for r in releases]
        if all(v.verdict in {"no", "unknown"} for v in verdicts):
            newest = verdicts[0]
            raise DriverTooOldError(
                f"driver {target.driver} cannot run CUDA {newest.release}: {newest.reason} "
                "(--force upgrades anyway)"
            )
    for gpu in target.gpus:
        arch = compat.architecture(gpu.compute_capability or "")
        if arch is not None and not arch.supported_by(releases[0]):
            raise GpuUnsupportedError(
                f"CUDA {line_text(line)} cannot target GPU {gpu.index} {gpu.name} (compute "
                f"capability {gpu.compute_capability}, {arch.sm}): "
                + (
                    f"{arch.sm} was dropped after CUDA {arch.last_release}"
                    if arch.last_release
                    else "it is not supported"
                )
                + " (--force upgrades anyway)"
            )


def _major_skipped(
    major: int, lines: list[Line], live: LiveReleases, compat: CompatTable, target: PlanTarget
) -> CudaupError | None:
    """Why no line of ``major`` can be planned on this machine, before resolving anything."""
    errors: list[CudaupError] = []
    for line in lines:
        try:
            _check_line(line, live, compat, target)
        except (DriverTooOldError, GpuUnsupportedError) as exc:
            errors.append(exc)
        else:
            return None
    return errors[0] if errors else None
