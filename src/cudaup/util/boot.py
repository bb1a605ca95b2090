"""This boot's id: what tells a file written in this boot from one a restart may have cut.

Bytes written and not synced are in the page cache, which every process of this boot sees,
and which a restart (a crash, a power loss) may lose: so what was recorded unsynced holds
exactly while the boot it was recorded in does.
"""

from __future__ import annotations

from pathlib import Path

_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def boot_id() -> str | None:
    """This boot's id (Linux); None where there is none: then nothing unsynced is trusted."""
    try:
        value = _BOOT_ID.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return value or None
