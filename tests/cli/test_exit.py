"""The process's exit (:func:`cudaup.cli.main.run`): without the interpreter's teardown,
yet with all output written, the exit hooks run, the command's exit code, and any thread
still at work waited for, as the normal exit would (issue #27: the teardown was 36-67 ms
of every cold install).  Each case runs in a fresh interpreter, its ``main`` replaced."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from cudaup.cli.version import VERSION

CHILD = """
import atexit, importlib, sys, threading, time
from pathlib import Path
entry = importlib.import_module("cudaup.cli.main")  # the module: cudaup.cli.main is the function
marker = Path(sys.argv[1])

def command():
    case = sys.argv[2]
    if case == "output":
        sys.stdout.write("x" * 2_000_000)
        sys.stdout.write("end")  # left in the buffer: run() must flush it
        sys.stderr.write("to stderr")
    elif case == "full":
        sys.stdout.write("end")  # left in the buffer, for a stdout that is a full disk
    elif case == "hook":
        atexit.register(lambda: marker.write_text("hook ran"))
    elif case == "thread":
        def late():
            time.sleep(0.3)  # still working when the command returns
            marker.write_text("thread finished")
        threading.Thread(target=late).start()
    elif case == "daemon":
        threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()
        shutdown = threading._shutdown  # what the interpreter's exit calls first
        def noted():
            marker.write_text("the interpreter's exit")
            shutdown()
        threading._shutdown = noted
    return 7

entry.main = command
entry.run()
"""


def child(tmp_path: Path, case: str, **redirect: Any) -> subprocess.CompletedProcess[str]:
    # Buffered output, as a user's shell gives it (this machine's environment sets
    # PYTHONUNBUFFERED, under which nothing would be left to flush).
    env = {name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"}
    streams = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, **redirect}
    return subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path / "marker"), case],
        **streams, text=True, timeout=60, check=False, env=env,
    )  # fmt: skip


def test_buffered_output_is_written_and_the_exit_code_kept(tmp_path: Path) -> None:
    done = child(tmp_path, "output")
    assert (done.returncode, done.stdout, done.stderr) == (7, "x" * 2_000_000 + "end", "to stderr")


def test_output_that_cannot_be_written_ends_as_the_normal_exit_ends_it(tmp_path: Path) -> None:
    """A full disk under a redirected stdout: the interpreter's own exit reports it
    (exit 120), as before; never a traceback (exit 1)."""
    with Path("/dev/full").open("w") as full:
        done = child(tmp_path, "full", stdout=full)
    assert done.returncode == 120, done.stderr
    assert "No space left on device" in done.stderr
    assert "Traceback" not in done.stderr


def test_exit_hooks_run(tmp_path: Path) -> None:
    done = child(tmp_path, "hook")
    assert done.returncode == 7, done.stderr
    assert (tmp_path / "marker").read_text() == "hook ran"


def test_a_thread_still_at_work_is_waited_for(tmp_path: Path) -> None:
    done = child(tmp_path, "thread")
    assert done.returncode == 7, done.stderr
    assert (tmp_path / "marker").read_text() == "thread finished"


def test_a_daemon_thread_does_not_hold_the_exit_back(tmp_path: Path) -> None:
    """Python's own exit does not wait for a daemon thread (the request deadlines' one
    stays for the process): the exit without the teardown is taken all the same."""
    done = child(tmp_path, "daemon")
    assert done.returncode == 7, done.stderr
    assert not (tmp_path / "marker").exists()


def test_python_m_cudaup_exits_through_it() -> None:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "cudaup", "--version"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert done.stdout == VERSION + "\n"
    assert "atexit" in done.stderr  # run() loaded it for the exit hooks: the path taken
