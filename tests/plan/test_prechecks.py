"""The lines a plan excludes before any resolution (``plan/prechecks.py``), on the shipped
compatibility table: the driver, the GPUs, a per-line index, an extra.  The planner's
tests (``test_planner.py``) see the same exclusions through whole plans."""

from __future__ import annotations

from packaging.requirements import Requirement

from cudaup.core.compat import CompatTable
from cudaup.core.driver import DriverVersion, GpuInfo
from cudaup.core.platforms import parse_platform
from cudaup.plan.indexes import Index
from cudaup.plan.prechecks import precheck
from cudaup.plan.result import Exclusion, PlanTarget
from cudaup.plan.survey import Page

TABLE = CompatTable.load()
RELEASES_13_0 = ["13.0.2", "13.0.1", "13.0.0"]
PYTORCH = Index(
    "pytorch",
    {"cu130": "https://download.pytorch.org/whl/cu130", "cu128": "https://x/whl/cu128"},
    ("torch",),
    only=("torch",),
)


def target(driver: str | None = "590.48.01", *gpus: tuple[str, str]) -> PlanTarget:
    return PlanTarget(
        (3, 12),
        parse_platform("linux-x86_64"),
        DriverVersion.from_text(driver) if driver else None,
        None,
        tuple(GpuInfo(i, name, cc, None) for i, (name, cc) in enumerate(gpus)),
    )


def check(
    requests: list[str],
    on: PlanTarget,
    line: tuple[int, int] = (13, 0),
    pages: dict[tuple[str, str, str], Page] | None = None,
) -> Exclusion | None:
    return precheck(
        line,
        RELEASES_13_0 if line == (13, 0) else ["12.8.1", "12.8.0"],
        TABLE,
        on,
        [Requirement(r) for r in requests],
        [PYTORCH],
        pages or {},
    )


def torch_page(tag: str, files: tuple[()] | None) -> dict[tuple[str, str, str], Page]:
    return {
        ("pytorch", tag, "torch"): Page("pytorch", tag, f"https://x/{tag}/torch/", "torch", files)
    }


def test_a_line_every_check_accepts_is_not_excluded() -> None:
    assert check(["vllm"], target("590.48.01", ("NVIDIA H100", "9.0"))) is None


def test_a_driver_older_than_every_release_of_the_line_excludes_it() -> None:
    excluded = check(["vllm"], target("535.54.03"))
    assert excluded is not None
    assert (excluded.line, excluded.kind) == ((13, 0), "driver")
    assert excluded.message.startswith("driver 535.54.03 cannot run CUDA 13.0.2: ")
    # 535 runs 12.8 under minor-version compatibility: weighed later, not excluded here
    assert check(["vllm"], target("535.54.03"), line=(12, 8)) is None
    assert check(["vllm"], target("470.82.01"), line=(12, 8)) is not None
    assert check(["vllm"], target(None)) is None  # no driver given: nothing to refuse


def test_a_gpu_the_newest_release_cannot_target_excludes_the_line() -> None:
    volta = target("590.48.01", ("NVIDIA H100", "9.0"), ("Tesla V100", "7.0"))
    excluded = check(["vllm"], volta)
    assert excluded is not None
    assert excluded.kind == "gpu"
    assert excluded.message == "cannot target GPU Tesla V100 (compute capability 7.0)"
    assert check(["vllm"], volta, line=(12, 8)) is None  # 12.9 is Volta's last line


def test_a_project_only_a_per_line_index_publishes_needs_its_build_for_the_line() -> None:
    on = target()
    excluded = check(["torch"], on, pages=torch_page("cu130", None))  # the index has no page
    assert excluded is not None
    assert (excluded.kind, excluded.message) == ("index", "torch: pytorch publishes no cu130 build")
    assert excluded.packages == ("torch",)
    assert check(["torch"], on, pages=torch_page("cu130", ())) is None  # the page exists
    lacking = check(["Torch"], on, line=(12, 6))  # no cu126 URL in the table at all
    assert lacking is not None
    assert lacking.message == "Torch: pytorch publishes no cu126 build"
    assert check(["vllm"], on) is None  # a project the index does not serve alone


def test_an_extra_that_names_another_major_excludes_the_line() -> None:
    excluded = check(["flashinfer-python[cu12]"], target())
    assert excluded is not None
    assert excluded.kind == "major"
    assert excluded.message == (
        "flashinfer-python[cu12] asks for CUDA 12: its extra cu12 names that major"
    )
    assert check(["flashinfer-python[cu12]"], target(), line=(12, 8)) is None


def test_the_driver_is_named_before_the_gpus_and_the_index() -> None:
    everything_wrong = target("535.54.03", ("Tesla V100", "7.0"))
    excluded = check(["torch", "flashinfer-python[cu12]"], everything_wrong)
    assert excluded is not None
    assert excluded.kind == "driver"
    excluded = check(["torch", "flashinfer-python[cu12]"], target("590.48.01", ("V100", "7.0")))
    assert excluded is not None
    assert excluded.kind == "gpu"
