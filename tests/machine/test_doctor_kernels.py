"""doctor: per GPU, whether the Python's CUDA packages carry kernels for it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cudaup.errors import EXIT_CODES
from cudaup.machine.doctor import examine
from cudaup.machine.sysroot import SystemRoot
from cudaup.machine.toolkits import Lookup
from tests import fakemachine as fm
from tests.helpers import run_cli

BINARIES = Path(__file__).parent.parent / "data" / "binaries"
#: a V100 and an H100, as nvidia-smi lists them
TWO_GPUS = (
    "590.48.01, Tesla V100-SXM2-32GB, 7.0, 32768 MiB\n"
    "590.48.01, NVIDIA H100 80GB HBM3, 9.0, 81559 MiB\n"
)


def installed(site: Path, project: str, files: dict[str, Path]) -> None:
    """A distribution as pip leaves it: its files and a RECORD that lists them."""
    dist_info = site / f"{project}-1.0.dist-info"
    fm.write(dist_info / "METADATA", f"Name: {project}\nVersion: 1.0\n")
    rows = [f"{dist_info.name}/METADATA,,"]
    for relative, source in files.items():
        (site / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, site / relative)
        rows.append(f"{relative},,")
    rows.append("../../../bin/outside,,")  # a RECORD row outside the site: never read
    fm.write(dist_info / "RECORD", "\n".join(rows) + "\n")


def test_each_gpu_names_the_packages_without_kernels(tmp_path: Path) -> None:
    site = fm.site_packages(tmp_path / "venv")
    installed(site, "turingkern", {"turingkern/k.cubin": BINARIES / "ptxas-12.9.86-sm_75.cubin"})
    installed(site, "hopperkern", {"hopperkern/k.cubin": BINARIES / "ptxas-12.9.86-sm_90a.cubin"})
    installed(site, "plain", {"plain/__init__.py": BINARIES / "ptxas-12.9.86-sm_75.cubin"})
    fm.script(tmp_path / "usr/bin/nvidia-smi", TWO_GPUS)
    fm.write(tmp_path / "sys/module/nvidia/version", "590.48.01\n")
    python = fm.fake_python(tmp_path / "venv/bin/python3", [site])
    lookup = Lookup(root=SystemRoot(tmp_path), env={"PATH": ""}, python=str(python),
                    store=tmp_path / "store", timeout=5)  # fmt: skip
    report = examine(lookup, nvml=lambda: None)
    volta, hopper = report.kernels
    assert volta.gpu.label == "GPU 0 Tesla V100-SXM2-32GB" and volta.gpu.capability == (7, 0)
    assert volta.covered == [] and [name for name, _ in volta.missing] == [
        "hopperkern",
        "turingkern",
    ]
    assert hopper.covered == ["hopperkern"] and [n for n, _ in hopper.missing] == ["turingkern"]
    errors = [p.message for p in report.problems if p.severity == "error"]
    assert any(
        m.startswith("turingkern in ")
        and "no kernels for GPU 1 NVIDIA H100 80GB HBM3 (sm_90)" in m
        and "it carries sm_75" in m
        for m in errors
    )
    assert sum("no kernels for GPU 0 Tesla V100" in m for m in errors) == 2
    assert report.to_json()["kernels"][1]["covered"] == ["hopperkern"]


def test_no_gpu_reads_no_binaries(tmp_path: Path) -> None:
    site = fm.site_packages(tmp_path / "venv")
    installed(site, "turingkern", {"turingkern/k.cubin": BINARIES / "ptxas-12.9.86-sm_75.cubin"})
    python = fm.fake_python(tmp_path / "venv/bin/python3", [site])
    lookup = Lookup(root=SystemRoot(tmp_path), env={"PATH": ""}, python=str(python),
                    store=tmp_path / "store", timeout=5)  # fmt: skip
    assert examine(lookup, nvml=lambda: None).kernels == []


def test_the_cli_says_it_per_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    site = fm.site_packages(tmp_path / "venv")
    installed(site, "turingkern", {"turingkern/k.cubin": BINARIES / "ptxas-12.9.86-sm_75.cubin"})
    fm.script(tmp_path / "usr/bin/nvidia-smi", TWO_GPUS)
    fm.write(tmp_path / "sys/module/nvidia/version", "590.48.01\n")
    python = fm.fake_python(tmp_path / "venv/bin/python3", [site])
    monkeypatch.setenv("CUDAUP_SYSTEM_ROOT", str(tmp_path))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    for name in ("CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH", "CONDA_PREFIX", "CPATH"):
        monkeypatch.delenv(name, raising=False)
    result = run_cli(capsys, "doctor", "--python", str(python))
    assert result.code == EXIT_CODES["problems-found"], result.err
    assert ("kernels   GPU 0 Tesla V100-SXM2-32GB: 0 CUDA package(s) carry kernels for it; "
            "none in turingkern") in result.out  # fmt: skip
    assert "kernels   GPU 1 NVIDIA H100 80GB HBM3: 0 CUDA package(s)" in result.out
    assert "error     turingkern in " in result.out
    document = run_cli(capsys, "--json", "doctor", "--python", str(python)).json()
    assert [k["sm"] for k in document["kernels"]] == ["sm_70", "sm_90"]
    assert document["kernels"][0]["missing"][0]["package"] == "turingkern"
