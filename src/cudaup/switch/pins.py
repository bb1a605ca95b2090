"""``.cuda-version`` pins: a directory's toolkit, read from the current directory upwards.

A pin another user owns or may write is skipped, with a warning naming it and its
owner (:func:`cudaup.switch.shim.read_pin`, :mod:`cudaup.util.trust`).
"""

from __future__ import annotations

import os
from pathlib import Path

from cudaup.errors import UntrustedPathError, UsageError
from cudaup.switch import shim
from cudaup.switch.selection import PIN_FILE, check_request
from cudaup.util.atomic import atomic_write


# -- pins ------------------------------------------------------------------------------------
def write_pin(directory: Path, request: str) -> Path:
    """Write ``directory/.cuda-version`` holding ``request``; its path."""
    value = check_request(request)
    path = directory / PIN_FILE
    atomic_write(path, value + "\n")
    return path


def remove_pin(directory: Path) -> Path | None:
    """Remove ``directory/.cuda-version``; its path, or ``None`` if there was none."""
    path = directory / PIN_FILE
    try:
        path.unlink()
    except FileNotFoundError:
        return None
    return path


def find_pin(start: Path) -> Path | None:
    """The nearest ``.cuda-version`` in ``start`` or above."""
    found = shim.find_pin(str(start))
    return Path(found) if found else None


def nearest_pin(start: Path) -> tuple[Path | None, str, list[str]]:
    """The nearest pin that may choose, its request, and a warning per pin skipped."""
    found, request, skipped = shim.nearest_pin(str(start), os.environ)
    return (Path(found) if found else None), request, skipped


def pinned_release(start: Path) -> tuple[Path, str, list[str]]:
    """The nearest ``.cuda-version`` and the release it asks for, for ``cudaup install``
    with no version (as rustup reads ``rust-toolchain.toml`` and uv ``.python-version``),
    and a warning for each nearer pin skipped because another user could have written it;
    :class:`UntrustedPathError` when every pin there is such a pin."""
    pin, request, skipped = nearest_pin(start)
    if pin is None and skipped:
        raise UntrustedPathError(skipped[0])
    if pin is None:
        raise UsageError(
            f"name a release to install (13.0.1, 13.0, cu130), give --lock FILE, or pin one "
            f"for this directory (`cudaup pin 13.0`): there is no {PIN_FILE} in {start} or above"
        )
    if not request:
        raise UsageError(f"{pin} names no toolkit; write a release in it (`cudaup pin 13.0`)")
    if shim.is_path_request(request):
        raise UsageError(
            f"{pin} names the directory {request}, not a release cudaup could install; "
            "name a release: cudaup install 13.0.1"
        )
    return pin, check_request(request), skipped
