"""The I/O edge for the NVIDIA driver: which driver this machine runs, and its GPUs.

:func:`detect_driver` asks, in order, and the first source that yields the
driver version wins:

1. the user: ``--driver`` (``override``) or ``CUDAUP_DRIVER_VERSION``;
2. NVML through ``pynvml`` (nvidia-ml-py), on the real machine only;
3. ``/sys/module/nvidia/version``, the loaded kernel module;
4. ``/proc/driver/nvidia/version``;
5. ``nvidia-smi``: its CSV query, else its plain table.

When the kernel module gave the version, ``nvidia-smi`` (if there is one)
still fills in the GPUs and the CUDA version the driver supports, in at most
two runs.  Each source that fails says why in ``DriverInfo.notes``.  Nothing
here raises except :class:`~cudaup.errors.UsageError` for a malformed version
given by the user: a machine without a driver is an answer, ``source="none"``.

Every system path goes through :class:`~cudaup.machine.sysroot.SystemRoot`, so the
tests build whole fake machines (a fake ``/usr/bin/nvidia-smi`` script
included) under a temporary directory.  Toolkit discovery lives elsewhere.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from cudaup.core.driver import (
    CudaVersion,
    DriverInfo,
    DriverVersion,
    GpuInfo,
    parse_nvidia_smi_banner,
    parse_nvidia_smi_csv,
    parse_proc_driver_version,
    parse_sys_module_version,
)
from cudaup.errors import UsageError
from cudaup.machine.sysroot import SystemRoot
from cudaup.util import processes

__all__ = ["DRIVER_VERSION_ENV", "NVIDIA_SMI_QUERY", "detect_driver", "driver_to_check"]

DRIVER_VERSION_ENV = "CUDAUP_DRIVER_VERSION"
NVIDIA_SMI_QUERY = (
    "--query-gpu=driver_version,name,compute_cap,memory.total",
    "--format=csv,noheader",
)
SYS_MODULE_VERSION = "/sys/module/nvidia/version"
PROC_DRIVER_VERSION = "/proc/driver/nvidia/version"
#: Where nvidia-smi is looked for below a system root other than ``/`` (tests build machines
#: there); on the real root it is looked up on PATH.
ROOTED_NVIDIA_SMI = "/usr/bin/nvidia-smi"
#: The kernel-module files are one or two lines; never read more than this.
_MAX_READ = 64 * 1024
_MIB = 1024 * 1024


def detect_driver(
    *,
    root: SystemRoot,
    override: str | None = None,
    env: Mapping[str, str] | None = None,
    nvml: Callable[[], ModuleType | None] | None = None,
    timeout: float = 10.0,
) -> DriverInfo:
    """Find the NVIDIA driver of the machine under ``root`` (see the module docstring for the order).

    ``nvml`` returns the ``pynvml`` module or ``None``; by default it is imported
    only when ``root`` is the real ``/``.  ``timeout`` bounds NVML and each
    ``nvidia-smi`` run, since both can hang on a wedged driver.
    """
    env = os.environ if env is None else env
    if override is not None:
        return _overridden(DriverVersion.from_text(override))
    from_env = env.get(DRIVER_VERSION_ENV, "").strip()
    if from_env:
        try:
            requested = DriverVersion.from_text(from_env)
        except UsageError as exc:
            raise UsageError(f"{DRIVER_VERSION_ENV}: {exc}") from None
        return _overridden(requested)

    notes: list[str] = []
    module = _load_nvml(root, nvml, notes)
    if module is not None:
        info = _query_nvml(module, timeout, notes)
        if info is not None:
            return info

    version, source = _read_kernel_module(root, notes)
    return _complete_with_nvidia_smi(
        root, env, timeout=timeout, version=version, source=source, notes=notes
    )


def driver_to_check(
    text: str | None, *, root: SystemRoot, env: Mapping[str, str] | None = None
) -> tuple[DriverVersion, CudaVersion | None]:
    """The driver a question is about: ``text`` (``--driver``), else
    ``CUDAUP_DRIVER_VERSION``, else this machine's; with the CUDA version it reports
    itself (``None`` when it was named, not asked).  :class:`UsageError` when there is
    none, since no answer can be given about no driver."""
    info = detect_driver(root=root, override=text or None, env=env)
    if info.version is None:
        raise UsageError(
            "no NVIDIA driver found on this machine",
            hint="--driver VERSION names one, or name a release: cudaup compat 13.0",
        )
    return info.version, info.cuda_version


def _overridden(version: DriverVersion) -> DriverInfo:
    return DriverInfo(version=version, cuda_version=None, gpus=(), source="override", notes=())


# ---------------------------------------------------------------------------- NVML


def _import_pynvml() -> ModuleType:
    return importlib.import_module("pynvml")


def _load_nvml(
    root: SystemRoot, nvml: Callable[[], ModuleType | None] | None, notes: list[str]
) -> ModuleType | None:
    if nvml is None:
        if not root.is_real:
            notes.append("NVML: not queried for a system root other than /")
            return None
        nvml = _import_pynvml
    try:
        module = nvml()
    except ImportError:
        notes.append("NVML: the pynvml module (nvidia-ml-py) is not installed")
        return None
    except Exception as exc:
        notes.append(f"NVML: could not load pynvml: {_describe(exc)}")
        return None
    if module is None:
        notes.append("NVML: not available")
    return module


@dataclass
class _NvmlOutcome:
    info: DriverInfo | None = None
    error: BaseException | None = None
    notes: list[str] = field(default_factory=list)


def _query_nvml(module: ModuleType, timeout: float, notes: list[str]) -> DriverInfo | None:
    """Ask NVML in a daemon thread; a wedged driver costs ``timeout``, not a hang."""
    outcome = _NvmlOutcome()

    def worker() -> None:
        try:
            outcome.info = _nvml_driver_info(module, outcome.notes)
        except Exception as exc:
            outcome.error = exc

    thread = threading.Thread(target=worker, name="cudaup-nvml", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        notes.append(f"NVML did not answer within {timeout:g} s")
        return None
    if outcome.error is not None:
        notes.append(_describe_nvml_error(outcome.error))
        return None
    if outcome.info is None:
        return None
    return DriverInfo(
        version=outcome.info.version,
        cuda_version=outcome.info.cuda_version,
        gpus=outcome.info.gpus,
        source="nvml",
        notes=(*notes, *outcome.notes),
    )


def _describe_nvml_error(exc: BaseException) -> str:
    name = type(exc).__name__
    text = _describe(exc)
    if name == "NVMLError_LibraryNotFound" or "Library Not Found" in text:
        return "NVML: libnvidia-ml.so.1 not found"
    if name == "NVMLError_DriverNotLoaded" or "Driver Not Loaded" in text:
        return "NVML: the NVIDIA kernel driver is not loaded"
    return f"NVML: {text}"


def _nvml_driver_info(module: ModuleType, notes: list[str]) -> DriverInfo:
    """Run in the NVML thread: init, read, always shut down.  Raises on failure to init."""
    errors = _nvml_errors(module)
    module.nvmlInit()
    try:
        version = DriverVersion.from_text(_text(module.nvmlSystemGetDriverVersion()))
        cuda = _nvml_cuda_version(module, errors, notes)
        gpus: list[GpuInfo] = []
        try:
            count = int(module.nvmlDeviceGetCount())
        except errors as exc:
            notes.append(f"NVML: could not count the GPUs: {_describe(exc)}")
            count = 0
        for index in range(count):
            gpu = _nvml_gpu(module, index, errors, notes)
            if gpu is not None:
                gpus.append(gpu)
        return DriverInfo(
            version=version, cuda_version=cuda, gpus=tuple(gpus), source="nvml", notes=()
        )
    finally:
        with contextlib.suppress(Exception):
            module.nvmlShutdown()


def _nvml_errors(module: ModuleType) -> tuple[type[BaseException], ...]:
    nvml_error = getattr(module, "NVMLError", None)
    base: tuple[type[BaseException], ...] = (
        OSError,
        AttributeError,
        TypeError,
        ValueError,
        UsageError,
    )
    if isinstance(nvml_error, type) and issubclass(nvml_error, BaseException):
        return (nvml_error, *base)
    return base


def _nvml_cuda_version(
    module: ModuleType, errors: tuple[type[BaseException], ...], notes: list[str]
) -> CudaVersion | None:
    for name in ("nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"):
        try:
            return CudaVersion.from_int(int(getattr(module, name)()))
        except errors as exc:
            last = exc
    notes.append(f"NVML: could not read the driver's CUDA version: {_describe(last)}")
    return None


def _nvml_gpu(
    module: ModuleType, index: int, errors: tuple[type[BaseException], ...], notes: list[str]
) -> GpuInfo | None:
    try:
        handle = module.nvmlDeviceGetHandleByIndex(index)
    except errors as exc:
        notes.append(f"NVML: could not open GPU {index}: {_describe(exc)}")
        return None

    def ask(function: str) -> Any:
        try:
            return getattr(module, function)(handle)
        except errors:
            return None

    name = ask("nvmlDeviceGetName")
    memory = ask("nvmlDeviceGetMemoryInfo")
    capability = ask("nvmlDeviceGetCudaComputeCapability")
    uuid = ask("nvmlDeviceGetUUID")
    total = getattr(memory, "total", None)
    return GpuInfo(
        index=index,
        name=_text(name) if name is not None else "unknown",
        compute_capability=f"{capability[0]}.{capability[1]}"
        if isinstance(capability, tuple) and len(capability) == 2
        else None,
        memory_mib=int(total) // _MIB if isinstance(total, int) else None,
        uuid=_text(uuid) if uuid is not None else None,
    )


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def _describe(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


# ------------------------------------------------------------------- kernel module


def _read_kernel_module(root: SystemRoot, notes: list[str]) -> tuple[DriverVersion | None, str]:
    sources: tuple[tuple[str, str, Callable[[str], DriverVersion | None]], ...] = (
        ("sysfs", SYS_MODULE_VERSION, parse_sys_module_version),
        ("procfs", PROC_DRIVER_VERSION, parse_proc_driver_version),
    )
    for source, system_path, parse in sources:
        try:
            with root.path(system_path).open(encoding="utf-8", errors="replace") as handle:
                text = handle.read(_MAX_READ)
        except FileNotFoundError:
            notes.append(f"{source}: {system_path} does not exist (no nvidia kernel module loaded)")
            continue
        except OSError as exc:
            notes.append(f"{source}: cannot read {system_path}: {exc.strerror or exc}")
            continue
        version = parse(text)
        if version is not None:
            return version, source
        notes.append(f"{source}: no driver version in {system_path}")
    return None, "none"


# ---------------------------------------------------------------------- nvidia-smi


@dataclass(frozen=True, slots=True)
class _SmiRun:
    """One ``nvidia-smi`` run: its output, or why there is none and whether to try again."""

    output: str | None
    failure: str | None = None
    worth_retrying: bool = True


def _find_nvidia_smi(root: SystemRoot, env: Mapping[str, str]) -> tuple[str | None, str]:
    if not root.is_real:
        candidate = root.path(ROOTED_NVIDIA_SMI)
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate), ""
        return None, f"nvidia-smi: {ROOTED_NVIDIA_SMI} does not exist"
    found = shutil.which("nvidia-smi", path=env.get("PATH", os.defpath))
    if found is None:
        return None, "nvidia-smi: not on PATH"
    return found, ""


def _run_nvidia_smi(executable: str, args: tuple[str, ...], timeout: float) -> _SmiRun:
    label = " ".join(("nvidia-smi", *(arg.split("=", 1)[0] for arg in args[:1])))
    try:
        completed = processes.run([executable, *args], timeout=timeout, errors="replace")
    except subprocess.TimeoutExpired:
        return _SmiRun(None, f"nvidia-smi did not answer within {timeout:g} s", False)
    except OSError as exc:
        return _SmiRun(None, f"nvidia-smi: cannot run {executable}: {exc.strerror or exc}", False)
    if completed.returncode != 0:
        said = completed.stdout + "\n" + completed.stderr
        message = _first_line(said) or "no output"
        # The driver is unreachable: a second run would only say so again.
        unreachable = "couldn't communicate with the NVIDIA driver" in said
        return _SmiRun(
            None, f"{label} exited with status {completed.returncode}: {message}", not unreachable
        )
    return _SmiRun(completed.stdout)


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def _complete_with_nvidia_smi(
    root: SystemRoot,
    env: Mapping[str, str],
    *,
    timeout: float,
    version: DriverVersion | None,
    source: str,
    notes: list[str],
) -> DriverInfo:
    """Ask ``nvidia-smi`` for what the kernel module cannot say: GPUs and CUDA version.

    At most two runs: the CSV query, then the plain table (for the CUDA version,
    and for everything when the CSV query failed).  No second run after a
    timeout or when the driver is unreachable.
    """
    executable, missing = _find_nvidia_smi(root, env)
    if executable is None:
        notes.append(missing)
        return DriverInfo(
            version=version, cuda_version=None, gpus=(), source=source, notes=tuple(notes)
        )

    smi_version: DriverVersion | None = None
    smi_source = source
    cuda: CudaVersion | None = None
    gpus: list[GpuInfo] = []

    csv_run = _run_nvidia_smi(executable, NVIDIA_SMI_QUERY, timeout)
    if csv_run.output is not None:
        smi_version, gpus = parse_nvidia_smi_csv(csv_run.output)
        if smi_version is None:
            notes.append(
                "nvidia-smi --query-gpu gave no driver version: "
                + (_first_line(csv_run.output) or "no output")
            )
        else:
            smi_source = "nvidia-smi"
    elif csv_run.failure:
        notes.append(csv_run.failure)

    if csv_run.worth_retrying:
        banner_run = _run_nvidia_smi(executable, (), timeout)
        if banner_run.output is not None:
            banner_version, cuda, banner_gpus = parse_nvidia_smi_banner(banner_run.output)
            if banner_version is None:
                notes.append(
                    "nvidia-smi printed no 'Driver Version': "
                    + (_first_line(banner_run.output) or "no output")
                )
            elif smi_version is None:
                smi_version, smi_source = banner_version, "nvidia-smi banner"
            if not gpus:
                gpus = banner_gpus
        elif banner_run.failure:
            notes.append(banner_run.failure)

    if version is None:
        version, source = smi_version, (smi_source if smi_version is not None else "none")
    elif smi_version is not None and smi_version != version:
        notes.append(
            f"nvidia-smi reports driver {smi_version} but the loaded kernel module is {version}"
        )
    return DriverInfo(
        version=version, cuda_version=cuda, gpus=tuple(gpus), source=source, notes=tuple(notes)
    )
