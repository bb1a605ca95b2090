"""What every command module shares: settings from flags, the platform, JSON output, sizes."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cudaup.config import Settings


def human_size(value: int | None) -> str:
    if value is None:
        return "size unknown"
    amount = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if amount < 1024 or unit == "GiB":
            return f"{amount:.0f} {unit}" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1024
    return f"{value} B"  # pragma: no cover


def emit_json(document: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(document, indent=2) + "\n")


def settings_of(args: argparse.Namespace) -> Settings:
    from cudaup.config import Settings  # noqa: PLC0415

    mirror = getattr(args, "mirror", None)
    if mirror:  # one root for every host, and its simple/ index for PyPI
        root = mirror.rstrip("/")
        args.download_url = args.download_url or root
        args.archive_url = args.archive_url or root
        args.prerelease_url = args.prerelease_url or root
        args.pypi_url = args.pypi_url or root + "/simple"
    return Settings.from_env(
        download_url=args.download_url,
        archive_url=args.archive_url,
        prerelease_url=args.prerelease_url,
        pypi_url=args.pypi_url,
        refresh=args.refresh or None,
        offline=args.offline or None,
        probe=False if args.no_probe else None,
    )


def platform_of(args: argparse.Namespace) -> Any:
    from cudaup.platforms import host_platform, parse_platform  # noqa: PLC0415

    return parse_platform(args.platform) if args.platform else host_platform()
