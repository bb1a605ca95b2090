"""``cudaup doctor``: the driver, the GPUs, every toolkit, and what is wrong.

:func:`examine` gathers the facts (I/O: driver detection, toolkit search, the
Python's torch); :func:`diagnose` is pure and turns facts into problems, each
with the fix a user can apply.  Nothing here raises for what it finds: a
machine with no driver, a dangling link or an unreadable directory is an
answer, not an error.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from cudaup.binaries.coverage import Gpu, GpuCoverage, check_coverage, environment_packages
from cudaup.core.compat import Compatibility, CompatTable
from cudaup.core.driver import CudaVersion, DriverInfo, GpuInfo
from cudaup.core.gpus import parse_gpu
from cudaup.core.libraries import LIBRARIES, LIBRARY_SONAMES
from cudaup.errors import UsageError
from cudaup.machine.driver_probe import detect_driver
from cudaup.machine.sysroot import SystemRoot
from cudaup.machine.toolkits import (
    Lookup,
    Toolkit,
    ask_shim,
    find_toolkits,
    is_shim,
    python_site_packages,
)
from cudaup.machine.torch_version import TorchInfo, read_torch

Severity = Literal["error", "warning", "info"]
IN_USE = ("CUDA_HOME", "CUDA_PATH", "nvcc on PATH", "/usr/local/cuda")


@dataclass(frozen=True, slots=True)
class Problem:
    severity: Severity
    message: str
    fix: str

    def to_json(self) -> dict[str, str]:
        return {"severity": self.severity, "message": self.message, "fix": self.fix}


@dataclass
class Report:
    driver: DriverInfo
    driver_cuda: CudaVersion | None
    driver_cuda_source: str | None
    toolkits: list[Toolkit]
    nvcc: str | None
    python: str | None
    torch: TorchInfo | None
    env: dict[str, str]
    problems: list[Problem] = field(default_factory=list)
    #: the libraries the Python environment's wheels carry: name → (project, version, lib dir)
    python_libraries: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    #: the libraries each LD_LIBRARY_PATH entry holds: (entry, library name, file)
    path_libraries: list[tuple[str, str, str]] = field(default_factory=list)
    #: why the cudaup shim that is ``nvcc`` on PATH runs no toolkit here, when it runs none
    shim_problem: str | None = None
    #: per GPU, which of the Python's CUDA packages carry kernels for it
    kernels: list[GpuCoverage] = field(default_factory=list)

    def in_use(self) -> list[Toolkit]:
        return [t for t in self.toolkits if any(v in IN_USE for v in t.found_via)]

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": 1,
            "driver": self.driver.to_json(),
            "driver_cuda": str(self.driver_cuda) if self.driver_cuda else None,
            "driver_cuda_source": self.driver_cuda_source,
            "gpus": [g.to_json() for g in self.driver.gpus],
            "toolkits": [t.to_json() for t in self.toolkits],
            "nvcc": self.nvcc,
            "python": self.python,
            "torch": asdict(self.torch) if self.torch else None,
            "python_libraries": {
                name: {"project": project, "version": version, "lib": lib}
                for name, (project, version, lib) in sorted(self.python_libraries.items())
            },
            "kernels": [k.to_json() for k in self.kernels],
            "problems": [p.to_json() for p in self.problems],
        }


def examine(
    lookup: Lookup,
    *,
    driver_override: str | None = None,
    compat: CompatTable | None = None,
    nvml: Any = None,
) -> Report:
    """Gather every fact doctor reports, then diagnose."""
    compat = compat or CompatTable.load()
    kwargs: dict[str, Any] = {
        "root": lookup.root,
        "override": driver_override,
        "env": lookup.env,
        "timeout": lookup.timeout,
    }
    if nvml is not None:
        kwargs["nvml"] = nvml
    driver = detect_driver(**kwargs)
    driver_cuda, source = driver.cuda_version, "driver" if driver.cuda_version else None
    if driver_cuda is None and driver.version is not None:
        driver_cuda = compat.reported_cuda(driver.version)
        source = "NVIDIA's toolkit driver table" if driver_cuda else None
    toolkits = find_toolkits(lookup)
    nvcc_path = shutil.which("nvcc", path=lookup.env.get("PATH", ""))
    nvcc_toolkit = next((t for t in toolkits if "nvcc on PATH" in t.found_via), None)
    nvcc, shim_problem = None, None
    if nvcc_path:
        shim = is_shim(Path(nvcc_path))
        answer = ask_shim(Path(nvcc_path), lookup) if shim else None
        if answer is not None and answer.executable is None:
            shim_problem = answer.problem or "it names no toolkit"
            nvcc = f"{nvcc_path} (cudaup shim; it runs no toolkit here)"
        else:
            nvcc = nvcc_path + (" (cudaup shim)" if shim else "")
            if nvcc_toolkit:
                nvcc += f" → {nvcc_toolkit.path} (CUDA {nvcc_toolkit.identity.describe()})"
    python, sites = python_site_packages(lookup)
    env_keys = (
        "CUDA_HOME",
        "CUDA_PATH",
        "LD_LIBRARY_PATH",
        "CPATH",
        "C_INCLUDE_PATH",
        "CPLUS_INCLUDE_PATH",
        "LIBRARY_PATH",
        "PATH",
    )
    env = {k: lookup.env[k] for k in env_keys if k in lookup.env}
    report = Report(driver, driver_cuda, source, toolkits, nvcc, python, read_torch(sites), env)
    report.shim_problem = shim_problem
    report.python_libraries = read_python_libraries(sites)
    report.path_libraries = read_path_libraries(_entries(env.get("LD_LIBRARY_PATH")))
    gpus = gpus_of(driver.gpus)
    if gpus:  # reading every CUDA package's binaries is worth it only with a GPU to judge
        cuda = (driver_cuda.major, driver_cuda.minor) if driver_cuda else None
        report.kernels = check_coverage(environment_packages(sites), gpus, cuda)
    report.problems = diagnose(report, compat)
    return report


def read_python_libraries(sites: list[Path]) -> dict[str, tuple[str, str, str]]:
    """The libraries an environment's wheels carry (``nvidia-cudnn-cu13`` → cuDNN), read
    from the dist-info and the wheel's tree, never by importing."""
    found: dict[str, tuple[str, str, str]] = {}
    for site in sites:
        for library in LIBRARIES.values():
            for major in range(11, 14):
                project = library.project(major)
                dist = _dist_info(site, project)
                if dist is None:
                    continue
                version = dist.name.removesuffix(".dist-info").partition("-")[2] or "unknown"
                lib = site.joinpath(*library.wheel_root.format(major=major).split("/"), "lib")
                found.setdefault(library.name, (project, version, str(lib)))
    return found


