"""What runs with what: toolkit ↔ driver ↔ GPU architecture, as data with provenance.

All facts come from data files shipped in ``cudaup/data`` (see its README):

* ``cuda-toolkit-driver-table.tsv``: NVIDIA's "CUDA Toolkit and Corresponding
  Driver Versions" table, verbatim (each release's toolkit driver, Linux and
  Windows);
* ``minor-version-floors.tsv``: the lowest driver of each major under
  minor-version compatibility;
* ``snapshot.json``: the driver bundled in each runfile's name, for releases
  NVIDIA's table leaves out (12.8.2, 13.0.3, 13.3.x …); live manifests
  (``nvidia_driver.version``) can be added with :meth:`CompatTable.with_bundled`;
* ``architectures.tsv``: which releases can compile for each compute capability.

Rules: a driver runs a release *fully* when it is at least the release's
toolkit driver; under *minor-version compatibility* when it is at least the
major's floor (the application runs, but features that need the newer driver,
and JIT of PTX built by that release, do not); newer drivers always run older
toolkits (backward compatibility); data-center GPUs can run a newer toolkit
than their driver through the ``cuda-compat`` package (forward compatibility).
When the driver itself reports its CUDA version (NVML, nvidia-smi), that wins
over the table.  Versions are always compared in full (``525.60.13``), never
by branch alone.  A release newer than the tables (learnt from a live release
list, :meth:`CompatTable.with_releases`) has no toolkit driver: below its
major's floor it does not run, at or above it runs under minor-version
compatibility, and with no floor either the verdict is ``unknown``, never "no".
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources
from typing import Any, Literal

from packaging.version import Version

from cudaup.core.driver import CudaVersion, DriverVersion

OS = Literal["linux", "windows"]
Verdict = Literal["full", "minor-version", "no", "unknown"]

TABLE_SOURCE = "NVIDIA CUDA release notes (13.2.2 edition), Table 3"
RUNFILE_SOURCE = "driver bundled in the release's runfile name (installer catalog snapshot)"
MANIFEST_SOURCE = "nvidia_driver.version in the release's redist manifest"
#: A release known only from a live release list, whose drivers no source names.
UNKNOWN_DRIVER_SOURCE = "no source names its toolkit driver yet"
FORWARD_NOTE = (
    "on data-center GPUs the cuda-compat package (forward compatibility) can run it "
    "with an older kernel driver"
)


def _read(name: str) -> str:
    return resources.files("cudaup").joinpath(f"data/{name}").read_text(encoding="utf-8")


def _rows(name: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(_read(name)), delimiter="\t"))


def _driver_cell(text: str) -> DriverVersion | None:
    cleaned = text.replace(">=", "").strip()
    return None if not cleaned or cleaned.upper() == "N/A" else DriverVersion.from_text(cleaned)


@dataclass(frozen=True, slots=True)
class DriverPair:
    """A driver per OS (a release's toolkit driver, or a major's floor) and its source."""

    linux: DriverVersion | None
    windows: DriverVersion | None
    source: str

    def for_os(self, os_name: OS) -> DriverVersion | None:
        return self.linux if os_name == "linux" else self.windows


@dataclass(frozen=True, slots=True)
class Architecture:
    compute_capability: str
    sm: str
    name: str
    first_release: str | None
    last_release: str | None
    source: str

    def supported_by(self, release: str) -> bool:
        line = _line(release)
        if self.first_release and line < _line(self.first_release):
            return False
        return not (self.last_release and line > _line(self.last_release))


def _line(release: str) -> tuple[int, int]:
    parts = Version(release).release
    return parts[0], parts[1] if len(parts) > 1 else 0


@dataclass(frozen=True, slots=True)
class Compatibility:
    """How one driver relates to one release."""

    release: str
    verdict: Verdict
    needs: DriverVersion | None
    floor: DriverVersion | None
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {
            "release": self.release,
            "verdict": self.verdict,
            "toolkit_driver": str(self.needs) if self.needs else None,
            "minor_version_floor": str(self.floor) if self.floor else None,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class CompatTable:
    drivers: dict[str, DriverPair]
    floors: dict[int, DriverPair]
    architectures: tuple[Architecture, ...] = field(default=())

    @classmethod
    def load(cls) -> CompatTable:
        return _load_default()

    def with_bundled(self, bundled: dict[str, str], source: str = MANIFEST_SOURCE) -> CompatTable:
        """Add Linux drivers bundled by releases the table does not cover (from manifests)."""
        drivers = dict(self.drivers)
        for release, driver in bundled.items():
            known = drivers.get(release)
            if known is None or known.linux is None:
                windows = known.windows if known else None
                drivers[release] = DriverPair(DriverVersion.from_text(driver), windows, source)
        return replace(self, drivers=drivers)

    def with_releases(self, releases: list[str], source: str) -> CompatTable:
        """Add releases known only by name (a live release list newer than the tables):
        their toolkit drivers are unknown, their major's minor-version floor still holds."""
        drivers = dict(self.drivers)
        for release in releases:
            drivers.setdefault(
                release, DriverPair(None, None, f"{source}; {UNKNOWN_DRIVER_SOURCE}")
            )
        return replace(self, drivers=drivers)

    def releases(self) -> list[str]:
        return sorted(self.drivers, key=Version, reverse=True)

    def toolkit_driver(
        self, release: str, os_name: OS = "linux"
    ) -> tuple[DriverVersion | None, str | None]:
        entry = self.drivers.get(release)
        if entry is None or entry.for_os(os_name) is None:
            return None, None
        return entry.for_os(os_name), entry.source

    def floor(self, release: str, os_name: OS = "linux") -> DriverVersion | None:
        entry = self.floors.get(_line(release)[0])
        return entry.for_os(os_name) if entry else None

    def check(
        self,
        driver: DriverVersion,
        release: str,
        os_name: OS = "linux",
        reported: CudaVersion | None = None,
    ) -> Compatibility:
        """Whether ``driver`` runs ``release`` fully, under minor-version compatibility, or not."""
        needs, _source = self.toolkit_driver(release, os_name)
        floor = self.floor(release, os_name)
        major, minor = _line(release)
        if reported is not None and (reported.major, reported.minor) >= (major, minor):
            return Compatibility(
                release, "full", needs, floor, f"the driver reports CUDA {reported}"
            )
        if needs is not None and driver >= needs:
            return Compatibility(
                release, "full", needs, floor, f"driver ≥ {needs}, the toolkit driver of {release}"
            )
        if floor is not None and driver >= floor and (reported is None or reported.major >= major):
            upgrade = (
                f"; ≥ {needs} for full support"
                if needs
                else f"; the driver {release} needs for full support is not known yet"
            )
            return Compatibility(
                release,
                "minor-version",
                needs,
                floor,
                f"minor-version compatibility (driver ≥ {floor}): runs, but PTX JIT and "
                f"features that need a newer driver do not{upgrade}",
            )
        if needs is None and floor is None:
            return Compatibility(
                release,
                "unknown",
                None,
                None,
                f"no source names a driver for CUDA {release} and CUDA {major}.x has no known "
                "minor-version floor",
            )
        if floor is not None and driver >= floor:
            reason = f"the driver reports CUDA {reported}, older than {major}.x"
        elif floor is not None:
            # One rule for every release of the major: below the floor nothing of it runs.
            full = f"; ≥ {needs} runs it fully" if needs else ""
            reason = (
                f"needs a driver ≥ {floor} (CUDA {major}.x under minor-version compatibility{full})"
            )
        else:
            reason = f"needs a driver ≥ {needs}"
        return Compatibility(release, "no", needs, floor, f"{reason}; or {FORWARD_NOTE}")

    def line_support(
        self,
        driver: DriverVersion,
        releases: list[str],
        os_name: OS = "linux",
        reported: CudaVersion | None = None,
    ) -> Compatibility | None:
        """How ``driver`` runs a line (its ``releases``): the best verdict any of them has
        (full, then minor-version, then unknown, then no), newest release first among
        equals; None when the line has no release."""
        rank = {"full": 0, "minor-version": 1, "unknown": 2, "no": 3}
        verdicts = [
            self.check(driver, r, os_name, reported) for r in sorted(releases, key=Version)[::-1]
        ]
        return min(verdicts, key=lambda v: rank[v.verdict], default=None)

    def reported_cuda(self, driver: DriverVersion, os_name: OS = "linux") -> CudaVersion | None:
        """The CUDA version a driver for ``os_name`` runs fully by this table: the newest
        line whose toolkit driver for that OS it meets."""
        best: tuple[int, int] | None = None
        for release, entry in self.drivers.items():
            needs = entry.for_os(os_name)
            if needs is not None and driver >= needs:
                line = _line(release)
                best = line if best is None or line > best else best
        return CudaVersion(*best) if best else None

    def architecture(self, compute_capability: str) -> Architecture | None:
        for arch in self.architectures:
            if arch.compute_capability == compute_capability:
                return arch
        return None

    def targets(self, release: str) -> list[Architecture]:
        """Compute capabilities ``release`` can compile for."""
        return [a for a in self.architectures if a.supported_by(release)]


