"""``compat``'s answers: which drivers run a release, which releases a driver runs.

The rules are :class:`~cudaup.core.compat.CompatTable`'s; this module adds what
only a running cudaup knows: releases newer than the shipped tables (their
manifests name the driver they bundle).  Which driver to ask about (``--driver``, or
this machine's) is :func:`cudaup.machine.driver_probe.driver_to_check`'s to say: the
release facts sit below the machine, as the layering in ``docs/design.md`` has them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from packaging.version import Version

from cudaup.config import Settings
from cudaup.core.compat import FORWARD_NOTE, OS, Architecture, Compatibility, CompatTable
from cudaup.core.driver import CudaVersion, DriverVersion
from cudaup.core.gpus import parse_gpu
from cudaup.core.versions import nearest, parse_request
from cudaup.errors import CudaupError, ReleaseNotFoundError
from cudaup.net.http import HttpClient
from cudaup.resolve.releases import bundled_drivers, learn_releases, live_releases
from cudaup.resolve.resolver import Resolver


def live_table(settings: Settings) -> tuple[CompatTable, list[str]]:
    """The shipped tables, plus the releases newer than them (no retries, so an offline
    machine answers at once); notes say what was not checked.

    The live release list (:func:`~cudaup.resolve.releases.live_releases`: NVIDIA's
    listing, else PyPI's ``cuda-toolkit`` versions) names the releases; their
    manifests, when NVIDIA answers, name the driver each bundles.  A release known
    only by name keeps an unknown toolkit driver: its verdict follows its major's
    minor-version floor, or is "unknown", never "does not run" for want of facts."""
    table = CompatTable.load()
    if settings.offline:
        return table, []
    http = HttpClient(settings, retries=0)
    live = live_releases(settings, http)
    notes = list(live.notes)
    if live.source == "nvidia":
        try:
            table = table.with_bundled(
                bundled_drivers(Resolver(settings, http), set(table.drivers))
            )
        except CudaupError as exc:
            notes.append(
                f"the drivers of releases newer than cudaup's tables were not read ({exc})"
            )
    elif live.source == "snapshot":
        notes.append("releases newer than cudaup's tables were not checked")
    return learn_releases(table, live), notes


@dataclass(frozen=True, slots=True)
class DriverVerdict:
    """Whether one driver runs the release: ``compat RELEASE --driver V``."""

    driver: DriverVersion
    os: OS
    verdict: Compatibility

    def to_json(self) -> dict[str, Any]:
        return {"version": str(self.driver), "os": self.os, **self.verdict.to_json()}


@dataclass(frozen=True, slots=True)
class GpuTargetVerdict:
    """Whether the release's nvcc compiles for one GPU: ``compat RELEASE --gpu sm_70``."""

    gpu: str
    sm: str
    verdict: Literal["yes", "no", "unknown"]
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"gpu": self.gpu, "sm": self.sm, "verdict": self.verdict, "reason": self.reason}


def gpu_target(table: CompatTable, release: str, text: str) -> GpuTargetVerdict:
    """The facts of ``data/architectures.tsv`` (checked on each release's nvcc/ptxas) for
    one GPU; a compute capability the table lacks is unknown, never "yes"."""
    major, minor = parse_gpu(text)
    sm = f"sm_{major}{minor}"
    arch = table.architecture(f"{major}.{minor}")
    if arch is None:
        return GpuTargetVerdict(text, sm, "unknown", f"cudaup's architecture table has no {sm}")
    if arch.supported_by(release):
        return GpuTargetVerdict(text, sm, "yes", f"CUDA {release} compiles for {sm} ({arch.name})")
    if arch.last_release:
        why = f"the last CUDA that compiles for {sm} ({arch.name}) is {arch.last_release}"
    else:
        why = f"CUDA compiles for {sm} ({arch.name}) from {arch.first_release}"
    return GpuTargetVerdict(text, sm, "no", f"CUDA {release} cannot compile for {sm}: {why}")