def _dist_info(site: Path, project: str) -> Path | None:
    normal = re.sub(r"[-_.]+", "_", project).lower()
    try:
        entries = list(site.iterdir())
    except OSError:
        return None
    for entry in entries:
        name = entry.name.lower()
        if name.endswith(".dist-info") and name.removesuffix(".dist-info").split("-")[0] == normal:
            return entry
    return None


def read_path_libraries(entries: list[str]) -> list[tuple[str, str, str]]:
    """(entry, library, file) for each library's shared object in each directory."""
    found: list[tuple[str, str, str]] = []
    for entry in entries:
        try:
            names = sorted(p.name for p in Path(entry).iterdir())
        except OSError:
            continue
        for library, soname in LIBRARY_SONAMES.items():
            match = next((n for n in names if n.startswith(soname + ".so.")), None)
            if match is not None:
                found.append((entry, library, match))
    return found


def gpus_of(found: Iterable[GpuInfo]) -> list[Gpu]:
    """The GPUs whose compute capability the driver reported, as coverage checks them."""
    gpus = []
    for gpu in found:
        with contextlib.suppress(UsageError):  # a capability no SM number spells: not judged
            gpus.append(Gpu(f"GPU {gpu.index} {gpu.name}", parse_gpu(gpu.compute_capability or "")))
    return gpus


