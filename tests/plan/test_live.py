"""``cudaup plan`` against the live PyPI, with exact pins so that the truth does not move.

Each case names the metadata that proves its answer (read from PyPI's files,
Python 3.12, linux-x86_64 unless said otherwise).  PyTorch's, FlashInfer's,
SGLang's and vLLM's own indexes cannot be reached from the test machines, so
every case says ``--index pypi``.
"""

from __future__ import annotations

import re
import tempfile
import tomllib
from pathlib import Path
from typing import Any

import pytest

from cudaup.errors import EXIT_CODES
from tests.helpers import CliResult, run_cli
from tests.plan.installcheck import printed_resolution

pytestmark = pytest.mark.pypi
X86 = ("--python", "3.12", "--platform", "linux-x86_64", "--index", "pypi")


def _plan(capsys: pytest.CaptureFixture[str], *argv: str) -> CliResult:
    result = run_cli(capsys, "plan", *argv, "--json")
    if result.code == 0:
        _installs_the_plan(result.json(), argv)
    return result


def _installs_the_plan(document: dict[str, Any], argv: tuple[str, ...]) -> None:
    """uv's resolution of the printed ``uv pip install`` line, as printed, is the closure."""
    python = argv[argv.index("--python") + 1]
    platform = argv[argv.index("--platform") + 1]
    with tempfile.TemporaryDirectory(prefix="cudaup-printed-") as cache:
        printed = printed_resolution(document["uv"], python, platform, Path(cache))
    assert printed == {p["name"]: p["version"] for p in document["closure"]}, document["uv"]
    assert document["install_checked"]


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
    driver = {e["line"]: e["message"] for e in document["excluded"] if e["kind"] == "driver"}
    thirteen = [m for line, m in driver.items() if line.startswith("13.")]
    assert thirteen and all("needs a driver ≥ 580.65.06" in m for m in thirteen)
    # 570.124.06 runs 12.9 only under minor-version compatibility and 12.8 fully: 12.8 wins.
    assert driver["12.9"].startswith("driver 570.124.06 runs it only under minor-version")


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
    # The printed line installs the plan: the runtime pins of the line it chose ride along.
    assert document["pip"].startswith("pip install 'jax[cuda13]==0.12.0.1'")
    closure = {p["name"]: p["version"] for p in document["closure"]}
    for pin in document["pip"].split()[3:]:
        name, version = pin.split("==")
        assert closure[name] == version, pin
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


