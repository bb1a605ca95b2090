"""A small ML wheel world on loopback, modelled on what PyPI and the CUDA indexes publish.

Flat index ``pypi`` (PEP 691 and 503):
  cuda-toolkit 12.8.2, 12.9.1, 13.0.2, 13.2.0 (lines), 13.4.0rc1 (no release), 13.1.0 (yanked)
  nvidia-cuda-runtime-cu12 12.8.90, 12.9.79; nvidia-cuda-runtime 13.0.96, 13.2.51
  torch 2.9.1   x86_64: nvidia-cuda-runtime-cu12==12.8.90 (Linux x86_64 marker, as the real one)
                aarch64: the same metadata, so no CUDA there, and libraries that link none
  torch 2.11.0  cuda-toolkit==13.0.2
  servellm 1.0  torch==2.11.0 (pure Python: its line comes through torch)
  sgl-kernel 0.3.21, 0.3.20: no dependencies, shared objects linking libcudart.so.12
  xfish 1.0: torch==2.9.1 (12.8), but links libcudart.so.13 (xformers 0.0.33 and torch 2.9.0)
  opswrap 1.0 (pure): opsdep (unpinned); opsdep 1.0 links libcudart.so.12, 2.0 .so.13
  kernlib 1.0, 2.0 (yanked: "broken ABI, use 2.0.1"): like sgl-kernel
  fastattn 1.0: like sgl-kernel; 1.1 pure Python, torch==2.11.0 (as xformers 0.0.35.dev1147)
  attnkern 1.0, 1.1 (yanked), 1.2rc1, 1.2, 1.3, 1.4: like sgl-kernel, every one a CUDA 12 build
  cupy-cuda12x 14.0.0; jaxish 0.4, 0.5 (no extras); jaxish 1.0 (extras cuda12/cuda13 → jaxish-cudaNN-plugin, which need
  nvidia-cuda-runtime[-cu12]>=NN); onnxish-gpu 1.0 ([cuda]: nvidia-cuda-runtime~=13.0)
Per-line indexes (PEP 503 HTML only):
  torch-cu128 torch 2.11.0+cu128 · torch-cu130 torch 2.11.0+cu130 · torch-cu132 torch 2.12.0+cu132
  fi-cu128, fi-cu130 flashinfer-jit-cache 0.6.4+cuXYZ (no cu132 index, as FlashInfer lacked it)
  sgl-cu130 sgl-kernel 0.3.21+cu130 (links libcudart.so.13)
  torch-nightly-cu130 (``pre``): torch 2.13.0.dev20261130+cu130 (cuda-toolkit==13.0.2 and
  pytorch-triton==3.6.0+git5a3c9f1, which only it publishes)
Silent GPU builds on ``pypi``: triton 3.3.0 (ships ptxas), bitsandbytes 0.45.5 (one object
per runtime, 11.7-12.8), paddlepaddle-gpu 2.6.2 (declares CUDA 11.8), mxnet-cu112 1.9.1,
cuda-python 12.8.0 (pure, requires cuda-bindings 12.8.0, which dlopens libnvrtc.so.12).
"""

from __future__ import annotations

from pathlib import Path

from cudaup.config import Settings
from cudaup.core.driver import DriverVersion, GpuInfo
from cudaup.core.platforms import Platform
from cudaup.plan import Planner, PlanResult, PlanTarget, parse_requirements
from cudaup.plan.indexes import Index, arrange
from cudaup.plan.lines import Line
from tests.plan.builders import ABI3, ARM, PURE, shared_object, wheel
from tests.plan.pyindex import IndexServer

CU12_X86 = 'platform_system == "Linux" and platform_machine == "x86_64"'
RUNTIME_TAG = "py3-none-manylinux_2_17_x86_64"


def _kernel(name: str, version: str, major: int, tag: str = ABI3) -> tuple[str, bytes]:
    ops = shared_object([f"libcudart.so.{major}", "libc.so.6"], "common_ops.so", code=512 * 1024)
    return wheel(
        name, version, tag=tag, shared={f"{name.replace('-', '_')}/common_ops.abi3.so": ops}
    )


