"""``cudaup plan`` against the live PyPI, with exact pins so that the truth does not move.

Each case names the metadata that proves its answer (read from PyPI's files,
Python 3.12, linux-x86_64 unless said otherwise).  PyTorch's, FlashInfer's,
SGLang's and vLLM's own indexes cannot be reached from the test machines, so
every case says ``--index pypi``.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from cudaup.errors import EXIT_CODES
from tests.helpers import CliResult, run_cli

pytestmark = pytest.mark.pypi
X86 = ("--python", "3.12", "--platform", "linux-x86_64", "--index", "pypi")


def _plan(capsys: pytest.CaptureFixture[str], *argv: str) -> CliResult:
    return run_cli(capsys, "plan", *argv, "--json")


def test_vllm_takes_its_line_from_torch(capsys: pytest.CaptureFixture[str]) -> None:
    """vllm 0.33.0 requires ``torch==2.14.0``; torch 2.14.0 requires
    ``cuda-toolkit[cublas,…]==13.0.3``: the line is 13.0 and the release 13.0.3, though
    vllm names no CUDA package itself."""
    result = _plan(capsys, "vllm==0.33.0", "--driver", "590.48.01", *X86)
    assert result.code == 0, result.err
    document = result.json()
    assert document["cuda_line"] == "13.0" and document["release"] == "13.0.3"
    (vllm,) = document["packages"]
    assert vllm["chain"][:2] == ["vllm 0.33.0", "torch 2.14.0"]
    assert vllm["chain"][-1].startswith("cuda-toolkit 13.0.3")
    assert document["pip"] == "pip install vllm==0.33.0"


def test_an_older_torch_for_an_older_driver(capsys: pytest.CaptureFixture[str]) -> None:
    """Driver 570.124.06 is below CUDA 13's floor (580.65.06).  torch 2.11.0 to 2.15.0 are
    CUDA 13 builds (``cuda-toolkit==13.0.2``/``13.0.3``/``13.2.2``, 2.12.x ``nvidia-cublas``
    13.1); torch 2.10.0 requires ``nvidia-cuda-runtime-cu12==12.8.90``: the resolver finds
    2.10.0 on the 12.8 line."""
    result = _plan(capsys, "torch<2.16", "--driver", "570.124.06", *X86)
    assert result.code == 0, result.err
    document = result.json()
    assert document["cuda_line"] == "12.8" and document["packages"][0]["version"] == "2.10.0"
    driver = [e for e in document["excluded"] if e["kind"] == "driver"]
    assert driver and all("needs a driver ≥ 580.65.06" in e["message"] for e in driver)


def test_jax_keeps_its_cuda_extra(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """jax 0.12.0.1's ``cuda13`` extra requires ``jax-cuda13-plugin[with-cuda]==0.12.0.1``
    (plain jax pulls no plugin): the plan keeps the extra in every command and the lock."""
    lock = tmp_path / "pylock.toml"
    result = _plan(
        capsys, "jax[cuda13]==0.12.0.1", "--driver", "590.48.01", *X86, "--export", str(lock)
    )
    assert result.code == 0, result.err
    document = result.json()
    assert document["cuda_line"].startswith("13.")
    assert document["pip"] == "pip install 'jax[cuda13]==0.12.0.1'"
    names = {p["name"] for p in tomllib.loads(lock.read_text())["packages"]}
    assert {"jax", "jaxlib", "jax-cuda13-plugin", "jax-cuda13-pjrt"} <= names


def test_a_range_in_an_extra_refuses_an_old_driver(capsys: pytest.CaptureFixture[str]) -> None:
    """onnxruntime-gpu 1.31.1's ``cuda`` extra requires ``nvidia-cuda-runtime~=13.0``: a
    CUDA 13 build, which driver 570.124.06 cannot run."""
    result = _plan(capsys, "onnxruntime-gpu[cuda]==1.31.1", "--driver", "570.124.06", *X86)
    assert result.code == 13
    error = result.json()["error"]
    assert "onnxruntime-gpu[cuda]==1.31.1 resolves on 13." in error["message"]
    assert "driver 570.124.06 cannot run" in error["message"]


def test_a_silent_wheel_links_cuda_12(capsys: pytest.CaptureFixture[str]) -> None:
    """sgl-kernel 0.3.21's PyPI wheel names no dependency at all; its extension modules
    link ``libnvrtc.so.12``: a CUDA 12 build, on no 13.x line."""
    result = _plan(capsys, "sgl-kernel==0.3.21", "--driver", "590.48.01", *X86)
    assert result.code == 0, result.err
    document = result.json()
    assert document["cuda_line"].startswith("12.")
    (kernel,) = document["packages"]
    assert kernel["cuda"] == "CUDA 12.x" and ".so.12" in kernel["evidence"]
    assert any(e["kind"] == "inconsistent" and e["line"] == "13.0" for e in document["excluded"])


def test_a_cpu_only_build_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    """PyPI's aarch64 torch 2.9.1 wheel: its nvidia-* requirements carry
    ``platform_machine == "x86_64"`` and its libraries link no CUDA runtime."""
    result = run_cli(
        capsys, "plan", "torch==2.9.1", "--driver", "590.48.01", "--python", "3.12",
        "--platform", "linux-sbsa", "--index", "pypi",
    )  # fmt: skip
    assert result.code == 13 and "CPU-only build" in result.err


def test_what_pypi_does_not_have(capsys: pytest.CaptureFixture[str]) -> None:
    missing = _plan(capsys, "cudaup-no-such-project-0f3a", "--driver", "590.48.01", *X86)
    assert (
        missing.code == EXIT_CODES["package-not-found"]
        and missing.json()["error"]["kind"] == "package-not-found"
    )
    version = _plan(capsys, "torch==9.9.9", "--driver", "590.48.01", *X86)
    assert (
        version.code == EXIT_CODES["package-not-found"]
        and "matches no version" in version.json()["error"]["message"]
    )