@dataclass(frozen=True, slots=True)
class ReleaseCompat:
    """The drivers that run one release, and the GPUs it compiles for."""

    release: str
    linux: DriverVersion | None
    windows: DriverVersion | None
    source: str | None
    linux_floor: DriverVersion | None
    windows_floor: DriverVersion | None
    targets: list[Architecture]
    notes: list[str] = field(default_factory=list)
    #: the verdict for the driver asked about, if one was
    driver: DriverVerdict | None = None
    #: whether its nvcc compiles for each GPU asked about (``--gpu``)
    gpus: list[GpuTargetVerdict] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        document = {
            "schema": 1,
            "release": self.release,
            "toolkit_driver": {
                "linux": str(self.linux) if self.linux else None,
                "windows": str(self.windows) if self.windows else None,
                "source": self.source,
            },
            "minor_version_floor": {
                "linux": str(self.linux_floor) if self.linux_floor else None,
                "windows": str(self.windows_floor) if self.windows_floor else None,
            },
            "backward_compatibility": "any newer driver runs it",
            "forward_compatibility": FORWARD_NOTE,
            "targets": [
                {"compute_capability": a.compute_capability, "sm": a.sm, "architecture": a.name}
                for a in self.targets
            ],
            "notes": self.notes,
        }
        if self.driver is not None:
            document["driver"] = self.driver.to_json()
        if self.gpus:
            document["gpus"] = [g.to_json() for g in self.gpus]
        return document


def release_compat(
    table: CompatTable,
    text: str,
    notes: list[str],
    *,
    driver: str | None = None,
    os_name: OS = "linux",
    offline: bool = False,
    gpus: Sequence[str] = (),
) -> ReleaseCompat:
    """What runs the release ``text`` names (``13.0`` → its newest known patch), and
    with ``driver``, whether that driver (for ``os_name``) runs it."""
    request = parse_request(text)
    known = [Version(r) for r in table.releases()]
    picked = request.pick(known)
    if not picked:
        close = tuple(str(v) for v in nearest(request, known))
        hint = f"; nearest: {' and '.join(close)}" if close else ""
        if offline:
            hint += " (--offline: only cudaup's shipped tables were read)"
        elif notes:
            hint += f" ({'; '.join(notes)})"
        raise ReleaseNotFoundError(f"cudaup knows no CUDA {request.describe()}{hint}", close)
    release = str(picked[0])
    asked = None
    if driver is not None:
        version = DriverVersion.from_text(driver)
        asked = DriverVerdict(version, os_name, table.check(version, release, os_name))
    linux, linux_source = table.toolkit_driver(release, "linux")
    windows, windows_source = table.toolkit_driver(release, "windows")
    return ReleaseCompat(
        release,
        linux,
        windows,
        # A release known only by name says so: its entry's source names why no driver is known.
        linux_source or windows_source or table.drivers[release].source,
        table.floor(release, "linux"),
        table.floor(release, "windows"),
        table.targets(release),
        notes,
        asked,
        [gpu_target(table, release, text) for text in gpus],
    )


@dataclass(frozen=True, slots=True)
class DriverCompat:
    """Every known release's verdict for one driver."""

    driver: DriverVersion
    os: OS
    reported_cuda: CudaVersion | None
    results: list[Compatibility]
    notes: list[str] = field(default_factory=list)
    #: who says what CUDA the driver runs: the driver itself, or NVIDIA's table for its OS
    reported_by: Literal["driver", "table"] = "table"

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": 1,
            "driver": str(self.driver),
            "os": self.os,
            "reported_cuda": str(self.reported_cuda) if self.reported_cuda else None,
            "reported_by": self.reported_by if self.reported_cuda else None,
            "releases": [r.to_json() for r in self.results],
            "notes": self.notes,
        }


def driver_compat(
    table: CompatTable,
    driver: DriverVersion,
    os_name: OS,
    notes: list[str],
    reported: CudaVersion | None = None,
) -> DriverCompat:
    """Every known release's verdict for ``driver`` (``reported``: the CUDA version the
    driver itself reports, when it was asked)."""
    results = [table.check(driver, r, os_name, reported) for r in table.releases()]
    return DriverCompat(
        driver,
        os_name,
        reported or table.reported_cuda(driver, os_name),
        results,
        notes,
        "driver" if reported is not None else "table",
    )
