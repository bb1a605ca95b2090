"""doctor and NVIDIA's libraries beside the toolkit: each toolkit's libraries are listed, and
two builds of one library that one process would load (an environment's wheel and a toolkit's
copy on LD_LIBRARY_PATH: pytorch #188892's CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH) warn."""

from __future__ import annotations

from pathlib import Path

from tests import fakemachine as fm
from tests.machine.test_doctor import machine


def _toolkit_with_cudnn(root: Path, version: str) -> Path:
    tree = fm.toolkit_tree(
        root / "usr/local/cuda-13.0", nvcc="13.0.88", cudart="13.0.96",
        version_json={"cuda_nvcc": "13.0.88", "cuda_cudart": "13.0.96", "cudnn": version},
    )  # fmt: skip
    lib = tree / "lib64"
    (lib / f"libcudnn.so.{version}").write_bytes(b"\x7fELF")
    (lib / "libcudnn.so.9").symlink_to(f"libcudnn.so.{version}")
    return tree


def _environment_with_cudnn(root: Path, version: str) -> Path:
    site = fm.site_packages(root / "venv", torch=("2.14.1+cu130", "13.0"))
    (site / f"nvidia_cudnn_cu13-{version}.dist-info").mkdir()
    (site / "nvidia/cudnn/lib").mkdir(parents=True)
    (site / "nvidia/cudnn/lib/libcudnn.so.9").write_bytes(b"\x7fELF")
    return fm.fake_python(root / "venv/bin/python3", [site])


def test_two_cudnn_builds_in_one_process_warn_and_name_both(tmp_path: Path) -> None:
    toolkit = _toolkit_with_cudnn(tmp_path, "9.27.0.42")
    python = _environment_with_cudnn(tmp_path, "9.28.1.4")
    report = machine(tmp_path, env={"LD_LIBRARY_PATH": f"{toolkit}/lib64"}, python=python)
    listed = {t.real: t.libraries for t in report.toolkits}
    assert listed[toolkit] == {"cudnn": "9.27.0.42"}
    assert report.python_libraries["cudnn"][:2] == ("nvidia-cudnn-cu13", "9.28.1.4")
    [problem] = [p for p in report.problems if "two cuDNN builds" in p.message]
    assert problem.severity == "warning"
    assert "nvidia-cudnn-cu13 9.28.1.4" in problem.message
    assert "cuDNN 9.27.0.42 of /usr/local/cuda-13.0" in problem.message
    assert "--components cudnn==9.28.1.4" in problem.fix
    [shown] = [t for t in report.to_json()["toolkits"] if t["path"] == "/usr/local/cuda-13.0"]
    assert shown["libraries"] == {"cudnn": "9.27.0.42"}


def test_the_same_build_or_no_path_entry_is_no_problem(tmp_path: Path) -> None:
    toolkit = _toolkit_with_cudnn(tmp_path, "9.28.1.4")
    python = _environment_with_cudnn(tmp_path, "9.28.1.4")
    same = machine(tmp_path, env={"LD_LIBRARY_PATH": f"{toolkit}/lib64"}, python=python)
    assert not [p for p in same.problems if "cuDNN" in p.message]
    apart = machine(tmp_path, env={}, python=python)
    assert not [p for p in apart.problems if "cuDNN" in p.message]


def test_a_loose_copy_on_the_path_warns_with_its_file(tmp_path: Path) -> None:
    loose = tmp_path / "usr/lib/extra"
    loose.mkdir(parents=True)
    (loose / "libcudnn.so.9").write_bytes(b"\x7fELF")
    python = _environment_with_cudnn(tmp_path, "9.28.1.4")
    report = machine(tmp_path, env={"LD_LIBRARY_PATH": str(loose)}, python=python)
    [problem] = [p for p in report.problems if "two cuDNN builds" in p.message]
    assert f"libcudnn.so.9 in {loose}" in problem.message
