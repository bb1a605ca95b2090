"""Shared by the benchmarks: write a section of docs/performance.md between markers."""

from __future__ import annotations

import argparse
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


def parser_for(doc: str | None, runs: int) -> argparse.ArgumentParser:
    """The arguments every benchmark takes: ``--runs`` and ``--output``; callers add theirs."""
    parser = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=runs, help="repetitions, best (or median) kept")
    parser.add_argument("--output", type=Path, help="markdown file whose section to replace")
    return parser


def publish(lines: list[str], output: Path | None, begin: str, end: str) -> None:
    """Print the section and, with ``--output``, put it in place of the old one."""
    text = "\n".join(lines) + "\n"
    print(text)
    if output:
        replace_section(output, begin, end, text)
