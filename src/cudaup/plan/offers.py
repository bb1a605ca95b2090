"""The I/O edge of ``cudaup plan``: index pages, wheel metadata, and the lock export.

One request per (index URL, package), concurrently, through the cached HTTP
client (PEP 691 JSON when offered, else PEP 503 HTML).  Metadata is read only
for PyPI-style flat indexes, and only for the newest matching version: from
PEP 658 when offered, else by HTTP range reads of the wheel's central
directory.  A 404 means "this index does not have the package"; any other
failure makes the index *unreachable*, which the plan reports.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from cudaup.config import Settings
from cudaup.core.compat import CompatTable
from cudaup.core.driver import CudaVersion, DriverVersion, GpuInfo
from cudaup.core.platforms import Platform, marker_environment, wheel_fits
from cudaup.errors import NetworkError, RemoteFileMissingError, UsageError
from cudaup.net.http import HttpClient
from cudaup.plan.choice import (
    SELF_CONTAINED,
    Choice,
    Offer,
    PackagePlan,
    choose_line,
    local_signal,
    name_signal,
    requirement_signals,
    tag_line,
)
from cudaup.plan.indexes import Index
from cudaup.resolve.pypi import DistFile, PackageIndex
from cudaup.util.parallel import map_concurrently


@dataclass(frozen=True, slots=True)
class Target:
    python: tuple[int, int]
    platform: Platform
    driver: DriverVersion | None
    reported: CudaVersion | None
    gpus: tuple[GpuInfo, ...] = ()


@dataclass
class PlanResult:
    choice: Choice
    packages: list[PackagePlan]
    unreachable: list[dict[str, str]] = field(default_factory=list)
    target: Target | None = None

    def pins(self) -> list[str]:
        """Requirements pinned to the chosen versions (unconstrained ones as asked)."""
        lines = []
        for package in self.packages:
            pick = self.choice.picks.get(package.project)
            lines.append(
                f"{package.requirement.name}=={pick.version}" if pick else str(package.requirement)
            )
        return lines

    def extra_index_urls(self) -> list[str]:
        urls = {pick.index_url for pick in self.choice.picks.values() if pick.index != "pypi"}
        return sorted(urls)


@dataclass(frozen=True, slots=True)
class _Job:
    package: int
    index: Index
    tag: str
    url: str


def python_version(text: str | None) -> tuple[int, int]:
    """``--python 3.12`` or a path to an interpreter (default: ``python3`` on PATH)."""
    if text and all(part.isdigit() for part in text.split(".")) and text.count(".") == 1:
        major, minor = text.split(".")
        return int(major), int(minor)
    interpreter = text or shutil.which("python3") or sys.executable
    try:
        output = subprocess.run(
            [interpreter, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        raise UsageError(
            f"cannot run {interpreter} to learn its version; pass --python X.Y"
        ) from None
    major, minor = output.split(".")
    return int(major), int(minor)


class Planner:
    def __init__(self, settings: Settings, http: HttpClient | None = None) -> None:
        self.settings = settings
        # Fewer retries than downloads: an index that is down should be reported quickly.
        self.http = http or HttpClient(settings, retries=1)

    def plan(
        self,
        requirements: Sequence[Requirement],
        indexes: dict[str, Index],
        target: Target,
        compat: CompatTable | None = None,
    ) -> PlanResult:
        compat = compat or CompatTable.load()
        packages = [PackagePlan(r) for r in requirements]
        jobs = [
            _Job(i, index, tag, url)
            for i, package in enumerate(packages)
            if package.project not in SELF_CONTAINED
            for index in indexes.values()
            if index.serves(package.project)
            for tag, url in index.urls.items()
        ]
        for package in packages:
            if package.project in SELF_CONTAINED:
                package.unconstrained = True
                package.note = "bundles its own CUDA pieces (ptxas, cudart): constrains nothing"
        environment = marker_environment(target.platform, target.python)
        unreachable: list[dict[str, str]] = []

        def run(job: _Job) -> list[Offer]:
            try:
                return self._offers(job, packages[job.package].requirement, target, environment)
            except RemoteFileMissingError:
                return []  # this index does not carry the package: an answer
            except NetworkError as exc:
                unreachable.append({"index": job.index.name, "url": job.url, "error": str(exc)})
                return []

        for job, offers in zip(
            jobs, map_concurrently(run, jobs, workers=self.settings.workers), strict=True
        ):
            packages[job.package].offers.extend(offers)
        for package in packages:
            if not package.offers and not package.unconstrained:
                package.note = (
                    package.note
                    or "shows no CUDA signal for this Python and platform: constrains nothing"
                )
        choice = choose_line(
            packages, compat, driver=target.driver, reported=target.reported, gpus=target.gpus
        )
        if unreachable:
            names = ", ".join(sorted({u["index"] for u in unreachable}))
            choice.notes.append(
                f"could not check {names}: the plan is made from the indexes that answered"
            )
        return PlanResult(choice, packages, unreachable, target)

    def _offers(
        self, job: _Job, requirement: Requirement, target: Target, environment: dict[str, str]
    ) -> list[Offer]:
        files = PackageIndex(self.http, job.url).files(requirement.name)
        by_version: dict[Version, list[DistFile]] = {}
        for file in files:
            version = file.version
            if (
                version is None
                or file.yanked
                or not file.is_wheel
                or not wheel_fits(file.filename, target.platform, target.python)
            ):
                continue
            if not requirement.specifier.contains(
                version, prereleases=bool(requirement.specifier.prereleases)
            ):
                continue
            by_version.setdefault(version, []).append(file)
        if not by_version:
            return []
        project = canonicalize_name(requirement.name)
        index_line = tag_line(job.tag) if job.tag else None
        offers: list[Offer] = []
        # On a per-line index every version is a build for that line; keep the newest per line.
        for version in sorted(by_version, reverse=True):
            file = by_version[version][0]
            line = index_line or local_signal(version)
            if line is not None:
                evidence = f"{job.url}/" if index_line else f"local version +{version.local}"
                offers.append(
                    Offer(
                        project,
                        str(version),
                        line,
                        job.index.name,
                        job.url,
                        file.filename,
                        None,
                        evidence,
                    )
                )
                if index_line:
                    break
                continue
            if (major := name_signal(project)) is not None:
                offers.append(
                    Offer(
                        project,
                        str(version),
                        major,
                        job.index.name,
                        job.url,
                        file.filename,
                        None,
                        f"the project name {project}",
                    )
                )
                break
            # A flat index's default build: its metadata says which CUDA it wants.
            metadata = PackageIndex(self.http, job.url).metadata(file)
            extras = list(requirement.extras)
            if not extras:
                extras = [
                    str(e) for e in (metadata.provides_extra or []) if str(e).startswith("cuda")
                ]
            for signal_line, exact, evidence in requirement_signals(
                metadata.requires_dist or [], environment, extras
            ):
                offers.append(
                    Offer(
                        project,
                        str(version),
                        signal_line,
                        job.index.name,
                        job.url,
                        file.filename,
                        exact,
                        evidence,
                    )
                )
            break
        return offers
