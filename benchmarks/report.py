"""Shared by the benchmarks: write a section of docs/performance.md between markers."""

from __future__ import annotations

from pathlib import Path


def replace_section(path: Path, begin: str, end: str, text: str) -> None:
    """Put ``text`` (which starts with ``begin`` and ends with ``end``) in place of the old section."""
    current = path.read_text() if path.exists() else "# Performance\n"
    if begin in current and end in current:
        head, rest = current.split(begin, 1)
        current = head + text.rstrip("\n") + rest.split(end, 1)[1]
    else:
        current = current.rstrip("\n") + "\n\n" + text
    path.write_text(current)
