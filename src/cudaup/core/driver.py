"""The NVIDIA display driver as facts: its version, the CUDA it reports, its GPUs.

Pure code, no I/O: value types plus parsers of what the machine prints, each
tried on recorded outputs in ``tests/data/driver/``.  The probing itself
(NVML, ``/sys``, ``/proc``, ``nvidia-smi``) lives in :mod:`cudaup.machine`.

Two versions are kept apart on purpose, as in NVIDIA's own tooling:

* :class:`DriverVersion` is the display-driver release (``590.48.01`` on
  Linux, ``571.96`` on Windows), what the toolkit's driver table asks for.
* :class:`CudaVersion` is the newest CUDA the driver supports (``13.1``), what
  ``nvidia-smi`` shows as ``CUDA Version`` and NVML encodes as ``13010``.

Formats read here::

    /sys/module/nvidia/version      590.48.01
    /proc/driver/nvidia/version     NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12 ...
                                    NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  590.48.01  Release Build  (...)  ...
                                    GCC version:  gcc version 13.3.0 (...)
    nvidia-smi --query-gpu=driver_version,name,compute_cap,memory.total --format=csv,noheader
                                    590.48.01, NVIDIA B200, 10.0, 183359 MiB
    nvidia-smi                      | NVIDIA-SMI 590.48.01   Driver Version: 590.48.01   CUDA Version: 13.1 |
                                    |   0  NVIDIA B200                    On  |   00000000:1B:00.0 Off | ...
                                    | N/A   31C    P0            140W / 1000W |       0MiB / 183359MiB | ...
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from cudaup.core.versions import shown
from cudaup.errors import UsageError

__all__ = [
    "CudaVersion",
    "DriverInfo",
    "DriverVersion",
    "GpuInfo",
    "parse_nvidia_smi_banner",
    "parse_nvidia_smi_csv",
    "parse_proc_driver_version",
    "parse_sys_module_version",
]

# At most nine digits a number (real ones have up to four), counted before int() sees them.
_DRIVER_VERSION = re.compile(r"[0-9]{1,9}(?:\.[0-9]{1,9}){0,3}")
_CUDA_VERSION = re.compile(r"([0-9]{1,9})(?:\.([0-9]{1,9}))?")
_COMPUTE_CAPABILITY = re.compile(r"\d+\.\d+")
#: Display-driver branches have had three digits since R100 (2007); anything
#: smaller is a CUDA version or a Windows file version typed by mistake.
_MIN_BRANCH = 100


@dataclass(frozen=True, slots=True, eq=False)
class DriverVersion:
    """A display-driver release version, shown as ``Driver Version`` by ``nvidia-smi``.

    Versions compare by their numeric components, missing ones counting as 0:
    ``570.26 < 570.86.10`` and ``570.26 == 570.26.00``.
    """

    text: str
    components: tuple[int, ...]

    @classmethod
    def from_text(cls, text: str) -> DriverVersion:
        """Parse ``590.48.01``, ``571.96`` or a driver-table cell such as ``>= 450.51.06``."""
        normalized = text.strip()
        normalized = normalized.removeprefix(">=").strip()
        if not _DRIVER_VERSION.fullmatch(normalized):
            raise UsageError(
                f"{shown(text)} is not an NVIDIA driver version; "
                "expected numbers and dots such as 590.48.01 or 571.96"
            )
        components = tuple(int(part) for part in normalized.split("."))
        if components[0] < _MIN_BRANCH:
            if len(components) == 4:
                raise UsageError(
                    f"{text!r} looks like a Windows driver file version; give the release "
                    "version that nvidia-smi shows as 'Driver Version', such as 571.96"
                )
            raise UsageError(
                f"{text!r} looks like a CUDA version, not a driver version; "
                "driver versions look like 590.48.01 (nvidia-smi shows it as 'Driver Version')"
            )
        return cls(text=normalized, components=components)

    @property
    def branch(self) -> int:
        """The driver branch: ``590`` for ``590.48.01``."""
        return self.components[0]

    def _key(self) -> tuple[int, ...]:
        key = list(self.components)
        while len(key) > 1 and key[-1] == 0:
            key.pop()
        return tuple(key)

    def _padded(self, other: DriverVersion) -> tuple[tuple[int, ...], tuple[int, ...]]:
        width = max(len(self.components), len(other.components))
        mine = self.components + (0,) * (width - len(self.components))
        theirs = other.components + (0,) * (width - len(other.components))
        return mine, theirs

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DriverVersion):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __lt__(self, other: DriverVersion) -> bool:
        if not isinstance(other, DriverVersion):
            return NotImplemented
        mine, theirs = self._padded(other)
        return mine < theirs

    def __le__(self, other: DriverVersion) -> bool:
        if not isinstance(other, DriverVersion):
            return NotImplemented
        mine, theirs = self._padded(other)
        return mine <= theirs

    def __gt__(self, other: DriverVersion) -> bool:
        if not isinstance(other, DriverVersion):
            return NotImplemented
        mine, theirs = self._padded(other)
        return mine > theirs

    def __ge__(self, other: DriverVersion) -> bool:
        if not isinstance(other, DriverVersion):
            return NotImplemented
        mine, theirs = self._padded(other)
        return mine >= theirs

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True, slots=True, order=True)
class CudaVersion:
    """The newest CUDA a driver supports, as it reports it: ``13.1``."""

    major: int
    minor: int

    @classmethod
    def from_text(cls, text: str) -> CudaVersion:
        """Parse ``13.1`` (or ``13``, meaning ``13.0``)."""
        match = _CUDA_VERSION.fullmatch(text.strip())
        if match is None:
            raise UsageError(
                f"{shown(text)} is not a CUDA version as a driver reports it; "
                "expected MAJOR.MINOR such as 13.1"
            )
        return cls(major=int(match.group(1)), minor=int(match.group(2) or 0))

    @classmethod
    def from_int(cls, value: int) -> CudaVersion:
        """Decode NVML's ``1000 * major + 10 * minor``: ``13010`` is ``13.1``."""
        if isinstance(value, bool) or not isinstance(value, int) or value < 1000:
            raise UsageError(
                f"{value!r} is not an NVML CUDA version; expected 1000*major + 10*minor such as 13010"
            )
        return cls(major=value // 1000, minor=(value % 1000) // 10)

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


@dataclass(frozen=True, slots=True)
class GpuInfo:
    """One GPU as the driver lists it; every field but ``index`` and ``name`` is best effort."""

    index: int
    name: str
    compute_capability: str | None
    memory_mib: int | None
    uuid: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "name": self.name,
            "compute_capability": self.compute_capability,
            "memory_mib": self.memory_mib,
            "uuid": self.uuid,
        }


