"""What the download tests share."""

from __future__ import annotations

import json
from pathlib import Path


def recorded(state: Path) -> int:
    """Bytes a resume state file counts as on disk (0 while there is none)."""
    try:
        saved = json.loads(state.read_text())  # replaced atomically: never half written
    except FileNotFoundError:
        return 0
    return sum(pos - start for start, pos, _end in saved["segments"])
