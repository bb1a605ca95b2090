"""The child processes cudaup starts and may have to stop: uv's resolutions and installs,
the interpreter asked for its version, and every tool run with a time limit
(``nvidia-smi``, ``nvcc --version``, an environment's Python).

:func:`kill` kills the child and every process below it.  Killing only the child is not
enough: the ``uv`` found may be a script that runs the real one without ``exec`` (a
version manager's shim, a logging wrapper), and the real one would then run on, holding
the output pipes, so the caller would still wait for its answer, and an ``upgrade``'s
install would go on writing.  The children stay in cudaup's process group, so that what
is sent to the group (the terminal's Ctrl-C, a ``kill`` of the group, a closed terminal)
reaches them too, even when cudaup itself can no longer act.

A process below the child is found by its parent (``/proc``) and killed through a pidfd
opened while its parent is still alive and checked to be that parent's child: never a
process that has taken the pid of one that has ended.

:func:`run` is ``subprocess.run`` with a limit that holds: ``subprocess.run`` kills a
child that ran out of time and then waits for it without limit, and a child stuck in
the kernel (``nvidia-smi`` on a wedged driver, ``nvcc`` on a hung NFS server: state
``D``) does not end when killed, so the caller hung with it.  :func:`stop`, which
:func:`run` and every caller that gives up on a child use, waits :data:`KILL_GRACE`
seconds for a killed child, then leaves it behind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Literal, overload

PROC = Path("/proc")
#: How long a killed child may take to end before :func:`run` stops waiting for it.  A
#: SIGKILL ends a child at once unless the kernel holds it in an uninterruptible wait,
#: which may last until the machine is restarted.
KILL_GRACE = 5.0
#: The children :func:`stop` stopped waiting for, reaped by the next child's start once
#: they end; held here so that no garbage collection ever waits for one or warns of it.
_LEFT: list[subprocess.Popen[Any]] = []


def start(
    argv: Sequence[str], environment: Mapping[str, str] | None = None
) -> subprocess.Popen[str]:
    """Start ``argv``: no input, its output and errors as text through pipes
    (``communicate`` reads them)."""
    return _popen(argv, environment, text=True)


def _popen(
    argv: Sequence[str],
    environment: Mapping[str, str] | None,
    *,
    text: bool,
    stdout: int | IO[Any] = subprocess.PIPE,
    stderr: int | IO[Any] = subprocess.PIPE,
    errors: str | None = None,
    cwd: Path | None = None,
) -> subprocess.Popen[Any]:
    """The one place a child starts: with no input (a child never reads cudaup's)."""
    _LEFT[:] = [left for left in _LEFT if left.poll() is None]
    return subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        text=text,
        errors=errors,
        env=None if environment is None else dict(environment),
        cwd=cwd,
    )


@overload
def run(
    argv: Sequence[str],
    *,
    timeout: float,
    text: Literal[True] = True,
    environment: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    stdout: int | IO[Any] = subprocess.PIPE,
    stderr: int | IO[Any] = subprocess.PIPE,
    errors: str | None = None,
) -> subprocess.CompletedProcess[str]: ...
@overload
def run(
    argv: Sequence[str],
    *,
    timeout: float,
    text: Literal[False],
    environment: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    stdout: int | IO[Any] = subprocess.PIPE,
    stderr: int | IO[Any] = subprocess.PIPE,
    errors: str | None = None,
) -> subprocess.CompletedProcess[bytes]: ...
def run(
    argv: Sequence[str],
    *,
    timeout: float,
    text: bool = True,
    environment: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    stdout: int | IO[Any] = subprocess.PIPE,
    stderr: int | IO[Any] = subprocess.PIPE,
    errors: str | None = None,
) -> subprocess.CompletedProcess[Any]:
    """Run ``argv`` (no input) and wait for it; :class:`subprocess.TimeoutExpired` once
    ``timeout`` seconds have passed and the child and what it started are killed, at most
    :data:`KILL_GRACE` seconds later even when the child does not end.  Its exit status
    is the caller's to judge; :class:`OSError` when it cannot start."""
    process = _popen(
        argv, environment, text=text, stdout=stdout, stderr=stderr, errors=errors, cwd=cwd
    )
    try:
        out, err = process.communicate(timeout=timeout)
    except BaseException as exc:  # out of time, or Ctrl-C: the child does not outlive it
        stop(process)
        if isinstance(exc, subprocess.TimeoutExpired):
            raise subprocess.TimeoutExpired(list(argv), timeout) from None
        raise
    return subprocess.CompletedProcess(list(argv), process.returncode, out, err)


def stop(process: subprocess.Popen[Any]) -> None:
    """:func:`kill` ``process``, then wait for it to end, :data:`KILL_GRACE` seconds at
    most: one the kernel holds is left behind (its pipes closed here), never waited on."""
    kill(process)
    try:
        process.communicate(timeout=KILL_GRACE)
    except subprocess.TimeoutExpired:
        _leave(process)


def _leave(process: subprocess.Popen[Any]) -> None:
    """Stop waiting for a child that a SIGKILL did not end: close cudaup's ends of its
    pipes, so that nothing here waits on them, and keep it to reap if it ever ends."""
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()
    _LEFT.append(process)


def kill(process: subprocess.Popen[Any]) -> None:
    """Kill ``process`` and the processes below it, the deepest first (each is checked
    against its parent, which must still be alive); nothing once ``process`` has ended."""
    if process.poll() is not None:
        return
    for pid, parent in reversed(list(_below(process.pid))):
        _kill_child(pid, parent)
    process.kill()


def _below(root: int) -> Iterator[tuple[int, int]]:
    """``(pid, parent)`` of every process below ``root``, parents before children."""
    parents = [root]
    while parents:
        parent = parents.pop()
        for child in _children(parent):
            yield child, parent
            parents.append(child)


def _children(pid: int) -> list[int]:
    """The children of ``pid``: its threads' ``children`` files (the kernel's list), or,
    on a kernel without them, every process whose parent it is."""
    tasks = PROC / str(pid) / "task"
    try:
        threads = list(tasks.iterdir())
    except OSError:
        return []  # it has ended
    found: list[int] = []
    for thread in threads:
        try:
            text = (thread / "children").read_text()
        except FileNotFoundError:
            if thread.exists():
                return [child for child, parent in _every_parent() if parent == pid]
            continue  # the thread has ended
        except OSError:
            continue
        found += [int(word) for word in text.split()]
    return found


def _every_parent() -> Iterator[tuple[int, int]]:
    """``(pid, parent)`` of every process this one may see."""
    for entry in os.scandir(PROC):
        if entry.name.isdigit() and (parent := _parent(int(entry.name))) is not None:
            yield int(entry.name), parent


def _parent(pid: int) -> int | None:
    """The parent of ``pid``, or None once it has ended."""
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The name, in parentheses, may hold any character; the fields follow its last ")".
    fields = stat.rpartition(")")[2].split()
    return int(fields[1]) if len(fields) > 1 and fields[0] != "Z" else None


def _kill_child(pid: int, parent: int) -> None:
    """SIGKILL ``pid`` if it is still ``parent``'s child: the pidfd holds the process it
    was opened for, and the check after opening it proves that process is the child."""
    try:
        descriptor = os.pidfd_open(pid)
    except OSError:
        return  # ended, or a kernel without pidfds: the child's own kill still follows
    try:
        if _parent(pid) == parent:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(descriptor, signal.SIGKILL)
    finally:
        os.close(descriptor)