@cache
def _load_default() -> CompatTable:
    drivers: dict[str, DriverPair] = {}
    for row in _rows("cuda-toolkit-driver-table.tsv"):
        release = row["release_label_derived"].strip()
        drivers[release] = DriverPair(
            _driver_cell(row["linux_x86_64_driver_verbatim"]),
            _driver_cell(row["windows_x86_64_driver_verbatim"]),
            TABLE_SOURCE,
        )
    snapshot = json.loads(_read("snapshot.json"))
    for release, entries in snapshot["releases"].items():
        if release in drivers:
            continue
        linux = next(
            (e["driver"] for e in entries if e["platform"] == "linux-x86_64" and e["driver"]), None
        )
        windows = next(
            (e["driver"] for e in entries if e["platform"] == "windows-x86_64" and e["driver"]),
            None,
        )
        generated = snapshot["generated"]
        drivers[release] = DriverPair(
            DriverVersion.from_text(linux) if linux else None,
            DriverVersion.from_text(windows) if windows else None,
            # A release whose installers name no driver says so, not where a driver came from.
            f"{RUNFILE_SOURCE} of {generated}"
            if linux or windows
            else f"installer catalog snapshot of {generated}; {UNKNOWN_DRIVER_SOURCE}",
        )
    floors = {
        int(row["ctk_major"]): DriverPair(
            _driver_cell(row["linux_floor"]),
            _driver_cell(row["windows_floor"]),
            row["source"],
        )
        for row in _rows("minor-version-floors.tsv")
    }
    architectures: tuple[Architecture, ...] = ()
    with contextlib.suppress(FileNotFoundError):
        architectures = tuple(
            Architecture(
                row["compute_capability"],
                row["sm"],
                row["architecture"],
                row["first_release"] or None,
                row["last_release"] or None,
                row["source"],
            )
            for row in _rows("architectures.tsv")
        )
    return CompatTable(drivers, floors, architectures)