def build(server: IndexServer) -> IndexServer:
    pypi = "pypi"
    server.root(pypi)
    for version in ("12.8.2", "12.9.1", "13.0.2", "13.2.0", "13.4.0rc1"):
        server.add(pypi, *wheel("cuda-toolkit", version, tag="py2.py3-none-any"))
    server.add(pypi, *wheel("cuda-toolkit", "13.1.0", tag="py2.py3-none-any"), yanked=True)
    for version in ("12.8.90", "12.9.79"):
        server.add(pypi, *wheel("nvidia-cuda-runtime-cu12", version, tag=RUNTIME_TAG))
    for version in ("13.0.96", "13.2.51"):
        server.add(pypi, *wheel("nvidia-cuda-runtime", version, tag=RUNTIME_TAG))
    cu12 = [f"nvidia-cuda-runtime-cu12==12.8.90; {CU12_X86}"]
    server.add(pypi, *wheel("torch", "2.9.1", cu12))
    cpu = shared_object(["libc.so.6", "libgomp.so.1"], "libtorch_cpu.so", code=256 * 1024)
    server.add(
        pypi, *wheel("torch", "2.9.1", cu12, tag=ARM, shared={"torch/lib/libtorch_cpu.so": cpu})
    )
    server.add(
        pypi, *wheel("torch", "2.11.0", ['cuda-toolkit==13.0.2; platform_system == "Linux"'])
    )
    server.add(pypi, *wheel("servellm", "1.0", ["torch==2.11.0"], tag=PURE))
    for version in ("0.3.20", "0.3.21"):
        server.add(pypi, *_kernel("sgl-kernel", version, 12))
    ops = shared_object(["libcudart.so.13"], "ops.so", code=4096)
    xfish = wheel("xfish", "1.0", ["torch==2.9.1"], tag=ABI3, shared={"xfish/_C.so": ops})
    server.add(pypi, *xfish)
    server.add(pypi, *_kernel("opsdep", "1.0", 12))
    server.add(pypi, *_kernel("opsdep", "2.0", 13))
    server.add(pypi, *wheel("opswrap", "1.0", ["opsdep"], tag=PURE))
    server.add(pypi, *_kernel("kernlib", "1.0", 12))
    server.add(pypi, *_kernel("kernlib", "2.0", 12), yanked="broken ABI, use 2.0.1")
    server.add(pypi, *_kernel("fastattn", "1.0", 12))
    server.add(pypi, *wheel("fastattn", "1.1", ["torch==2.11.0"], tag=PURE))
    for version in ("1.0", "1.1", "1.2rc1", "1.2", "1.3", "1.4"):
        server.add(pypi, *_kernel("attnkern", version, 12), yanked=version == "1.1")
    server.add(pypi, *wheel("cupy-cuda12x", "14.0.0"))
    server.add(
        pypi,
        *wheel(
            "jaxish",
            "1.0",
            [
                'jaxish-cuda12-plugin==1.0; extra == "cuda12"',
                'jaxish-cuda13-plugin==1.0; extra == "cuda13"',
            ],
            tag=PURE,
            extras=("cuda12", "cuda13"),
        ),
    )
    for version in ("0.4", "0.5"):  # before the CUDA extras
        server.add(pypi, *wheel("jaxish", version, tag=PURE), pep658=version == "0.5")
    server.add(pypi, *wheel("jaxish-cuda12-plugin", "1.0", ["nvidia-cuda-runtime-cu12>=12"]))
    server.add(pypi, *wheel("jaxish-cuda13-plugin", "1.0", ["nvidia-cuda-runtime>=13"]))
    server.add(
        pypi,
        *wheel(
            "onnxish-gpu", "1.0", ['nvidia-cuda-runtime~=13.0; extra == "cuda"'], extras=("cuda",)
        ),
    )
    for tag, version, requires in (
        ("cu128", "2.11.0+cu128", ["nvidia-cuda-runtime-cu12==12.8.90"]),
        ("cu130", "2.11.0+cu130", ["cuda-toolkit==13.0.2"]),
        ("cu132", "2.12.0+cu132", ["nvidia-cuda-runtime==13.2.51"]),
    ):
        server.root(f"torch-{tag}", html_only=True)
        server.add(f"torch-{tag}", *wheel("torch", version, requires))
    for tag in ("cu128", "cu130"):
        server.root(f"fi-{tag}", html_only=True)
        server.add(f"fi-{tag}", *wheel("flashinfer-jit-cache", f"0.6.4+{tag}", tag=PURE))
    server.root("sgl-cu130", html_only=True)
    server.add("sgl-cu130", *_kernel("sgl-kernel", "0.3.21+cu130", 13))
    nightly = "torch-nightly-cu130"
    server.root(nightly, html_only=True)
    triton = "pytorch-triton==3.6.0+git5a3c9f1"
    server.add(
        nightly, *wheel("torch", "2.13.0.dev20261130+cu130", ["cuda-toolkit==13.0.2", triton])
    )
    server.add(nightly, *wheel("pytorch-triton", "3.6.0+git5a3c9f1"))
    _silent_gpu_builds(server)
    return server


