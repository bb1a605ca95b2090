"""Where one download's bytes live: the final name, the part file, its resume state."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

from cudaup.errors import (
    InsufficientSpaceError,
    UsageError,
)


class Target:
    """Paths of one download: the final name, the part file and its resume state."""

    def __init__(self, directory: Path, filename: str) -> None:
        if "/" in filename or "\\" in filename or filename in {"", ".", ".."}:
            raise UsageError(f"refusing to write a file named {filename!r}")
        self.directory = directory
        self.final = directory / filename
        self.part = directory / (filename + ".part")
        self.state = directory / (filename + ".part.json")

    def load_state(self) -> dict[str, Any] | None:
        try:
            document = json.loads(self.state.read_text())
        except (OSError, ValueError):
            return None
        return document if isinstance(document, dict) and document.get("schema") == 1 else None

    def discard(self) -> None:
        for path in (self.part, self.state):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


def check_space(directory: Path, needed: int, what: str) -> None:
    free = shutil.disk_usage(directory).free
    if needed > free:
        raise InsufficientSpaceError(
            f"{what} needs {needed} more bytes ({needed / 2**30:.2f} GiB) in {directory}, "
            f"but only {free} bytes ({free / 2**30:.2f} GiB) are free"
        )


def fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
