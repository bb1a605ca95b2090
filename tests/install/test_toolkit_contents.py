"""What an install contains: ``nvcc`` brings what everyday CUDA code needs (the C++ core
libraries included), a component without its tool is refused, and files get pip's modes.

The live tests (``pypi``) check these against what PyPI really serves; the others
serve NVIDIA's and PyPI's formats from loopback.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from cudaup.core.components import CLOSURE, REQUIRED_TOOLS, with_closure
from cudaup.core.tools import TOOL_COMPONENTS
from cudaup.errors import EXIT_CODES
from cudaup.install.store import Store
from tests.fakenvidia.server import FakeNvidiaServer
from tests.faultserver import FaultServer
from tests.helpers import point_env_at, run_cli
from tests.install.served import Files, make_wheel, serve_extras
from tests.osfaults import ROOT_ONLY, as_nobody, shared_tmp


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Store:
    monkeypatch.setenv("CUDAUP_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CUDAUP_SYSTEM_ROOT", str(tmp_path / "root"))
    monkeypatch.delenv("CUDAUP_DRIVER_VERSION", raising=False)
    (tmp_path / "root").mkdir()
    monkeypatch.chdir(tmp_path)
    return Store(tmp_path / "home")


# -- the closure -------------------------------------------------------------------------------
def test_nvcc_brings_the_cpp_core_libraries_where_a_release_has_them() -> None:
    cuda13 = {"cuda_nvcc", "cuda_cudart", "cuda_crt", "libnvvm", "cuda_cccl", "libcublas"}
    assert with_closure(["nvcc"], cuda13) == [
        "cuda_nvcc",
        "cuda_crt",
        "libnvvm",
        "cuda_cudart",
        "cuda_cccl",
    ]
    # CUDA 12 (PyPI's cuda-toolkit 12.8.1 extras, 12.x manifests): no separate crt or nvvm.
    cuda12 = {"cuda_nvcc", "cuda_cudart", "cuda_cccl"}
    assert with_closure(["nvcc", "cudart"], cuda12) == ["cuda_nvcc", "cuda_cudart", "cuda_cccl"]
    # A release without cccl (the fake server's manifests) gets nothing it lacks.
    assert with_closure(["nvcc"], {"cuda_nvcc", "cuda_cudart"}) == ["cuda_nvcc", "cuda_cudart"]
    assert "cuda_cccl" in CLOSURE["cuda_nvcc"]


def test_a_required_tool_is_said_to_come_with_its_component() -> None:
    for component, tools in REQUIRED_TOOLS.items():
        assert all(TOOL_COMPONENTS[tool] == component for tool in tools)


# -- a component without its tool ----------------------------------------------------------------
def cu12_wheels() -> dict[str, tuple[str, str, bytes]]:
    """What PyPI's cuda-toolkit 12.8.1 pins for nvcc and cudart, in miniature: the nvcc
    wheel holds ptxas (mode 0744, as NVIDIA stores it) but no nvcc."""
    nvcc: Files = {
        "nvidia/cuda_nvcc/bin/ptxas": (b"#!/bin/sh\necho ptxas\n", 0o744),
        "nvidia/cuda_nvcc/include/crt/host_config.h": (b"#pragma once\n", 0o644),
    }
    runtime: Files = {
        "nvidia/cuda_runtime/lib/libcudart.so.12": (b"\x7fELF fake cudart 12.8.90", 0o755),
        "nvidia/cuda_runtime/include/cuda_runtime.h": (b"#pragma once\n", 0o644),
    }
    return {
        "nvcc": ("nvidia-cuda-nvcc-cu12", "12.8.93", make_wheel("nvidia-cuda-nvcc-cu12", "12.8.93", nvcc)),
        "cudart": ("nvidia-cuda-runtime-cu12", "12.8.90", make_wheel("nvidia-cuda-runtime-cu12", "12.8.90", runtime)),
    }  # fmt: skip


def test_a_pypi_nvcc_without_nvcc_is_refused_with_the_channel_that_has_it(
    fault_server: FaultServer,
    store: Store,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("CUDAUP_PYPI_URL", serve_extras(fault_server, "12.8.1", cu12_wheels()))
    refused = run_cli(
        capsys, "install", "12.8.1", "--channel", "pypi", "--components", "nvcc,cudart",
        "--platform", "linux-x86_64",
    )  # fmt: skip
    assert refused.code == EXIT_CODES["artifact-not-found"], refused.err
    assert "nvidia_cuda_nvcc_cu12-12.8.93" in refused.err
    assert "has no bin/nvcc" in refused.err and "--channel redist" in refused.err
    assert store.installed() == [] and store.default() is None  # nothing published
    assert not store.toolkits_dir.exists() or not any(store.toolkits_dir.iterdir())
    # The tools the wheel does have are fine: cudart alone installs.
    alone = run_cli(
        capsys, "install", "12.8.1", "--channel", "pypi", "--components", "cudart",
        "--platform", "linux-x86_64", "-q",
    )  # fmt: skip
    assert alone.code == 0, alone.err


def test_auto_takes_nvcc_from_nvidias_redist_when_it_answers(
    fake_nvidia: FakeNvidiaServer,
    store: Store,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    point_env_at(monkeypatch, fake_nvidia)
    done = run_cli(
        capsys, "install", "12.8.1", "--components", "nvcc,cudart", "--platform",
        "linux-x86_64", "--json",
    )  # fmt: skip
    assert done.code == 0, done.err
    result = done.json()
    assert result["channel"] == "redist"
    assert any("channel auto: using redist" in note for note in result["notes"])
    nvcc = Path(result["path"]) / "bin" / "nvcc"
    version = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=True)
    assert "V12.8.93" in version.stdout


@ROOT_ONLY
def test_a_prefix_install_gets_modes_every_user_can_run(
    fault_server: FaultServer,
    store: Store,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    nvcc: Files = {
        "nvidia/cu13/bin/nvcc": (b"#!/bin/sh\necho 'release 13.0, V13.0.88'\n", 0o744),
        "nvidia/cu13/bin/crt/link.stub": (b"stub\n", 0o664),
        "nvidia/cu13/include/fatbinary_section.h": (b"#pragma once\n", 0o600),
    }
    wheel = make_wheel("nvidia-cuda-nvcc", "13.0.88", nvcc)
    index = serve_extras(fault_server, "13.0.1", {"nvcc": ("nvidia-cuda-nvcc", "13.0.88", wheel)})
    monkeypatch.setenv("CUDAUP_PYPI_URL", index)
    with shared_tmp() as shared:
        prefix = shared / "cuda-13.0.1"
        done = run_cli(
            capsys, "install", "13.0.1", "--channel", "pypi", "--components", "nvcc",
            "--platform", "linux-x86_64", "--prefix", str(prefix), "-q",
        )  # fmt: skip
        assert done.code == 0, done.err
        modes = {
            str(p.relative_to(prefix)): p.stat().st_mode & 0o7777
            for p in prefix.rglob("*")
            if not p.is_symlink() and p.name != "cudaup-record.json"
        }
        assert modes["bin/nvcc"] == 0o755
        assert modes["bin/crt/link.stub"] == 0o644
        assert modes["include/fatbinary_section.h"] == 0o644
        assert modes["bin"] == 0o755 and modes["bin/crt"] == 0o755
        assert set(modes.values()) <= {0o755, 0o644}, modes
        ran = as_nobody([str(prefix / "bin" / "nvcc")], env={"PATH": "/usr/bin:/bin"})
        assert ran.returncode == 0 and "V13.0.88" in ran.stdout, ran.stderr


# -- live PyPI: everyday CUDA code compiles and links ----------------------------------------------
EVERYDAY = r"""
#include <cstdio>
#include <cuda_fp16.h>
#include <cooperative_groups.h>
#include <thrust/device_vector.h>
#include <thrust/reduce.h>

