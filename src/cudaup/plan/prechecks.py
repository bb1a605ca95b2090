"""The lines a plan excludes before anything resolves.

A line is out, without a uv run, when the driver runs none of its releases (or cudaup
cannot tell that it does), when a GPU is one its newest release cannot target, when a
requested project that only a per-line index publishes has no build there, or when a
request's extra names another major (``flashinfer-python[cu12]`` on 13.0).  Pure: the
pages the plan read and the compatibility table come in; one
:class:`~cudaup.plan.result.Exclusion` (or ``None``) comes out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from cudaup.core.compat import CompatTable
from cudaup.core.major_extras import named_majors, shipped_major_extras
from cudaup.plan.indexes import Index
from cudaup.plan.lines import Line, line_tag
from cudaup.plan.result import Exclusion, PlanTarget
from cudaup.plan.survey import Page


def precheck(
    line: Line,
    releases: Sequence[str],
    table: CompatTable,
    target: PlanTarget,
    requirements: Sequence[Requirement],
    tagged: Sequence[Index],
    pages: Mapping[tuple[str, str, str], Page],
) -> Exclusion | None:
    """The first reason, in that order, that ``line`` (whose ``releases`` are newest
    first) is out before any resolution: the driver, the GPUs, a per-line index, an extra.
    ``pages``: what the plan read of each per-line index, by (index, line tag, project)."""
    return (
        driver_refuses(line, releases, table, target)
        or gpus_refuse(line, releases, table, target)
        or index_lacks(line, requirements, tagged, pages)
        or extra_refuses(requirements, line)
    )


def driver_refuses(
    line: Line, releases: Sequence[str], table: CompatTable, target: PlanTarget
) -> Exclusion | None:
    """The driver runs none of the line's releases (or cudaup cannot tell)."""
    if target.driver is None:
        return None
    verdicts = [table.check(target.driver, r, reported=target.reported) for r in releases]
    if not verdicts or any(v.verdict not in {"no", "unknown"} for v in verdicts):
        return None
    newest = verdicts[0]
    if newest.verdict == "no":
        message = f"driver {target.driver} cannot run CUDA {newest.release}: {newest.reason}"
    else:
        message = f"cudaup cannot tell whether driver {target.driver} runs it: {newest.reason}"
    return Exclusion(line, "driver", message)


def gpus_refuse(
    line: Line, releases: Sequence[str], table: CompatTable, target: PlanTarget
) -> Exclusion | None:
    """A GPU the line's newest release cannot target."""
    for gpu in target.gpus:
        arch = table.architecture(gpu.compute_capability or "")
        if arch is not None and releases and not arch.supported_by(releases[0]):
            return Exclusion(
                line,
                "gpu",
                f"cannot target GPU {gpu.name} (compute capability {gpu.compute_capability})",
            )
    return None


def index_lacks(
    line: Line,
    requirements: Sequence[Requirement],
    tagged: Sequence[Index],
    pages: Mapping[tuple[str, str, str], Page],
) -> Exclusion | None:
    """A requested project only a per-line index publishes, with no build for the line."""
    tag = line_tag(line)
    for requirement in requirements:
        project = canonicalize_name(requirement.name)
        for index in tagged:
            if index.serves(requirement.name) and index.publishes_alone(requirement.name):
                page = pages.get((index.name, tag, project))
                if tag not in index.urls or page is None or page.files is None:
                    return Exclusion(
                        line,
                        "index",
                        f"{requirement.name}: {index.name} publishes no {tag} build",
                        (project,),
                    )
    return None


def extra_refuses(requirements: Sequence[Requirement], line: Line) -> Exclusion | None:
    """``line`` excluded for a request whose extra names another major
    (``flashinfer-python[cu12]`` on 13.0: ``data/families.toml`` ``[extras]``)."""
    extras = shipped_major_extras()
    for requirement in requirements:
        asked = sorted(requirement.extras)
        for extra, major in named_majors(extras, requirement.name, asked).items():
            if major != line[0]:
                words = f"{requirement} asks for CUDA {major}: its extra {extra} names that major"
                return Exclusion(line, "major", words, (canonicalize_name(requirement.name),))
    return None
