"""Reading (never writing) standalone-installer file names.

Names changed four times (``win10``/``windows``/``windows_x86_64``, drivers in
and out of the name), so the platform is read from tokens, not one strict
pattern: a name seen for the first time tomorrow still classifies as long as it
keeps the ``.run``/``.exe`` extension and says ``sbsa``/``arm64``/``ppc64le``
where it is not x86_64.  This module only *reads* names that a source listed;
cudaup never builds a file name and presents it as fact.  A name that is not a
plain file name (``..``, a separator, control characters) is refused: the name
of an installer becomes the name of its download.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cudaup.core.names import check_file_name
from cudaup.core.platforms import Platform

_VERSION = re.compile(r"^cuda_(\d+\.\d+\.\d+)")
# A driver is a 3-digit branch and one or two more dotted parts (455.32.00, 571.96).
_DRIVER = re.compile(r"_(\d{3}\.\d{2,3}(?:\.\d{2,3})?)(?=_)")


@dataclass(frozen=True, slots=True)
class InstallerName:
    filename: str
    version: str | None
    driver: str | None
    platform: Platform
    network: bool


def classify_installer(filename: str) -> InstallerName | None:
    """What a listed installer file is for, or ``None`` if it is not one.

    Raises :class:`~cudaup.errors.SourceFormatError` for a name that is not a plain
    file name."""
    lowered = check_file_name(filename, field="installer file name").lower()
    tokens = set(re.split(r"[_.\-]", lowered))
    platform: Platform
    if lowered.endswith(".run"):
        if "sbsa" in tokens:
            platform = "linux-sbsa"
        elif "ppc64le" in tokens:
            platform = "linux-ppc64le"
        elif "aarch64" in tokens or "arm64" in tokens:
            # Jetson never had a runfile; an arm64 runfile is a server (SBSA) one.
            platform = "linux-sbsa"
        else:
            platform = "linux-x86_64"
    elif lowered.endswith(".exe") and tokens & {"windows", "win10", "win11", "win"}:
        platform = "windows-arm64" if "arm64" in tokens else "windows-x86_64"
    else:
        return None
    version = _VERSION.match(lowered)
    driver = _DRIVER.search(lowered)
    return InstallerName(
        filename=filename,
        version=version.group(1) if version else None,
        driver=driver.group(1) if driver else None,
        platform=platform,
        network="network" in tokens,
    )
