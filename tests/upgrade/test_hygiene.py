"""What a killed upgrade leaves, and who removes it: the next upgrade, rollback or
``snapshots`` removes a dead run's temporary directory and work tree (a free ``flock`` is a
dead holder), never a live run's; ``snapshots`` says the disk each entry takes; the
environment's lock file is 0644.  Kills wait for the state they need (the server holding
the wheel uv asked for), never a sleep."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
from pathlib import Path

import pytest

from cudaup.upgrade.snapshots import SnapshotStore
from cudaup.upgrade.transaction import SCRATCH_PREFIX, held_scratch, sweep_scratch
from tests.helpers import run_cli
from tests.osfaults import cudaup_argv
from tests.upgrade.conftest import STACK
from tests.upgrade.test_transaction import HoldingServer, holding_world  # noqa: F401 - fixture
from tests.upgrade.world import freeze, make_environment, tree_state


def _du(path: Path) -> int:
    """``du``'s answer: allocated bytes, each inode once."""
    done = subprocess.run(
        ["du", "-s", "-B1", str(path)], capture_output=True, text=True, check=True
    )
    return int(done.stdout.split()[0])


@pytest.fixture
def scratch_base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """$TMPDIR for this test alone, so what other runs leave in /tmp is not in the way."""
    base = tmp_path / "tmp"
    base.mkdir()
    monkeypatch.setenv("TMPDIR", str(base))
    monkeypatch.setattr("tempfile.tempdir", None)  # read $TMPDIR again
    return base


def _start(python: Path, base: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        cudaup_argv("upgrade", "13.0", "--python", str(python), "--yes", "--no-toolkit"),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        start_new_session=True, env={**os.environ, "TMPDIR": str(base)},
    )  # fmt: skip


def test_a_dead_runs_leftovers_go_with_the_next_snapshots(
    holding_world: HoldingServer,  # noqa: F811 - the fixture
    tmp_path: Path,
    uv_cache: Path,
    scratch_base: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    python = make_environment(holding_world, tmp_path / "project" / "venv", STACK, uv_cache)
    root = python.parent.parent
    state = tree_state(root)
    process = _start(python, scratch_base)
    try:
        assert holding_world.arrived.wait(120), "uv never asked for the wheel"
        os.killpg(process.pid, signal.SIGKILL)  # cudaup and uv, mid-install
        process.communicate(timeout=30)
    finally:
        holding_world.release.set()
    store = SnapshotStore(root)
    [snapshot] = store.snapshots()
    work = store.work_path(snapshot.id)
    [scratch] = scratch_base.glob(f"{SCRATCH_PREFIX}*")
    assert work.is_dir() and (scratch / "lock").is_file()
    lock = store.directory / "lock"
    assert stat.S_IMODE(lock.stat().st_mode) == 0o644

    listed = run_cli(capsys, "snapshots", "--python", str(python), "--json")
    assert listed.code == 0, listed.err
    document = listed.json()
    assert not work.exists() and not scratch.exists()
    notes = " / ".join(document["notes"])
    assert f"snapshot {snapshot.id}: an upgrade was interrupted before it changed" in notes
    assert f"removed {scratch}, left by an upgrade that was killed" in notes
    [row] = document["snapshots"]
    assert row["status"] == "interrupted" and row["in_progress"] is False
    # Its tree shares every file with the environment: it takes its directories and the
    # files' blocks once (du's count), and removing it frees only what it alone links.
    assert row["holds"] == _du(store.path_of(snapshot.id)) > 0
    assert 0 < row["frees"] < row["holds"]
    text = run_cli(capsys, "snapshots", "--python", str(python))
    assert "interrupted (its upgrade was killed before it changed the environment)" in text.out
    assert tree_state(root) == state


def test_a_live_runs_work_is_left_alone_and_listed_in_progress(
    holding_world: HoldingServer,  # noqa: F811 - the fixture
    tmp_path: Path,
    uv_cache: Path,
    scratch_base: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    python = make_environment(holding_world, tmp_path / "project" / "venv", STACK, uv_cache)
    process = _start(python, scratch_base)
    try:
        assert holding_world.arrived.wait(120), "uv never asked for the wheel"
        store = SnapshotStore(python.parent.parent)
        [snapshot] = store.snapshots()
        [scratch] = scratch_base.glob(f"{SCRATCH_PREFIX}*")
        listed = run_cli(capsys, "snapshots", "--python", str(python), "--json").json()
        [row] = listed["snapshots"]
        assert row["in_progress"] is True and row["status"] == "taken"
        # The entry takes its own tree and the live run's work tree, with what uv put there.
        assert row["holds"] >= _du(store.path_of(snapshot.id))
        assert any("is working on" in note for note in listed["notes"])
        assert store.work_path(snapshot.id).is_dir() and scratch.is_dir()
        assert sweep_scratch() == [] and scratch.is_dir()
    finally:
        holding_world.release.set()
    _out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err
    assert "cupy-cuda13x==14.0.0" in freeze(python)
    assert not list(scratch_base.glob(f"{SCRATCH_PREFIX}*"))  # the run removed its own


def test_the_sweep_leaves_a_live_run_and_what_has_no_lock_or_is_a_link(scratch_base: Path) -> None:
    bare = scratch_base / f"{SCRATCH_PREFIX}bare"
    bare.mkdir()
    link = scratch_base / f"{SCRATCH_PREFIX}link"
    link.symlink_to(bare)
    with held_scratch() as live:
        assert stat.S_IMODE(live.stat().st_mode) == 0o700
        assert stat.S_IMODE((live / "lock").stat().st_mode) == 0o600
        assert sweep_scratch() == []
        assert live.is_dir() and bare.is_dir() and link.is_symlink()
    assert not live.exists()
