"""``cudaup probe URL``: one cheap request, and what a failure means.

A module of its own so that a probe imports only the HTTP client and NVIDIA's
checksum parser: the resolver (packaging, every parser) loads only to explain a
file that is not there (see :mod:`cudaup.resolve.probe`).
"""

from __future__ import annotations

import argparse
from urllib.parse import urlsplit

from cudaup.cli.common import settings_of
from cudaup.cli.output import emit_json
from cudaup.errors import RemoteFileMissingError, UsageError
from cudaup.resolve.probe import probe_url


def add_probe(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("url", help="an https:// URL (NVIDIA's hosts go to the configured base)")
    parser.set_defaults(handler=cmd_probe)


def cmd_probe(args: argparse.Namespace) -> int:
    parts = urlsplit(args.url)
    if parts.scheme not in {"http", "https"} or not parts.netloc:
        raise UsageError(f"probe takes a full URL (https://host/path), not {args.url!r}")
    report = probe_url(settings_of(args), args.url)
    if args.json:
        emit_json(report.to_json())
    else:
        print(report.url)
        print(report.explanation)
        if report.suggestion:
            print(f"    url     {report.suggestion['url']}")
            print(f"    md5     {report.suggestion['md5'] or 'none published'}")
    if not report.exists:  # the explanation above is the answer: said once, with exit 6
        return RemoteFileMissingError.exit_code
    return 0
