"""The one rule of what a GPU runs, as a table."""

from __future__ import annotations

import pytest

from cudaup.core.fatbin import FatbinTarget
from cudaup.core.gpus import covers, parse_gpu, ptx_isa_releases, runs_on
from cudaup.errors import UsageError


def sass(arch: int, variant: str = "") -> FatbinTarget:
    return FatbinTarget("sass", (arch // 10, arch % 10), variant)


def ptx(arch: int, isa: tuple[int, int], variant: str = "") -> FatbinTarget:
    return FatbinTarget("ptx", (arch // 10, arch % 10), variant, isa)


NEW_DRIVER = (13, 1)
RULE = [
    # SASS: same major, minor not above the GPU's
    (sass(80), (8, 6), NEW_DRIVER, "yes"),
    (sass(80), (8, 0), NEW_DRIVER, "yes"),
    (sass(86), (8, 0), NEW_DRIVER, "no"),
    (sass(80), (9, 0), NEW_DRIVER, "no"),
    (sass(90), (10, 0), NEW_DRIVER, "no"),
    (sass(70), (7, 5), NEW_DRIVER, "yes"),
    (sass(100), (10, 3), NEW_DRIVER, "yes"),
    # a: that exact architecture only
    (sass(90, "a"), (9, 0), NEW_DRIVER, "yes"),
    (sass(100, "a"), (10, 3), NEW_DRIVER, "no"),
    (sass(100, "a"), (10, 0), NEW_DRIVER, "yes"),
    # f: its family (same major, minor at least its own)
    (sass(100, "f"), (10, 0), NEW_DRIVER, "yes"),
    (sass(100, "f"), (10, 3), NEW_DRIVER, "yes"),
    (sass(103, "f"), (10, 0), NEW_DRIVER, "no"),
    (sass(100, "f"), (12, 0), NEW_DRIVER, "no"),
    (sass(120, "f"), (12, 1), NEW_DRIVER, "yes"),
    # PTX: capability not above the GPU's, JIT by a driver at least as new as the ISA
    (ptx(75, (9, 0)), (12, 0), NEW_DRIVER, "yes"),
    (ptx(75, (9, 0)), (7, 5), (13, 0), "yes"),
    (ptx(75, (9, 0)), (7, 5), (12, 9), "no"),
    (ptx(75, (8, 8)), (9, 0), (12, 9), "yes"),
    (ptx(90, (9, 0)), (8, 9), NEW_DRIVER, "no"),
    (ptx(75, (9, 0)), (8, 0), None, "unknown"),
    (ptx(75, (99, 0)), (8, 0), NEW_DRIVER, "unknown"),
    (ptx(90, (9, 0), "a"), (9, 0), NEW_DRIVER, "yes"),
    (ptx(90, (9, 0), "a"), (10, 0), NEW_DRIVER, "no"),
    (ptx(100, (9, 0), "f"), (10, 3), NEW_DRIVER, "yes"),
    (ptx(100, (9, 0), "f"), (12, 0), NEW_DRIVER, "no"),
]


@pytest.mark.parametrize(("target", "gpu", "driver", "verdict"), RULE)
def test_the_rule(
    target: FatbinTarget, gpu: tuple[int, int], driver: tuple[int, int] | None, verdict: str
) -> None:
    assert runs_on(target, gpu, driver).verdict == verdict


def test_coverage_prefers_sass_and_says_what_is_missing() -> None:
    torch_cu130 = [sass(75), sass(80), sass(90), sass(100), sass(120), ptx(120, (9, 0))]
    answer = covers(torch_cu130, (7, 0), NEW_DRIVER)
    assert answer.verdict == "no"
    assert "no kernel for sm_70" in answer.reason and "sm_75" in answer.reason
    assert covers(torch_cu130, (9, 0), NEW_DRIVER).reason == "sm_90 SASS runs on sm_90"
    # PTX only, driver unknown: not "runs", not "does not"
    assert covers([ptx(80, (9, 0))], (9, 0), None).verdict == "unknown"
    assert covers([], (9, 0), NEW_DRIVER).verdict == "no"


def test_the_ptx_table_has_one_release_per_isa_in_order() -> None:
    table = ptx_isa_releases()
    assert table[(9, 0)] == (13, 0) and table[(8, 8)] == (12, 9) and table[(7, 0)] == (11, 0)
    releases = [table[isa] for isa in sorted(table)]
    assert releases == sorted(releases)


@pytest.mark.parametrize(
    ("text", "capability"),
    [("sm_90", (9, 0)), ("90", (9, 0)), ("9.0", (9, 0)), ("sm_100a", (10, 0)), ("sm_121", (12, 1))],
)
def test_gpu_names(text: str, capability: tuple[int, int]) -> None:
    assert parse_gpu(text) == capability


@pytest.mark.parametrize("text", ["volta", "sm_", "9.x", "0.5", ""])
def test_bad_gpu_names_are_usage_errors(text: str) -> None:
    with pytest.raises(UsageError, match="not a GPU architecture"):
        parse_gpu(text)
