"""``cache``: where cudaup's cache is, what it holds, making room.  It reads and
removes local files only: no network stack is imported (tests/cli/test_startup.py)."""

from __future__ import annotations

import argparse

from cudaup.cli.common import human_size, settings_of
from cudaup.cli.output import emit_json
from cudaup.util import cachedir


def add_cache(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "action",
        choices=("dir", "info", "prune", "clean"),
        help="dir: print its path. info: sizes by area. prune: remove what no installed "
        "toolkit uses (unpacked archives, finished downloads; partial downloads stay, to "
        "resume). clean: remove everything but lock files.",
    )
    parser.set_defaults(handler=cmd_cache)


def cmd_cache(args: argparse.Namespace) -> int:
    root = settings_of(args).cache_root
    if args.action == "dir":
        if args.json:
            emit_json(cachedir.CacheLayout(root).to_json())
        else:
            print(root)
        return 0
    if args.action == "info":
        info = cachedir.inspect(root)
        if args.json:
            emit_json(info.to_json())
            return 0
        print(f"{root}: {human_size(info.bytes)}")
        for area in info.areas:
            line = f"  {area.name + '/':<11} {human_size(area.bytes):>10}  {area.files} files"
            if area.name == "unpacked" and area.files:
                line += (
                    f"; {human_size(area.shared_bytes)} shared with installed toolkits, "
                    f"{area.unused_entries} archives no toolkit uses"
                )
            print(line)
        if info.reclaimable:
            print(f"`cudaup cache prune` frees {human_size(info.reclaimable)}")
        return 0
    report = cachedir.prune(root) if args.action == "prune" else cachedir.clean(root)
    if args.json:
        emit_json(report.to_json())
    else:
        linked = (
            f"; {human_size(report.still_linked)} stay on disk, hard-linked by installed toolkits"
            if report.still_linked
            else ""
        )
        print(
            f"removed {len(report.removed)} entries from {root}, "
            f"{human_size(report.freed)} freed{linked}"
        )
    return 0
