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

import contextlib
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from cudaup.errors import UsageError
from cudaup.plan.planner import Planner
from cudaup.plan.result import PlanResult, PlanTarget
from cudaup.util import processes


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
    return python_version_ahead(text)()


def python_version_ahead(text: str | None) -> Callable[[], tuple[int, int]]:
    """:func:`python_version`'s answer, to be asked for later: the interpreter starts now
    and is waited for when the answer is asked for, so what the caller does meanwhile
    overlaps it (finding the driver through NVML or nvidia-smi; a pyenv shim takes
    0.1-0.15 s to start Python).  The very file that runs cudaup is not run: its
    version is this process's.  A file that cannot be started fails here, one that runs
    and does not answer when asked."""
    if text and re.fullmatch(r"\d{1,4}\.\d{1,4}", text):
        major, minor = text.split(".")
        return lambda: (int(major), int(minor))
    interpreter = text or shutil.which("python3") or sys.executable
    failed = UsageError(
        f"cannot run {interpreter} to learn its version", hint="--python X.Y names it"
    )
    with contextlib.suppress(OSError, ValueError):
        if Path(interpreter).samefile(sys.executable):
            return lambda: (sys.version_info.major, sys.version_info.minor)
    try:
        process = processes.start(
            [interpreter, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"]
        )
    except (OSError, ValueError):
        raise failed from None

    def answer() -> tuple[int, int]:
        try:
            output, _ = process.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            processes.stop(process)
            raise failed from None
        with contextlib.suppress(ValueError):  # not "X.Y"
            if process.returncode == 0:
                major, minor = output.strip().split(".")
                return int(major), int(minor)
        raise failed

    return answer


__all__ = [
    "PlanResult",
    "PlanTarget",
    "Planner",
    "parse_requirements",
    "python_version",
    "python_version_ahead",
]
