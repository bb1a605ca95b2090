"""``plan``: which CUDA line the driver and the whole ML wheel stack agree on.

``lines`` (pure) says what ties a resolved package to a line and builds the
constraints that hold a resolution to one; ``closure`` (pure) reads uv's answer
back as a graph; ``elf`` (pure) reads the libraries a shared object links;
``survey`` checks the requested projects on every index; ``wheels`` reads facts
from wheels (cached by URL and sha256); ``uv`` runs the resolver; ``attempt``
resolves one line and reads it back; ``planner`` searches the lines; ``result`` is
the answer and the no-line error; ``export`` writes the plan as a PEP 751 lock;
``indexes`` is the index table.
"""

from packaging.requirements import InvalidRequirement, Requirement

from cudaup.errors import UsageError
from cudaup.plan.planner import Planner
from cudaup.plan.result import PlanResult, PlanTarget


def parse_requirements(texts: list[str]) -> list[Requirement]:
    requirements = []
    for text in texts:
        try:
            requirements.append(Requirement(text))
        except InvalidRequirement as exc:
            raise UsageError(f"{text!r} is not a package requirement ({exc})") from None
    return requirements


__all__ = ["PlanResult", "PlanTarget", "Planner", "parse_requirements"]
