"""What ``cudaup env --python`` and ``cudaup run --python`` need to know about a Python
environment and this host: the CUDA line its frameworks were built for, read from files and
never by importing (torch's ``torch/version.py``, ``cuda = '13.0'``; else a CuPy build's
distribution name, ``cupy-cuda13x``: any 13.x), ``TORCH_CUDA_ARCH_LIST`` from the GPUs
present, and whether the host compiler is one the toolkit accepts (its
``include/crt/host_config.h``); :func:`toolkit_for_environment` puts them together.  The
``.pth`` that binds an environment to its toolkit is :mod:`cudaup.upgrade.binding`'s.
"""

from __future__ import annotations

import logging
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cudaup.core.driver import GpuInfo
from cudaup.errors import ReleaseNotFoundError, UsageError
from cudaup.install.store import Store
from cudaup.machine.sysroot import SystemRoot
from cudaup.machine.torch_version import read_torch
from cudaup.switch.selection import Active, select
from cudaup.util import processes
from cudaup.util.reading import read_small

log = logging.getLogger("cudaup.switch.binding")

_CUPY = re.compile(r"^cupy[-_]cuda(\d+)x-[^-]+\.dist-info$", re.IGNORECASE)
#: ``#if __GNUC__ > 15`` in ``host_config.h``: the newest gcc major the toolkit accepts.
_GNUC_LIMIT = re.compile(r"^\s*#\s*if\s+__GNUC__\s*>\s*(\d+)\s*(?:$|\|\||/[*/])", re.MULTILINE)
_VERSION = re.compile(r"^(\d+)(?:\.(\d+))?")


@dataclass(frozen=True, slots=True)
class EnvironmentLine:
    """What an environment's frameworks were built for: a version request (``13.0``, or
    ``13`` where only a major is known) and where it was read."""

    request: str
    reason: str


def environment_root(python: str) -> Path:
    """The environment an interpreter (``E/bin/python``) or a directory names; the path as
    written, never through ``bin/python``'s link."""
    given = Path(python).absolute()
    root = given if given.is_dir() else given.parent.parent
    if not site_directories(root):
        raise UsageError(
            f"{python} is not a Python environment's interpreter or directory "
            f"(no lib/python*/site-packages in {root})"
        )
    return root


def site_directories(root: Path) -> list[Path]:
    found: list[Path] = []
    for lib in ("lib", "lib64"):
        for site in sorted((root / lib).glob("python*/site-packages")):
            if site.is_dir() and not any(site.samefile(seen) for seen in found):
                found.append(site)
    return found


def environment_line(root: Path) -> EnvironmentLine:
    """The line torch (``torch/version.py``) or CuPy (its build's name) says the
    environment is on."""
    sites = site_directories(root)
    torch = read_torch(sites)
    if torch is not None and torch.cuda:
        return EnvironmentLine(torch.cuda, f"torch {torch.version} is built for CUDA {torch.cuda}")
    for site in sites:
        for entry in sorted(site.iterdir()):
            if (match := _CUPY.match(entry.name)) is not None:
                name = entry.name.split("-")[0].replace("_", "-").lower()
                return EnvironmentLine(
                    match.group(1), f"{name} is CuPy's CUDA {match.group(1)} build"
                )
    said = "torch without CUDA" if torch is not None else "no torch"
    raise UsageError(
        f"{root} holds {said} and no CuPy CUDA build, so it names no CUDA line: "
        "give the version instead of --python"
    )


# -- TORCH_CUDA_ARCH_LIST ----------------------------------------------------------------------
def arch_list(gpus: Sequence[GpuInfo]) -> str | None:
    """``8.0;9.0`` for the GPUs present (each capability once, oldest first); None: none."""
    capabilities = {g.compute_capability for g in gpus if g.compute_capability}
    if not capabilities:
        return None
    return ";".join(sorted(capabilities, key=lambda c: tuple(int(p) for p in c.split("."))))


# -- the host compiler -------------------------------------------------------------------------
def gcc_limit(header: str) -> int | None:
    """The newest gcc major ``host_config.h`` accepts (its ``#if __GNUC__ > N`` guard)."""
    match = _GNUC_LIMIT.search(header)
    return int(match.group(1)) if match else None


