"""Which GPUs each package's kernels cover: the rule of :mod:`cudaup.core.gpus` applied to
what :mod:`.read` found, per GPU and per package.

:func:`check_coverage` is the one function ``doctor``, ``upgrade`` and ``plan`` use.
A package with no device code at all is not a CUDA package here and is not judged.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cudaup.binaries.read import Package, installed_packages
from cudaup.core.gpus import Answer, Capability, covers, gpu_name


@dataclass(frozen=True, slots=True)
class Gpu:
    """A GPU to cover: its label (``GPU 0 NVIDIA H200`` or the ``--gpu`` text) and capability."""

    label: str
    capability: Capability


@dataclass(slots=True)
class GpuCoverage:
    gpu: Gpu
    covered: list[str] = field(default_factory=list)
    #: (package, why) for each package that carries no kernel the GPU runs
    missing: list[tuple[str, str]] = field(default_factory=list)
    #: (package, why) where the answer depends on what is not known (the driver's CUDA)
    unknown: list[tuple[str, str]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu.label,
            "sm": gpu_name(self.gpu.capability),
            "covered": self.covered,
            "missing": [{"package": p, "reason": r} for p, r in self.missing],
            "unknown": [{"package": p, "reason": r} for p, r in self.unknown],
        }


@dataclass(frozen=True, slots=True)
class ArchReport:
    """``cudaup arch``'s answer: the targets each package carries, and for each GPU asked
    about, which packages carry kernels it runs."""

    packages: Sequence[Package]
    gpus: Sequence[GpuCoverage]

    def to_json(self) -> dict[str, Any]:
        return {
            "packages": [p.to_json() for p in self.packages],
            "gpus": [c.to_json() for c in self.gpus],
        }


def check_coverage(
    packages: Sequence[Package], gpus: Iterable[Gpu], driver_cuda: Capability | None
) -> list[GpuCoverage]:
    """Per GPU: which packages carry kernels it runs, which do not, which cannot be told."""
    answers = []
    for gpu in gpus:
        result = GpuCoverage(gpu)
        for package in packages:
            answer: Answer = covers(package.targets, gpu.capability, driver_cuda)
            if answer.verdict == "yes":
                result.covered.append(package.name)
            elif answer.verdict == "no":
                result.missing.append((package.name, answer.reason))
            else:
                result.unknown.append((package.name, answer.reason))
        answers.append(result)
    return answers


def environment_packages(sites: Iterable[Path]) -> list[Package]:
    """Every distribution with device code installed in ``sites`` (site-packages)."""
    return [package for site in sites for package in installed_packages(site)]
