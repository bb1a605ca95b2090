"""Real operating-system faults for tests: a tiny filesystem that fills up, a read-only
one, and commands run as an unprivileged user.

Both need root (``mount``, ``setpriv``); elsewhere the tests that use them skip and
say why.  Nothing here fakes a fault: the kernel answers ENOSPC, EROFS and EACCES.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

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
    """Run ``argv`` as uid/gid 65534 with no supplementary groups."""
    command = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *argv]
    return subprocess.run(
        command,
        env=dict(env),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def cudaup_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "cudaup", *args]