@dataclass(frozen=True, slots=True)
class DriverInfo:
    """What this machine's driver is, where that was learnt, and what failed on the way.

    ``source`` is one of ``"override"``, ``"nvml"``, ``"sysfs"``, ``"procfs"``,
    ``"nvidia-smi"``, ``"nvidia-smi banner"`` or ``"none"``.  "No driver" is an
    answer, not an error: ``version`` is then ``None`` and ``notes`` says why.
    """

    version: DriverVersion | None
    cuda_version: CudaVersion | None
    gpus: tuple[GpuInfo, ...]
    source: str
    notes: tuple[str, ...]

    @property
    def found(self) -> bool:
        return self.version is not None

    def to_json(self) -> dict[str, Any]:
        return {
            "found": self.found,
            "version": str(self.version) if self.version else None,
            "branch": self.version.branch if self.version else None,
            "cuda_version": str(self.cuda_version) if self.cuda_version else None,
            "source": self.source,
            "gpus": [gpu.to_json() for gpu in self.gpus],
            "notes": list(self.notes),
        }


def _driver_version_or_none(text: str) -> DriverVersion | None:
    try:
        return DriverVersion.from_text(text)
    except UsageError:
        return None


def _field(value: str) -> str | None:
    """A CSV field, or ``None`` for ``[N/A]``, ``[Not Supported]`` and the like."""
    value = value.strip()
    if not value or (value.startswith("[") and value.endswith("]")) or value == "N/A":
        return None
    return value


