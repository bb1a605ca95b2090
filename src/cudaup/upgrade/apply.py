"""Applying a plan with uv, into the environment's work tree, never into the environment.

The work tree is a hard-linked clone of the environment (:mod:`cudaup.upgrade.clone`).
uv runs with the environment's own interpreter and ``--prefix`` the work tree, so
it reads what the work tree holds, installs there, and writes scripts that name the
environment's interpreter (``#!/proj/.venv/bin/python``): once the work tree takes the
environment's place, everything in it is where it says it is.  First the builds that
were renamed or removed are uninstalled (so two ``cupy`` never share the tree, and no
uninstall removes a file the new build just wrote), then the plan's lock is installed:
exact files, hashes required, no package's build code run.  uv's cache links into the
work tree (``--link-mode hardlink``): a link that replaces a file by rename never writes
into a file the environment and its snapshot share.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

from cudaup.errors import (
    CudaupError,
    ExternalToolError,
    IntegrityError,
    NetworkError,
    PermissionDeniedError,
)
from cudaup.plan.uv import find_uv, uv_environment
from cudaup.upgrade.environment import Environment
from cudaup.util.faults import full_disk

_NETWORK = re.compile(
    r"error sending request|Request failed after|dns error|tcp connect error|"
    r"Connection refused|timed out|Failed to fetch|client error \(Connect\)"
)


def apply_lock(
    environment: Environment,
    work: Path,
    lock: Path,
    removals: Sequence[str],
    cache: Path,
    *,
    timeout: float,
) -> None:
    """Uninstall ``removals`` from the work tree, then install the lock into it."""
    common = [
        "--python", str(environment.interpreter), "--prefix", str(work),
        "--no-config", "--native-tls",
    ]  # fmt: skip
    if removals:
        run_uv(
            ["pip", "uninstall", *removals, *common],
            f"uninstall {', '.join(removals)}",
            work,
            timeout,
        )
    install = [
        "pip", "install", "-r", str(lock), *common,
        "--no-build", "--require-hashes", "--link-mode", "hardlink", "--cache-dir", str(cache),
    ]  # fmt: skip
    run_uv(install, "install the plan", work, timeout)


def run_uv(arguments: list[str], action: str, work: Path, timeout: float) -> str:
    """Run uv hermetically; its failure as cudaup's error (``action`` says what it did)."""
    environment = uv_environment(timeout)
    environment["UV_HTTP_RETRIES"] = "3"  # downloads, unlike a plan's index reads, retry
    process = subprocess.Popen(
        [find_uv(), *arguments],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
    )
    try:
        out, err = process.communicate()
    except BaseException:
        # Ctrl-C (uv got it too) or an error here: uv never outlives the upgrade.
        process.kill()
        process.wait()
        raise
    if process.returncode != 0:
        raise uv_failure(action, err, work)
    return out + err


def uv_failure(action: str, err: str, work: Path) -> CudaupError:
    """What uv's failure means: a full disk, a refusal, the network, a hash, or uv itself."""
    causes = [
        line.strip().removeprefix("error: ").removeprefix("Caused by: ")
        for line in err.splitlines()
        if line.strip() and not line.strip().startswith(("hint:", "warning:", "Using "))
    ]
    last = causes[-1] if causes else "no message"
    text = f"uv could not {action} in {work}: {last}"
    if "No space left on device" in err or "Disk quota exceeded" in err:
        return full_disk(f"uv could not {action}", work, None)
    if "Permission denied" in err or "Read-only file system" in err:
        return PermissionDeniedError(text)
    if "Hash mismatch" in err:
        return IntegrityError(text)
    if _NETWORK.search(err):
        return NetworkError(text)
    return ExternalToolError(text)
