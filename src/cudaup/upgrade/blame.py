"""Which package keeps the others off a line: what exit 13 names (pure but for the
resolution it is handed).

A move's requests are the environment's roots (``flashinfer-python[cu13]``,
``sglang-kernel``); what fails is often not one of them but what they share below
(``torch``: PyPI has no 13.1 torch, so every request that needs it fails on 13.1, and
the last one tried is no answer).  So, for the requests that resolve on no line, the
installed packages they all require that move too are resolved alone on the line,
topmost first (torch before the nvidia libraries it pulls in); the first that fails
alone is the blocker, and the error names it, with its own reason.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from cudaup.errors import CudaupError, NoCommonLineError
from cudaup.plan.lines import Line, line_text
from cudaup.plan.result import Exclusion
from cudaup.upgrade.census import Census, Request

#: Shared dependencies resolved alone before the error is left as it is.
TRIES = 3

#: Resolves one requirement alone on the line; the error it fails with, or None.
AloneCheck = Callable[[Requirement], CudaupError | None]


def blocking_dependencies(census: Census, sources: Sequence[str]) -> list[str]:
    """The moving packages every one of ``sources`` requires (directly or not), topmost
    first (the one that reaches most of the others), ``sources`` themselves left out."""
    if not sources:
        return []
    reached = [census.reach([s]) - {s} for s in sources]
    # What they all require; else what any of them does (each may fail for its own reason).
    shared = (set.intersection(*reached) or set.union(*reached)) & census.moving
    shared -= set(sources)
    return sorted(shared, key=lambda n: (-len(census.reach([n]) & shared), n))


def name_blocker(
    error: NoCommonLineError,
    census: Census,
    requests: Sequence[Request],
    line: Line,
    rename: Callable[[str], str | None],
    alone: AloneCheck,
) -> NoCommonLineError:
    """``error`` with the package that keeps the failing requests off ``line`` named first,
    when one is found (see the module docstring); else ``error`` as it is."""
    packages = error.details.get("packages")
    if not isinstance(packages, list):
        return error
    failing = {
        canonicalize_name(Requirement(p["requirement"]).name): p["requirement"]
        for p in packages
        if isinstance(p, dict) and not p.get("lines")
    }
    sources = {
        r.source.name: failing[canonicalize_name(r.requirement.name)]
        for r in requests
        if r.source is not None and canonicalize_name(r.requirement.name) in failing
    }
    for name in blocking_dependencies(census, list(sources))[:TRIES]:
        project = rename(name)
        if project is None:
            continue
        problem = alone(Requirement(project))
        if problem is None:
            continue
        why = _reason(problem, line)
        needing = sorted(text for source, text in sources.items() if name in census.reach([source]))
        return NoCommonLineError(
            f"{project} has no build that resolves on CUDA {line_text(line)} ({why}), and "
            f"{', '.join(needing)} {'requires' if len(needing) == 1 else 'require'} it: {error}",
            {**error.details, "blocker": project},
        )
    return error


def _reason(problem: CudaupError, line: Line) -> str:
    """The first sentence of why one package fails alone on ``line``."""
    details = getattr(problem, "details", {})
    for entry in details.get("excluded", []) if isinstance(details, dict) else []:
        if isinstance(entry, dict) and entry.get("line") == line_text(line):
            text = Exclusion(line, str(entry.get("kind")), str(entry.get("message"))).summary()
            return text.split(": ", 1)[1] if ": " in text else text
    return str(problem)