def host_compiler(env: Mapping[str, str]) -> str | None:
    """The host compiler nvcc will run: ``NVCC_CCBIN`` or ``CUDAHOSTCXX`` where set, else
    the ``gcc`` on ``PATH``."""
    chosen = env.get("NVCC_CCBIN") or env.get("CUDAHOSTCXX")
    return chosen or shutil.which("gcc", path=env.get("PATH"))


def compiler_problem(toolkit: Path, env: Mapping[str, str]) -> str | None:
    """A sentence when the host compiler is newer than ``toolkit`` accepts, with the way out;
    None when it is accepted (or there is nothing to check: said in ``-v``)."""
    header = toolkit / "include" / "crt" / "host_config.h"
    try:
        limit = gcc_limit(read_small(header).decode(errors="replace"))
    except OSError:
        log.info("%s is missing: the host compiler was not checked", header)
        return None
    compiler = host_compiler(env)
    if limit is None or compiler is None:
        log.info("no gcc limit in %s or no gcc on PATH: the host compiler was not checked", header)
        return None
    try:
        done = processes.run([compiler, "-dumpfullversion", "-dumpversion"], timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.info(
            "%s did not say its version (%s): the host compiler was not checked", compiler, exc
        )
        return None
    match = _VERSION.match(done.stdout.strip())
    if done.returncode != 0 or match is None:
        log.info("%s did not say its version: the host compiler was not checked", compiler)
        return None
    major = int(match.group(1))
    if major <= limit:
        log.info(
            "host compiler %s %s: accepted by %s (gcc up to %d)",
            compiler,
            done.stdout.strip(),
            header,
            limit,
        )
        return None
    return (
        f"the host compiler {compiler} is gcc {done.stdout.strip()}, newer than this toolkit "
        f"accepts (gcc {limit} at most, {header}): install gcc-{limit} and g++-{limit} and set "
        f"NVCC_CCBIN=g++-{limit}, or pass -allow-unsupported-compiler to nvcc at your own risk"
    )


@dataclass(frozen=True, slots=True)
class EnvironmentToolkit:
    """The toolkit of an environment's line (``env --python``, ``run --python``), and what
    goes with it."""

    active: Active
    #: the environment's own directory (its ``bin`` comes after the toolkit's on PATH)
    root: Path
    #: variables to add: ``TORCH_CUDA_ARCH_LIST`` from the GPUs present, when it is unset
    extra: dict[str, str] = field(default_factory=dict)
    #: a host compiler the toolkit does not accept, with the way out
    compiler_problem: str | None = None


def toolkit_for_environment(
    python: str,
    store: Store,
    *,
    env: Mapping[str, str],
    root: SystemRoot,
    install: Callable[[str], None] | None = None,
) -> EnvironmentToolkit:
    """The installed toolkit of ``python``'s environment's CUDA line; ``install`` (the
    caller's, given a release request) is called first when none of the line is installed.
    :class:`ReleaseNotFoundError` when there is still none."""
    environment = environment_root(python)
    line = environment_line(environment)
    log.info("%s: %s: CUDA %s", environment, line.reason, line.request)
    active = select(store, request=line.request, env=env)
    if active.path is None and install is not None:
        install(line.request)
        active = select(store, request=line.request, env=env)
    if active.path is None:
        installable = active.failure == "not-installed"
        raise ReleaseNotFoundError(
            active.problem or "no toolkit",
            hint=f"--install installs it ({line.reason})" if installable else None,
        )
    extra: dict[str, str] = {}
    if env.get("TORCH_CUDA_ARCH_LIST"):
        log.info("TORCH_CUDA_ARCH_LIST is set (%s): kept", env["TORCH_CUDA_ARCH_LIST"])
    else:
        # Only these commands probe the driver: loaded here, not when `env VERSION` starts.
        from cudaup.machine.driver_probe import detect_driver  # noqa: PLC0415

        arch = arch_list(detect_driver(root=root, env=env).gpus)
        if arch is None:
            log.info("no GPU found here: TORCH_CUDA_ARCH_LIST is left unset")
        else:
            extra["TORCH_CUDA_ARCH_LIST"] = arch
    return EnvironmentToolkit(active, environment, extra, compiler_problem(active.path, env))
