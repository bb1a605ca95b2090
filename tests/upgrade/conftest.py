"""Fixtures for the upgrade tests: the loopback world and environments built in it."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.plan.pyindex import IndexServer
from tests.upgrade.world import build, index_table, make_environment

#: The packages of the environment most tests move from CUDA 12.8 to 13.0.
STACK = [
    "torch==2.9.1+cu128",
    "torchvision==0.24.1+cu128",
    "cupy-cuda12x==13.4.1",
    "cuda-bindings==12.8.0",
    "fastlock==1.0",
    "servellm==1.0",
]

MakeEnv = Callable[..., Path]


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="session")
def uv_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """uv's cache for building test environments (their wheels are the same every time)."""
    return tmp_path_factory.mktemp("uv-cache")


@pytest.fixture
def world(
    index_server: IndexServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> IndexServer:
    """The world on loopback; PyPI and PyTorch's indexes pointed at it, NVIDIA's hosts at a
    closed port (the release list then comes from the world's cuda-toolkit versions)."""
    build(index_server)
    point_at(index_server, monkeypatch, tmp_path)
    index_table(index_server, tmp_path / "home")
    return index_server


def point_at(server: IndexServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """PyPI at ``server``'s ``pypi`` root, NVIDIA's hosts at a closed port, no driver."""
    monkeypatch.setenv("CUDAUP_PYPI_URL", server.url("pypi"))
    nowhere = f"http://127.0.0.1:{closed_port()}"
    for name in ("DOWNLOAD", "ARCHIVE", "PRERELEASE"):
        monkeypatch.setenv(f"CUDAUP_NVIDIA_{name}_URL", nowhere)
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    monkeypatch.setenv("CUDAUP_SYSTEM_ROOT", str(tmp_path / "machine"))
    (tmp_path / "machine").mkdir()


@pytest.fixture
def make_env(world: IndexServer, tmp_path: Path, uv_cache: Path) -> MakeEnv:
    def make(packages: list[str] | None = None, name: str = "venv") -> Path:
        return make_environment(
            world, tmp_path / "project" / name, STACK if packages is None else packages, uv_cache
        )

    return make
