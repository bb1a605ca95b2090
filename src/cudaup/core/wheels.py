"""Which wheels install on a platform, and the marker values of a platform, through
``packaging`` (tags, markers, wheel file names): the one wheel-tag matcher.

Pure: the platform facts come from :data:`cudaup.core.platforms.FACTS`.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache, lru_cache

from packaging.markers import default_environment
from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import BuildTag, InvalidWheelFilename, NormalizedName, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from cudaup.core.platforms import FACTS, NEWEST_GLIBC_MINOR, Platform


def marker_environment(platform: Platform, python: tuple[int, int] | None = None) -> dict[str, str]:
    """PEP 508 marker values for ``platform`` (and a CPython ``python``, when given)."""
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
def tag_rank(python: tuple[int, int], platform: Platform) -> Mapping[Tag, int]:
    """Every wheel tag a CPython ``python`` accepts on ``platform`` (``packaging.tags``), by
    preference (0: the most specific); kept, since a plan asks for the best wheel a hundred
    times (building the ~900 tags each time was a third of a warm plan's CPU)."""
    platforms = platform_tags(platform)
    order = [
        *cpython_tags(python, platforms=platforms),
        *compatible_tags(python, f"cp{python[0]}{python[1]}", platforms),
    ]
    return {tag: position for position, tag in enumerate(order)}


@cache
def supported_tags(python: tuple[int, int], platform: Platform) -> frozenset[Tag]:
    """Every wheel tag a CPython ``python`` accepts on ``platform``."""
    return frozenset(tag_rank(python, platform))


@lru_cache(maxsize=1 << 16)
def wheel_name(filename: str) -> tuple[NormalizedName, Version, BuildTag, frozenset[Tag]] | None:
    """What a wheel's file name says (:func:`packaging.utils.parse_wheel_filename`), None
    when it is no wheel's name; kept, since a plan asks the tags and version of the same
    names again on every line and round (4,349 parses of a cold plan's names took 30 ms)."""
    try:
        return parse_wheel_filename(filename)
    except (InvalidWheelFilename, InvalidVersion):
        return None


def wheel_fits(filename: str, platform: Platform, python: tuple[int, int] | None = None) -> bool:
    """Whether a wheel installs on ``platform``: for CPython ``python`` when given, else
    for any Python 3 (NVIDIA's toolkit wheels are ``py3-none``)."""
    parts = wheel_name(filename)
    if parts is None:
        return False
    tags = parts[3]
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
