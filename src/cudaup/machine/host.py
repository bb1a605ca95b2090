"""Which of NVIDIA's platforms this host is: ``sys.platform``, the CPU, and on ARM
the Jetson marker files (Jetson is ``linux-aarch64``; servers are ``linux-sbsa``)."""

from __future__ import annotations

import platform as _platform
import sys
from pathlib import Path

from cudaup.core.platforms import PLATFORMS, Platform
from cudaup.errors import UsageError


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
        f"NVIDIA publishes no CUDA toolkit for this host ({sys.platform} {machine})",
        hint=f"--platform names one (one of {', '.join(PLATFORMS)})",
    )
