"""``cudaup plan``: the newest CUDA line that the driver and every ML package agree on.

Pure core first: :func:`offers_of` reads a wheel's CUDA signal (local version
tag ``+cu130``, the per-line index it came from, ``cuda-toolkit==13.0.2`` or
``nvidia-cuda-runtime-cu12==12.8.90`` in its metadata, names such as
``cupy-cuda13x``/``jax-cuda13-plugin``), and :func:`choose_line` picks the
newest line every constraining package offers that the driver runs and the
GPUs can use, explaining each exclusion.  Then the I/O edge: :class:`Planner`
fetches one index page per (index, package) concurrently through the cached
HTTP client, and metadata via PEP 658 or HTTP range reads of the wheel's
central directory.  An index that cannot be reached is reported, never taken
as empty.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from cudaup.core.compat import CompatTable
from cudaup.core.driver import CudaVersion, DriverVersion, GpuInfo
from cudaup.errors import NoCommonLineError, UsageError

Line = tuple[int, int]
_TAG = re.compile(r"^cu(\d{2,3})$")
_LOCAL_CU = re.compile(r"(?:^|\.)cu(\d{2,3})(?:$|\.)")
_NAME_MAJOR = re.compile(r"cuda-?(\d{2})(?:x|-|$)")
_NVIDIA_SUFFIX = re.compile(r"^nvidia-.+-cu(\d{2})$")  # nvidia-cudnn-cu13, nvidia-nccl-cu12
_RUNTIME = re.compile(r"^nvidia-cuda-(?:runtime|nvrtc)(?:-cu(\d+))?$")
#: Projects whose wheels bundle their own CUDA pieces and constrain nothing (triton ships ptxas).
SELF_CONTAINED = frozenset({"triton", "pytorch-triton"})


def tag_line(tag: str) -> Line | None:
    """``cu130`` → (13, 0); ``cu92`` → (9, 2)."""
    match = _TAG.match(tag)
    if not match:
        return None
    digits = match.group(1)
    return int(digits[:-1]), int(digits[-1])


def line_text(line: Line) -> str:
    return f"{line[0]}.{line[1]}"


def line_tag(line: Line) -> str:
    return f"cu{line[0]}{line[1]}"


# ----------------------------------------------------------------------------
# Target interpreter and platform → the wheel tags that install there
# ----------------------------------------------------------------------------
# ----------------------------------------------------------------------------
# Signals
# ----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Offer:
    """A package version that runs on one CUDA line, or on a whole major (``line[1] == -1``)."""

    project: str
    version: str
    line: tuple[int, int]
    index: str
    index_url: str
    filename: str | None
    exact_release: str | None
    evidence: str

    @property
    def major_wide(self) -> bool:
        return self.line[1] < 0

    def covers(self, line: Line) -> bool:
        return self.line == line or (self.major_wide and self.line[0] == line[0])


def requirement_signals(
    requires: Iterable[Requirement], environment: Mapping[str, str], extras: Iterable[str]
) -> list[tuple[tuple[int, int], str | None, str]]:
    """CUDA lines a wheel's requirements tie it to: (line, exact release, evidence).

    Within one choice of extras the requirements describe one build, so the most
    specific signal wins (``nvidia-cuda-runtime-cu12==12.8.90`` says 12.8; the
    ``nvidia-cudnn-cu12`` beside it only repeats "12"); different extras (jax's
    ``cuda12``/``cuda13``) are alternatives and all count.
    """
    requires = list(requires)
    found: list[tuple[tuple[int, int], str | None, str]] = []
    for extra in list(extras) or [""]:
        signals = [
            signal
            for requirement in requires
            if requirement.marker is None
            or requirement.marker.evaluate({**environment, "extra": extra})
            if (signal := _signal(requirement)) is not None
        ]
        specific = [signal for signal in signals if signal[0][1] >= 0]
        for signal in specific or signals:
            if all(signal[:2] != known[:2] for known in found):
                found.append(signal)
    return found


def _signal(requirement: Requirement) -> tuple[tuple[int, int], str | None, str] | None:
    name = canonicalize_name(requirement.name)
    pins = [s.version for s in requirement.specifier if s.operator in {"==", "==="}]
    pin = pins[0].removesuffix(".*") if pins else None
    if name == "cuda-toolkit":
        if not pin:
            return None
        parts = pin.split(".")
        return (int(parts[0]), int(parts[1])), ".".join(parts[:3]), f"requires {requirement}"
    if match := _RUNTIME.match(name):
        if pin:
            parts = pin.split(".")
            return (int(parts[0]), int(parts[1])), None, f"requires {requirement}"
        if match.group(1):
            return (int(match.group(1)), -1), None, f"requires {requirement.name}"
        return None
    if major := _NAME_MAJOR.search(name) or _NVIDIA_SUFFIX.search(name):
        return (int(major.group(1)), -1), None, f"requires {requirement.name}"
    return None


def name_signal(project: str) -> tuple[int, int] | None:
    """``cupy-cuda13x`` / ``jax-cuda13-plugin`` → (13, -1): built for the whole major."""
    match = _NAME_MAJOR.search(canonicalize_name(project))
    return (int(match.group(1)), -1) if match else None


def local_signal(version: Version) -> tuple[int, int] | None:
    if version.local and (match := _LOCAL_CU.search(version.local)):
        return tag_line("cu" + match.group(1))
    return None


# ----------------------------------------------------------------------------
# Choosing
# ----------------------------------------------------------------------------
@dataclass
class PackagePlan:
    requirement: Requirement
    offers: list[Offer] = field(default_factory=list)
    unconstrained: bool = False
    note: str | None = None

    @property
    def project(self) -> str:
        return canonicalize_name(self.requirement.name)


@dataclass
class Choice:
    line: Line
    release: str
    release_reason: str
    picks: dict[str, Offer]
    excluded: list[str]
    notes: list[str]


def known_lines(compat: CompatTable) -> list[Line]:
    return sorted({(Version(r).major, Version(r).minor) for r in compat.releases()}, reverse=True)


def _newest_release(compat: CompatTable, line: Line) -> str | None:
    return next(
        (r for r in compat.releases() if (Version(r).major, Version(r).minor) == line), None
    )


def _preference(offer: Offer) -> tuple[Version, bool, bool, Version]:
    """Newest public version; at a tie the flat index's build (no extra index needed),
    then the one whose metadata pins its toolkit release."""
    version = Version(offer.version)
    return Version(version.public), offer.index == "pypi", offer.exact_release is not None, version


def choose_line(
    packages: Sequence[PackagePlan],
    compat: CompatTable,
    *,
    driver: DriverVersion | None,
    reported: CudaVersion | None,
    gpus: Sequence[GpuInfo] = (),
) -> Choice:
    """The newest line every constraining package offers that the driver and GPUs accept."""
    constraining = [p for p in packages if not p.unconstrained and p.offers]
    candidates: set[Line] = set()
    for package in constraining:
        for offer in package.offers:
            if offer.major_wide:
                candidates |= {line for line in known_lines(compat) if line[0] == offer.line[0]}
            else:
                candidates.add(offer.line)
    if not constraining:
        candidates = set(known_lines(compat))
    excluded: list[str] = []
    notes: list[str] = []
    for line in sorted(candidates, reverse=True):
        text = line_text(line)
        missing = [p.project for p in constraining if not any(o.covers(line) for o in p.offers)]
        if missing:
            excluded.append(
                f"{text}: {', '.join(missing)} publish{'es' if len(missing) == 1 else ''} no {line_tag(line)}"
            )
            continue
        release = _newest_release(compat, line) or f"{text}.0"
        if driver is not None:
            verdict = compat.check(driver, f"{text}.0", reported=reported)
            if verdict.verdict == "no":
                excluded.append(f"{text}: driver {driver} cannot run it ({verdict.reason})")
                continue
            if verdict.verdict == "minor-version":
                notes.append(f"CUDA {text} runs on driver {driver} under {verdict.reason}")
        unsupported = [
            g for g in gpus
            if (arch := compat.architecture(g.compute_capability or "")) is not None and not arch.supported_by(f"{text}.0")
        ]  # fmt: skip
        if unsupported:
            excluded.append(
                f"{text}: cannot target GPU {unsupported[0].name} (compute capability {unsupported[0].compute_capability})"
            )
            continue
        picks = {
            p.project: max((o for o in p.offers if o.covers(line)), key=_preference)
            for p in constraining
        }
        pinned = sorted({o.exact_release for o in picks.values() if o.exact_release})
        if len(pinned) > 1:
            excluded.append(f"{text}: packages pin different releases ({', '.join(pinned)})")
            continue
        if pinned:
            who = next(p for p, o in picks.items() if o.exact_release == pinned[0])
            release, reason = (
                pinned[0],
                f"{who} {picks[who].version} pins cuda-toolkit=={pinned[0]}",
            )
        else:
            reason = f"the newest {text} release"
        if driver is None:
            notes.append("no NVIDIA driver found and no --driver: planned by the packages alone")
        return Choice(line, release, reason, picks, excluded, notes)
    closest = excluded[:3] or ["no package offers any CUDA line for this Python and platform"]
    raise NoCommonLineError("no CUDA line fits every package and the driver: " + "; ".join(closest))


def parse_requirements(texts: Sequence[str]) -> list[Requirement]:
    requirements = []
    for text in texts:
        try:
            requirements.append(Requirement(text))
        except InvalidRequirement as exc:
            raise UsageError(f"{text!r} is not a package requirement ({exc})") from None
    return requirements


def to_json(
    choice: Choice, packages: Sequence[PackagePlan], unreachable: Sequence[dict[str, str]]
) -> dict[str, Any]:
    return {
        "schema": 1,
        "cuda_line": line_text(choice.line),
        "release": choice.release,
        "release_reason": choice.release_reason,
        "install": f"cudaup install {choice.release} --components nvcc,cudart",
        "packages": [
            {
                "name": package.project,
                "constrains": not package.unconstrained and bool(package.offers),
                "note": package.note,
                **(
                    {
                        "version": pick.version,
                        "index": pick.index,
                        "index_url": pick.index_url,
                        "file": pick.filename,
                        "evidence": pick.evidence,
                    }
                    if (pick := choice.picks.get(package.project))
                    else {}
                ),
            }
            for package in packages
        ],
        "excluded": choice.excluded,
        "notes": choice.notes,
        "unreachable": list(unreachable),
    }