def _silent_gpu_builds(server: IndexServer) -> None:
    """GPU packages that declare no CUDA dependency, each with the signal its real wheel
    carries (the facts are in tests/plan/test_live.py beside the live cases)."""
    plain = shared_object(["libc.so.6"], "plain.so", code=8192)
    tools = {
        "triton/_C/libtriton.so": plain,
        "triton/backends/nvidia/bin/ptxas": b"\x7fELF" + bytes(64),
        "triton/backends/nvidia/include/cuda.h": b"#define CUDA_VERSION 12080\n",
    }
    server.add("pypi", *wheel("triton", "3.3.0", shared=tools))
    objects = {
        f"bitsandbytes/libbitsandbytes_cuda{tag}.so": shared_object(
            [f"libcudart.so.{'11.0' if tag < 120 else '12'}"], f"b{tag}.so", code=1024
        )
        for tag in (117, 118, 126, 128)
    }
    server.add("pypi", *wheel("bitsandbytes", "0.45.5", shared=objects))
    version_py = b"full_version = '2.6.2'\ncuda_version = '11.8'\n"
    paddle = {"paddle/base/libpaddle.so": plain, "paddle/version/__init__.py": version_py}
    server.add("pypi", *wheel("paddlepaddle-gpu", "2.6.2", shared=paddle))
    server.add("pypi", *wheel("mxnet-cu112", "1.9.1", shared={"mxnet/libmxnet.so": plain}))
    server.add("pypi", *wheel("cuda-python", "12.8.0", ["cuda-bindings~=12.8.0"], tag=PURE))
    loader = shared_object(["libc.so.6"], "cynvrtc.so", code=4096) + b"\0libnvrtc.so.12\0"
    bindings = {"cuda/bindings/_bindings/cynvrtc.so": loader}
    server.add("pypi", *wheel("cuda-bindings", "12.8.0", shared=bindings))


def indexes(server: IndexServer, *names: str) -> dict[str, Index]:
    table = {
        "pypi": Index("pypi", {"": server.url("pypi")}, ("*",)),
        "pytorch": Index(
            "pytorch",
            {tag: server.url(f"torch-{tag}") for tag in ("cu128", "cu130", "cu132")},
            ("torch",),
        ),
        "flashinfer": Index(
            "flashinfer",
            {tag: server.url(f"fi-{tag}") for tag in ("cu128", "cu130")},
            ("flashinfer-jit-cache",),
            ("flashinfer-jit-cache",),
        ),
        "sglang": Index("sglang", {"cu130": server.url("sgl-cu130")}, ("sgl-kernel",)),
        "pytorch-nightly": Index(
            "pytorch-nightly",
            {"cu130": server.url("torch-nightly-cu130")},
            ("torch", "pytorch-triton"),
            ("pytorch-triton",),
            pre=True,
        ),
    }
    return {name: table[name] for name in names or table}


def settings(
    server: IndexServer, tmp_path: Path, *, refresh: bool = False, offline: bool = False
) -> Settings:
    # NVIDIA's host is down (503): the release list comes from PyPI's cuda-toolkit.
    server.root("nvidia").down = True
    return Settings.from_env(
        pypi_url=server.url("pypi"),
        download_url=server.url("nvidia"),
        cache_dir=tmp_path / "cache",
        refresh=refresh,
        offline=offline,
    )


def plan(
    server: IndexServer,
    tmp_path: Path,
    packages: list[str],
    *,
    only: tuple[str, ...] = (),
    driver: str | None = "590.48.01",
    platform: Platform = "linux-x86_64",
    python: tuple[int, int] = (3, 12),
    gpus: tuple[GpuInfo, ...] = (),
    line: Line | None = None,
    refresh: bool = False,
    offline: bool = False,
    pre: bool = False,
    allow_minor_compat: bool = False,
) -> PlanResult:
    target = PlanTarget(
        python, platform, DriverVersion.from_text(driver) if driver else None, None, gpus
    )
    planner = Planner(settings(server, tmp_path, refresh=refresh, offline=offline))
    table = arrange(indexes(server, *only), only, pre=pre)
    return planner.plan(
        parse_requirements(packages), table, target, line=line, pre=pre,
        allow_minor_compat=allow_minor_compat,
    )  # fmt: skip
