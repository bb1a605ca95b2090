"""A small CUDA package world on loopback, installable for real, and environments built in it.

Flat index ``pypi`` (every wheel pure Python, so any test interpreter installs it):
  cuda-toolkit 12.8.1, 12.9.1, 13.0.2, 13.2.0 (the release list, as PyPI's is)
  nvidia-cuda-runtime-cu12 12.8.90, 12.9.79 · nvidia-cuda-runtime 13.0.96, 13.2.51
  cuda-bindings 12.8.0, 12.9.0, 13.0.3, 13.2.0 (its version is its CUDA release)
  cupy-cuda12x 13.4.1 · cupy-cuda13x 14.0.0 (both the module ``cupy``; each answers its
    CUDA runtime version as CuPy does; both require fastlock)
  fastlock 1.0, 1.1 (carries no line: an environment's 1.0 stays)
  servellm 1.0 (pure, requires torch>=2.9: a dependent that moves with nothing)
  torch 2.9.1 (nvidia-cuda-runtime-cu12==12.8.90), 2.11.0 (nvidia-cuda-runtime==13.0.96)
Per-line indexes (PEP 503 HTML), as PyTorch's:
  torch-cu128: torch 2.9.1+cu128 (nvidia-cuda-runtime-cu12==12.8.90), torchvision 0.24.1+cu128
  torch-cu130: torch 2.11.0+cu130 (nvidia-cuda-runtime==13.0.96), torchvision 0.26.0+cu130
  torch writes ``torch/version.py`` with its ``cuda`` and a ``torchrun`` console script.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import subprocess
import sys
import zipfile
from collections.abc import Mapping
from pathlib import Path

import pytest

from cudaup.plan.uv import find_uv
from tests.helpers import CliResult, run_cli
from tests.plan.pyindex import IndexServer

PURE = "py3-none-any"
PYTORCH = ("torch", "torchvision")


def wheel(
    name: str,
    version: str,
    requires: tuple[str, ...] = (),
    *,
    files: Mapping[str, str | bytes] | None = None,
    scripts: dict[str, str] | None = None,
    extras: tuple[str, ...] = (),
) -> tuple[str, bytes]:
    """An installable wheel: METADATA, WHEEL, entry points and a RECORD with hashes."""
    stem = re.sub(r"[-.]+", "_", name)
    info = f"{stem}-{version}.dist-info"
    members: dict[str, str | bytes] = dict(
        files if files is not None else {f"{stem}/__init__.py": ""}
    )
    members[f"{info}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        + "".join(f"Provides-Extra: {e}\n" for e in extras)
        + "".join(f"Requires-Dist: {r}\n" for r in requires)
    )
    members[f"{info}/WHEEL"] = (
        f"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: {PURE}\n"
    )
    if scripts:
        members[f"{info}/entry_points.txt"] = "[console_scripts]\n" + "".join(
            f"{script} = {target}\n" for script, target in scripts.items()
        )
    record = []
    for path, text in members.items():
        data = text if isinstance(text, bytes) else text.encode()  # binaries: kernels
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(data)}")
    record.append(f"{info}/RECORD,,")
    members[f"{info}/RECORD"] = "\n".join(record) + "\n"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, text in members.items():
            archive.writestr(path, text)
    return f"{stem}-{version}-{PURE}.whl", buffer.getvalue()


def cupy(name: str, version: str, runtime: int, *, broken: bool = False) -> tuple[str, bytes]:
    init = (
        "raise ImportError('this cupy build is broken')\n" if broken else "from cupy import cuda\n"
    )
    files = {
        "cupy/__init__.py": init,
        "cupy/cuda/__init__.py": "from cupy.cuda import runtime\n",
        "cupy/cuda/runtime.py": f"def runtimeGetVersion():\n    return {runtime}\n",
    }
    return wheel(name, version, ("fastlock>=1.0",), files=files)


def torch(
    version: str, cuda: str, requires: tuple[str, ...], *, libtorch: bytes | None = None
) -> tuple[str, bytes]:
    files: dict[str, str | bytes] = {
        "torch/__init__.py": "from torch.version import __version__\n",
        "torch/version.py": f"__version__ = '{version}'\ncuda = '{cuda}'\n",
        "torch/run.py": "def main():\n    print('torchrun ok')\n",
    }
    if libtorch is not None:
        files["torch/lib/libtorch.so"] = libtorch
    return wheel("torch", version, requires, files=files, scripts={"torchrun": "torch.run:main"})


def build(server: IndexServer) -> IndexServer:
    pypi = "pypi"
    server.root(pypi)
    for version in ("12.8.1", "12.9.1", "13.0.2", "13.2.0"):
        server.add(pypi, *wheel("cuda-toolkit", version, files={}))
    for version in ("12.8.90", "12.9.79"):
        server.add(pypi, *wheel("nvidia-cuda-runtime-cu12", version, files={
            "nvidia/cuda_runtime/__init__.py": f"version = '{version}'\n"}))  # fmt: skip
    for version in ("13.0.96", "13.2.51"):
        server.add(pypi, *wheel("nvidia-cuda-runtime", version, files={
            "nvidia/cu13/__init__.py": f"version = '{version}'\n"}))  # fmt: skip
    for version in ("12.8.0", "12.9.0", "13.0.3", "13.2.0"):
        server.add(pypi, *wheel("cuda-bindings", version, files={
            "cuda/bindings/__init__.py": f"__version__ = '{version}'\n"}))  # fmt: skip
    server.add(pypi, *cupy("cupy-cuda12x", "13.4.1", 12080))
    server.add(pypi, *cupy("cupy-cuda13x", "14.0.0", 13000))
    server.add(pypi, *cupy("cupy-cuda13x", "15.0.0rc1", 13000))  # only `--pre` takes it
    for version in ("1.0", "1.1"):
        server.add(pypi, *wheel("fastlock", version))
    server.add(pypi, *wheel("servellm", "1.0", ("torch>=2.9",)))
    # PyPI's own torch: one CUDA build per version, untagged, as PyTorch publishes it.
    server.add(pypi, *torch("2.9.1", "12.8", ("nvidia-cuda-runtime-cu12==12.8.90",)))
    server.add(pypi, *torch("2.11.0", "13.0", ("nvidia-cuda-runtime==13.0.96",)))
    for tag, torch_version, torchvision, requires in (
        ("cu128", "2.9.1+cu128", "0.24.1+cu128", "nvidia-cuda-runtime-cu12==12.8.90"),
        ("cu130", "2.11.0+cu130", "0.26.0+cu130", "nvidia-cuda-runtime==13.0.96"),
    ):
        root = f"torch-{tag}"
        server.root(root, html_only=True)
        server.add(root, *torch(torch_version, f"{tag[2:-1]}.{tag[-1]}", (requires,)))
        public = torch_version.split("+")[0]
        server.add(root, *wheel("torchvision", torchvision, (f"torch=={public}",)))
    return server


def index_table(server: IndexServer, home: Path) -> None:
    """The user's index table: PyTorch's per-line indexes on loopback."""
    home.mkdir(parents=True, exist_ok=True)
    urls = "".join(f'{tag} = "{server.url(f"torch-{tag}")}"\n' for tag in ("cu128", "cu130"))
    (home / "indexes.toml").write_text(
        f"[indexes.pytorch]\nprojects = {list(PYTORCH)!r}\n[indexes.pytorch.urls]\n{urls}".replace(
            "'", '"'
        )
    )


def make_environment(
    server: IndexServer, path: Path, packages: list[str], cache: Path, *, per_line: bool = True
) -> Path:
    """A virtual environment at ``path`` holding ``packages`` from the world (``per_line``:
    PyTorch's cu128 index before ``pypi``, as a user of it installs); its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    python = path / "bin" / "python"
    if packages:
        argv = [
            find_uv(), "pip", "install", "--python", str(python), "--no-config", "--quiet",
            "--cache-dir", str(cache), "--index-url", server.url("pypi"),
            *(["--index", server.url("torch-cu128")] if per_line else []), *packages,
        ]  # fmt: skip
        environment = {k: v for k, v in os.environ.items() if not k.startswith("UV_")}
        subprocess.run(argv, check=True, env=environment)
    return python


def tree_state(root: Path) -> dict[str, tuple[str, int, str]]:
    """Every entry below ``root``: kind, mode and content hash (or link target)."""
    state: dict[str, tuple[str, int, str]] = {}
    for directory, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = Path(directory) / name
            relative = str(path.relative_to(root))
            status = path.lstat()
            if path.is_symlink():
                state[relative] = ("link", 0, str(path.readlink()))
            elif path.is_dir():
                state[relative] = ("dir", status.st_mode & 0o7777, "")
            else:
                state[relative] = (
                    "file",
                    status.st_mode & 0o7777,
                    hashlib.sha256(path.read_bytes()).hexdigest(),
                )
    return state


def freeze(python: Path) -> list[str]:
    done = subprocess.run(
        [find_uv(), "pip", "freeze", "--python", str(python), "--no-config"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return sorted(done.stdout.split())


def upgrade(capsys: pytest.CaptureFixture[str], python: Path, *args: str) -> CliResult:
    """``cudaup upgrade ARGS --python PYTHON``."""
    return run_cli(capsys, "upgrade", *args, "--python", str(python))
