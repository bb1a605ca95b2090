"""NVIDIA's platforms: their names and the one table of facts about them.

Which wheels install on each is :mod:`cudaup.core.wheels`' question (it needs
``packaging``, which this module, read by every command that names a platform,
does without); which platform *this* host is, :mod:`cudaup.machine.host`'s.
Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from cudaup.core.versions import shown
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


@dataclass(frozen=True, slots=True)
class PlatformFacts:
    """What cudaup needs to know about one platform, in one place."""

    description: str  # "Linux x86_64"
    machine: str  # the ``platform_machine`` marker value
    wheel_arch: str  # the architecture in wheel platform tags
    uv_platform: str  # uv's ``--python-platform`` target

    @property
    def system(self) -> str:
        return "Windows" if self.wheel_arch.startswith("win") else "Linux"


#: The one platform table.  ``linux-aarch64`` (Jetson) and ``linux-sbsa`` are the same
#: CPU to a wheel; NVIDIA's toolkits tell them apart.
FACTS: dict[Platform, PlatformFacts] = {
    "linux-x86_64": PlatformFacts("Linux x86_64", "x86_64", "x86_64", "x86_64-manylinux_2_28"),
    "linux-sbsa": PlatformFacts("Linux Arm64 server (SBSA)", "aarch64", "aarch64", "aarch64-manylinux_2_28"),
    "linux-aarch64": PlatformFacts("Linux aarch64 Jetson (L4T)", "aarch64", "aarch64", "aarch64-manylinux_2_28"),
    "linux-ppc64le": PlatformFacts("Linux ppc64le", "ppc64le", "ppc64le", "powerpc64le-unknown-linux-gnu"),
    "windows-x86_64": PlatformFacts("Windows x86_64", "AMD64", "win_amd64", "x86_64-pc-windows-msvc"),
    "windows-arm64": PlatformFacts("Windows Arm64", "ARM64", "win_arm64", "aarch64-pc-windows-msvc"),
}  # fmt: skip

#: The newest glibc whose manylinux wheels a plan accepts (a current distribution's).
NEWEST_GLIBC_MINOR = 39


def describe(platform: Platform) -> str:
    """Human name of a platform ("Linux x86_64")."""
    return FACTS[platform].description


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
    raise UsageError(f"unknown platform {shown(text)}; use one of {', '.join(PLATFORMS)}")
