"""Requests a line holds back to an old version that pins no CUDA line.

A line resolves when every request resolves on it, and a request whose newer versions
need what the line lacks can still resolve there, to an old version that pins no line:
``sglang`` on 13.1 (driver 590.48.01, 2026-12-06) resolved to 0.5.2, which requires no
torch, since sglang 0.5.23 needs torch 2.14.1 and there is no 13.1 torch; and
``sglang-kernel`` to 0.4.6.post1, which links libcudart.so.13 (any 13.x) and names no
torch, where 0.4.10 pins torch 2.14.1.  That line "fits" only because the request stopped
saying which line it needs, and taking it would hand the user a year-old sglang.  So :mod:`cudaup.plan.planner` looks on
to the next line of the same tier that resolves: when it takes each request held back
newer, it is the answer and the line above is passed over (``held-back``); otherwise the
line above stays, with a note of what it held back (older lines would hold a request
back further).  Pure, but for :func:`held_in`, which reads the requests' pages the line
resolver already holds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from cudaup.plan.closure import Closure, Resolved
from cudaup.plan.lines import Evidence, Line, line_text
from cudaup.plan.result import Exclusion, PlanTarget
from cudaup.plan.survey import newest_installable
from cudaup.resolve.pypi import DistFile

if TYPE_CHECKING:  # the planner hands its attempts and line resolver in
    from cudaup.plan.attempt import Attempt, LineResolver


@dataclass(frozen=True, slots=True)
class HeldBack:
    """A request resolved to ``taken``, pinning no CUDA line, below its newest ``newest``."""

    project: str
    taken: Version
    newest: Version

    def words(self, line: Line) -> str:
        return (
            f"{self.project} resolves on {line_text(line)} only as {self.taken}, which pins "
            f"no CUDA line; its newest version, {self.newest}, does not resolve there"
        )


def held_in(
    attempt: Attempt, requirements: Sequence[Requirement], lines: LineResolver, target: PlanTarget
) -> list[HeldBack]:
    """:func:`held_back` of a line's resolved attempt."""
    assert attempt.closure is not None and attempt.job is not None
    return held_back(
        requirements,
        attempt.closure,
        attempt.evidence,
        lambda package: lines.files_of(package, attempt),
        target,
        attempt.job.prerelease,
    )


def passed_over_for(line: Line, held: Sequence[HeldBack]) -> Exclusion:
    """Why the search passed over ``line``, which resolved holding ``held`` back."""
    words = "; ".join(h.words(line) for h in held)
    return Exclusion(line, "held-back", words, tuple(h.project for h in held))


def held_back(
    requirements: Sequence[Requirement],
    closure: Closure,
    evidence: dict[str, Evidence],
    files_of: Callable[[Resolved], Sequence[DistFile]],
    target: PlanTarget,
    prerelease: bool,
) -> list[HeldBack]:
    """The requests resolved in ``closure`` to a version below the newest one the target
    could install (:func:`~cudaup.plan.survey.newest_installable`), and
    whose requirement path reaches no package that pins a line (a major alone, as
    ``libcudart.so.13`` says, does not)."""
    naming = {name for name, e in evidence.items() if e.line is not None or e.kind == "lines"}
    found: list[HeldBack] = []
    for requirement in requirements:
        package = closure.get(canonicalize_name(requirement.name))
        if package is None or closure.chain(package.name, naming) is not None:
            continue
        files = files_of(package)
        newest = newest_installable(
            files, requirement, target.python, target.platform, pre=prerelease
        )
        if newest is not None and package.version < newest:
            found.append(HeldBack(package.name, package.version, newest))
    return found


def takes_newer(attempt: Attempt, held: Sequence[HeldBack]) -> bool:
    """Whether ``attempt`` takes every request ``held`` back above the version it was held at."""
    closure = attempt.closure
    return closure is not None and all(
        (package := closure.get(h.project)) is not None and package.version > h.taken for h in held
    )
