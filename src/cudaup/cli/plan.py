"""``cudaup plan``: the CUDA line the driver and the ML packages agree on."""

from __future__ import annotations

import argparse
import os
import shlex
from pathlib import Path

from cudaup.cli.common import add_platform, emit_json, platform_of, settings_of
from cudaup.core.driver import DriverVersion
from cudaup.machine.driver_probe import detect_driver
from cudaup.machine.sysroot import SystemRoot
from cudaup.plan.choice import parse_requirements, to_json
from cudaup.plan.export import export_pylock
from cudaup.plan.indexes import indexes_for
from cudaup.plan.offers import Planner, Target, python_version


def add_plan(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "packages", nargs="+", help='requirements, e.g. torch "vllm>=0.11" sgl-kernel'
    )
    parser.add_argument("--driver", help="plan for this driver (default: this machine's)")
    parser.add_argument("--python", help="X.Y or an interpreter path (default: python3 on PATH)")
    add_platform(parser)
    parser.add_argument(
        "--index",
        action="append",
        help="pypi, pytorch, flashinfer, sglang, vllm or a URL (repeatable)",
    )
    parser.add_argument(
        "--export", metavar="FILE", help="write a PEP 751 pylock.toml (resolved by uv)"
    )
    parser.set_defaults(handler=cmd_plan)


def cmd_plan(args: argparse.Namespace) -> int:

    settings = settings_of(args)
    requirements = parse_requirements(args.packages)
    indexes = indexes_for(settings.pypi_url, args.index or [], settings.user_indexes)
    if args.driver:
        target = Target(
            python_version(args.python),
            platform_of(args),
            DriverVersion.from_text(args.driver),
            None,
        )
    else:
        info = detect_driver(root=SystemRoot.from_env(), env=os.environ)
        target = Target(
            python_version(args.python),
            platform_of(args),
            info.version,
            info.cuda_version,
            info.gpus,
        )
    result = Planner(settings).plan(requirements, indexes, target)
    if args.export:
        export_pylock(result, Path(args.export), indexes)
    if args.json:
        document = to_json(result.choice, result.packages, result.unreachable)
        document["pip"] = _pip_command(result.pins(), result.extra_index_urls())
        document["uv"] = "uv " + _pip_command(result.pins(), result.extra_index_urls())
        if args.export:
            document["export"] = args.export
        emit_json(document)
        return 0
    choice = result.choice
    print(
        f"CUDA {choice.line[0]}.{choice.line[1]}: install {choice.release} ({choice.release_reason})"
    )
    print(f"  cudaup install {choice.release} --components nvcc,cudart")
    for package in result.packages:
        pick = choice.picks.get(package.project)
        if pick:
            print(f"  {package.project} {pick.version}  from {pick.index_url}  ({pick.evidence})")
        else:
            print(f"  {package.project}: {package.note}")
    for line in choice.excluded:
        print(f"excluded {line}")
    for note in choice.notes:
        print(f"note: {note}")
    failed: dict[str, list[dict[str, str]]] = {}
    for entry in result.unreachable:
        failed.setdefault(entry["index"], []).append(entry)
    for name, entries in failed.items():
        urls = ", ".join(e["url"] for e in entries)
        print(f"unreachable: {name} ({urls}): {entries[0]['error']}")
    print(_pip_command(result.pins(), result.extra_index_urls()))
    print("uv " + _pip_command(result.pins(), result.extra_index_urls()))
    if args.export:
        print(f"wrote {args.export}")
    return 0


def _pip_command(pins: list[str], extra_urls: list[str]) -> str:

    words = ["pip", "install", *pins]
    for url in extra_urls:
        words += ["--extra-index-url", url]
    return " ".join(shlex.quote(w) for w in words)
