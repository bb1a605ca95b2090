"""Real operating-system faults for tests: a tiny filesystem that fills up, a read-only
one, and commands run as an unprivileged user.

Both need root (``mount``, ``setpriv``); elsewhere the tests that use them skip and
say why.  Nothing here fakes a fault: the kernel answers ENOSPC, EROFS and EACCES.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import importlib.metadata
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from cudaup.plan.uv import find_uv
from tests.helpers import require_tool

#: The user nobody is: owns nothing a test made, may write nothing a test did not open.
NOBODY = 65534
ROOT_ONLY = pytest.mark.skipif(
    os.geteuid() != 0, reason="needs root: mounts a tmpfs, or runs a command as uid 65534"
)


@contextlib.contextmanager
def tmpfs(
    path: Path, *, size: str = "4m", inodes: int | None = None, ro: bool = False
) -> Iterator[Path]:
    """A fresh tmpfs of ``size`` (and at most ``inodes`` files) mounted at ``path``."""
    path.mkdir(parents=True, exist_ok=True)
    options = [f"size={size}", "mode=0755"]
    if inodes is not None:
        options.append(f"nr_inodes={inodes}")
    if ro:
        options.append("ro")
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", ",".join(options), "cudaup-test", str(path)], check=True
    )
    try:
        yield path
    finally:
        subprocess.run(["umount", "--lazy", str(path)], check=False)


@contextlib.contextmanager
def frozen_filesystem(path: Path, *, thaw_after: float = 60.0) -> Iterator[Path]:
    """A small ext4 (a loop device) mounted at ``path`` and frozen (``fsfreeze``): a write
    there waits in the kernel, uninterruptibly (state D), until the filesystem is thawed,
    as a process does on a wedged GPU driver or a hung NFS server. A SIGKILL does not end
    it before. It is thawed on the way out, or after ``thaw_after`` seconds: code that
    waits for such a process fails its test then, instead of hanging it."""
    mkfs = require_tool("mkfs.ext4", "e2fsprogs")
    freeze = require_tool("fsfreeze", "util-linux")
    image = path.with_name(path.name + ".img")
    with image.open("wb") as handle:
        handle.truncate(8 * 2**20)
    subprocess.run([mkfs, "-q", str(image)], check=True)
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-o", "loop", str(image), str(path)],
        check=False,
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:  # a container without loop devices
        pytest.skip(f"cannot mount a loop device here: {mounted.stderr.strip()}")
    thaw = threading.Timer(thaw_after, subprocess.run, [[freeze, "-u", str(path)]])
    try:
        subprocess.run([freeze, "-f", str(path)], check=True)
        thaw.start()
        try:
            yield path
        finally:
            thaw.cancel()
            subprocess.run([freeze, "-u", str(path)], check=False, capture_output=True)
    finally:
        subprocess.run(["umount", "--lazy", str(path)], check=False)


@contextlib.contextmanager
def shared_tmp() -> Iterator[Path]:
    """A directory every user can reach (pytest's tmp_path is root's alone): for files
    an unprivileged command must see, and others it must not be able to write."""
    directory = Path(tempfile.mkdtemp(prefix="cudaup-shared-"))
    directory.chmod(0o755)
    try:
        yield directory
    finally:
        subprocess.run(["rm", "-rf", str(directory)], check=False)


def as_nobody(
    argv: list[str], env: Mapping[str, str], cwd: Path | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` as uid/gid 65534 with no supplementary groups (``cudaup_argv`` gives
    a cudaup that user can read)."""
    return subprocess.run(
        nobody_argv(argv),
        env=dict(env),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def nobody_argv(argv: list[str]) -> list[str]:
    """``argv`` prefixed to run as uid/gid 65534 with no supplementary groups."""
    setpriv = require_tool("setpriv", "util-linux")
    return [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *argv]


def cudaup_argv(*args: str) -> list[str]:
    """``python -m cudaup ARGS`` with a Python every user can run (see ``readable_python``)."""
    return [readable_python(), "-m", "cudaup", *args]


def readable_python() -> str:
    """A Python with this checkout's cudaup installed from a wheel, in a directory every
    user can read: the checkout itself may be private (a home directory, ``mktemp -d``:
    mode 0700), and so may the interpreter running the tests.  Built once per session
    with uv, the dependencies pinned to the versions installed here; removed at exit."""
    return str(_readable_environment() / "bin" / "python")


def _world_traversable_tmp() -> Path:
    """A temporary directory other users can reach: the first test to need the readable
    environment may have pointed TMPDIR into its own ``tmp_path`` (mode 0700)."""
    for candidate in (Path(tempfile.gettempdir()), Path("/tmp"), Path("/var/tmp")):
        path = candidate.resolve()
        if path.is_dir() and all(p.stat().st_mode & 0o001 for p in (path, *path.parents)):
            return path
    raise RuntimeError("no temporary directory here can be reached by another user")


@functools.cache
def _readable_environment() -> Path:
    root = Path(tempfile.mkdtemp(prefix="cudaup-readable-", dir=_world_traversable_tmp()))
    root.chmod(0o755)
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    source = root / "source"  # a copy: building in the checkout would leave build/ there
    checkout = Path(__file__).resolve().parent.parent
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(checkout / name, source / name)
    shutil.copytree(
        checkout / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
    )
    pins = root / "constraints.txt"
    pins.write_text("".join(f"{name}=={version}\n" for name, version in _installed_dependencies()))
    uv = find_uv()
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "PIP_"))}
    venv = root / "venv"
    steps = [
        [uv, "venv", "--quiet", "--no-config", "--python", _world_runnable_python(), str(venv)],
        [uv, "pip", "install", "--quiet", "--no-config", "--link-mode", "copy",
         "--python", str(venv / "bin" / "python"), "--constraint", str(pins), str(source)],
    ]  # fmt: skip
    for step in steps:
        # uv's cache first (a machine offline since its last run), else PyPI
        done = subprocess.run(
            [*step, "--offline"], env=environment, capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            done = subprocess.run(
                step, env=environment, capture_output=True, text=True, check=False
            )
        if done.returncode != 0:
            pytest.fail(f"building a cudaup every user can run failed: {shlex.join(step)}\n"
                        f"{done.stderr}")  # fmt: skip
    return venv


def _installed_dependencies() -> list[tuple[str, str]]:
    """cudaup's dependencies at the versions this test environment has."""
    names = [
        re.split(r"[ ;<>=!~\[]", requirement, maxsplit=1)[0]
        for requirement in importlib.metadata.requires("cudaup") or []
        if "extra ==" not in requirement
    ]
    found = []
    for name in names:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            found.append((name, importlib.metadata.version(name)))
    return found


def _world_runnable_python() -> str:
    """This interpreter's base if every user can reach it, else a system Python 3.11+."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [
        str(Path(getattr(sys, "_base_executable", sys.executable)).resolve()),
        *(shutil.which(f"python{v}", path="/usr/local/bin:/usr/bin:/bin") or "" for v in
          (version, "3.13", "3.12", "3.11", "3")),
    ]  # fmt: skip
    for candidate in candidates:
        if candidate and _every_user_may_run(Path(candidate)):
            return candidate
    pytest.fail(
        "no Python that every user can run (this one lies in a private directory): "
        "apt-get install python3"
    )


def _every_user_may_run(program: Path) -> bool:
    """Others may search every directory above ``program`` and execute it (and, for an
    interpreter that loads its library and standard library from beside itself, read
    the installation it belongs to: checked by its prefix's directories)."""
    real = program.resolve()
    prefix = real.parent.parent
    if not real.stat().st_mode & stat.S_IXOTH:
        return False
    return all(
        d.stat().st_mode & stat.S_IXOTH for d in [*real.parents, prefix / "lib"] if d.exists()
    )
