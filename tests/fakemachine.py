"""Fake machines under a temporary system root, for toolkit discovery and doctor.

Each helper writes one real-world layout: a runfile toolkit, a deb-owned
toolkit managed by update-alternatives, pip cu12/cu13 wheels, a conda env, a
dangling ``/usr/local/cuda``.  Executables are small shell scripts printing
what the real tools print.
"""

from __future__ import annotations

import json
from pathlib import Path

NVCC_BANNER = """nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2025 NVIDIA Corporation
Built on Wed_Aug_20_01:58:59_PM_PDT_2025
Cuda compilation tools, release {line}, V{version}
Build cuda_{line}.r{line}/compiler.36424714_0
"""


def write(path: Path, text: str, mode: int | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if mode is not None:
        path.chmod(mode)
    return path


def script(path: Path, output: str, exit_code: int = 0) -> Path:
    body = f"#!/bin/sh\ncat <<'EOF'\n{output.rstrip()}\nEOF\nexit {exit_code}\n"
    return write(path, body, 0o755)


def toolkit_tree(
    directory: Path,
    *,
    nvcc: str | None,
    cudart: str | None,
    header: str | None = None,
    version_json: dict[str, str] | None = None,
    uninstaller: bool = False,
) -> Path:
    """A CUDA_HOME-style tree: bin/nvcc, lib64/libcudart.so.X.Y.Z, include/, version.json."""
    if nvcc:
        line = ".".join(nvcc.split(".")[:2])
        script(directory / "bin" / "nvcc", NVCC_BANNER.format(line=line, version=nvcc))
    if cudart:
        write(directory / "lib64" / f"libcudart.so.{cudart}", "ELF")
        soname = directory / "lib64" / f"libcudart.so.{cudart.split('.')[0]}"
        soname.symlink_to(f"libcudart.so.{cudart}")
    header_line = header or (".".join(cudart.split(".")[:2]) if cudart else None)
    if header_line:
        major, minor = header_line.split(".")
        write(
            directory / "include" / "cuda_runtime_api.h",
            f"#define CUDART_VERSION {int(major) * 1000 + int(minor) * 10}\n",
        )
    if version_json:
        document = {key: {"name": key, "version": value} for key, value in version_json.items()}
        write(directory / "version.json", json.dumps(document, indent=3))
    if uninstaller:
        script(directory / "bin" / "cuda-uninstaller", "")
    return directory


def link(root: Path, system_path: str, target: str) -> None:
    path = root / system_path.lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(target)


def runfile_13_0(root: Path) -> Path:
    """A runfile install of 13.0.2 (nvcc 13.0.88, cudart 13.0.96, date-based cuda.version)."""
    return toolkit_tree(
        root / "usr/local/cuda-13.0",
        nvcc="13.0.88",
        cudart="13.0.96",
        version_json={
            "cuda": "13.0.20251002",
            "cuda_cudart": "13.0.96",
            "cuda_nvcc": "13.0.88",
            "nvidia_driver": "580.95.05",
        },
        uninstaller=True,
    )


def deb_12_4_with_alternatives(root: Path) -> Path:
    tree = toolkit_tree(root / "usr/local/cuda-12.4", nvcc="12.4.131", cudart="12.4.127")
    write(
        root / "var/lib/dpkg/status",
        "\n\n".join(
            [
                "Package: cuda-toolkit-12-4\nStatus: install ok installed\nVersion: 12.4.1-1",
                "Package: cuda-nvcc-12-4\nStatus: install ok installed\nVersion: 12.4.131-1",
                "Package: cuda-cudart-12-4\nStatus: install ok installed\nVersion: 12.4.127-1",
                "Package: bash\nStatus: install ok installed\nVersion: 5.2.15-2",
            ]
        )
        + "\n",
    )
    write(
        root / "var/lib/dpkg/alternatives/cuda",
        "auto\n/usr/local/cuda\n\n/usr/local/cuda-12.4\n124\n",
    )
    link(root, "/etc/alternatives/cuda", "/usr/local/cuda-12.4")
    link(root, "/usr/local/cuda", "/etc/alternatives/cuda")
    return tree


def site_packages(
    base: Path,
    *,
    cu13: dict[str, str] | None = None,
    cu12: dict[str, str] | None = None,
    torch: tuple[str, str | None] | None = None,
) -> Path:
    """A site-packages with nvidia wheels (dist-info names as pip writes them) and maybe torch."""
    site = base / "lib/python3.12/site-packages"
    site.mkdir(parents=True, exist_ok=True)
    for project, version in (cu13 or {}).items():
        write(
            site / f"{project.replace('-', '_')}-{version}.dist-info" / "METADATA",
            f"Name: {project}\nVersion: {version}\n",
        )
    if cu13:
        write(site / "nvidia/cu13/include/cuda_runtime_api.h", "#define CUDART_VERSION 13000\n")
        (site / "nvidia/cu13/lib").mkdir(parents=True, exist_ok=True)
    for project, version in (cu12 or {}).items():
        write(
            site / f"{project.replace('-', '_')}-{version}.dist-info" / "METADATA",
            f"Name: {project}\nVersion: {version}\n",
        )
        (
            site
            / "nvidia"
            / project.removeprefix("nvidia-").removesuffix("-cu12").replace("-", "_")
            / "lib"
        ).mkdir(parents=True, exist_ok=True)
    if torch:
        version, cuda = torch
        cuda_text = f"'{cuda}'" if cuda else "None"
        write(
            site / "torch/version.py",
            f"from typing import Optional\n\n__all__ = ['__version__', 'cuda']\n__version__ = '{version}'\ndebug = False\ncuda: Optional[str] = {cuda_text}\nhip: Optional[str] = None\n",
        )
    return site


def fake_python(path: Path, sites: list[Path]) -> Path:
    """A 'python' that answers doctor's site-packages query like a real interpreter."""
    return script(path, json.dumps([str(s) for s in sites]))


def conda_env(prefix: Path, packages: dict[str, str]) -> Path:
    for name, version in packages.items():
        write(
            prefix / "conda-meta" / f"{name}-{version}-0.json",
            json.dumps({"name": name, "version": version, "build": "0"}),
        )
    return prefix
