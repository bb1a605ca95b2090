"""detect_driver on fake machines built under tmp_path, and once on this real machine."""

from __future__ import annotations

import json
import shlex
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from cudaup.core.driver import CudaVersion, DriverInfo, DriverVersion, GpuInfo
from cudaup.errors import UsageError
from cudaup.machine.driver_probe import detect_driver
from cudaup.machine.sysroot import SystemRoot
from cudaup.util.processes import KILL_GRACE
from tests.osfaults import ROOT_ONLY, frozen_filesystem

DATA = Path(__file__).resolve().parents[1] / "data" / "driver"
MIB = 1024 * 1024


# ------------------------------------------------------------------------- fake machines


class FakeMachine:
    """A system root under tmp_path: kernel-module files and a scripted nvidia-smi."""

    def __init__(self, root: Path) -> None:
        self.root = SystemRoot(root)
        self.smi_log = root / "nvidia-smi.log"

    def write(self, system_path: str, text: str) -> None:
        path = self.root.path(system_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")

    def sysfs(self, fixture: str = "sys-module-version-590.txt") -> None:
        self.write("/sys/module/nvidia/version", (DATA / fixture).read_text())

    def procfs(self, fixture: str) -> None:
        self.write("/proc/driver/nvidia/version", (DATA / fixture).read_text())

    def nvidia_smi(self, *, query: str, plain: str) -> None:
        """``nvidia-smi``: ``query`` for ``--query-gpu=...``, else ``plain``; each a shell snippet."""
        log = shlex.quote(str(self.smi_log))
        self.write(
            "/usr/bin/nvidia-smi",
            "#!/bin/sh\n"
            f'echo "$*" >> {log}\n'
            'case "$1" in\n'
            f"  --query-gpu=*)\n    {query}\n    ;;\n"
            f"  *)\n    {plain}\n    ;;\n"
            "esac\n",
        )
        self.root.path("/usr/bin/nvidia-smi").chmod(0o755)

    def recorded_smi(self, csv: str, banner: str, *, csv_status: int = 0) -> None:
        self.nvidia_smi(
            query=f"cat {shlex.quote(str(DATA / csv))}; exit {csv_status}",
            plain=f"cat {shlex.quote(str(DATA / banner))}; exit 0",
        )

    @property
    def smi_runs(self) -> list[str]:
        if not self.smi_log.exists():
            return []
        return self.smi_log.read_text().splitlines()

    def detect(self, **kwargs: Any) -> DriverInfo:
        kwargs.setdefault("env", {})
        return detect_driver(root=self.root, **kwargs)


@pytest.fixture
def machine(tmp_path: Path) -> FakeMachine:
    root = tmp_path / "machine"
    root.mkdir()
    return FakeMachine(root)


def has_note(info: DriverInfo, fragment: str) -> bool:
    return any(fragment in note for note in info.notes)


# ----------------------------------------------------------------------------- fake NVML


class NVMLError(Exception):
    pass


class NVMLError_LibraryNotFound(NVMLError):  # noqa: N801, N818 - pynvml's own names
    def __str__(self) -> str:
        return "NVML Shared Library Not Found"


class NVMLError_NotSupported(NVMLError):  # noqa: N801, N818 - pynvml's own names
    def __str__(self) -> str:
        return "Not Supported"


def fake_nvml(
    *,
    init: Callable[[], None] | None = None,
    version: bytes | str = b"590.48.01",
    cuda: int = 13010,
    with_v2: bool = True,
    gpus: tuple[dict[str, Any], ...] = (),
    calls: list[str] | None = None,
) -> ModuleType:
    """A stand-in for ``pynvml`` with the calls detect_driver makes."""
    log = [] if calls is None else calls
    module = ModuleType("pynvml")

    def nvml_init() -> None:
        log.append("init")
        if init is not None:
            init()

    def shutdown() -> None:
        log.append("shutdown")

    def field(name: str) -> Callable[[int], Any]:
        def get(handle: int) -> Any:
            value = gpus[handle][name]
            if isinstance(value, BaseException):
                raise value
            return value

        return get

    functions: dict[str, Any] = {
        "NVMLError": NVMLError,
        "nvmlInit": nvml_init,
        "nvmlShutdown": shutdown,
        "nvmlSystemGetDriverVersion": lambda: version,
        "nvmlSystemGetCudaDriverVersion": lambda: cuda,
        "nvmlDeviceGetCount": lambda: len(gpus),
        "nvmlDeviceGetHandleByIndex": lambda index: index,
        "nvmlDeviceGetName": field("name"),
        "nvmlDeviceGetMemoryInfo": field("memory"),
        "nvmlDeviceGetCudaComputeCapability": field("capability"),
        "nvmlDeviceGetUUID": field("uuid"),
    }
    if with_v2:
        functions["nvmlSystemGetCudaDriverVersion_v2"] = lambda: cuda
    for name, value in functions.items():
        setattr(module, name, value)
    return module


def nvml_gpu(name: str, memory_mib: int, capability: tuple[int, int], uuid: str) -> dict[str, Any]:
    return {
        "name": name,
        "memory": SimpleNamespace(total=memory_mib * MIB, free=memory_mib * MIB, used=0),
        "capability": capability,
        "uuid": uuid,
    }


def raising_init(error: BaseException) -> Callable[[], None]:
    def init() -> None:
        raise error

    return init


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set at teardown, so a hanging fake NVML thread ends with its test."""
    event = threading.Event()
    yield event
    event.set()


# ------------------------------------------------------------------------------ overrides


def test_override_wins_and_queries_nothing(machine: FakeMachine) -> None:
    machine.sysfs()
    machine.recorded_smi("nvidia-smi-csv-590-b200x8.txt", "nvidia-smi-590-b200x8.txt")
    info = machine.detect(override=">= 570.26", env={"CUDAUP_DRIVER_VERSION": "590.48.01"})
    assert info == DriverInfo(
        version=DriverVersion.from_text("570.26"),
        cuda_version=None,
        gpus=(),
        source="override",
        notes=(),
    )
    assert machine.smi_runs == []


def test_driver_version_env(machine: FakeMachine) -> None:
    info = machine.detect(env={"CUDAUP_DRIVER_VERSION": " 580.65.06 "})
    assert (str(info.version), info.source) == ("580.65.06", "override")


def test_empty_driver_version_env_is_ignored(machine: FakeMachine) -> None:
    machine.sysfs()
    info = machine.detect(env={"CUDAUP_DRIVER_VERSION": ""})
    assert info.source == "sysfs"


def test_bad_override_is_a_usage_error(machine: FakeMachine) -> None:
    with pytest.raises(UsageError, match="looks like a CUDA version"):
        machine.detect(override="13.1")
    with pytest.raises(UsageError, match="CUDAUP_DRIVER_VERSION: 'latest' is not"):
        machine.detect(env={"CUDAUP_DRIVER_VERSION": "latest"})


# ------------------------------------------------------------------- kernel module files


def test_a_real_h200_machine_as_recorded(machine: FakeMachine) -> None:
    """Everything a real H200 (580.159.04) printed, byte for byte, gives what NVML gave there:
    ``cudaup doctor --json`` on that machine reported driver 580.159.04 from NVML, CUDA 13.0,
    one NVIDIA H200, compute 9.0, 143771 MiB."""
    machine.sysfs("sys-module-version-580-recorded.txt")
    machine.procfs("proc-version-580-open-x86_64-recorded.txt")
    machine.recorded_smi("nvidia-smi-csv-580-h200-recorded.txt", "nvidia-smi-580-h200-recorded.txt")
    info = machine.detect()
    assert (str(info.version), info.source, str(info.cuda_version)) == (
        "580.159.04",
        "sysfs",
        "13.0",
    )
    assert [(g.name, g.compute_capability, g.memory_mib) for g in info.gpus] == [
        ("NVIDIA H200", "9.0", 143771)
    ]


def test_sysfs_only(machine: FakeMachine) -> None:
    machine.sysfs()
    info = machine.detect()
    assert (str(info.version), info.source, info.gpus, info.cuda_version) == (
        "590.48.01",
        "sysfs",
        (),
        None,
    )
    assert has_note(info, "NVML: not queried")
    assert has_note(info, "nvidia-smi: /usr/bin/nvidia-smi does not exist")
    assert not has_note(info, "procfs")


@pytest.mark.parametrize(
    ("fixture", "expected"),
    [
        ("proc-version-535-x86_64.txt", "535.183.01"),
        ("proc-version-580-open-x86_64.txt", "580.65.06"),
        ("proc-version-590-open-aarch64.txt", "590.48.01"),
    ],
)
def test_procfs_only(machine: FakeMachine, fixture: str, expected: str) -> None:
    machine.procfs(fixture)
    info = machine.detect()
    assert (str(info.version), info.source) == (expected, "procfs")
    assert has_note(info, "sysfs: /sys/module/nvidia/version does not exist")


def test_unreadable_sysfs_falls_through_to_procfs(machine: FakeMachine) -> None:
    machine.write("/sys/module/nvidia/version", "\n")
    machine.procfs("proc-version-535-x86_64.txt")
    info = machine.detect()
    assert info.source == "procfs"
    assert has_note(info, "sysfs: no driver version in /sys/module/nvidia/version")


def test_no_driver_at_all(machine: FakeMachine) -> None:
    info = machine.detect()
    assert not info.found
    assert (info.version, info.cuda_version, info.gpus, info.source) == (None, None, (), "none")
    assert has_note(info, "sysfs:")
    assert has_note(info, "procfs:")
    assert has_note(info, "nvidia-smi:")
    json.dumps(info.to_json())


# ------------------------------------------------------------------------------ nvidia-smi


def test_sysfs_plus_nvidia_smi_fills_gpus_and_cuda(machine: FakeMachine) -> None:
    machine.sysfs()
    machine.recorded_smi("nvidia-smi-csv-590-b200x8.txt", "nvidia-smi-590-b200x8.txt")
    info = machine.detect()
    assert (str(info.version), info.source, info.cuda_version) == (
        "590.48.01",
        "sysfs",
        CudaVersion(13, 1),
    )
    assert len(info.gpus) == 8
    assert info.gpus[7] == GpuInfo(7, "NVIDIA B200", "10.0", 183359)
    assert len(machine.smi_runs) == 2
    assert not has_note(info, "nvidia-smi")


def test_nvidia_smi_alone(machine: FakeMachine) -> None:
    machine.recorded_smi("nvidia-smi-csv-580-rtx-pro-6000.txt", "nvidia-smi-580-rtx-pro-6000.txt")
    info = machine.detect()
    assert (str(info.version), info.source, str(info.cuda_version)) == (
        "580.95.05",
        "nvidia-smi",
        "13.0",
    )
    assert info.gpus == (GpuInfo(0, "NVIDIA RTX PRO 6000 Blackwell Server Edition", "12.0", 97887),)


def test_old_driver_without_compute_cap_falls_back_to_the_banner(machine: FakeMachine) -> None:
    machine.recorded_smi(
        "nvidia-smi-csv-470-tesla-t4.txt", "nvidia-smi-470-tesla-t4.txt", csv_status=2
    )
    info = machine.detect()
    assert (str(info.version), info.source, str(info.cuda_version)) == (
        "470.256.02",
        "nvidia-smi banner",
        "11.4",
    )
    assert info.gpus == (GpuInfo(0, "Tesla T4", None, 15109),)
    assert has_note(info, 'Field "compute_cap" is not a valid field to query.')
    assert len(machine.smi_runs) == 2


def test_odd_csv_output_with_status_zero_falls_back_to_the_banner(machine: FakeMachine) -> None:
    machine.recorded_smi("nvidia-smi-csv-470-tesla-t4.txt", "nvidia-smi-470-tesla-t4.txt")
    info = machine.detect()
    assert info.source == "nvidia-smi banner"
    assert has_note(info, "nvidia-smi --query-gpu gave no driver version")


def test_hanging_nvidia_smi_times_out(machine: FakeMachine) -> None:
    machine.procfs("proc-version-580-open-x86_64.txt")
    machine.nvidia_smi(query="exec sleep 30", plain="exec sleep 30")
    started = time.monotonic()
    info = machine.detect(timeout=0.5)
    assert time.monotonic() - started < 10
    assert (str(info.version), info.source, info.gpus) == ("580.65.06", "procfs", ())
    assert has_note(info, "nvidia-smi did not answer within 0.5 s")
    assert len(machine.smi_runs) == 1  # no second run after a timeout


@ROOT_ONLY
def test_an_nvidia_smi_stuck_in_the_driver_costs_its_time_limit_not_a_hang(
    machine: FakeMachine, tmp_path: Path
) -> None:
    """On a wedged GPU, nvidia-smi waits in the kernel, where a SIGKILL does not end it:
    the probe leaves it behind after the limit and a grace, as it leaves a wedged NVML."""
    machine.procfs("proc-version-580-open-x86_64.txt")
    with frozen_filesystem(tmp_path / "driver") as driver:
        stuck = f"echo query > {shlex.quote(str(driver))}/ioctl"
        machine.nvidia_smi(query=stuck, plain=stuck)
        started = time.monotonic()
        info = machine.detect(timeout=0.5)
        assert time.monotonic() - started < 0.5 + KILL_GRACE + 20  # the old code waited on
    assert (str(info.version), info.source, info.gpus) == ("580.65.06", "procfs", ())
    assert has_note(info, "nvidia-smi did not answer within 0.5 s")
    assert len(machine.smi_runs) == 1


def test_nvidia_smi_without_a_driver(machine: FakeMachine) -> None:
    failed = shlex.quote(str(DATA / "nvidia-smi-failed.txt"))
    machine.nvidia_smi(query=f"cat {failed}; exit 9", plain=f"cat {failed}; exit 9")
    info = machine.detect()
    assert info.source == "none"
    assert has_note(
        info,
        "nvidia-smi --query-gpu exited with status 9: NVIDIA-SMI has failed because it "
        "couldn't communicate with the NVIDIA driver",
    )
    assert len(machine.smi_runs) == 1


def test_nvidia_smi_without_devices(machine: FakeMachine) -> None:
    machine.sysfs("sys-module-version-535.txt")
    none = shlex.quote(str(DATA / "nvidia-smi-no-devices.txt"))
    machine.nvidia_smi(query=f"cat {none}; exit 6", plain=f"cat {none}; exit 6")
    info = machine.detect()
    assert (str(info.version), info.source, info.gpus) == ("535.183.01", "sysfs", ())
    assert has_note(info, "nvidia-smi --query-gpu exited with status 6: No devices were found")
    assert has_note(info, "nvidia-smi exited with status 6: No devices were found")
    assert len(machine.smi_runs) == 2


def test_nvidia_smi_that_cannot_run(machine: FakeMachine) -> None:
    machine.write("/usr/bin/nvidia-smi", "#!/nonexistent/interpreter\n")
    machine.root.path("/usr/bin/nvidia-smi").chmod(0o755)
    info = machine.detect()
    assert info.source == "none"
    assert has_note(info, "nvidia-smi: cannot run")


def test_kernel_module_and_nvidia_smi_disagree(machine: FakeMachine) -> None:
    machine.sysfs("sys-module-version-535.txt")
    machine.recorded_smi("nvidia-smi-csv-590-h200.txt", "nvidia-smi-590-b200x8.txt")
    info = machine.detect()
    assert (str(info.version), info.source) == ("535.183.01", "sysfs")
    assert has_note(info, "nvidia-smi reports driver 590.48.01 but the loaded kernel module is")


# ------------------------------------------------------------------------------------ NVML


def test_nvml_gives_everything(machine: FakeMachine) -> None:
    machine.recorded_smi("nvidia-smi-csv-590-b200x8.txt", "nvidia-smi-590-b200x8.txt")
    calls: list[str] = []
    module = fake_nvml(
        calls=calls,
        gpus=(
            nvml_gpu("NVIDIA H200", 143771, (9, 0), "GPU-5c1f0f6e-0d4e-4a4b-8d4e-3b4a2e1f9c01"),
            nvml_gpu("NVIDIA H200", 143771, (9, 0), "GPU-7a2b9e30-1f2c-4d8e-9a6b-0c3d5e7f8a02"),
        ),
    )
    info = machine.detect(nvml=lambda: module)
    assert (str(info.version), info.source, info.cuda_version) == (
        "590.48.01",
        "nvml",
        CudaVersion(13, 1),
    )
    assert info.gpus == (
        GpuInfo(0, "NVIDIA H200", "9.0", 143771, "GPU-5c1f0f6e-0d4e-4a4b-8d4e-3b4a2e1f9c01"),
        GpuInfo(1, "NVIDIA H200", "9.0", 143771, "GPU-7a2b9e30-1f2c-4d8e-9a6b-0c3d5e7f8a02"),
    )
    assert calls == ["init", "shutdown"]
    assert machine.smi_runs == []
    assert info.to_json()["gpus"][1]["uuid"].startswith("GPU-7a2b")


def test_nvml_best_effort_fields(machine: FakeMachine) -> None:
    gpu = nvml_gpu("NVIDIA A100-SXM4-80GB", 81920, (8, 0), "GPU-1")
    gpu["memory"] = NVMLError_NotSupported()
    gpu["name"] = b"NVIDIA A100-SXM4-80GB"
    module = fake_nvml(version="535.183.01", cuda=12020, with_v2=False, gpus=(gpu,))
    info = machine.detect(nvml=lambda: module)
    assert info.source == "nvml"
    assert info.cuda_version == CudaVersion(12, 2)
    assert info.gpus == (GpuInfo(0, "NVIDIA A100-SXM4-80GB", "8.0", None, "GPU-1"),)


def test_nvml_init_error_falls_through_to_sysfs(machine: FakeMachine) -> None:
    machine.sysfs()
    calls: list[str] = []
    module = fake_nvml(init=raising_init(NVMLError("Driver Not Loaded")), calls=calls)
    info = machine.detect(nvml=lambda: module)
    assert info.source == "sysfs"
    assert has_note(info, "NVML: the NVIDIA kernel driver is not loaded")
    assert calls == ["init"]


def test_nvml_without_its_library(machine: FakeMachine) -> None:
    module = fake_nvml(init=raising_init(NVMLError_LibraryNotFound()))
    info = machine.detect(nvml=lambda: module)
    assert info.source == "none"
    assert info.notes[0] == "NVML: libnvidia-ml.so.1 not found"


def test_nvml_with_a_bad_version_string(machine: FakeMachine) -> None:
    machine.procfs("proc-version-590-open-aarch64.txt")
    calls: list[str] = []
    info = machine.detect(nvml=lambda: fake_nvml(version=b"", calls=calls))
    assert info.source == "procfs"
    assert has_note(info, "NVML: '' is not an NVIDIA driver version")
    assert calls == ["init", "shutdown"]


def test_hanging_nvml_times_out(machine: FakeMachine, release: threading.Event) -> None:
    machine.sysfs()

    def hang() -> None:
        release.wait(30)

    module = fake_nvml(init=hang)
    started = time.monotonic()
    info = machine.detect(nvml=lambda: module, timeout=0.5)
    assert time.monotonic() - started < 10
    assert info.source == "sysfs"
    assert has_note(info, "NVML did not answer within 0.5 s")


def test_nvml_loader_returning_none(machine: FakeMachine) -> None:
    info = machine.detect(nvml=lambda: None)
    assert has_note(info, "NVML: not available")


def test_nvml_loader_failing_to_import(machine: FakeMachine) -> None:
    def loader() -> ModuleType:
        raise ImportError("No module named 'pynvml'")

    info = machine.detect(nvml=loader)
    assert has_note(info, "NVML: the pynvml module (nvidia-ml-py) is not installed")


# ------------------------------------------------------------------------ the real machine


def test_real_machine_answers_without_raising(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDAUP_DRIVER_VERSION", raising=False)
    info = detect_driver(root=SystemRoot(), timeout=10.0)
    assert isinstance(info, DriverInfo)
    assert info.source in {"nvml", "sysfs", "procfs", "nvidia-smi", "nvidia-smi banner", "none"}
    assert info.found == (info.source != "none")
    if not info.found:
        assert info.notes
    json.dumps(info.to_json())
