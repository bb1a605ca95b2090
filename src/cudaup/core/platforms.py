"""NVIDIA's platforms: their names, the one table of facts about them, and which wheels
install on each (through ``packaging.tags``).

Pure: which platform *this* host is, is :mod:`cudaup.machine.host`'s question.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Literal, get_args

from cudaup.errors import UsageError

if TYPE_CHECKING:
    from packaging.tags import Tag

# packaging's markers and tags are imported where they are used: the table below is
# read by every command that names a platform, and importing them costs ~15 ms.

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
    raise UsageError(f"unknown platform {text!r}; use one of {', '.join(PLATFORMS)}")


def marker_environment(platform: Platform, python: tuple[int, int] | None = None) -> dict[str, str]:
    """PEP 508 marker values for ``platform`` (and a CPython ``python``, when given)."""
    from packaging.markers import default_environment  # noqa: PLC0415 - see the imports

    facts = FACTS[platform]
    linux = facts.system == "Linux"
    environment: dict[str, str] = dict(default_environment())  # type: ignore[arg-type]
    environment.update(
        sys_platform="linux" if linux else "win32",
        platform_system=facts.system,
        platform_machine=facts.machine,
        os_name="posix" if linux else "nt",
    )
    if python is not None:
        environment.update(
            python_version=f"{python[0]}.{python[1]}",
            python_full_version=f"{python[0]}.{python[1]}.0",
            implementation_name="cpython",
            platform_python_implementation="CPython",
        )
    return environment


def platform_tags(platform: Platform) -> list[str]:
    """Wheel platform tags that install on ``platform``, most specific first."""
    arch = FACTS[platform].wheel_arch
    if arch.startswith("win"):
        return [arch]
    manylinux = [f"manylinux_2_{minor}_{arch}" for minor in range(NEWEST_GLIBC_MINOR, 16, -1)]
    legacy = [f"manylinux2014_{arch}", f"manylinux2010_{arch}", f"manylinux1_{arch}"]
    return [*manylinux, *legacy, f"linux_{arch}"]


@cache
def supported_tags(python: tuple[int, int], platform: Platform) -> frozenset[Tag]:
    """Every wheel tag a CPython ``python`` accepts on ``platform`` (``packaging.tags``)."""
    from packaging.tags import compatible_tags, cpython_tags  # noqa: PLC0415 - see the imports

    platforms = platform_tags(platform)
    return frozenset(
        (
            *cpython_tags(python, platforms=platforms),
            *compatible_tags(python, f"cp{python[0]}{python[1]}", platforms),
        )
    )


def wheel_fits(filename: str, platform: Platform, python: tuple[int, int] | None = None) -> bool:
    """Whether a wheel installs on ``platform``: for CPython ``python`` when given, else
    for any Python 3 (NVIDIA's toolkit wheels are ``py3-none``)."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename  # noqa: PLC0415
    from packaging.version import InvalidVersion  # noqa: PLC0415 - see the imports

    try:
        tags = parse_wheel_filename(filename)[3]
    except (InvalidWheelFilename, InvalidVersion):
        return False
    if python is not None:
        return not supported_tags(python, platform).isdisjoint(tags)
    arch = FACTS[platform].wheel_arch
    for tag in tags:
        if not tag.interpreter.startswith(("py3", "cp3")):
            continue
        if tag.platform in {"any", arch}:
            return True
        if tag.platform.startswith(("manylinux", "linux_")) and tag.platform.endswith("_" + arch):
            return True
    return False
