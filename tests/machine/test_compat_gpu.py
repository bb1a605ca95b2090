"""``compat RELEASE --gpu``: which GPUs a release's nvcc compiles for (data/architectures.tsv)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from cudaup.errors import EXIT_CODES
from tests.helpers import run_cli


def test_cuda_13_cannot_compile_for_volta(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_cli(capsys, "--offline", "compat", "13.0", "--gpu", "sm_70,sm_75,sm_99")
    assert result.code == EXIT_CODES["gpu-unsupported"] == 20
    assert ("sm_70              CUDA 13.0.3 cannot compile for sm_70: the last CUDA that "
            "compiles for sm_70 (Volta) is 12.9") in result.out  # fmt: skip
    assert "sm_75              CUDA 13.0.3 compiles for sm_75 (Turing)" in result.out
    assert "cudaup's architecture table has no sm_99" in result.out  # unknown, not "yes"
    document = run_cli(capsys, "--offline", "--json", "compat", "13.0", "--gpu", "7.0").json()
    assert document["gpus"] == [{
        "gpu": "7.0", "sm": "sm_70", "verdict": "no",
        "reason": "CUDA 13.0.3 cannot compile for sm_70: the last CUDA that compiles for sm_70 "
                  "(Volta) is 12.9",
    }]  # fmt: skip


def test_older_releases_and_newer_gpus(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(capsys, "--offline", "compat", "12.8", "--gpu", "sm_70").code == 0
    result = run_cli(capsys, "--offline", "compat", "12.6", "--gpu", "sm_120")
    assert (
        result.code == 20
        and "compiles for sm_120 (Blackwell (RTX 50 / RTX PRO)) from 12.8" in result.out
    )


def test_gpu_needs_a_release_and_a_real_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(capsys, "--offline", "compat", "--gpu", "sm_70").code == EXIT_CODES["usage"]
    bad = run_cli(capsys, "--offline", "compat", "13.0", "--gpu", "volta")
    assert bad.code == EXIT_CODES["usage"] and "not a GPU architecture" in bad.err


@pytest.mark.pypi
def test_the_facts_are_what_the_toolkits_own_nvcc_lists(
    pypi_toolkit: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    listed = subprocess.run(
        [str(pypi_toolkit / "bin" / "nvcc"), "--list-gpu-code"],
        capture_output=True, text=True, check=True, timeout=120,
    ).stdout.split()  # fmt: skip
    document = run_cli(capsys, "--offline", "--json", "compat", "13.0.2").json()
    assert {t["sm"] for t in document["targets"]} == set(listed)
    assert "sm_70" not in listed  # what `compat 13.0 --gpu sm_70` says, from nvcc itself
