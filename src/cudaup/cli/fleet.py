"""The fleet commands: ``lock`` (and ``lock --check``) and ``mirror``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cudaup.cli.common import add_components, settings_of
from cudaup.cli.output import emit_json, error_prefix
from cudaup.cli.progress import display_for
from cudaup.core.components import split_components
from cudaup.core.platforms import parse_platform
from cudaup.errors import UsageError
from cudaup.fleet.build import LockCheck, build_lock, check_lock
from cudaup.fleet.lockfile import read_lock
from cudaup.fleet.mirror import build_mirror
from cudaup.machine.host import host_platform
from cudaup.net.http import HttpClient


def add_lock(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("version", nargs="?", help="13.0.1, 13.0, cu130")
    parser.add_argument(
        "--check", metavar="FILE", help="do the origins still serve exactly what FILE names?"
    )
    add_components(parser)
    parser.add_argument("--all", action="store_true", help="the whole toolkit")
    parser.add_argument(
        "--channel",
        choices=("auto", "installer", "redist", "pypi"),
        default="auto",
        help="where the files come from (default: auto, redist when NVIDIA answers, else pypi)",
    )
    parser.add_argument(
        "--platform", action="append", help="repeatable (default: this host), e.g. linux-sbsa"
    )
    parser.add_argument(
        "--with",
        dest="with_packages",
        metavar="PKGS",
        help="comma-separated wheels to lock beside it (PEP 751), e.g. torch,flashinfer-python",
    )
    parser.add_argument("--index", action="append", help="as for plan, for --with (repeatable)")
    parser.add_argument("--python", help="X.Y or an interpreter, for --with")
    parser.add_argument(
        "-o", "--output", default="cuda.lock.toml", help="where to write (default: cuda.lock.toml)"
    )
    parser.set_defaults(handler=cmd_lock)


def add_mirror(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("lock", help="a cuda.lock.toml")
    parser.add_argument("directory", help="where to write the mirror (any static web server)")
    parser.set_defaults(handler=cmd_mirror)


def cmd_lock(args: argparse.Namespace) -> int:
    settings = settings_of(args)
    if args.check:
        checked = LockCheck(args.check, check_lock(read_lock(Path(args.check)), settings))
        failure = checked.failure
        if args.json:
            emit_json(checked.to_json())
        else:
            for change in checked.changes:
                print(f"changed: {change}")
            if not checked.changes:
                print("the origins still serve exactly these bytes")
        if failure is not None:
            sys.stderr.write(f"{error_prefix(sys.stderr)} {failure}\n")
            return failure.exit_code
        return 0
    if not args.version:
        raise UsageError("name a release to lock (13.0.1, 13.0, cu130) or give --check FILE")
    output = Path(args.output)
    platforms = [parse_platform(p) for p in args.platform or []] or [host_platform()]
    built = build_lock(
        args.version,
        platforms,
        settings=settings,
        output=output,
        components=split_components(args.components),
        everything=args.all,
        channel=args.channel,
        with_packages=[p for p in (args.with_packages or "").split(",") if p.strip()],
        indexes=args.index or [],
        python=args.python,
    )
    built.lock.write(output)
    if args.json:
        emit_json(built.to_json())
        return 0
    for toolkit in built.lock.toolkits:
        print(
            f"{toolkit.platform}: CUDA {toolkit.release} ({toolkit.channel}, {len(toolkit.files)} file(s))"
        )
    for wheels in built.lock.wheels:
        print(f"{wheels.platform}: wheels for CUDA {wheels.cuda_line} in {wheels.pylock}")
    print(f"wrote {output}")
    return 0


def cmd_mirror(args: argparse.Namespace) -> int:
    settings = settings_of(args)
    lock_path = Path(args.lock)
    with display_for(quiet=args.quiet or args.json) as display:
        report = build_mirror(
            read_lock(lock_path),
            lock_path.parent,
            Path(args.directory),
            settings=settings,
            http=HttpClient(settings),
            progress=display,
        )
    if args.json:
        emit_json({"directory": args.directory, **report.to_json()})
    else:
        print(
            f"{args.directory}: {len(report.fetched)} fetched, {len(report.kept)} kept (verified), {len(report.documents)} documents"
        )
    return 0
