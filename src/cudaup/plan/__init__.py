"""``plan``: which CUDA line the driver and the whole ML wheel stack agree on.

``lines`` (pure) says what ties a resolved package to a line and builds the
constraints that hold a resolution to one; ``closure`` (pure) reads uv's answer
back as a graph; ``elf`` (pure) reads the libraries a shared object links;
``survey`` checks the requested projects on every index; ``wheels`` reads facts
from wheels (cached by URL and sha256); ``uv`` runs the resolver; ``attempt``
resolves one line and reads it back; ``planner`` searches the lines; ``conflict``
proves beside it that requests conflict whatever the line; ``result`` is
the answer and the no-line error; ``export`` writes the plan as a PEP 751 lock;
``indexes`` is the index table.
"""

import re
import shutil
import subprocess
import sys

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


def python_version(text: str | None) -> tuple[int, int]:
    """``--python 3.12`` or a path to an interpreter (default: ``python3`` on PATH)."""
    if text and re.fullmatch(r"\d{1,4}\.\d{1,4}", text):
        major, minor = text.split(".")
        return int(major), int(minor)
    interpreter = text or shutil.which("python3") or sys.executable
    try:
        output = subprocess.run(
            [interpreter, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        major, minor = output.split(".")
        return int(major), int(minor)
    except (OSError, subprocess.SubprocessError, ValueError):
        raise UsageError(
            f"cannot run {interpreter} to learn its version", hint="--python X.Y names it"
        ) from None


__all__ = ["PlanResult", "PlanTarget", "Planner", "parse_requirements", "python_version"]
