"""doctor on fake machines: facts found and problems flagged with their fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cudaup.core.compat import CompatTable
from cudaup.errors import EXIT_CODES
from cudaup.machine.doctor import Problem, Report, examine
from cudaup.machine.sysroot import SystemRoot
from cudaup.machine.toolkits import Lookup
from tests import fakemachine as fm
from tests.helpers import run_cli

T4_CSV = "570.124.06, Tesla V100-SXM2-32GB, 7.0, 32768 MiB\n"


def machine(
    root: Path,
    env: dict[str, str] | None = None,
    driver: str | None = "590.48.01",
    python: Path | None = None,
) -> Report:
    if driver:
        fm.write(root / "sys/module/nvidia/version", driver + "\n")
    lookup = Lookup(
        root=SystemRoot(root),
        env={"PATH": "", **(env or {})},
        python=str(python or root / "none"),
        store=root / "store",
        timeout=5,
    )
    return examine(lookup, nvml=lambda: None)


def messages(report: Report, severity: str | None = None) -> list[Problem]:
    return [p for p in report.problems if severity is None or p.severity == severity]


def test_healthy_machine_has_no_problems(tmp_path: Path) -> None:
    tree = fm.runfile_13_0(tmp_path)
    fm.link(tmp_path, "/usr/local/cuda", "/usr/local/cuda-13.0")
    report = machine(
        tmp_path,
        env={
            "CUDA_HOME": str(tree),
            "PATH": str(tree / "bin"),
            "LD_LIBRARY_PATH": str(tree / "lib64"),
        },
    )
    assert report.driver.version is not None and str(report.driver.version) == "590.48.01"
    assert (
        str(report.driver_cuda) == "13.1"
        and report.driver_cuda_source == "NVIDIA's toolkit driver table"
    )
    assert report.problems == []
    assert report.nvcc is not None and report.nvcc.startswith(str(tree / "bin/nvcc"))
    assert "(CUDA 13.0.2 or 13.0.3)" in report.nvcc


def test_driver_too_old_and_minor_version(tmp_path: Path) -> None:
    runfile = fm.runfile_13_0(tmp_path)
    deb = fm.deb_12_4_with_alternatives(tmp_path)
    report = machine(
        tmp_path, driver="545.23.08", env={"CUDA_HOME": str(deb), "PATH": str(runfile / "bin")}
    )
    errors = messages(report, "error")
    assert any("driver 545.23.08 is too old for CUDA 13.0.2 or 13.0.3" in p.message for p in errors)
    warnings = [p.message for p in messages(report, "warning")]
    assert any("CUDA 12.4.1" in m and "minor-version compatibility" in m for m in warnings)
    assert any(
        m.startswith("nvcc on PATH is CUDA 13.0.2 or 13.0.3") and "CUDA_HOME is CUDA 12.4.1" in m
        for m in warnings
    )
    assert all(p.fix for p in report.problems)


def test_dangling_link_and_mixed_library_path(tmp_path: Path) -> None:
    fm.link(tmp_path, "/usr/local/cuda", "/usr/local/cuda-11.8")
    a = fm.runfile_13_0(tmp_path)
    b = fm.toolkit_tree(tmp_path / "usr/local/cuda-12.8", nvcc="12.8.93", cudart="12.8.90")
    report = machine(tmp_path, env={"LD_LIBRARY_PATH": f"{a}/lib64:{b}/lib64:/usr/lib"})
    text = [p.message for p in report.problems]
    assert any("/usr/local/cuda is dangling: it points to /usr/local/cuda-11.8" in m for m in text)
    assert any(m.startswith("LD_LIBRARY_PATH mixes toolkits") for m in text)


def test_headers_and_libraries_from_different_toolkits(tmp_path: Path) -> None:
    mixed = fm.toolkit_tree(
        tmp_path / "usr/local/cuda-13.0", nvcc="13.0.88", cudart="13.0.96", header="12.8"
    )
    other = fm.toolkit_tree(tmp_path / "usr/local/cuda-12.8", nvcc="12.8.93", cudart="12.8.90")
    report = machine(
        tmp_path, env={"CPATH": f"{other}/include", "LD_LIBRARY_PATH": f"{mixed}/lib64"}
    )
    text = [p.message for p in messages(report, "error")]
    assert any("mixes headers from CUDA 12.8 with libcudart 13.0.96" in m for m in text)
    assert any(m.startswith("headers come from") for m in text)


def test_torch_built_for_a_cuda_the_driver_cannot_run(tmp_path: Path) -> None:
    site = fm.site_packages(tmp_path / "venv", torch=("2.11.0+cu130", "13.0"))
    python = fm.fake_python(tmp_path / "venv/bin/python3", [site])
    report = machine(tmp_path, driver="570.124.06", python=python)
    assert report.torch is not None and report.torch.cuda == "13.0"
    [problem] = messages(report, "error")
    assert (
        "torch 2.11.0+cu130 is built for CUDA 13.0, which driver 570.124.06 cannot run"
        in problem.message
    )
    assert "cudaup plan torch" in problem.fix
    cpu = fm.site_packages(tmp_path / "cpu", torch=("2.13.0+cpu", None))
    report = machine(
        tmp_path / "cpu",
        driver="570.124.06",
        python=fm.fake_python(tmp_path / "cpu/bin/python3", [cpu]),
    )
    assert (
        report.torch is not None and report.torch.cuda is None and messages(report, "error") == []
    )


def test_no_driver_is_an_answer(tmp_path: Path) -> None:
    report = machine(tmp_path, driver=None)
    assert report.driver.version is None
    [problem] = report.problems
    assert (
        problem.severity == "info"
        and "no NVIDIA driver found" in problem.message
        and "--driver" in problem.fix
    )


def test_gpu_the_toolkit_cannot_target(tmp_path: Path) -> None:
    assert CompatTable.load().architectures, "data/architectures.tsv must ship with cudaup"
    fm.script(tmp_path / "usr/bin/nvidia-smi", T4_CSV)
    tree = fm.runfile_13_0(tmp_path)
    report = machine(tmp_path, driver="570.124.06", env={"CUDA_HOME": str(tree)})
    assert [g.compute_capability for g in report.driver.gpus] == ["7.0"]
    assert any(
        "cannot compile for GPU 0 Tesla V100-SXM2-32GB (sm_70" in p.message for p in report.problems
    )


def test_cli_doctor_json_on_a_fake_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fm.deb_12_4_with_alternatives(tmp_path)
    fm.write(
        tmp_path / "proc/driver/nvidia/version",
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release Build  (dvs-builder@U16-I3-B03-4-3)  Sun Jul 27 06:54:38 UTC 2025\n",
    )
    monkeypatch.setenv("CUDAUP_SYSTEM_ROOT", str(tmp_path))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    for name in ("CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH", "CONDA_PREFIX", "CPATH"):
        monkeypatch.delenv(name, raising=False)
    result = run_cli(capsys, "doctor", "--json", "--python", str(tmp_path / "none"))
    assert result.code == 0, result.err
    document = json.loads(result.out)
    assert (
        document["schema"] == 1
        and document["driver"]["version"] == "580.65.06"
        and document["driver"]["source"] == "procfs"
    )
    [toolkit] = [t for t in document["toolkits"] if t["path"] == "/usr/local/cuda-12.4"]
    assert toolkit["identity"]["release"] == "12.4.1" and toolkit["link"]["alternatives"] is True
    human = run_cli(capsys, "doctor", "--python", str(tmp_path / "none"), "--driver", "535.104.05")
    assert "driver    535.104.05 (from override) · runs CUDA ≤ 12.2" in human.out
    # 535 runs 12.4 under minor-version compatibility: a warning, not a failure
    assert human.code == 0 and "warning" in human.out
    # 520 cannot run 12.4 at all: an error-level problem, so CI can gate on the exit code
    failing = run_cli(capsys, "doctor", "--python", str(tmp_path / "none"), "--driver", "520.61.05")
    assert failing.code == EXIT_CODES["problems-found"]
    assert any(line.startswith("error ") for line in failing.out.splitlines())
    gated = run_cli(
        capsys, "doctor", "--json", "--python", str(tmp_path / "none"), "--driver", "520.61.05"
    )
    assert gated.code == EXIT_CODES["problems-found"]
    assert any(p["severity"] == "error" for p in json.loads(gated.out)["problems"])
    assert (
        "toolkit   /usr/local/cuda-12.4: CUDA 12.4.1 · dpkg: cuda-toolkit-12-4 12.4.1-1"
        in human.out
    )


def test_doctor_on_this_machine(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_cli(capsys, "doctor", "--json")
    assert result.code == 0, result.err
    document = json.loads(result.out)
    assert "driver" in document and isinstance(document["toolkits"], list)
    if Path("/usr/local/cuda/bin/nvcc").exists():
        assert any(t["path"].startswith("/usr/local/cuda") for t in document["toolkits"])