# -- diagnosis (pure) ----------------------------------------------------------------
def _release_of(toolkit: Toolkit) -> str | None:
    identity = toolkit.identity
    if identity.newest:
        return identity.newest
    return f"{identity.line}.0" if identity.line else None


def _owner_of(path: str, toolkits: list[Toolkit]) -> Toolkit | None:
    real = str(Path(path).resolve()) if Path(path).exists() else path
    best: Toolkit | None = None
    for toolkit in toolkits:
        root = str(toolkit.real.resolve()) if toolkit.real.exists() else str(toolkit.real)
        if (real == root or real.startswith(root + "/")) and (
            best is None or len(root) > len(str(best.real))
        ):
            best = toolkit
    return best


def _entries(value: str | None) -> list[str]:
    return [p for p in (value or "").split(":") if p]


def _driver_problems(report: Report, compat: CompatTable) -> list[Problem]:
    problems: list[Problem] = []
    driver = report.driver.version
    if driver is None:
        tried = "; ".join(report.driver.notes) or "NVML, /sys, /proc and nvidia-smi"
        problems.append(
            Problem(
                "info",
                f"no NVIDIA driver found ({tried})",
                "on a machine without a GPU (login node, build host, container) pass --driver VERSION "
                "or set CUDAUP_DRIVER_VERSION so compat and plan can answer for the target",
            )
        )
        return problems
    seen: set[str] = set()
    for toolkit in report.in_use():
        release = _release_of(toolkit)
        if release is None or release in seen:
            continue
        seen.add(release)
        verdict: Compatibility = compat.check(driver, release, reported=report.driver.cuda_version)
        if verdict.verdict == "no":
            problems.append(
                Problem(
                    "error",
                    f"driver {driver} is too old for CUDA {toolkit.identity.describe()} at {toolkit.path} ({verdict.reason})",
                    f"upgrade the driver to ≥ {verdict.needs or verdict.floor} (cudaup never installs drivers), "
                    f"or use a toolkit the driver runs (≤ {report.driver_cuda})",
                )
            )
        elif verdict.verdict == "minor-version":
            problems.append(
                Problem(
                    "warning",
                    f"CUDA {toolkit.identity.describe()} at {toolkit.path} runs on driver {driver} only under {verdict.reason}",
                    f"upgrade the driver to ≥ {verdict.needs} for full support"
                    if verdict.needs
                    else "upgrade the driver for full support",
                )
            )
    return problems


def _arch_problems(report: Report, compat: CompatTable) -> list[Problem]:
    problems: list[Problem] = []
    for toolkit in report.in_use():
        release = _release_of(toolkit)
        if release is None:
            continue
        for gpu in report.driver.gpus:
            arch = compat.architecture(gpu.compute_capability or "")
            if arch is not None and not arch.supported_by(release):
                last = arch.last_release or "none"
                problems.append(
                    Problem(
                        "warning",
                        f"CUDA {toolkit.identity.describe()} at {toolkit.path} cannot compile for GPU {gpu.index} "
                        f"{gpu.name} ({arch.sm}, compute capability {arch.compute_capability})",
                        f"build for this GPU with CUDA ≤ {last}, e.g. `cudaup install {last}`"
                        if arch.last_release
                        else f"use CUDA ≥ {arch.first_release} for this GPU",
                    )
                )
    return problems


