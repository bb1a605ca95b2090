"""The command that moves bytes without installing: ``download`` (``cache`` is in
:mod:`cudaup.cli.cache`, which needs no network)."""

from __future__ import annotations

import argparse
import dataclasses
import socket
from pathlib import Path
from urllib.parse import urlsplit

from cudaup.cli.common import (
    add_channel,
    add_components,
    add_connections,
    add_platform,
    human_size,
    platform_of,
    settings_of,
)
from cudaup.cli.output import emit_json
from cudaup.cli.progress import display_for
from cudaup.config import parse_size
from cudaup.download import DownloadRequest, download_many
from cudaup.download.api import FILES_AT_ONCE
from cudaup.errors import HostUnreachableError, NetworkError, UsageError
from cudaup.net.http import PUBLIC_HOSTS, HttpClient
from cudaup.net.tls import warm_up


def add_download(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", help="a version request (13.0.1, cu130, latest) or a URL")
    parser.add_argument("-o", "--output", default=".", help="directory to write into (default: .)")
    add_platform(parser)
    add_channel(parser, auto=False)
    add_components(parser)
    add_connections(parser)
    parser.add_argument("--sha256", help="expected SHA-256 of a bare URL")
    parser.add_argument("--md5", help="expected MD5 of a bare URL")
    parser.add_argument(
        "--allow-unverified", action="store_true", help="download files with no known checksum"
    )
    parser.add_argument(
        "--max-size",
        metavar="SIZE",
        help="refuse a file larger than SIZE (bytes, or 16G, 500M; default: CUDAUP_MAX_SIZE, "
        "else 16G), stated or not: a body that never ends stops there",
    )
    parser.set_defaults(handler=cmd_download)


def cmd_download(args: argparse.Namespace) -> int:
    output = Path(args.output)
    if output.exists() and not output.is_dir():
        raise UsageError(f"-o names the directory to write into, and {output} is a file")
    settings = settings_of(args)
    if args.max_size is not None:
        settings = dataclasses.replace(settings, max_size=parse_size(args.max_size, "--max-size"))
    http = HttpClient(settings)
    if "://" in args.target:
        if args.target.startswith("https:"):
            warm_up()  # the CA certificates load in the background while the request is prepared
        if not (args.sha256 or args.md5 or args.allow_unverified):
            raise UsageError(
                "a bare URL needs the checksum to check it against: --sha256 HEX or --md5 HEX",
                hint=f"--allow-unverified downloads {args.target} unchecked",
            )
        # NVIDIA's own hosts go to the configured base or mirror, as `probe` sends them.
        url = settings.rewrite(args.target)
        requests = [DownloadRequest.from_url(url, sha256=args.sha256, md5=args.md5)]
    else:
        if args.sha256 or args.md5:
            raise UsageError(
                "--sha256/--md5 are for a bare URL; a release's checksums come from its sources"
            )
        warm_up()
        # Imported here: a download by URL needs no resolver (packaging, parsers: ~25 ms).
        from cudaup.core.components import split_components  # noqa: PLC0415
        from cudaup.resolve.resolver import Resolver  # noqa: PLC0415

        resolution = Resolver(settings, http, downloads_next=FILES_AT_ONCE).resolve(
            args.target,
            platform=platform_of(args),
            channel=args.channel,
            components=split_components(args.components),
        )
        requests = [DownloadRequest.from_artifact(a) for a in resolution.artifacts]
    with display_for(quiet=args.quiet or args.json) as display:
        try:
            results = download_many(
                requests,
                output,
                http=http,
                connections=args.connections,
                progress=display,
                allow_unverified=args.allow_unverified,
            )
        except NetworkError as exc:
            raise _as_unreachable(exc, [r.url for r in requests]) or exc from None
    if args.json:
        emit_json({"files": [r.to_json() for r in results]})
        return 0
    for result in results:
        if result.skipped:
            how = "already here"
        else:
            rate = result.fetched / result.seconds / 2**20 if result.seconds else 0.0
            how = f"{result.fetched / 2**20:.1f} MiB in {result.seconds:.1f} s ({rate:.0f} MiB/s)"
            if result.resumed_from:
                how += f", resumed at {human_size(result.resumed_from)}"
        check = (
            f"{result.algorithm} verified"
            if result.algorithm
            else "NOT verified (--allow-unverified)"
        )
        print(f"{result.path}  {human_size(result.size)}  {check}  · {how}")
    return 0


def _as_unreachable(exc: NetworkError, urls: list[str]) -> HostUnreachableError | None:
    """``exc`` as the host-unreachable error (which names ``--mirror``) when it came from
    NVIDIA's or PyPI's own host and that host takes no connection at all now: checked,
    once, so that an HTTP error or a stall from a host that answers gets no such hint."""
    if isinstance(exc, HostUnreachableError):
        return None
    for url in urls:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if host not in PUBLIC_HOSTS or url not in str(exc):
            continue
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
            socket.create_connection((host, port), timeout=5).close()
        except OSError:
            return HostUnreachableError(str(exc), url, public=True)
    return None
