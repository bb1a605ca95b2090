"""What the command modules share: settings from flags, the platform, sizes, warnings."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from cudaup.config import Settings

if TYPE_CHECKING:
    from cudaup.core.platforms import Platform


def human_size(value: int | None) -> str:
    if value is None:
        return "size unknown"
    amount = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if amount < 1024 or unit == "GiB":
            return f"{amount:.0f} {unit}" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1024
    return f"{value} B"  # pragma: no cover


def warn(message: str) -> None:
    """One ``cudaup: warning: …`` line on stderr (never on stdout: ``--json`` stays JSON)."""
    sys.stderr.write(f"cudaup: warning: {message}\n")


def settings_of(args: argparse.Namespace) -> Settings:
    """The settings cascade with this command line's flags on top."""
    return Settings.from_env(
        download_url=args.download_url,
        archive_url=args.archive_url,
        prerelease_url=args.prerelease_url,
        pypi_url=args.pypi_url,
        mirror=args.mirror,
        refresh=args.refresh or None,
        offline=args.offline or None,
        probe=False if args.no_probe else None,
    )


def platform_of(args: argparse.Namespace) -> Platform:
    # Imported here: the platform table and its version parser (packaging) are not needed
    # by every command that shares this module (a download by URL names no platform).
    from cudaup.core.platforms import parse_platform  # noqa: PLC0415
    from cudaup.machine.host import host_platform  # noqa: PLC0415

    return parse_platform(args.platform) if args.platform else host_platform()


def add_platform(parser: argparse.ArgumentParser, what: str = "(default: this host)") -> None:
    parser.add_argument(
        "--platform",
        help="linux-x86_64, linux-sbsa, linux-aarch64, windows-x86_64, windows-arm64 " + what,
    )


def add_allow_minor_compat(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--allow-minor-compat",
        action="store_true",
        help="take the newest line even when the driver runs it only under minor-version "
        "compatibility (default: such a line only when no line the driver runs fully fits)",
    )


def add_channel(parser: argparse.ArgumentParser, *, auto: bool) -> None:
    choices = ("auto", "installer", "redist", "pypi") if auto else ("installer", "redist", "pypi")
    parser.add_argument(
        "--channel",
        choices=choices,
        default=choices[0],
        help="where the files come from: the runfile installer, NVIDIA's redist archives or "
        f"PyPI's wheels (default: {choices[0]})",
    )


def add_components(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--components",
        metavar="LIST",
        help="comma-separated, e.g. nvcc,cudart (nvcc brings crt, nvvm and cudart's headers)",
    )


def add_connections(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--connections",
        type=int,
        default=None,
        help="parallel connections per file, 1-16 (default: adapt, starting with one and "
        "adding up to 8 while each one added raises the throughput)",
    )