def _kernel_problems(report: Report) -> list[Problem]:
    problems: list[Problem] = []
    for result in report.kernels:
        sm = "sm_{}{}".format(*result.gpu.capability)
        for package, reason in result.missing:
            problems.append(
                Problem(
                    "error",
                    f"{package} in {report.python} carries no kernels for {result.gpu.label} "
                    f"({sm}): {reason}",
                    f"install a build of {package} that targets {sm} (`cudaup plan {package} "
                    f"--gpu {sm}`; CUDA 13 builds dropped sm_70 and older)",
                )
            )
        for package, reason in result.unknown:
            problems.append(
                Problem(
                    "info",
                    f"whether {package} runs on {result.gpu.label} is not known: {reason}",
                    "pass --driver VERSION so the driver's CUDA version is known",
                )
            )
    return problems


def _layout_problems(report: Report) -> list[Problem]:
    problems: list[Problem] = []
    for toolkit in report.toolkits:
        link = toolkit.link
        if link and not link.get("exists"):
            problems.append(
                Problem(
                    "error",
                    f"/usr/local/cuda is dangling: it points to {link.get('target')}, which does not exist",
                    "point it at an installed toolkit (`sudo update-alternatives --config cuda` where alternatives "
                    "manage it, else `sudo ln -sfn /usr/local/cuda-X.Y /usr/local/cuda`) or remove it",
                )
            )
        cudart = toolkit.components.get("cuda_cudart")
        if (
            toolkit.header_version
            and cudart
            and not cudart.startswith(toolkit.header_version + ".")
        ):
            problems.append(
                Problem(
                    "error",
                    f"{toolkit.path} mixes headers from CUDA {toolkit.header_version} with libcudart {cudart}",
                    "reinstall that toolkit into an empty directory (`cudaup install` builds each release in its own tree)",
                )
            )
    return problems


def _environment_problems(report: Report) -> list[Problem]:
    """What the environment's variables and PATH get wrong, one check per step."""
    found = (
        _shim_runs_nothing(report),
        _mixed_library_path(report),
        _nvcc_and_home_disagree(report),
        _headers_apart_from_libraries(report),
    )
    return [problem for problem in found if problem is not None]


def _owners(report: Report, variable: str) -> list[Toolkit]:
    """The toolkits the entries of the path list ``variable`` lie in, in its order."""
    return [
        t
        for entry in _entries(report.env.get(variable))
        if (t := _owner_of(entry, report.toolkits)) is not None
    ]


def _library_roots(report: Report) -> dict[str, str]:
    """The toolkits on ``LD_LIBRARY_PATH``, by release (the last entry of a release names it)."""
    return {t.identity.describe(): t.path for t in _owners(report, "LD_LIBRARY_PATH")}


def _shim_runs_nothing(report: Report) -> Problem | None:
    if not report.shim_problem:
        return None
    return Problem(
        "warning",
        f"nvcc on PATH is cudaup's shim, and it runs no toolkit here: {report.shim_problem}",
        "choose a toolkit (`cudaup default VERSION`, `cudaup pin VERSION`), or take "
        "cudaup's shim directory off PATH",
    )


def _mixed_library_path(report: Report) -> Problem | None:
    library_roots = _library_roots(report)
    if len(library_roots) <= 1:
        return None
    listing = ", ".join(f"{path} (CUDA {release})" for release, path in library_roots.items())
    return Problem(
        "warning",
        f"LD_LIBRARY_PATH mixes toolkits: {listing}",
        'keep one toolkit\'s lib64 in LD_LIBRARY_PATH (`eval "$(cudaup env)"` sets it for the active one)',
    )


def _nvcc_and_home_disagree(report: Report) -> Problem | None:
    home = report.env.get("CUDA_HOME") or report.env.get("CUDA_PATH")
    nvcc = next((t for t in report.toolkits if "nvcc on PATH" in t.found_via), None)
    home_toolkit = _owner_of(home, report.toolkits) if home else None
    if (
        nvcc is None
        or home_toolkit is None
        or nvcc is home_toolkit
        or nvcc.identity.describe() == home_toolkit.identity.describe()
    ):
        return None
    return Problem(
        "warning",
        f"nvcc on PATH is CUDA {nvcc.identity.describe()} ({nvcc.path}) but CUDA_HOME is "
        f"CUDA {home_toolkit.identity.describe()} ({home_toolkit.path})",
        f"put {home_toolkit.path}/bin first on PATH, or set CUDA_HOME={nvcc.path}",
    )


