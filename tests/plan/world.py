"""A small ML wheel world on loopback, modelled on what PyPI and the CUDA indexes publish.

Flat index ``pypi`` (PEP 691 and 503):
  cuda-toolkit 12.8.2, 12.9.1, 13.0.2, 13.2.0 (lines), 13.4.0rc1 (no release), 13.1.0 (yanked)
  nvidia-cuda-runtime-cu12 12.8.90, 12.9.79; nvidia-cuda-runtime 13.0.96, 13.2.51
  torch 2.9.1   x86_64: nvidia-cuda-runtime-cu12==12.8.90 (Linux x86_64 marker, as the real one)
                aarch64: the same metadata, so no CUDA there, and libraries that link none
  torch 2.11.0  cuda-toolkit==13.0.2
  servellm 1.0  torch==2.11.0 (pure Python: its line comes through torch)
  sgl-kernel 0.3.21, 0.3.20: no dependencies, shared objects linking libcudart.so.12
  cupy-cuda12x 14.0.0; jaxish 1.0 (extras cuda12/cuda13 → jaxish-cudaNN-plugin, which need
  nvidia-cuda-runtime[-cu12]>=NN); onnxish-gpu 1.0 ([cuda]: nvidia-cuda-runtime~=13.0)
Per-line indexes (PEP 503 HTML only):
  torch-cu128 torch 2.11.0+cu128 · torch-cu130 torch 2.11.0+cu130 · torch-cu132 torch 2.12.0+cu132
  fi-cu128, fi-cu130 flashinfer-jit-cache 0.6.4+cuXYZ (no cu132 index, as FlashInfer lacked it)
  sgl-cu130 sgl-kernel 0.3.21+cu130 (links libcudart.so.13)
"""

from __future__ import annotations

from pathlib import Path

from cudaup.config import Settings
from cudaup.core.driver import DriverVersion, GpuInfo
from cudaup.core.platforms import Platform
from cudaup.plan import Planner, PlanResult, Target, parse_requirements
from cudaup.plan.indexes import Index
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
    return server


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
    }
    return {name: table[name] for name in names or table}


def settings(
    server: IndexServer, tmp_path: Path, *, refresh: bool = False, offline: bool = False
) -> Settings:
    return Settings.from_env(
        pypi_url=server.url("pypi"), cache_dir=tmp_path / "cache", refresh=refresh, offline=offline
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
    allow_minor_compat: bool = False,
) -> PlanResult:
    target = Target(
        python, platform, DriverVersion.from_text(driver) if driver else None, None, gpus
    )
    planner = Planner(settings(server, tmp_path, refresh=refresh, offline=offline))
    return planner.plan(
        parse_requirements(packages),
        indexes(server, *only),
        target,
        line=line,
        allow_minor_compat=allow_minor_compat,
    )