namespace cg = cooperative_groups;

__global__ void twice(const __half* in, float* out, int n) {
    cg::thread_block block = cg::this_thread_block();
    int i = block.group_index().x * block.size() + block.thread_rank();
    if (i < n) out[i] = __half2float(in[i]) * 2.0f;
    block.sync();
}

int main() {
    const int n = 1024;
    thrust::device_vector<__half> in(n, __float2half(1.5f));
    thrust::device_vector<float> out(n);
    twice<<<(n + 255) / 256, 256>>>(thrust::raw_pointer_cast(in.data()),
                                    thrust::raw_pointer_cast(out.data()), n);
    float sum = thrust::reduce(out.begin(), out.end());
    std::printf("%f\n", sum);
    return sum == 3.0f * n ? 0 : 1;
}
"""


@pytest.mark.pypi
def test_live_nvcc_cudart_compiles_fp16_thrust_and_cooperative_groups(
    store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    done = run_cli(
        capsys, "install", "13.0.2", "--channel", "pypi", "--components", "nvcc,cudart",
        "--platform", "linux-x86_64", "--json",
    )  # fmt: skip
    assert done.code == 0, done.err
    result = done.json()
    assert {"cuda_nvcc", "cuda_cudart", "cuda_crt", "libnvvm", "cuda_cccl"} <= set(
        result["components"]
    )
    toolkit = Path(result["path"])
    nvcc = toolkit / "bin" / "nvcc"
    assert (toolkit / "include" / "cccl" / "thrust" / "device_vector.h").is_file()
    source = tmp_path / "everyday.cu"
    source.write_text(EVERYDAY)
    objects = tmp_path / "everyday.o"
    compiled = subprocess.run(
        [str(nvcc), "-arch=sm_80", "-c", str(source), "-o", str(objects)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert compiled.returncode == 0, compiled.stderr
    binary = tmp_path / "everyday"
    linked = subprocess.run(
        [str(nvcc), "-arch=sm_80", "-cudart", "static", str(objects), "-o", str(binary)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert linked.returncode == 0, linked.stderr
    assert os.access(binary, os.X_OK)
    libraries = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=False)
    assert "libcudart" not in libraries.stdout  # cudart is linked in, not looked up
    # The shared runtime links too: through the unversioned libcudart.so the layout adds.
    shared = subprocess.run(
        [str(nvcc), "-arch=sm_80", "-cudart", "shared", str(objects), "-o", f"{binary}-shared"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert shared.returncode == 0, shared.stderr
    version = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=True)
    assert "V13.0.88" in version.stdout
    # Every file other users may need is readable (and its tools runnable) by them.
    loose = [
        p for p in toolkit.rglob("*") if not p.is_symlink() and p.stat().st_mode & 0o044 != 0o044
    ]
    assert loose == []


@pytest.mark.pypi
def test_live_pypi_12_8_1_nvcc_is_refused_for_what_pypi_really_serves(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    refused = run_cli(
        capsys, "install", "12.8.1", "--channel", "pypi", "--components", "nvcc,cudart",
        "--platform", "linux-x86_64",
    )  # fmt: skip
    assert refused.code == EXIT_CODES["artifact-not-found"], refused.err
    assert "nvidia_cuda_nvcc_cu12-12.8.93" in refused.err and "has no bin/nvcc" in refused.err
    assert store.installed() == []
