"""What a GPU can run: the one rule, from a binary's targets to yes, no or unknown (pure).

NVIDIA's compatibility rules (CUDA C++ Programming Guide, "Binary Compatibility",
"PTX Compatibility" and "Feature Availability"; the Blackwell compatibility guide;
NVIDIA's blog "NVIDIA Blackwell and NVIDIA CUDA 12.9 Introduce Family-Specific
Architecture Features"):

* SASS for ``X.y`` runs on a GPU ``X.z`` with ``z ≥ y``: same major, minor not
  above the GPU's (``sm_80`` runs on ``sm_86``, never on ``sm_90``);
* an architecture-specific target (``sm_90a``, ``compute_100a``) runs only on
  that exact compute capability;
* a family target (``sm_100f``, ``compute_100f``) runs across its family: the
  GPUs of the same major with a minor at least its own (``sm_100f`` on 10.0 and
  10.3, ``sm_103f`` on 10.3 only, ``sm_120f`` on 12.0 and 12.1);
* PTX for a compute capability not above the GPU's can be compiled for it by the
  driver (JIT), but only by a driver at least as new as the PTX's ISA version:
  PTX ISA 9.0 came with CUDA 13.0, so it needs a driver that runs CUDA 13.0
  (``data/ptx-isa.tsv`` maps ISA → release, with sources).  An ``a`` or ``f``
  PTX keeps its restriction.

"Unknown" is an answer: a driver whose CUDA version is not known, or a PTX ISA
newer than the table, never counts as "runs".
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Literal

from cudaup.core.fatbin import FatbinTarget
from cudaup.errors import UsageError

Verdict = Literal["yes", "no", "unknown"]
Capability = tuple[int, int]


@cache
def ptx_isa_releases() -> dict[Capability, Capability]:
    """PTX ISA version → the CUDA release that introduced it (``(9, 0)`` → ``(13, 0)``)."""
    text = resources.files("cudaup").joinpath("data/ptx-isa.tsv").read_text(encoding="utf-8")
    rows = csv.DictReader(io.StringIO(text), delimiter="\t")
    return {_pair(row["ptx_isa"]): _pair(row["cuda"]) for row in rows}


def _pair(text: str) -> Capability:
    major, minor = text.split(".")
    return int(major), int(minor)


def parse_gpu(text: str) -> Capability:
    """``sm_90``, ``90``, ``9.0`` or ``sm_100a`` (the variant is the code's, not the GPU's)
    → ``(9, 0)``; anything else is a usage error."""
    cleaned = text.strip().lower().removeprefix("sm_").removeprefix("compute_").rstrip("af")
    try:
        if "." in cleaned:
            capability = _pair(cleaned)
        else:
            number = int(cleaned)
            capability = (number // 10, number % 10)
    except ValueError:
        raise UsageError(f"not a GPU architecture: {text!r} (write sm_90 or 9.0)") from None
    if not 1 <= capability[0] <= 99 or not 0 <= capability[1] <= 9:
        raise UsageError(f"not a GPU architecture: {text!r} (write sm_90 or 9.0)")
    return capability


def gpu_name(capability: Capability) -> str:
    return f"sm_{capability[0]}{capability[1]}"


@dataclass(frozen=True, slots=True)
class Answer:
    verdict: Verdict
    reason: str


def _architecture_allows(target: FatbinTarget, gpu: Capability) -> bool:
    if target.variant == "a":
        return target.capability == gpu
    if target.kind == "sass" or target.variant == "f":
        return target.capability[0] == gpu[0] and target.capability[1] <= gpu[1]
    return target.capability <= gpu


def runs_on(target: FatbinTarget, gpu: Capability, driver_cuda: Capability | None) -> Answer:
    """Whether code for ``target`` runs on a GPU of compute capability ``gpu`` under a
    driver that runs CUDA ``driver_cuda`` (None: not known)."""
    if not _architecture_allows(target, gpu):
        return Answer("no", f"{target.name} does not run on {gpu_name(gpu)}")
    if target.kind == "sass":
        return Answer("yes", f"{target.name} SASS runs on {gpu_name(gpu)}")
    isa = target.ptx_isa
    release = ptx_isa_releases().get(isa) if isa else None
    isa_text = "{}.{}".format(*isa) if isa else "of an unknown version"
    if release is None:
        return Answer("unknown", f"{target.name} is PTX ISA {isa_text}, which cudaup's table lacks")
    needs = "{}.{}".format(*release)
    if driver_cuda is None:
        return Answer(
            "unknown",
            f"{target.name} (PTX ISA {isa_text}) JIT-compiles only on a driver for CUDA ≥ {needs}, "
            "and the driver's CUDA version is not known",
        )
    if driver_cuda < release:
        return Answer(
            "no",
            f"{target.name} is PTX ISA {isa_text}: JIT needs a driver for CUDA ≥ {needs}, "
            f"this one runs {driver_cuda[0]}.{driver_cuda[1]}",
        )
    return Answer("yes", f"{target.name} (PTX ISA {isa_text}) JIT-compiles for {gpu_name(gpu)}")


def covers(
    targets: Iterable[FatbinTarget], gpu: Capability, driver_cuda: Capability | None
) -> Answer:
    """Whether any of ``targets`` runs on ``gpu``: yes when one does (SASS first, then
    PTX through the JIT), unknown when none does but one might, else no."""
    unique = set(targets)
    # SASS first: it runs as it is, where PTX waits for the JIT.
    ordered = sorted(unique, key=lambda t: (t.kind != "sass", t))
    answers = [runs_on(t, gpu, driver_cuda) for t in ordered]
    for wanted in ("yes", "unknown"):
        found = next((a for a in answers if a.verdict == wanted), None)
        if found is not None:
            return found
    names = sorted({t.name for t in unique})
    shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
    return Answer("no", f"no kernel for {gpu_name(gpu)}: it carries {shown or 'no GPU code'}")