def _headers_apart_from_libraries(report: Report) -> Problem | None:
    include_roots = {
        t.path
        for name in ("CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH")
        for t in _owners(report, name)
    }
    lib_paths = set(_library_roots(report).values()) | {
        t.path for t in _owners(report, "LIBRARY_PATH")
    }
    if not include_roots or not lib_paths or not include_roots.isdisjoint(lib_paths):
        return None
    return Problem(
        "error",
        f"headers come from {', '.join(sorted(include_roots))} but libraries from {', '.join(sorted(lib_paths))}",
        "point CPATH and LD_LIBRARY_PATH/LIBRARY_PATH at the same toolkit",
    )


def _library_problems(report: Report) -> list[Problem]:
    """Two builds of one library in one process: an environment's wheel (what torch loads)
    and another copy on LD_LIBRARY_PATH, which the loader finds first for the libraries the
    wheel's own loads by name (cuDNN: CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH)."""
    problems: list[Problem] = []
    for entry, library, file in report.path_libraries:
        wheel = report.python_libraries.get(library)
        if wheel is None:
            continue
        project, version, lib = wheel
        if Path(entry).resolve() == Path(lib).resolve():
            continue
        owner = _owner_of(entry, report.toolkits)
        other = owner.libraries.get(library) if owner else None
        if other is not None and _same_release(other, version):
            continue
        title = LIBRARIES[library].title
        where = f"{title} {other} of {owner.path}" if owner and other else f"{file} in {entry}"
        problems.append(
            Problem(
                "warning",
                f"one process would load two {title} builds: the environment's {project} "
                f"{version} ({lib}) and {where} on LD_LIBRARY_PATH",
                f"take {entry} off LD_LIBRARY_PATH for this environment, or give the toolkit the "
                f"same build (`cudaup install RELEASE --components {library}=={version}`)",
            )
        )
    return problems


def _same_release(a: str, b: str) -> bool:
    return a.split(".")[:3] == b.split(".")[:3]


def _torch_problems(report: Report, compat: CompatTable) -> list[Problem]:
    torch, driver = report.torch, report.driver.version
    if torch is None or torch.cuda is None or driver is None:
        return []
    verdict = compat.check(driver, f"{torch.cuda}.0", reported=report.driver.cuda_version)
    if verdict.verdict == "no":
        return [
            Problem(
                "error",
                f"torch {torch.version} is built for CUDA {torch.cuda}, which driver {driver} cannot run ({verdict.reason})",
                f"install a torch build for CUDA ≤ {report.driver_cuda} (`cudaup plan torch`) or upgrade the driver",
            )
        ]
    return []


def diagnose(report: Report, compat: CompatTable) -> list[Problem]:
    """Every problem the facts show, errors first."""
    problems = (
        _driver_problems(report, compat)
        + _layout_problems(report)
        + _environment_problems(report)
        + _torch_problems(report, compat)
        + _library_problems(report)
        + _arch_problems(report, compat)
        + _kernel_problems(report)
    )
    order = {"error": 0, "warning": 1, "info": 2}
    return sorted(problems, key=lambda p: order[p.severity])


def lookup_from_env(env: Mapping[str, str], *, python: str | None = None) -> Lookup:
    return Lookup(root=SystemRoot.from_env(env), env=dict(env), python=python)


def doctor(
    *,
    python: str | None = None,
    driver: str | None = None,
    env: Mapping[str, str] | None = None,
) -> Report:
    """This machine's driver, GPUs and toolkits, with every problem and its fix.

    ``python``: the interpreter whose wheels and torch to inspect (default: the
    ``python3`` on ``PATH``); ``driver``: assume this driver version instead of
    detecting one.
    """
    return examine(
        lookup_from_env(os.environ if env is None else env, python=python), driver_override=driver
    )