def test_a_library_bundled_in_the_wheel_that_loads_cublas_12(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ctranslate2 4.8.5 names no CUDA dependency and its extension module links no CUDA
    runtime; the library auditwheel bundled beside it (``ctranslate2.libs/
    libctranslate2-a7a60d30.so.4.8.5``, 80 MB: ``.nv_fatbin`` kernels, the runtime linked
    in) dlopens ``libcublas.so.12`` (a string in its ``.rodata``): a CUDA 12 build, on no
    13.x line.  Read from the wheel with readelf and strings."""
    result = _plan(capsys, "ctranslate2==4.8.5", "--driver", "590.48.01", *X86)
    assert result.code == 0, result.err
    document = result.json()
    assert document["cuda_line"].startswith("12.")
    (package,) = document["packages"]
    assert package["cuda"] == "CUDA 12.x"
    assert package["evidence"] == "loads libcublas.so.12 by name"


def test_a_meta_packages_child_bundles_a_library_that_loads_cublas(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """faster-whisper 1.2.1 is pure Python; of what it pulls in, only ctranslate2
    (``>=4.0,<5``, left to the resolution here: pinning it would make it a request) is a
    CUDA build, and says so only in the library auditwheel bundled (the case above).
    Its line is ctranslate2's, never "constrains nothing"."""
    result = _plan(capsys, "faster-whisper==1.2.1", "--driver", "590.48.01", *X86)
    assert result.code == 0, result.err
    document = result.json()
    (package,) = document["packages"]
    assert package["chain"][1].startswith("ctranslate2 ") and package["constrains"]
    assert re.fullmatch(r"loads libcublas\.so\.1\d by name", package["evidence"])
    major = package["evidence"].split(".so.")[1].split(" ")[0]
    assert package["cuda"] == f"CUDA {major}.x" and document["cuda_line"].startswith(major + ".")


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


def test_triton_is_a_gpu_build_that_sets_no_line(capsys: pytest.CaptureFixture[str]) -> None:
    """triton-3.3.0-cp312-…x86_64.whl requires no CUDA package and links no libcudart, but
    ships ``triton/backends/nvidia/bin/ptxas``, ``cuobjdump``, ``nvdisasm`` and
    ``include/cuda.h``; torch 2.7.0 and xformers 0.0.30 require
    ``nvidia-cuda-nvrtc-cu12==12.6.77``: 12.6, whose newest release is 12.6.3, which
    driver 550.54.15 runs under minor-version compatibility."""
    result = _plan(
        capsys, "torch==2.7.0", "xformers==0.0.30", "triton==3.3.0", "--driver", "550.54.15", *X86
    )
    assert result.code == 0, result.err
    document = result.json()
    assert (document["cuda_line"], document["release"]) == ("12.6", "12.6.3")
    triton = next(p for p in document["packages"] if p["name"] == "triton")
    assert triton["cuda"] == "any CUDA line" and "bin/ptxas" in triton["evidence"]


def test_paddle_declares_its_line(capsys: pytest.CaptureFixture[str]) -> None:
    """paddlepaddle_gpu-2.6.2-cp312-…whl names no CUDA package; its
    ``paddle/version/__init__.py`` says ``cuda_version = '11.8'`` (``cudnn_version =
    '8.6.0'``)."""
    result = _plan(capsys, "paddlepaddle-gpu==2.6.2", "--driver", "590.48.01", *X86)
    assert result.code == 0, result.err
    document = result.json()
    assert document["cuda_line"] == "11.8"
    (paddle,) = document["packages"]
    assert paddle["evidence"].startswith("paddle/version/__init__.py says cuda_version")


def test_mxnet_is_named_for_its_line(capsys: pytest.CaptureFixture[str]) -> None:
    """mxnet_cu112-1.9.1-py3-none-manylinux2014_x86_64.whl: the name says cu112, and
    ``libmxnet.so`` (891 MB) needs ``libcudart.so.11.0``.  The release lists these
    machines read (PyPI's ``cuda-toolkit`` versions) hold no 11.2 release, so no line
    fits, and the error says why."""
    result = _plan(capsys, "mxnet-cu112==1.9.1", "--driver", "590.48.01", *X86)
    assert result.code == 13
    assert "CUDA 11.2 (the name mxnet-cu112)" in result.json()["error"]["message"]


def test_cuda_python_is_a_12_build(capsys: pytest.CaptureFixture[str]) -> None:
    """cuda_python-12.8.0-py3-none-any.whl is a meta-package requiring
    ``cuda-bindings~=12.8.0``; cuda-bindings 12.8.0 links no CUDA runtime but its
    ``cuda/bindings/_bindings/cynvrtc…so`` names ``libnvrtc.so.12`` (and
    ``_lib/cyruntime/cyruntime…so`` ``libcudart.so.12``), which it dlopens: a 12.x line."""
    result = _plan(capsys, "cuda-python==12.8.0", "--driver", "590.48.01", *X86)
    assert result.code == 0, result.err
    document = result.json()
    assert document["cuda_line"].startswith("12.")
    (package,) = document["packages"]
    assert package["chain"] == ["cuda-python 12.8.0", "cuda-bindings 12.8.0"]
    assert package["evidence"] == "loads libnvrtc.so.12 by name"


def test_a_dependency_backtracked_to_cuda_12_is_asked_for_newer(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """flashinfer-python 0.7.4 requires ``cuda-python>=12.0``.  Beside torch 2.14.1 on 13.0,
    uv took cuda-python 12.6.2.post1 (no dependencies; it loads libnvrtc.so.12), having
    settled cuda-bindings first; excluding the 12.x builds one at a time led it to 12.6.0
    and 12.5.0 and the line was given up (2026-12-06).  Asked for a cuda-python newer than
    12.6.2.post1, uv takes a 13.x, whose cuda-bindings loads libnvrtc.so.13."""
    argv = ("torch==2.14.1", "flashinfer-python==0.7.4", "--driver", "590.48.01", *X86)
    result = _plan(capsys, *argv)
    assert result.code == 0, result.err
    document = result.json()
    assert document["cuda_line"] == "13.0"
    closure = {p["name"]: p["version"] for p in document["closure"]}
    assert closure["cuda-python"].startswith("13.") and closure["cuda-bindings"].startswith("13.")


def test_a_line_that_holds_sglang_back_is_passed_over(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """sglang 0.5.23 requires ``torch==2.14.1`` (13.0); PyPI has no 13.1 torch.  On 13.1,
    the newest line driver 590.48.01 runs fully, sglang resolved only as 0.5.2, which
    requires no torch at all (2026-12-06): that line is passed over for 13.0's 0.5.23."""
    result = _plan(capsys, "sglang<=0.5.23", "--driver", "590.48.01", *X86)
    assert result.code == 0, result.err
    document = result.json()
    assert document["cuda_line"] == "13.0"
    assert document["packages"][0]["version"] == "0.5.23"
    (passed,) = [e for e in document["excluded"] if e["line"] == "13.1"]
    assert passed["kind"] == "held-back" and passed["packages"] == ["sglang"]


def test_vllm_beside_flashinfer_keeps_its_line(capsys: pytest.CaptureFixture[str]) -> None:
    """vllm 0.33.0 requires ``flashinfer-python==0.7.2.post1`` and ``torch==2.14.0`` (13.0).
    uv took flashinfer-python 0.7.4, then vllm 0.2.2, a CUDA 12 build that pins neither;
    0.2.2 and the two older builds read with it were excluded one by one and 13.0 was given
    up for 12.8 and vllm 0.19.1 (2026-12-06).  Asked for a vllm newer than 0.2.2, uv takes
    0.33.0 and the flashinfer it pins."""
    argv = ("vllm<=0.33.0", "flashinfer-python<=0.7.4", "--driver", "590.48.01", *X86)
    result = _plan(capsys, *argv)
    assert result.code == 0, result.err
    document = result.json()
    assert document["cuda_line"] == "13.0"
    versions = [p["version"] for p in document["packages"]]
    assert versions == ["0.33.0", "0.7.2.post1"]


def test_bitsandbytes_supports_each_runtime_it_ships(capsys: pytest.CaptureFixture[str]) -> None:
    """bitsandbytes-0.45.5-py3-none-manylinux_2_24_x86_64.whl ships
    ``libbitsandbytes_cuda117.so`` … ``_cuda126.so`` and ``_cuda128.so`` (linking
    ``libcudart.so.11.0`` and ``libcudart.so.12``); torch 2.10.0 requires
    ``nvidia-cuda-runtime-cu12==12.8.90``: 12.8, which bitsandbytes supports."""
    result = _plan(capsys, "bitsandbytes==0.45.5", "torch==2.10.0", "--driver", "590.48.01", *X86)
    assert result.code == 0, result.err
    assert result.json()["cuda_line"] == "12.8"
    # Alone, its ``torch`` requirement floats: 13.x torch builds resolve, but bitsandbytes
    # ships no CUDA 13 library, so those lines are excluded and 12.8 (torch 2.10.0) is it.
    alone = _plan(capsys, "bitsandbytes==0.45.5", "--driver", "590.48.01", *X86).json()
    assert alone["cuda_line"] == "12.8"
    inconsistent = [e for e in alone["excluded"] if e["kind"] == "inconsistent"]
    assert inconsistent and all("one object per CUDA runtime" in e["message"] for e in inconsistent)


def test_yanked_exact_pins_are_planned(capsys: pytest.CaptureFixture[str]) -> None:
    """PEP 592: nvidia_cudnn_cu13-9.25.0.15-…whl and cuda_python-12.6.1-cp312-…whl are
    yanked (cuda-python's reason: https://github.com/NVIDIA/cuda-python/issues/215), and an
    exact pin selects them (uv resolves both)."""
    cudnn = _plan(capsys, "nvidia-cudnn-cu13==9.25.0.15", "--driver", "590.48.01", *X86)
    assert cudnn.code == 0, cudnn.err
    document = cudnn.json()
    assert document["cuda_line"].startswith("13.")
    assert document["packages"][0]["yanked"] == "no reason given"
    python = _plan(capsys, "cuda-python==12.6.1", "--driver", "590.48.01", *X86)
    assert python.code == 0, python.err
    (package,) = python.json()["packages"]
    assert package["yanked"] == "https://github.com/NVIDIA/cuda-python/issues/215"
    assert any("cuda-python 12.6.1 is yanked on pypi" in n for n in python.json()["notes"])


def test_a_yanked_pin_that_cannot_resolve_says_why(capsys: pytest.CaptureFixture[str]) -> None:
    """torchvision 0.15.0 is yanked on PyPI, and its METADATA says ``Requires-Dist: torch
    (==2.0.0+cu117)``, a build PyPI does not have: it exists, so not exit 18; the error
    names the missing torch."""
    result = _plan(
        capsys, "torchvision==0.15.0", "--driver", "590.48.01", "--python", "3.11",
        "--platform", "linux-x86_64", "--index", "pypi",
    )  # fmt: skip
    assert result.code == 13
    assert "no version of torch==2.0.0+cu117" in result.json()["error"]["message"]


def test_the_reason_shown_is_the_true_one(capsys: pytest.CaptureFixture[str]) -> None:
    """xformers 0.0.33 requires ``torch==2.9.0``, whose PyPI wheel requires
    ``nvidia-cuda-runtime-cu12==12.8.90`` (12.8); xformers' own ``_C.so`` links
    ``libcudart.so.13``: the line says so, not the 13.x lines' resolver failure."""
    result = _plan(capsys, "xformers==0.0.33", "torch==2.9.0", "--driver", "590.48.01", *X86)
    assert result.code == 13
    message = result.json()["error"]["message"]
    assert "xformers==0.0.33 resolves on no CUDA line (12.8: builds of another line" in message
    assert "libcudart.so.13" in message and "torch==2.9.0 resolves on 12.8 only" in message


def test_an_extra_that_names_a_major_is_held_to_it(capsys: pytest.CaptureFixture[str]) -> None:
    """jax's ``cuda13`` extra names CUDA 13 (the family table's ``[extras]``): every jax
    with it pulls ``jax-cuda13-plugin``, a CUDA 13 build, while torch 2.9.1 is 12.8, so no
    line fits; the 12.x lines are passed over for the extra itself, before anything
    resolves (they once resolved jax 0.6.2, which has no ``cuda13`` extra and is CPU-only
    here, and excluded it: the same answer, by a longer way)."""
    result = _plan(capsys, "torch==2.9.1", "jax[cuda13]", "--driver", "590.48.01", *X86)
    assert result.code == 13
    error = result.json()["error"]
    assert "torch==2.9.1 resolves on 12.8 only; jax[cuda13] resolves on 13." in error["message"]
    held = {e["line"]: e for e in error["details"]["excluded"] if e["kind"] == "major"}
    assert held["12.8"]["message"] == (
        "jax[cuda13] asks for CUDA 13: its extra cuda13 names that major"
    )


def test_the_printed_line_installs_the_plan(capsys: pytest.CaptureFixture[str]) -> None:
    """``uv pip install vllm==0.20.0`` alone resolves nvidia-cutlass-dsl 4.8.1 (with
    ``nvidia-cutlass-dsl-libs-cu12``), quack-kernels 0.6.5 and cuda-bindings 13.5.0, where
    the plan, held to its line, has older ones: the printed line pins what would differ,
    and uv's resolution of it, as printed, is the plan's closure (checked in ``_plan``)."""
    result = _plan(capsys, "vllm==0.20.0", "--driver", "590.48.01", *X86)
    assert result.code == 0, result.err
    document = result.json()
    assert document["install_checked"] and document["uv"].startswith("uv pip install vllm==0.20.0 ")
    closure = {p["name"]: p["version"] for p in document["closure"]}
    assert f"nvidia-cutlass-dsl=={closure['nvidia-cutlass-dsl']}" in document["uv"]


def test_a_warm_plan_sends_no_request(capsys: pytest.CaptureFixture[str]) -> None:
    """NVIDIA's host cannot be reached from the test machines: the first plan's listing
    fails (a note), the second reuses that answer and asks nothing at all (``-v``)."""
    argv = ("-v", "plan", "sgl-kernel==0.3.21", "--driver", "590.48.01", *X86)
    first = run_cli(capsys, *argv)
    assert first.code == 0, first.err
    assert "GET https://developer.download.nvidia.com/compute/cuda/redist/" in first.err
    second = run_cli(capsys, *argv)
    assert second.code == 0, second.err
    assert "cache: the release list of" in second.err
    asked = [line for line in second.err.splitlines() if re.match(r"cudaup: (GET|HEAD) ", line)]
    assert asked == [] and second.out == first.out
