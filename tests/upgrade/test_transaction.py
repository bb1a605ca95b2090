"""The transaction: killed, interrupted, serialised, verified on a GPU, faulted, recovered."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from cudaup.config import Settings
from cudaup.core.driver import DriverInfo, DriverVersion, GpuInfo
from cudaup.errors import EXIT_CODES, VerificationFailedError
from cudaup.plan.indexes import indexes_for
from cudaup.upgrade import Upgrader, UpgradeRequest
from cudaup.upgrade.snapshots import SnapshotStore
from cudaup.upgrade.verify import Verifier
from tests.helpers import run_cli
from tests.osfaults import ROOT_ONLY, as_nobody, cudaup_argv, shared_tmp, tmpfs
from tests.plan.pyindex import IndexServer
from tests.upgrade.conftest import STACK, MakeEnv
from tests.upgrade.world import (
    build,
    freeze,
    index_table,
    make_environment,
    tree_state,
    upgrade,
)

H100 = (GpuInfo(0, "NVIDIA H100 80GB HBM3", "9.0", 81559),)
DRIVER = DriverInfo(DriverVersion.from_text("590.48.01"), None, H100, "sysfs", ())


class HoldingServer(IndexServer):
    """The world's server, holding back the download of one file until released."""

    def __init__(self, filename: str) -> None:
        super().__init__()
        self.filename = filename
        self.arrived = threading.Event()
        self.release = threading.Event()
        # The client the test kills leaves a broken pipe behind: expected, not worth a trace.
        self.server.handle_error = lambda request, address: None  # type: ignore[method-assign, assignment]

    def _file(self, path: str, spec: str | None) -> tuple[int, dict[str, str], bytes]:
        if path.endswith("/" + self.filename) and spec is None:
            self.arrived.set()
            self.release.wait(120)
        return super()._file(path, spec)


def _request(python: Path, line: tuple[int, int] = (13, 0)) -> UpgradeRequest:
    settings = Settings.from_env()
    return UpgradeRequest(
        python=str(python),
        line=line,
        indexes=indexes_for(settings.pypi_url, [], settings.user_indexes),
        platform="linux-x86_64",
        components=None,
    )


def _store(python: Path) -> SnapshotStore:
    return SnapshotStore(python.parent.parent)


# -- a kill during apply ----------------------------------------------------------------
@pytest.fixture
def holding_world(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, world: IndexServer
) -> Iterator[HoldingServer]:
    """The world again, on a server that holds cupy-cuda13x's wheel back."""
    server = HoldingServer("cupy_cuda13x-14.0.0-py3-none-any.whl")
    with server:
        build(server)
        monkeypatch.setenv("CUDAUP_PYPI_URL", server.url("pypi"))
        index_table(server, tmp_path / "home")
        yield server
        server.release.set()


