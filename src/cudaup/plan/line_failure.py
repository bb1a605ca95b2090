"""Why a line's rounds stop, in words: the :class:`Exclusion` each way of giving up reads as.

Pure: :mod:`cudaup.plan.attempt` runs the rounds; this module says when they are given up
and how the failure is told (grouped by project, newest first).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cudaup.plan.lines import Evidence, Line
from cudaup.plan.result import Exclusion
from cudaup.plan.uv import CompileAnswer

#: Versions of one project excluded for contradicting a line before the line is given up.
CONTRADICTION_ROUNDS = 3
#: Resolutions that may each exclude versions lacking a requested extra.
EXTRA_ROUNDS = 4


def extras_given_up(
    line: Line, lacking: Sequence[Lacking], missing: Sequence[Lacking]
) -> Exclusion | None:
    """The line's failure once :data:`EXTRA_ROUNDS` resolutions have each met a version
    without a requested extra; None while another round may exclude ``missing``."""
    if sum(1 for x in lacking if x.first) < EXTRA_ROUNDS:
        return None
    return Exclusion(
        line,
        "extra",
        f"{lacking_words([*lacking, *missing])}; older versions not read",
        tuple(sorted({x.project for x in missing})),
    )


def contradictions_given_up(
    fresh: Sequence[Evidence], learnt: Sequence[Evidence], rounds: Mapping[str, int] | None = None
) -> bool:
    """Whether to stop: nothing new read, or a project excluded CONTRADICTION_ROUNDS times:
    in as many versions, or, excluded toward the line (``rounds``: each project's rounds
    so far, this one included), in as many rounds, since one ``>`` keeps out every older
    version a round read at once."""
    if not fresh:
        return True
    if rounds is not None:
        return max(rounds.get(e.project, 0) for e in fresh) >= CONTRADICTION_ROUNDS
    tried = [sum(k.project == e.project for k in learnt) for e in fresh]
    return max(tried) >= CONTRADICTION_ROUNDS


def one_more_gives_up(
    project: str, learnt: Sequence[Evidence], rounds: Mapping[str, int] | None
) -> bool:
    """Whether one more build of ``project`` that contradicts the line gives the line up,
    whatever else its read-back finds: :func:`contradictions_given_up`'s rule, asked
    before the read-back (``rounds``: each project's rounds before this one, when excluded
    toward the line; ``learnt``: what earlier rounds excluded)."""
    if rounds is not None:
        return rounds.get(project, 0) + 1 >= CONTRADICTION_ROUNDS
    return sum(e.project == project for e in learnt) + 1 >= CONTRADICTION_ROUNDS


def no_resolution(
    line: Line, answer: CompileAnswer, learnt: Sequence[Evidence], lacking: Sequence[Lacking]
) -> Exclusion:
    """Why a round found nothing: what was excluded before it (and the projects uv found
    only source of, which a plan does not build: uv gives that as a hint), else uv's own
    reason."""
    source = ""
    if answer.source_only:
        source = f"uv found only source for {', '.join(answer.source_only)} in the versions "
        source += "it tried, and a plan builds nothing"
    if learnt:
        return Exclusion(
            line,
            "inconsistent",
            f"{learnt_words(learnt)}; without them there is no resolution"
            + (f" ({source})" if source else ""),
            tuple(sorted({e.project for e in learnt})),
        )
    if lacking:
        return Exclusion(
            line,
            "extra",
            f"{lacking_words(lacking)}; without them there is no resolution"
            + (f" ({source})" if source else ""),
            tuple(sorted({x.project for x in lacking})),
        )
    return Exclusion(line, "resolution", answer.reason or "uv found no resolution")


@dataclass(frozen=True, slots=True)
class Lacking:
    """A version of a requested project without an extra it was asked with."""

    project: str
    version: str
    extras: tuple[str, ...]
    #: The version the resolver chose (the others were read ahead of it).
    first: bool = False


def lacking_words(found: Sequence[Lacking]) -> str:
    """``jax 0.6.2, 0.6.1 have no extra cuda13``, grouped by project."""
    by_project: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for item in found:
        by_project.setdefault((item.project, item.extras), []).append(item.version)
    parts = []
    for (project, extras), versions in by_project.items():
        shown = ", ".join(versions[:4]) + (
            f" and {len(versions) - 4} older" if len(versions) > 4 else ""
        )
        verb = "has" if len(versions) == 1 else "have"
        parts.append(f"{project} {shown} {verb} no extra {', '.join(extras)}")
    return "; ".join(parts)


def learnt_words(found: Sequence[Evidence]) -> str:
    """What contradicting builds were met, grouped by project (newest first)."""
    by_project: dict[str, list[Evidence]] = {}
    for evidence in found:
        by_project.setdefault(evidence.project, []).append(evidence)
    parts = []
    for project, items in by_project.items():
        kinds = sorted({e.cuda() for e in items})
        versions = ", ".join(e.version for e in items)
        how = items[0].how
        more = "; older versions not read" if len(items) >= CONTRADICTION_ROUNDS else ""
        parts.append(f"{project} {versions}: {' / '.join(kinds)} ({how}{more})")
    return "builds of another line: " + "; ".join(parts)
