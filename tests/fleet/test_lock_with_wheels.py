"""``lock RELEASE --with PKGS``: the wheels are planned for the locked release's line."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from cudaup.errors import EXIT_CODES
from cudaup.fleet.lockfile import read_lock
from tests.cli.test_cli_plan import world  # noqa: F401 - fixture: the ML wheel world
from tests.fakenvidia.server import FakeNvidiaServer
from tests.helpers import point_env_at, run_cli
from tests.plan.pyindex import IndexServer


@pytest.fixture
def nvidia_and_world(
    world: IndexServer,  # noqa: F811 - the fixture imported above
    fake_nvidia: FakeNvidiaServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> IndexServer:
    """NVIDIA's documents and the ML wheel world (pytorch's per-line indexes in the
    user's index table) on loopback; the lock is written in ``tmp_path``."""
    point_env_at(monkeypatch, fake_nvidia)
    monkeypatch.chdir(tmp_path)
    return world


LOCK = ["--channel", "redist", "--components", "nvcc", "--platform", "linux-x86_64"]
WITH = ["--with", "torch", "--index", "pypi", "--index", "pytorch", "--python", "3.12"]


def test_the_wheels_follow_the_locked_release(
    nvidia_and_world: IndexServer, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    result = run_cli(capsys, "lock", "13.0.1", *LOCK, *WITH)
    assert result.code == 0, result.err
    assert "linux-x86_64: CUDA 13.0.1 (redist, " in result.out
    assert "linux-x86_64: wheels for CUDA 13.0 in pylock.cuda-lock-linux-x86_64.toml" in result.out
    [wheels] = read_lock(tmp_path / "cuda.lock.toml").wheels
    assert wheels.cuda_line == "13.0"
    pylock = tomllib.loads((tmp_path / wheels.pylock).read_text())
    torch = next(p for p in pylock["packages"] if p["name"] == "torch")
    assert torch["version"] == "2.11.0+cu130"  # not 2.12.0+cu132, the newest line's
    older = run_cli(capsys, "lock", "12.8.0", *LOCK, *WITH, "-o", "old.lock.toml")
    assert older.code == 0, older.err
    assert "wheels for CUDA 12.8 in pylock.old-lock-linux-x86_64.toml" in older.out


def test_no_wheels_for_the_locked_line_is_said_so(
    nvidia_and_world: IndexServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """11.8 has no torch in this world: the lock fails rather than pair it with
    wheels for another line."""
    result = run_cli(capsys, "lock", "11.8.0", *LOCK, *WITH)
    assert result.code == EXIT_CODES["no-common-line"], result.err
    assert "11.8" in result.err
    assert not Path("cuda.lock.toml").exists()
