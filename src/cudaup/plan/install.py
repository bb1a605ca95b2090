"""The install lines a plan prints, checked to install the plan.

The plan's resolution was held to its line by constraints (``cuda-toolkit==13.0.*``,
other majors' runtimes forbidden, versions read as another line's excluded); a user's
``uv pip install vllm==0.20.0`` has none of them, and uv may then take newer builds the
plan refused (nvidia-cutlass-dsl 4.8.1 with ``…-libs-cu12`` where the plan has 4.5.3).
So the printed requirements are resolved again exactly as printed, with no constraint,
and every package whose version then differs from the plan's is pinned in the line,
until the two closures are the same; if a few rounds do not get there, every package of
the closure is pinned.  What is printed is what was checked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from cudaup.plan.closure import Closure
from cudaup.plan.uv import CompileJob, UvRunner

#: Resolutions of the printed line before every package of the closure is pinned.
ROUNDS = 3


def differences(plan: Closure, printed: Closure) -> list[str]:
    """Packages whose version the printed line resolves otherwise (or not at all), and
    packages it resolves that the plan does not have (pure)."""
    found = []
    for package in plan:
        other = printed.get(package.name)
        if other is None or other.version != package.version:
            found.append(package.name)
    found += [p.name for p in printed if plan.get(p.name) is None]
    return sorted(set(found))


def exact_pins(requirements: Sequence[Requirement]) -> list[str] | None:
    """The lines a plan prints for requests that are all exact pins (``vllm==0.20.0``),
    spelled as :meth:`~cudaup.plan.result.PackagePick.pinned` spells them, known before any
    line is resolved; None when one request is not."""
    pins = []
    for requirement in requirements:
        specifiers = list(requirement.specifier)
        if requirement.url or len(specifiers) != 1:
            return None
        (only,) = specifiers
        if only.operator != "==" or only.version.endswith(".*"):
            return None
        try:
            version = Version(only.version)
        except InvalidVersion:
            return None
        extras = f"[{','.join(sorted(requirement.extras))}]" if requirement.extras else ""
        marker = f"; {requirement.marker}" if requirement.marker else ""
        pins.append(f"{requirement.name}{extras}=={version}{marker}")
    return pins


def install_pins(
    runner: UvRunner, job: CompileJob, pins: Sequence[str], closure: Closure, identity: str
) -> tuple[list[str], bool]:
    """The pins to add to ``pins`` so that resolving them, unconstrained, gives ``closure``;
    and whether that was checked (False: uv resolved the line otherwise still)."""
    added: list[str] = []
    for _round in range(ROUNDS):
        printed = replace(job, requirements=(*pins, *added), constraints=(), preferences=())
        answer = runner.compile(printed, identity=identity)
        if answer.closure is None:
            break
        differing = differences(closure, answer.closure)
        if not differing:
            return added, True
        fresh = [
            f"{name}=={package.version}"
            for name in differing
            if (package := closure.get(name)) is not None
        ]
        fresh = [pin for pin in fresh if pin not in added]
        if not fresh:
            break  # only packages the plan lacks differ: pins cannot remove them
        added += fresh
    asked = {canonicalize_name(Requirement(pin).name) for pin in pins}
    every = [f"{p.name}=={p.version}" for p in closure if p.name not in asked]
    printed = replace(job, requirements=(*pins, *every), constraints=(), preferences=())
    answer = runner.compile(printed, identity=identity)
    same = answer.closure is not None and not differences(closure, answer.closure)
    return every, same
