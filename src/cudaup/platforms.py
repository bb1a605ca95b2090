"""Platform names (NVIDIA's redist keys) and what this host is.

Pure apart from :func:`host_platform`, which reads ``sys.platform``,
``platform.machine()`` and the Jetson marker files.
"""

from __future__ import annotations

import platform as _platform
import sys
from pathlib import Path
from typing import Literal, get_args

from cudaup.errors import UsageError

Platform = Literal[
    "linux-x86_64",
    "linux-sbsa",
    "linux-aarch64",
    "linux-ppc64le",
    "windows-x86_64",
    "windows-arm64",
]
PLATFORMS: tuple[Platform, ...] = get_args(Platform)

#: Other spellings people (and other tools' catalogs) use for the same platforms.
_ALIASES: dict[str, Platform] = {
    "linux-amd64": "linux-x86_64",
    "linux-x64": "linux-x86_64",
    "x86_64": "linux-x86_64",
    "linux-arm64": "linux-sbsa",
    "linux-arm64-sbsa": "linux-sbsa",
    "sbsa": "linux-sbsa",
    "jetson": "linux-aarch64",
    "linux-jetson": "linux-aarch64",
    "windows-amd64": "windows-x86_64",
    "windows-x64": "windows-x86_64",
    "win-amd64": "windows-x86_64",
    "win-arm64": "windows-arm64",
}

_DESCRIPTIONS: dict[Platform, str] = {
    "linux-x86_64": "Linux x86_64",
    "linux-sbsa": "Linux Arm64 server (SBSA)",
    "linux-aarch64": "Linux aarch64 Jetson (L4T)",
    "linux-ppc64le": "Linux ppc64le",
    "windows-x86_64": "Windows x86_64",
    "windows-arm64": "Windows Arm64",
}

#: Environment-marker values of each platform, for evaluating wheel requirements.
MARKER_ENVIRONMENTS: dict[Platform, dict[str, str]] = {
    "linux-x86_64": {"sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix"},
    "linux-sbsa": {"sys_platform": "linux", "platform_system": "Linux", "platform_machine": "aarch64", "os_name": "posix"},
    "linux-aarch64": {"sys_platform": "linux", "platform_system": "Linux", "platform_machine": "aarch64", "os_name": "posix"},
    "linux-ppc64le": {"sys_platform": "linux", "platform_system": "Linux", "platform_machine": "ppc64le", "os_name": "posix"},
    "windows-x86_64": {"sys_platform": "win32", "platform_system": "Windows", "platform_machine": "AMD64", "os_name": "nt"},
    "windows-arm64": {"sys_platform": "win32", "platform_system": "Windows", "platform_machine": "ARM64", "os_name": "nt"},
}  # fmt: skip

#: Wheel platform-tag suffixes that run on each platform (manylinux/musllinux/legacy).
WHEEL_ARCH: dict[Platform, tuple[str, ...]] = {
    "linux-x86_64": ("linux_x86_64",),
    "linux-sbsa": ("linux_aarch64",),
    "linux-aarch64": ("linux_aarch64",),
    "linux-ppc64le": ("linux_ppc64le",),
    "windows-x86_64": ("win_amd64",),
    "windows-arm64": ("win_arm64",),
}


def describe(platform: Platform) -> str:
    """Human name of a platform ("Linux x86_64")."""
    return _DESCRIPTIONS[platform]


def is_linux(platform: Platform) -> bool:
    return platform.startswith("linux-")


def parse_platform(text: str) -> Platform:
    """Accept NVIDIA's keys and common aliases; name the valid ones otherwise."""
    key = text.strip().lower().replace("_", "-").replace("x86-64", "x86_64")
    for name in PLATFORMS:
        if key == name:
            return name
    if key in _ALIASES:
        return _ALIASES[key]
    raise UsageError(f"unknown platform {text!r}; use one of {', '.join(PLATFORMS)}")


def _is_jetson() -> bool:
    # L4T writes this file; newer JetPacks also expose the tegra compatible string.
    if Path("/etc/nv_tegra_release").exists():
        return True
    try:
        compatible = Path("/proc/device-tree/compatible").read_bytes()
    except OSError:
        return False
    return b"nvidia,tegra" in compatible


def host_platform() -> Platform:
    """The platform of the machine cudaup runs on."""
    machine = _platform.machine().lower()
    if sys.platform.startswith("linux"):
        if machine in {"x86_64", "amd64"}:
            return "linux-x86_64"
        if machine in {"aarch64", "arm64"}:
            return "linux-aarch64" if _is_jetson() else "linux-sbsa"
        if machine == "ppc64le":
            return "linux-ppc64le"
    elif sys.platform == "win32":
        return "windows-arm64" if machine == "arm64" else "windows-x86_64"
    raise UsageError(
        f"NVIDIA publishes no CUDA toolkit for this host ({sys.platform} {machine}); "
        f"pass --platform (one of {', '.join(PLATFORMS)})"
    )
