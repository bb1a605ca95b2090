"""``upgrade``'s kernels step: a change that leaves a GPU without kernels is refused (exit 20)
and undone; the GPUs are ``--gpu``'s here, as on a machine without one."""

from __future__ import annotations

from pathlib import Path

import pytest

from cudaup.errors import EXIT_CODES
from tests.plan.pyindex import IndexServer
from tests.upgrade.conftest import point_at
from tests.upgrade.world import make_environment, tree_state, upgrade, wheel

BINARIES = Path(__file__).parent.parent / "data" / "binaries"
VOLTA = (BINARIES / "ptxas-12.9.86-sm_70.cubin").read_bytes()
TURING = (BINARIES / "ptxas-12.9.86-sm_75.cubin").read_bytes()


def cupy(name: str, version: str, runtime: int, kernels: bytes) -> tuple[str, bytes]:
    """A CuPy build whose kernels are a real cubin (CuPy 14's CUDA 13 build drops sm_70)."""
    files: dict[str, str | bytes] = {
        "cupy/__init__.py": "from cupy import cuda\n",
        "cupy/cuda/__init__.py": "from cupy.cuda import runtime\n",
        "cupy/cuda/runtime.py": f"def runtimeGetVersion():\n    return {runtime}\n",
        "cupy/_core/kernels.cubin": kernels,
    }
    return wheel(name, version, ("fastlock>=1.0",), files=files)


@pytest.fixture
def kernel_world(
    index_server: IndexServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> IndexServer:
    pypi = "pypi"
    index_server.root(pypi)
    for version in ("12.8.1", "13.0.2"):
        index_server.add(pypi, *wheel("cuda-toolkit", version, files={}))
    index_server.add(pypi, *wheel("nvidia-cuda-runtime-cu12", "12.8.90", files={
        "nvidia/cuda_runtime/__init__.py": "version = '12.8.90'\n"}))  # fmt: skip
    index_server.add(pypi, *wheel("nvidia-cuda-runtime", "13.0.96", files={
        "nvidia/cu13/__init__.py": "version = '13.0.96'\n"}))  # fmt: skip
    index_server.add(pypi, *wheel("fastlock", "1.0"))
    index_server.add(pypi, *cupy("cupy-cuda12x", "13.4.1", 12080, VOLTA))
    index_server.add(pypi, *cupy("cupy-cuda13x", "14.0.0", 13000, TURING))
    point_at(index_server, monkeypatch, tmp_path)
    return index_server


@pytest.fixture
def volta_env(kernel_world: IndexServer, tmp_path: Path, uv_cache: Path) -> Path:
    packages = ["cupy-cuda12x==13.4.1", "nvidia-cuda-runtime-cu12==12.8.90", "fastlock==1.0"]
    return make_environment(kernel_world, tmp_path / "venv", packages, uv_cache)


def test_an_upgrade_that_drops_a_gpu_is_refused_and_undone(
    volta_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = volta_env.parent.parent
    before = tree_state(root)
    result = upgrade(capsys, volta_env, "13.0", "--yes", "--json", "--no-toolkit",
                     "--gpu", "sm_70,sm_75")  # fmt: skip
    assert result.code == EXIT_CODES["gpu-unsupported"] == 20, result.err
    error = result.json()["error"]
    assert error["kind"] == "gpu-unsupported"
    assert error["message"] == (
        "the upgrade leaves sm_70 without kernels: the new cupy-cuda13x has no kernel for "
        "sm_70: it carries sm_75"
    )
    assert tree_state(root) == before  # nothing of the upgrade stayed


def test_the_step_passes_for_gpus_the_new_build_covers_and_skips_without_any(
    volta_env: Path, tmp_path: Path, kernel_world: IndexServer, uv_cache: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    result = upgrade(capsys, volta_env, "13.0", "--yes", "--json", "--no-toolkit",
                     "--gpu", "7.5")  # fmt: skip
    assert result.code == 0, result.err
    steps = {c["step"]: c for c in result.json()["verification"]}
    assert steps["kernels"]["status"] == "ok"
    assert "1 changed CUDA package(s) carry kernels for 7.5" in steps["kernels"]["detail"]
    packages = ["cupy-cuda12x==13.4.1", "nvidia-cuda-runtime-cu12==12.8.90", "fastlock==1.0"]
    other = make_environment(kernel_world, tmp_path / "other", packages, uv_cache)
    plain = upgrade(capsys, other, "13.0", "--yes", "--json", "--no-toolkit")
    assert plain.code == 0, plain.err
    steps = {c["step"]: c for c in plain.json()["verification"]}
    assert steps["kernels"]["status"] == "skipped"
    assert "no GPU found and no --gpu given" in steps["kernels"]["detail"]


def test_a_bad_gpu_name_is_a_usage_error(
    volta_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = upgrade(capsys, volta_env, "13.0", "--dry-run", "--gpu", "volta")
    assert result.code == EXIT_CODES["usage"]
    assert "not a GPU architecture: 'volta'" in result.err
