"""The install check: the printed lines resolved unconstrained, started ahead when the
requests are exact pins."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement

from cudaup.plan.install import exact_pins
from cudaup.plan.uv import UvRunner
from tests.plan.pyindex import IndexServer
from tests.plan.world import build, plan


@pytest.fixture
def world(index_server: IndexServer) -> IndexServer:
    return build(index_server)


def test_exact_pins_are_spelled_as_the_plan_prints_them() -> None:
    asked = ["jaxish[cuda13,b]==1.0", 'torch==2.10; sys_platform == "linux"', "vllm==0.20.0"]
    assert exact_pins([Requirement(r) for r in asked]) == [
        "jaxish[b,cuda13]==1.0",
        'torch==2.10; sys_platform == "linux"',
        "vllm==0.20.0",
    ]
    for loose in ("torch", "torch>=2.9", "torch==2.*", "torch==2.9,!=2.9.1"):
        assert exact_pins([Requirement("vllm==0.20.0"), Requirement(loose)]) is None


def test_the_check_of_exact_pins_runs_beside_the_search(
    world: IndexServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The printed line's resolution starts before the line search ends, and the install
    check takes its kept answer instead of resolving it again."""
    started: list[tuple[str, str]] = []
    lock = threading.Lock()
    real_run = UvRunner._run

    def recorded(
        self: UvRunner, argv: list[str], environment: dict[str, str], *rest: Any
    ) -> tuple[int, str, str]:
        requirements = Path(argv[3]).read_text().strip()
        constraints = Path(argv[5]).read_text().strip()
        with lock:
            started.append((requirements, constraints))
        return real_run(self, argv, environment, *rest)

    monkeypatch.setattr(UvRunner, "_run", recorded)
    result = plan(world, tmp_path, ["cupy-cuda12x==14.0.0"], only=("pypi",))
    assert result.install_checked and result.install_extra == []
    printed = [
        i for i, (req, cons) in enumerate(started) if req == "cupy-cuda12x==14.0.0" and not cons
    ]
    lines = [i for i, (_req, cons) in enumerate(started) if cons]
    assert len(printed) == 1 and lines and printed[0] < lines[-1], started
