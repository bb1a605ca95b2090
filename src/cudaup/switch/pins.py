"""``.cuda-version`` pins: a directory's toolkit, read from the current directory upwards."""

from __future__ import annotations

from pathlib import Path

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
