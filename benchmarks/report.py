"""Shared by the benchmarks: write a section of docs/performance.md between markers, and
start each timed run from the same state of the machine's free memory."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

#: Where a Linux guest that hands its free memory back to the host (free page reporting,
#: as this machine's Firecracker kernel does) counts what it handed back.  A page handed
#: back costs a fault in the host when it is used again: writing a 1 GiB file into the
#: page cache took 0.22 s of system time here from memory freed a moment before and
#: 2.3-2.8 s from memory handed back (``benchmarks/`` runs, 2026-12-04, in
#: docs/performance.md), so a tool that started right after the previous one deleted its
#: output wrote its own up to ten times faster than one that started a second later.
REPORTED = Path("/sys/module/page_reporting/parameters/reported_kib")
#: Seconds the count must stay still to call the hand-back done (it comes in rounds
#: about half a second to a second and a half apart after a large free).
QUIET = 1.6
#: ... but no wait lasts longer than this.
MOST = 15.0


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


def settle_memory(reported: Path = REPORTED) -> None:
    """Wait until the kernel has handed the memory freed so far back to its host (where it
    does: :data:`REPORTED`; elsewhere at once), so that every timed run writes into memory
    in the same state."""
    try:
        last = reported.read_text()
    except OSError:
        return
    began = quiet_since = time.monotonic()
    while (now := time.monotonic()) - quiet_since < QUIET and now - began < MOST:
        time.sleep(0.1)
        count = reported.read_text()
        if count != last:
            last, quiet_since = count, time.monotonic()
