"""Requests that conflict among themselves, whatever the CUDA line: one resolution proves
it (against tests/plan/world.py, resolved by real uv), and a conflict that is about lines
keeps its per-line explanation."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from cudaup.errors import CudaupError, NoCommonLineError
from cudaup.plan.attempt import Attempt
from cudaup.plan.conflict import ConflictProof, pins_contradict
from cudaup.plan.lines import Line
from cudaup.plan.result import Exclusion
from cudaup.plan.survey import union_pages
from cudaup.plan.uv import UvRunner
from cudaup.resolve.pypi import DistFile
from tests.plan.pyindex import IndexServer
from tests.plan.world import build, plan


@pytest.fixture
def world(index_server: IndexServer) -> IndexServer:
    return build(index_server)


@pytest.fixture
def resolutions(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[list[str]]]:
    """The requirements of every uv resolution the plan runs (uv itself still runs)."""
    seen: list[list[str]] = []
    real = UvRunner._run

    def recording(
        self: UvRunner, argv: list[str], environment: dict[str, str], *rest: Any
    ) -> tuple[int, str, str]:
        seen.append(Path(argv[3]).read_text().split())
        return real(self, argv, environment, *rest)

    monkeypatch.setattr(UvRunner, "_run", recording)
    yield seen


@pytest.mark.parametrize("servellm", ["servellm==1.0", "servellm"])
@pytest.mark.parametrize("only", [("pypi",), ("pypi", "pytorch")])
def test_requests_that_conflict_are_told_by_one_resolution(
    world: IndexServer,
    tmp_path: Path,
    resolutions: list[list[str]],
    only: tuple[str, ...],
    servellm: str,
) -> None:
    """servellm 1.0 requires torch==2.11.0: with torch==2.9.1 asked too, no line can
    resolve them, whether torch comes from PyPI alone or from the per-line indexes, and
    whether the proof starts at once (exact pins) or when a line first fails."""
    requests = [servellm, "torch==2.9.1"]
    with pytest.raises(NoCommonLineError) as failed:
        plan(world, tmp_path, requests, only=only)
    message = str(failed.value)
    assert message.startswith("the requests conflict among themselves, whatever the CUDA line: ")
    if servellm == "servellm==1.0" and only == ("pypi",):
        # Exact pins from one index: servellm 1.0's own wheel tells it, before uv answers.
        assert (
            "servellm==1.0 depends on torch==2.11.0 (the Requires-Dist of "
            "servellm-1.0-py3-none-any.whl) and you require torch==2.9.1" in message
        )
    else:
        assert "servellm depend on torch==2.11.0" in message and "require torch==2.9.1" in message
    details = failed.value.details
    assert details["conflict"] and details["requirements"] == requests
    excluded = details["excluded"]
    assert isinstance(excluded, list)
    assert {e["line"] for e in excluded} == {"13.2", "13.0", "12.9", "12.8"}
    # One resolution with no line constraint said it; no package was resolved alone on
    # every line to explain it (before: 4 lines, then 2 packages x 4 lines, each offline
    # first).  Exact pins start it at once and the lines wait for it: beside it ran only
    # the install check's first resolution, where a per-line index makes the proof
    # another job.  Otherwise it starts when a line fails: beside it ran at most the
    # world's 4 lines, each ending at its first round.
    if servellm == "servellm==1.0":
        assert len(resolutions) == len(only)
    else:
        assert 1 <= len(resolutions) <= 1 + 4
    assert all(r == requests for r in resolutions)


def test_a_conflict_about_lines_keeps_its_per_line_explanation(
    world: IndexServer, tmp_path: Path, resolutions: list[list[str]]
) -> None:
    """torch 2.11.0 is CUDA 13.0, bitsandbytes 0.45.5 supports 11.7-12.8: together they
    resolve (no conflict among themselves), on no common line."""
    with pytest.raises(NoCommonLineError, match="their CUDA lines do not meet") as failed:
        plan(world, tmp_path, ["torch==2.11.0", "bitsandbytes==0.45.5"], only=("pypi",))
    assert "conflict" not in failed.value.details
    assert "torch==2.11.0 resolves on 13.0" in str(failed.value)
    assert ["bitsandbytes==0.45.5"] in resolutions  # each package alone, for the reasons


def _file(name: str, sha: str | None = "a" * 64) -> DistFile:
    return DistFile(name, f"https://example.org/{name}", sha, None, None, False, False)


def test_the_union_of_pages_refuses_what_it_cannot_prove() -> None:
    """A version two sources serve differently would be read from one of them only."""
    cu128 = {"torch": (_file("torch-2.11.0+cu128-cp312-cp312-linux_x86_64.whl"),)}
    pypi = {"torch": (_file("torch-2.9.1-cp312-cp312-linux_x86_64.whl"),)}
    union = union_pages([cu128, pypi, cu128])
    assert union is not None and len(union["torch"]) == 2
    other = {"torch": (_file("torch-2.9.1-cp312-cp312-linux_x86_64.whl", "b" * 64),)}
    assert union_pages([pypi, other]) is None
    unhashed = {"torch": (_file("torch-2.9.1-cp312-cp312-linux_x86_64.whl", None),)}
    assert union_pages([unhashed, unhashed]) is None
    assert union_pages([unhashed]) == unhashed


def test_a_page_nobody_asked_for_is_read_once_for_every_line(
    world: IndexServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """cuda-python is pure: what it pulls in (cuda-bindings) is read on each line the
    search resolves at once; its page is read once for the whole plan: uv's runs read it
    through the index memo, and the read-back of every line takes it from there (cudaup's
    log says each request upstream, the memo's for uv included)."""
    with caplog.at_level(logging.DEBUG, logger="cudaup.http"):
        result = plan(world, tmp_path, ["cuda-python==12.8.0"], only=("pypi",))
    assert result.line == (12, 9)
    read = [r.getMessage() for r in caplog.records if "/pypi/cuda-bindings/ →" in r.getMessage()]
    assert len(read) == 1 and read[0].startswith("GET "), read


def _finished(attempt: Attempt) -> Future[Attempt]:
    done: Future[Attempt] = Future()
    done.set_result(attempt)
    return done


def test_a_line_that_resolves_refutes_the_proof() -> None:
    """The proof starts on a line uv found no resolution for; a line whose first round
    resolved stops it (its resolution picked from a subset of the proof's), and what the
    stopped proof raises proves nothing."""
    release = threading.Event()
    stopped: list[bool] = []

    def prove(lines: list[Line]) -> str | None:
        release.wait(timeout=60)
        raise CudaupError("the plan was cancelled")  # what a killed uv run raises

    def stop() -> None:
        stopped.append(True)
        release.set()

    with ThreadPoolExecutor(max_workers=1) as pool:
        proof = ConflictProof(pool, prove, stop)
        proof.lines = [(13, 0), (12, 8)]
        proof.after_line(
            _finished(Attempt((13, 0), failure=Exclusion((13, 0), "resolution", "no")))
        )
        assert proof.future is not None and not proof.future.done()
        built = Exclusion((12, 8), "inconsistent", "builds of another line")
        proof.after_line(_finished(Attempt((12, 8), failure=built)))
        assert proof.refuted and stopped == [True]
        assert proof.reason(block=True) is None
        proof.start()  # refuted: nothing starts again
        assert proof.future is not None and proof.reason(block=True) is None


def test_the_proof_waits_for_the_lines_reading_and_is_refuted_by_them() -> None:
    """A line its kept answers decide (a warm plan) refutes the proof before the proof's
    uv run starts: the proof starts only once no line is reading (the search's gate)."""
    quiet, proved = threading.Event(), []

    def until_quiet() -> None:
        quiet.wait(timeout=60)

    def prove(lines: list[Line]) -> str | None:
        proved.append(lines)
        return "uv found no resolution"

    with ThreadPoolExecutor(max_workers=1) as pool:
        proof = ConflictProof(pool, prove, lambda: None, until_quiet)
        proof.lines = [(13, 2), (13, 0)]
        proof.after_line(
            _finished(Attempt((13, 2), failure=Exclusion((13, 2), "resolution", "no")))
        )
        assert proof.future is not None and not proof.future.done()
        proof.after_line(_finished(Attempt((13, 0))))  # it resolved: refuted
        quiet.set()
        assert proof.reason(block=True) is None and proved == []
        waiting = ConflictProof(pool, prove, lambda: None, lambda: None)
        waiting.lines = [(13, 2)]
        waiting.start()
        assert waiting.reason(block=True) == "uv found no resolution" and proved == [[(13, 2)]]


def test_a_proof_that_proved_nothing_leaves_the_search_waiting_for_its_lines(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The search waits for the line it must answer next, or for another line of its
    window to end (it refills the window then), or for the proof: a proof answered with no
    reason must leave it waiting for the lines, not return at once (the search would spin
    on two cores until the line ended)."""
    import concurrent.futures

    from cudaup.plan import conflict

    line: Future[Attempt] = Future()
    beside: Future[Attempt] = Future()
    real_wait, waits = concurrent.futures.wait, []

    def wait(futures: Any, **kw: Any) -> Any:
        waits.append(len(futures))
        beside.set_result(Attempt((12, 9)))  # another line of the window ends
        return real_wait(futures, **kw)

    with ThreadPoolExecutor(max_workers=1) as pool:
        proof = ConflictProof(pool, lambda lines: None, lambda: None)
        proof.lines = [(13, 0)]
        proof.start()
        assert proof.future is not None and proof.future.result() is None
        monkeypatch.setattr(conflict, "wait", wait)
        assert proof.proved_first(line, beside=[beside]) is False
    assert beside.done() and not line.done() and waits == [3]


def _pins(*texts: str) -> dict[Any, Requirement]:
    return {canonicalize_name(Requirement(t).name): Requirement(t) for t in texts}


@pytest.mark.parametrize(
    ("pins", "required", "told"),
    [
        # vllm 0.20.0's wheel requires torch==2.11.0: torch==2.9.0 cannot be had beside it.
        (("vllm==0.20.0", "torch==2.9.0"), "torch==2.11.0", True),
        (("vllm==0.20.0", "Torch==2.9.0"), "torch>=2.10", True),
        (("vllm==0.20.0", "torch==2.11.0"), "torch>=2.10,<2.12", False),
        (("vllm==0.20.0", "torch==1!2.9.0"), "torch==2.11.0", True),
        # Only a final release is judged: a local label, a pre-, post- or development
        # release meets PEP 440's special cases, and uv answers them.
        (("vllm==0.20.0", "torch==2.9.0+cu130"), "torch==2.11.0", False),
        (("vllm==0.20.0", "torch==2.12.0rc1"), "torch<2.12", False),
        (("vllm==0.20.0", "torch==2.9.0.post1"), "torch==2.11.0", False),
        (("vllm==0.20.0", "torch==2.9.0.dev1"), "torch==2.11.0", False),
        # A marker may not hold for the target: uv answers, not the wheel.
        (("vllm==0.20.0", "torch==2.9.0"), "torch==2.11.0; python_version < '3'", False),
        (("vllm==0.20.0", "torch==2.9.0"), "torch==2.11.0; extra == 'cuda'", False),
        # What no pin names proves nothing.
        (("vllm==0.20.0", "torch==2.9.0"), "numpy<2", False),
    ],
)
def test_pins_contradict_only_where_a_wheels_own_requirement_excludes_a_pin(
    pins: tuple[str, ...], required: str, told: bool
) -> None:
    pinned = _pins(*pins)
    wheel = "vllm-0.20.0-cp38-abi3-manylinux_2_35_x86_64.whl"
    reason = pins_contradict(pinned, {canonicalize_name("vllm"): (wheel, [Requirement(required)])})
    assert (reason is not None) == told, reason
    if told:
        assert reason == (
            f"vllm==0.20.0 depends on {Requirement(required)} (the Requires-Dist of {wheel}) "
            f"and you require {pins[1]}: no version of torch satisfies both"
        )


def test_a_wheel_that_requires_itself_or_nothing_pinned_tells_nothing() -> None:
    pinned = _pins("alpha==1.0", "beta==2.0")
    requires = {
        canonicalize_name("alpha"): ("alpha-1.0-py3-none-any.whl", [Requirement("alpha[x]==0.1")]),
        canonicalize_name("beta"): ("beta-2.0-py3-none-any.whl", []),
    }
    assert pins_contradict(pinned, requires) is None


def test_pins_told_by_a_wheel_are_the_answer_a_warm_plan_takes(
    world: IndexServer, tmp_path: Path, resolutions: list[list[str]]
) -> None:
    """The wheel's proof stopped uv; kept as the first resolution's answer, the same plan
    again (warm, within the answers' lifetime) gives the same reason and runs no uv."""
    requests = ["servellm==1.0", "torch==2.9.1"]
    reasons = []
    for _ in range(2):
        with pytest.raises(NoCommonLineError) as failed:
            plan(world, tmp_path, requests, only=("pypi",))
        reasons.append(failed.value.details["conflict"])
    assert reasons[0] == reasons[1] and "(the Requires-Dist of servellm-1.0" in str(reasons[0])
    assert len(resolutions) == 1  # the cold plan's, stopped; none for the warm one
