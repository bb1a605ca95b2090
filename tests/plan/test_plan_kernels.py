"""``plan --gpu``: the planned wheels, as published, read for kernels by range requests."""

from __future__ import annotations

from pathlib import Path

import pytest

from cudaup.errors import EXIT_CODES
from tests.helpers import run_cli
from tests.plan.builders import wheel
from tests.plan.pyindex import IndexServer
from tests.plan.world import build

BINARIES = Path(__file__).parent.parent / "data" / "binaries"
TARGET = ("--driver", "590.48.01", "--python", "3.12", "--platform", "linux-x86_64")


@pytest.fixture
def world(index_server: IndexServer, monkeypatch: pytest.MonkeyPatch) -> IndexServer:
    build(index_server)
    kernels = {"kernpack/_k.cubin": (BINARIES / "ptxas-12.9.86-sm_75.cubin").read_bytes()}
    index_server.add("pypi", *wheel("kernpack", "1.0", ["nvidia-cuda-runtime==13.0.96"],
                                    shared=kernels))  # fmt: skip
    monkeypatch.setenv("CUDAUP_PYPI_URL", index_server.url("pypi"))
    return index_server


def test_plan_reads_the_published_wheels_for_each_gpu(
    world: IndexServer, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run_cli(capsys, "--json", "plan", "kernpack", "--index", "pypi", *TARGET,
                     "--gpu", "sm_70,sm_75")  # fmt: skip
    assert result.code == EXIT_CODES["gpu-unsupported"], result.err
    kernels = {(k["package"], k["status"]): k for k in result.json()["kernels"]}
    assert (
        kernels[("kernpack", "missing")]["detail"] == "sm_70: no kernel for sm_70: it carries sm_75"
    )
    covered = kernels[("kernpack", "covered")]
    assert (
        covered["detail"]
        == "kernpack-1.0-cp312-cp312-manylinux_2_28_x86_64.whl carries kernels for sm_75"
    )
    assert covered["bytes_read"] > 0
    # the runtime wheel has no device code: not judged; no --gpu reads nothing
    assert {k["package"] for k in result.json()["kernels"]} == {"kernpack"}
    text = run_cli(capsys, "plan", "kernpack", "--index", "pypi", *TARGET, "--gpu", "sm_75")
    assert text.code == 0, text.err
    assert "kernels kernpack: covered: kernpack-1.0-" in text.out
    plain = run_cli(capsys, "--json", "plan", "kernpack", "--index", "pypi", *TARGET)
    assert plain.code == 0 and "kernels" not in plain.json()


def test_what_could_not_be_read_is_named_never_covered(
    world: IndexServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("cudaup.plan.kernels.MAX_WHEEL", 1024)  # the budget, made small
    result = run_cli(capsys, "--json", "plan", "kernpack", "--index", "pypi", *TARGET,
                     "--gpu", "sm_75")  # fmt: skip
    assert result.code == 0, result.err  # nothing read lacks kernels; nothing is "covered"
    statuses = {k["package"]: (k["status"], k["detail"]) for k in result.json()["kernels"]}
    status, detail = statuses["kernpack"]
    assert status == "not-read" and "more than --gpu reads" in detail
