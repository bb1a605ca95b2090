"""Stopping a child process (util/processes.py) with real processes: a wrapper that runs
its program without ``exec`` is stopped with what it started, and a child stuck in the
kernel does not hold its caller."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cudaup.util import processes
from tests.helpers import lingering_wrapper, started_child, wait_until_ended
from tests.osfaults import ROOT_ONLY, frozen_filesystem


@pytest.mark.parametrize("depth", [1, 2])
def test_kill_stops_what_a_wrapper_started_without_exec(tmp_path: Path, depth: int) -> None:
    pid_file = lingering_wrapper(tmp_path / "wrapper.sh")
    argv = [str(tmp_path / "wrapper.sh")]
    if depth == 2:  # a wrapper around the wrapper, neither exec'ing the next
        (tmp_path / "outer.sh").write_text(f"#!/bin/sh\n{argv[0]}\necho ended\n")
        (tmp_path / "outer.sh").chmod(0o755)
        argv = [str(tmp_path / "outer.sh")]
    process = processes.start(argv)
    child = started_child(pid_file)
    processes.kill(process)
    # The child holds the output pipes: killing the wrapper alone left communicate()
    # waiting for it (LINGER seconds).
    out, _ = process.communicate(timeout=30)
    assert process.returncode == -9 and out == ""
    wait_until_ended(child)


def test_kill_leaves_a_process_that_has_ended_alone() -> None:
    process = processes.start(["true"])
    process.communicate(timeout=30)
    processes.kill(process)  # nothing to kill: nothing raised, nothing signalled
    assert process.returncode == 0


def test_a_process_is_killed_only_while_it_is_the_child_it_was_found_as() -> None:
    """What a pid names may change between the look at /proc and the kill: a process
    whose parent is not the one it was found under is left alone."""
    process = subprocess.Popen(["sleep", "300"])
    try:
        processes._kill_child(process.pid, parent=1)  # not its parent: left alone
        with pytest.raises(subprocess.TimeoutExpired):
            process.wait(timeout=0.2)
        processes._kill_child(process.pid, parent=os.getpid())
        assert process.wait(timeout=30) == -9
    finally:
        process.kill()
        process.wait()


def test_without_the_kernels_children_files_every_process_is_asked_its_parent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A /proc without ``task/*/children`` (a kernel built without them): the processes
    below are found by their parents, the deepest last, zombies left out."""

    def process(pid: int, parent: int, state: str = "S") -> None:
        (tmp_path / str(pid) / "task" / str(pid)).mkdir(parents=True)
        (tmp_path / str(pid) / "stat").write_text(f"{pid} (a) b) {state} {parent} {pid} 0\n")

    process(100, 1)
    process(200, 100)  # the wrapper's child
    process(300, 200)  # and its child
    process(400, 100, "Z")  # ended, not reaped
    process(500, 1)  # another's
    monkeypatch.setattr(processes, "PROC", tmp_path)
    assert list(processes._below(100)) == [(200, 100), (300, 200)]


def test_a_child_stays_in_the_callers_group_so_a_kill_of_the_group_reaches_it() -> None:
    process = processes.start([sys.executable, "-c", "import os; print(os.getpgid(0))"])
    out, _ = process.communicate(timeout=30)
    assert int(out) == os.getpgid(0)


def test_the_environment_given_is_the_whole_environment() -> None:
    process = processes.start(
        ["sh", "-c", 'echo "$CUDAUP_TEST_MARK:$HOME"'], {"CUDAUP_TEST_MARK": "x"}
    )
    out, _ = process.communicate(timeout=30)
    assert out == "x:\n"


def test_a_child_reads_no_input_and_says_its_output_and_errors_as_text() -> None:
    process = processes.start(["sh", "-c", "cat; echo out; echo err >&2"])
    assert process.communicate(timeout=30) == ("out\n", "err\n")


def test_run_answers_what_the_child_said_and_its_status() -> None:
    done = processes.run(["sh", "-c", "echo out; echo err >&2; exit 3"], timeout=30)
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "err\n")
    raw = processes.run(["printf", "\\377"], timeout=30, text=False)
    assert raw.stdout == b"\xff"


def test_run_kills_a_child_out_of_time_with_what_it_started(tmp_path: Path) -> None:
    pid_file = lingering_wrapper(tmp_path / "wrapper.sh")
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        processes.run([str(tmp_path / "wrapper.sh")], timeout=0.5)
    assert time.monotonic() - started < processes.KILL_GRACE  # it ended when killed
    wait_until_ended(int(pid_file.read_text()))


@ROOT_ONLY
def test_run_does_not_hang_on_a_child_stuck_in_the_kernel(tmp_path: Path) -> None:
    """``subprocess.run`` kills a child that ran out of time, then waits for it without
    limit: one stuck in the kernel, which a SIGKILL does not end, hung the caller with it
    (``cudaup doctor`` on a machine whose nvidia-smi hangs in the driver)."""
    with frozen_filesystem(tmp_path / "frozen") as frozen:
        started = time.monotonic()
        with pytest.raises(subprocess.TimeoutExpired):
            processes.run(["sh", "-c", f"echo x > {frozen}/file"], timeout=0.5)
        waited = time.monotonic() - started
    assert 0.5 + processes.KILL_GRACE <= waited < 0.5 + processes.KILL_GRACE + 20