def _memory_mib(value: str | None) -> int | None:
    if value is None:
        return None
    number = value.removesuffix("MiB").strip()
    return int(number) if number.isdigit() else None


def parse_sys_module_version(text: str) -> DriverVersion | None:
    """``/sys/module/nvidia/version``: the loaded kernel module's version, one line."""
    lines = text.strip().splitlines()
    return _driver_version_or_none(lines[0]) if lines else None


def parse_proc_driver_version(text: str) -> DriverVersion | None:
    """``/proc/driver/nvidia/version``: the version on its ``NVRM version:`` line.

    Both the proprietary (``... x86_64 Kernel Module  535.183.01  <date>``) and
    the open module (``... Open Kernel Module for aarch64  590.48.01  Release
    Build ...``) are read; the ``GCC version:`` line is never taken for it.
    """
    for line in text.splitlines():
        if not line.strip().startswith("NVRM version:"):
            continue
        for token in line.split():
            version = _driver_version_or_none(token) if "." in token else None
            if version is not None:
                return version
    return None


def parse_nvidia_smi_csv(text: str) -> tuple[DriverVersion | None, list[GpuInfo]]:
    """Output of ``nvidia-smi --query-gpu=driver_version,name,compute_cap,memory.total --format=csv,noheader``.

    One line per GPU (``590.48.01, NVIDIA H200, 9.0, 143771 MiB``).  Lines that
    are not four fields starting with a driver version are skipped, so an error
    (drivers before 510 reject ``compute_cap``), ``No devices were found`` or a
    header give ``(None, [])`` and the caller falls back to the banner.
    """
    version: DriverVersion | None = None
    gpus: list[GpuInfo] = []
    for line in text.splitlines():
        fields = line.split(",")
        if len(fields) != 4:
            continue
        line_version = _driver_version_or_none(fields[0])
        if line_version is None:
            continue
        version = version or line_version
        capability = _field(fields[2])
        gpus.append(
            GpuInfo(
                index=len(gpus),
                name=_field(fields[1]) or "unknown",
                compute_capability=capability
                if capability and _COMPUTE_CAPABILITY.fullmatch(capability)
                else None,
                memory_mib=_memory_mib(_field(fields[3])),
            )
        )
    return version, gpus


_BANNER_DRIVER = re.compile(r"Driver Version:\s*(\d+(?:\.\d+)*)")
_BANNER_CUDA = re.compile(r"CUDA Version:\s*(\d+\.\d+)")
_BANNER_GPU_ROW = re.compile(
    r"^\|\s*(\d+)\s+(.+?)\s+(?:On|Off|WDDM|TCC|MCDM|N/A)\s*\|"
    r"\s*[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]\b"
)
_BANNER_MEMORY = re.compile(r"(\d+)MiB\s*/\s*(\d+)MiB")


def parse_nvidia_smi_banner(
    text: str,
) -> tuple[DriverVersion | None, CudaVersion | None, list[GpuInfo]]:
    """The plain ``nvidia-smi`` table: driver version, the CUDA it supports, GPUs.

    Reads every layout since the 470 branch (79, 89 and 91 columns wide).
    GPU names are as printed, so long ones end in ``...``; the memory comes from
    the row under each GPU.  The table shows no compute capability.
    """
    driver_match = _BANNER_DRIVER.search(text)
    cuda_match = _BANNER_CUDA.search(text)
    version = _driver_version_or_none(driver_match.group(1)) if driver_match else None
    cuda = CudaVersion.from_text(cuda_match.group(1)) if cuda_match else None
    gpus: list[GpuInfo] = []
    lines = text.splitlines()
    for number, line in enumerate(lines):
        row = _BANNER_GPU_ROW.match(line.strip())
        if row is None:
            continue
        memory = None
        if number + 1 < len(lines):
            usage = _BANNER_MEMORY.search(lines[number + 1])
            memory = int(usage.group(2)) if usage else None
        gpus.append(
            GpuInfo(
                index=int(row.group(1)),
                name=row.group(2).strip(),
                compute_capability=None,
                memory_mib=memory,
            )
        )
    return version, cuda, gpus
