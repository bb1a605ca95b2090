"""Applying a plan with uv, into the environment's work tree, never into the environment.

The work tree is a hard-linked clone of the environment (:mod:`cudaup.upgrade.clone`).
uv runs with the environment's own interpreter and ``--prefix`` the work tree, so
it reads what the work tree holds, installs there, and writes scripts that name the
environment's interpreter (``#!/proj/.venv/bin/python``): once the work tree takes the
environment's place, everything in it is where it says it is.  First the builds that
were renamed or removed are uninstalled (so two ``cupy`` never share the tree, and no
uninstall removes a file the new build just wrote), then the plan's closure is
installed: every package pinned, with the sha256 of its wheels from the plan's lock
(``--require-hashes``), from the indexes the plan resolved on, no build code run.  uv's cache links into the
work tree (``--link-mode hardlink``): a link that replaces a file by rename never writes
into a file the environment and its snapshot share.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from packaging.markers import InvalidMarker, Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from cudaup.core.documents import load_toml
from cudaup.errors import (
    CudaupError,
    ExternalToolError,
    IntegrityError,
    NetworkError,
    PermissionDeniedError,
    SourceFormatError,
)
from cudaup.plan.uv import find_uv, uv_environment
from cudaup.upgrade.environment import Environment
from cudaup.util import processes
from cudaup.util.faults import full_disk

#: A lock of a torch + vllm stack is a few hundred kilobytes.
MAX_LOCK = 64 << 20
_PROJECT = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$")
_SHA256 = re.compile(r"^[0-9a-fA-F]{64}$")
_NETWORK = re.compile(
    r"error sending request|Request failed after|dns error|tcp connect error|"
    r"Connection refused|timed out|Failed to fetch|client error \(Connect\)|HTTP status server error"
)


def pinned_requirements(lock: Path) -> str:
    """uv's ``pylock.toml`` as a requirements file: each package pinned, with the sha256 of
    every wheel the lock names for it.  Installing pins (not the lock) lets uv take the
    wheels from its cache, keyed by index and version, instead of downloading each URL
    again; ``--require-hashes`` still admits no other bytes."""
    document = load_toml(lock.read_bytes(), what=str(lock), max_bytes=MAX_LOCK)
    packages = document.get("packages")
    if not isinstance(packages, list):
        raise SourceFormatError(f"{lock} lists no packages")
    lines = []
    for package in packages:
        if not isinstance(package, dict):
            raise SourceFormatError(f"{lock}: a package is not a table")
        name, version = package.get("name"), package.get("version")
        if not isinstance(name, str) or not _PROJECT.match(name) or not isinstance(version, str):
            raise SourceFormatError(f"{lock}: {name!r} {version!r} is not a pinned project")
        try:
            pin = Requirement(f"{name}=={Version(version)}")
            marker = package.get("marker")
            if isinstance(marker, str):
                pin.marker = Marker(marker)
        except (InvalidVersion, InvalidMarker, InvalidRequirement):
            raise SourceFormatError(f"{lock}: {name} {version!r} cannot be pinned") from None
        hashes = sorted(
            {
                wheel["hashes"]["sha256"].lower()
                for wheel in package.get("wheels", [])
                if isinstance(wheel, dict)
                and isinstance(wheel.get("hashes"), dict)
                and _SHA256.match(str(wheel["hashes"].get("sha256", "")))
            }
        )
        if not hashes:
            raise SourceFormatError(f"{lock}: {name} {version} has no wheel with a sha256")
        lines.append(f"{pin} " + " ".join(f"--hash=sha256:{digest}" for digest in hashes))
    return "\n".join(lines) + "\n"


def apply_pins(
    environment: Environment,
    work: Path,
    requirements: Path,
    indexes: Sequence[str],
    default_index: str,
    removals: Sequence[str],
    cache: Path,
    *,
    timeout: float,
) -> None:
    """Uninstall ``removals`` from the work tree, then install the pinned requirements
    into it from the plan's indexes (its per-line pages first, then the default)."""
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
        "pip", "install", "-r", str(requirements), *common, "--default-index", default_index,
        "--no-build", "--require-hashes", "--link-mode", "hardlink", "--cache-dir", str(cache),
    ]  # fmt: skip
    for index in indexes:
        install += ["--index", index]
    run_uv(install, "install the plan", work, timeout)


def run_uv(arguments: list[str], action: str, work: Path, timeout: float) -> str:
    """Run uv hermetically; its failure as cudaup's error (``action`` says what it did)."""
    environment = uv_environment(timeout)
    environment["UV_HTTP_RETRIES"] = "3"  # downloads, unlike a plan's index reads, retry
    process = processes.start([find_uv(), *arguments], environment)
    try:
        out, err = process.communicate()
    except BaseException:
        # Ctrl-C (uv got it too) or an error here: uv, and what a wrapper named uv
        # started, never outlive the upgrade.
        processes.stop(process)
        raise
    if process.returncode != 0:
        raise uv_failure(action, err, work)
    return out + err


def uv_failure(action: str, err: str, work: Path) -> CudaupError:
    """What uv's failure means: a full disk, a refusal, the network, a hash, or uv itself."""
    causes = [
        line.strip().removeprefix("error: ").removeprefix("cause: ").removeprefix("Caused by: ")
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