def test_a_kill_during_apply_leaves_the_old_environment_and_rollback_restores_it(
    holding_world: HoldingServer, tmp_path: Path, uv_cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    python = make_environment(holding_world, tmp_path / "project" / "venv", STACK, uv_cache)
    root = python.parent.parent
    frozen, state = freeze(python), tree_state(root)
    process = subprocess.Popen(
        cudaup_argv("upgrade", "13.0", "--python", str(python), "--yes", "--no-toolkit"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group: cudaup and the uv it runs
    )
    try:
        assert holding_world.arrived.wait(120), "uv never asked for the wheel"
        os.killpg(process.pid, signal.SIGKILL)  # cudaup and uv, mid-install
        process.communicate(timeout=30)
    finally:
        holding_world.release.set()
    assert process.returncode == -signal.SIGKILL
    # The environment is the old one, whole: uv only ever wrote to the work tree.
    assert tree_state(root) == state and freeze(python) == frozen
    store = _store(python)
    [snapshot] = store.snapshots()
    assert snapshot.status == "taken" and store.work_path(snapshot.id).is_dir()
    # rollback finishes what the kill left, and restores the snapshot taken before it.
    result = run_cli(capsys, "rollback", "--python", str(python))
    assert result.code == 0, result.err
    assert "an upgrade was interrupted before it changed the environment" in result.out
    assert tree_state(root) == state and freeze(python) == frozen
    assert sorted(p.name for p in store.directory.iterdir()) == ["lock"]


def test_ctrl_c_during_apply_changes_nothing_and_leaves_nothing(
    holding_world: HoldingServer, tmp_path: Path, uv_cache: Path
) -> None:
    python = make_environment(holding_world, tmp_path / "project" / "venv", STACK, uv_cache)
    root = python.parent.parent
    state = tree_state(root)
    process = subprocess.Popen(
        cudaup_argv("upgrade", "13.0", "--python", str(python), "--yes", "--no-toolkit"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert holding_world.arrived.wait(120), "uv never asked for the wheel"
        os.killpg(process.pid, signal.SIGINT)  # what a terminal's Ctrl-C sends the group
        _out, err = process.communicate(timeout=120)
    finally:
        holding_world.release.set()
    assert process.returncode == 130, err
    assert tree_state(root) == state
    assert sorted(p.name for p in _store(python).directory.iterdir()) == ["lock"]


KILLED_AT = {
    # Between the swap and the record that says it happened.
    "commit": """
from cudaup.upgrade.snapshots import SnapshotStore
real = SnapshotStore.write
def write(self, snapshot):
    if snapshot.record.get("status") == "applied":
        os.kill(os.getpid(), signal.SIGKILL)
    real(self, snapshot)
SnapshotStore.write = write
""",
    # A filesystem without RENAME_EXCHANGE, between its two renames.
    "renames": """
import pathlib
from cudaup.upgrade import snapshots
snapshots.exchange = lambda first, second: False
real = pathlib.Path.rename
def rename(self, target):
    if self.name.startswith("work-"):
        os.kill(os.getpid(), signal.SIGKILL)
    return real(self, target)
pathlib.Path.rename = rename
""",
}


def _killed_at(point: str, python: Path) -> None:
    """Run an upgrade that SIGKILLs itself at ``point``."""
    script = (
        "import os, signal, sys\n"
        + KILLED_AT[point]
        + ("from cudaup.cli import main\nsys.exit(main(sys.argv[1:]))\n")
    )
    argv = ["upgrade", "13.0", "--python", str(python), "--yes", "--no-toolkit"]
    done = subprocess.run(
        [sys.executable, "-c", script, *argv], capture_output=True, text=True, check=False
    )
    assert done.returncode == -signal.SIGKILL, done.stderr


def test_a_kill_after_the_swap_is_finished_by_the_next_command(
    make_env: MakeEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    """Killed between the swap and the record saying so: the journal tells the next command
    that the environment is already the new one; rollback then restores the old."""
    python = make_env()
    root = python.parent.parent
    state = tree_state(root)
    _killed_at("commit", python)
    assert "cupy-cuda13x==14.0.0" in freeze(python)  # the swap happened
    store = _store(python)
    [snapshot] = store.snapshots()
    assert snapshot.status == "applying" and store.work_path(snapshot.id).is_dir()
    listed = run_cli(capsys, "snapshots", "--python", str(python), "--prune", "--keep", "5")
    assert "an upgrade was interrupted after it replaced the environment" in listed.err
    [snapshot] = store.snapshots()
    assert snapshot.status == "applied" and not store.work_path(snapshot.id).exists()
    assert run_cli(capsys, "rollback", "--python", str(python)).code == 0
    assert tree_state(root) == state


def test_without_an_atomic_exchange_two_journaled_renames_do(
    make_env: MakeEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A filesystem without RENAME_EXCHANGE: the environment is moved aside, the new tree
    moved in; a kill between the two renames is undone by the next command."""
    python = make_env()
    root = python.parent.parent
    state = tree_state(root)
    with monkeypatch.context() as patch:
        patch.setattr("cudaup.upgrade.snapshots.exchange", lambda first, second: False)
        Upgrader(Settings.from_env()).upgrade(_request(python), lambda plan: True)
        assert "cupy-cuda13x==14.0.0" in freeze(python)
        Upgrader(Settings.from_env()).rollback(str(python))
    assert tree_state(root) == state
    _killed_at("renames", python)
    assert not root.exists()  # aside, and the new tree not yet in its place
    store = _store(python)
    [snapshot] = store.snapshots()
    assert store.recover() == [
        f"snapshot {snapshot.id}: an upgrade was interrupted before it changed the environment"
    ]
    assert tree_state(root) == state


# -- two at once ---------------------------------------------------------------------------
HOLD_LOCK = """
import sys, time
from pathlib import Path
from cudaup.util.faults import Place
from cudaup.util.locks import locked
path = Path(sys.argv[1])
with locked(path, busy="busy", wait=5, place=Place(path.parent, "")):
    print("held", flush=True)
    time.sleep(600)
"""


def test_two_upgrades_of_one_environment_are_serialised(make_env: MakeEnv) -> None:
    python = make_env()
    root = python.parent.parent
    state = tree_state(root)
    store = _store(python)
    store.ensure()
    holder = subprocess.Popen(  # another process holds the lock (flock is per process)
        [sys.executable, "-c", HOLD_LOCK, str(store.directory / "lock")],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    process = subprocess.Popen(
        cudaup_argv("upgrade", "13.0", "--python", str(python), "--yes", "--no-toolkit"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        first = process.stderr.readline()
        assert "waiting for another cudaup working on" in first, first
        assert tree_state(root) == state  # it waits before reading anything
    finally:
        holder.kill()
        holder.communicate()
    _out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err
    assert "cupy-cuda13x==14.0.0" in freeze(python)


# -- verification in the environment's interpreter ----------------------------------------------
def test_the_gpu_step_runs_a_supplied_kernel_in_the_new_environment(make_env: MakeEnv) -> None:
    python = make_env()
    # The check runs in the upgraded environment's interpreter: cupy there is CUDA 13.
    script = (
        "import cupy, sys; sys.exit(0 if cupy.cuda.runtime.runtimeGetVersion() == 13000 else 5)"
    )
    upgrader = Upgrader(Settings.from_env(), verifier=Verifier(DRIVER, gpu_script=script))
    outcome = upgrader.upgrade(_request(python), lambda plan: True, driver=DRIVER)
    gpu = [c for c in outcome.checks if c.step == "gpu"]
    assert [(c.status, c.detail) for c in gpu] == [
        ("ok", "a kernel ran on the GPU through the supplied script")
    ]


def test_a_failing_kernel_rolls_back(make_env: MakeEnv) -> None:
    python = make_env()
    root = python.parent.parent
    state = tree_state(root)
    failing = (
        "import sys; sys.stderr.write('CUDA error: no kernel image is available\\n'); sys.exit(1)"
    )
    upgrader = Upgrader(Settings.from_env(), verifier=Verifier(DRIVER, gpu_script=failing))
    with pytest.raises(VerificationFailedError) as caught:
        upgrader.upgrade(_request(python), lambda plan: True, driver=DRIVER)
    assert caught.value.step == "gpu" and caught.value.exit_code == 19
    assert "no kernel image is available" in str(caught.value) and "rolled back" in str(
        caught.value
    )
    assert tree_state(root) == state and _store(python).snapshots() == []


def test_with_a_driver_the_default_kernel_goes_through_torch(make_env: MakeEnv) -> None:
    """The world's torch has no CUDA to run a kernel on: the default step uses it, fails, and
    the environment stays as it was."""
    python = make_env()
    state = tree_state(python.parent.parent)
    with pytest.raises(VerificationFailedError) as caught:
        Upgrader(Settings.from_env()).upgrade(_request(python), lambda plan: True, driver=DRIVER)
    assert caught.value.step == "gpu" and caught.value.package == "torch"
    assert tree_state(python.parent.parent) == state


# -- snapshots ----------------------------------------------------------------------------
def test_prune_keeps_the_newest(make_env: MakeEnv, capsys: pytest.CaptureFixture[str]) -> None:
    python = make_env()
    for line in ("13.0", "12.8", "13.0"):
        result = upgrade(capsys, python, line, "--yes", "--no-toolkit")
        assert result.code == 0, result.err
    listed = run_cli(capsys, "snapshots", "--python", str(python), "--json").json()
    assert [s["line_after"] for s in listed["snapshots"]] == ["13.0", "12.8", "13.0"]
    newest = listed["snapshots"][-1]["id"]
    pruned = run_cli(
        capsys, "snapshots", "--python", str(python), "--prune", "--keep", "1", "--json"
    ).json()
    assert len(pruned["removed"]) == 2 and [s["id"] for s in pruned["snapshots"]] == [newest]
    assert list(pruned) == ["schema", "environment", "store", "snapshots", "removed", "notes"]
    assert list(pruned["snapshots"][0])[-3:] == ["holds", "frees", "in_progress"]
    assert pruned["snapshots"][0]["in_progress"] is False
    text = run_cli(capsys, "snapshots", "--python", str(python))
    assert f"{newest}" in text.out and "applied  CUDA 12.8 → 13.0" in text.out


def test_a_snapshot_changed_in_place_is_not_restored(
    make_env: MakeEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    python = make_env()
    root = python.parent.parent
    assert upgrade(capsys, python, "13.0", "--yes", "--no-toolkit").code == 0
    # fastlock did not move: its file is shared by the environment and the snapshot.
    [shared] = root.glob("lib/python*/site-packages/fastlock/__init__.py")
    with shared.open("a") as handle:
        handle.write("# edited in place\n")
    result = run_cli(capsys, "rollback", "--python", str(python))
    assert result.code == EXIT_CODES["integrity"]
    assert "fastlock/__init__.py was replaced or written" in result.err
    assert "cupy-cuda13x==14.0.0" in freeze(python)  # nothing was swapped


# -- the toolkit ----------------------------------------------------------------------------
def test_the_toolkit_is_installed_and_pinned(
    make_env: MakeEnv,
    fake_nvidia: object,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from tests.helpers import point_env_at

    point_env_at(monkeypatch, fake_nvidia)  # type: ignore[arg-type]
    python = make_env(["cupy-cuda12x==13.4.1", "cuda-bindings==12.8.0"])
    monkeypatch.chdir(tmp_path)
    result = upgrade(capsys, python, "13.0", "--yes", "--channel", "redist", "--pin", "--json")
    assert result.code == 0, result.err
    outcome = result.json()
    toolkit = outcome["toolkit"]
    assert toolkit["version"] == outcome["release"] and outcome["release"].startswith("13.0.")
    assert sorted(toolkit["components"]) == ["cuda_cudart", "cuda_nvcc"]
    assert Path(toolkit["path"], "bin", "nvcc").is_file()
    assert (tmp_path / ".cuda-version").read_text().strip() == outcome["release"]
    assert list(outcome)[-3:] == ["binding", "dry_run", "pin"] and outcome["dry_run"] is False
    assert outcome["pin"] == str(Path.cwd() / ".cuda-version")
    assert Path(os.environ["CUDAUP_HOME"], "bin", "nvcc").is_file()  # its shim


# -- faults ------------------------------------------------------------------------------------
@ROOT_ONLY
def test_a_directory_the_user_cannot_write_is_named(world: IndexServer, uv_cache: Path) -> None:
    with shared_tmp() as shared:
        project = shared / "project"
        python = make_environment(world, project / "venv", ["cupy-cuda12x==13.4.1"], uv_cache)
        subprocess.run(["chown", "-R", "65534:65534", str(project / "venv")], check=True)
        home = shared / "home"
        index_table(world, home)
        subprocess.run(["chown", "-R", "65534:65534", str(home)], check=True)
        env = {**os.environ, "CUDAUP_HOME": str(home), "CUDAUP_CACHE_DIR": str(home / "cache")}
        done = as_nobody(
            cudaup_argv("upgrade", "13.0", "--python", str(python), "--yes", "--no-toolkit"), env
        )
        assert done.returncode == EXIT_CODES["permission-denied"], done.stderr
        assert f"{project}/.cudaup-snapshots" in done.stderr and "permission denied" in done.stderr
        assert "run as the user who can write" in done.stderr


@ROOT_ONLY
def test_no_room_for_the_snapshot_is_named(
    make_env: MakeEnv, world: IndexServer, uv_cache: Path, tmp_path: Path
) -> None:
    with tmpfs(tmp_path / "fs", size="64m") as fs:
        python = make_environment(
            world, fs / "venv", ["cupy-cuda12x==13.4.1", "cuda-bindings==12.8.0"], uv_cache
        )
        state = tree_state(fs / "venv")
        used = os.statvfs(fs).f_files - os.statvfs(fs).f_ffree
        # Room for the store and a few directories: not for a clone of the environment's.
        subprocess.run(["mount", "-o", f"remount,nr_inodes={used + 8}", str(fs)], check=True)
        code = subprocess.run(
            cudaup_argv("upgrade", "13.0", "--python", str(python), "--yes", "--no-toolkit"),
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert code.returncode == EXIT_CODES["insufficient-space"], code.stderr
        assert "no free inodes" in code.stderr and str(fs) in code.stderr
        assert tree_state(fs / "venv") == state
        store = fs / ".cudaup-snapshots" / "venv"
        assert sorted(p.name for p in store.iterdir()) == ["lock"]  # the half-made clone went


def test_an_index_that_goes_down_before_the_install_changes_nothing(
    make_env: MakeEnv, world: IndexServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plan and its lock were made; then PyPI stops answering: uv cannot download, the
    upgrade stops with the network's exit code, and the environment is as it was."""
    from cudaup.errors import NetworkError
    from cudaup.upgrade.apply import pinned_requirements

    python = make_env()
    state = tree_state(python.parent.parent)

    def then_down(lock: Path) -> str:
        world.root("pypi").down = True
        return pinned_requirements(lock)

    monkeypatch.setattr("cudaup.upgrade.transaction.pinned_requirements", then_down)
    with pytest.raises(NetworkError, match=r"uv could not install the plan in .*: .*503"):
        Upgrader(Settings.from_env()).upgrade(_request(python), lambda plan: True)
    assert tree_state(python.parent.parent) == state and _store(python).snapshots() == []
