"""``cudaup plan``: the CUDA line the driver and the whole ML wheel stack agree on."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cudaup.plan.kernels import WheelKernels

from cudaup.cli.common import add_allow_minor_compat, add_platform, platform_of, settings_of
from cudaup.cli.output import emit_json
from cudaup.core.driver import DriverVersion
from cudaup.errors import GpuUnsupportedError
from cudaup.net.http import HttpClient
from cudaup.plan import Planner, PlanTarget, parse_requirements, python_version_ahead
from cudaup.plan.indexes import indexes_for
from cudaup.plan.lines import line_text, parse_line
from cudaup.plan.result import PlanResult


def add_plan(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "packages", nargs="+", help='requirements, e.g. torch "vllm>=0.11" "jax[cuda13]"'
    )
    parser.add_argument("--driver", help="plan for this driver (default: this machine's)")
    parser.add_argument("--python", help="X.Y or an interpreter path (default: python3 on PATH)")
    parser.add_argument("--cuda", metavar="LINE", help="plan for this CUDA line only (13.0, cu130)")
    add_allow_minor_compat(parser)
    add_platform(parser)
    parser.add_argument(
        "--index",
        action="append",
        help="pypi, pytorch, pytorch-nightly, flashinfer, sglang, vllm or a URL (repeatable; default: all; the nightly ones only with --pre)",
    )
    parser.add_argument(
        "--pre",
        action="store_true",
        help="let the resolver take pre-releases, from the nightly indexes too",
    )
    parser.add_argument(
        "--export", metavar="FILE", help="write the plan as a PEP 751 pylock.toml (by uv)"
    )
    parser.add_argument(
        "--gpu",
        help="read the planned wheels (by range requests) for kernels for these GPUs "
        "(sm_70,sm_90): exit 20 when one lacks them",
    )
    parser.set_defaults(handler=cmd_plan)


def cmd_plan(args: argparse.Namespace) -> int:
    settings = settings_of(args)
    requirements = parse_requirements(args.packages)
    indexes = indexes_for(settings.pypi_url, args.index or [], settings.user_indexes, pre=args.pre)
    line = parse_line(args.cuda) if args.cuda else None
    python = python_version_ahead(args.python)  # it starts while the driver is found
    if args.driver:
        target = PlanTarget(python(), platform_of(args), DriverVersion.from_text(args.driver), None)
    else:
        # What only some plans need is imported where they need it: every command's
        # parser imports this module, and a warm plan spends most of its time importing.
        from cudaup.machine.driver_probe import detect_driver  # noqa: PLC0415
        from cudaup.machine.sysroot import SystemRoot  # noqa: PLC0415

        info = detect_driver(root=SystemRoot.from_env(), env=os.environ)
        target = PlanTarget(python(), platform_of(args), info.version, info.cuda_version, info.gpus)
    # No common line: the error object carries the exclusions and each package's lines.
    result = Planner(settings).plan(
        requirements,
        indexes,
        target,
        line=line,
        pre=args.pre,
        allow_minor_compat=args.allow_minor_compat,
    )
    if args.export:
        from cudaup.plan.export import export_pylock  # noqa: PLC0415 - only --export

        export_pylock(result, Path(args.export), settings)
    kernels: list[WheelKernels] = []
    if args.gpu:  # the published wheels' kernels, per GPU named (plan/kernels.py)
        from cudaup.binaries.coverage import Gpu  # noqa: PLC0415 - only --gpu
        from cudaup.core.gpus import parse_gpu  # noqa: PLC0415
        from cudaup.plan.kernels import published_kernels  # noqa: PLC0415

        gpus = [Gpu(g.strip(), parse_gpu(g)) for g in args.gpu.split(",")]
        kernels = published_kernels(result, HttpClient(settings), settings.pypi_url, gpus)
    code = GpuUnsupportedError.exit_code if any(k.status == "missing" for k in kernels) else 0
    if args.json:
        document = result.to_json()
        if args.export:
            document["export"] = args.export
        if args.gpu:
            document["kernels"] = [k.to_json() for k in kernels]
        emit_json(document)
        return code
    _print(result)
    for answer in kernels:
        print(f"kernels {answer.package}: {answer.status}: {answer.detail}")
    if args.export:
        print(f"wrote {args.export}")
    return code


def _print(result: PlanResult) -> None:
    print(f"CUDA {line_text(result.line)}: install {result.release} ({result.release_reason})")
    print(f"  cudaup install {result.release} --components nvcc,cudart")
    for pick in result.packages:
        if pick.version is None or not pick.constrains:
            version = f" {pick.version}" if pick.version else ""
            yanked = f" [yanked: {pick.yanked}]" if pick.yanked else ""
            print(f"  {pick.name}{version}: {pick.note}{yanked}")
            continue
        how = " → ".join(pick.chain) if len(pick.chain) > 1 else pick.evidence
        yanked = f"  [yanked: {pick.yanked}]" if pick.yanked else ""
        pure = "  [pure Python: no compiled code]" if pick.pure_wheel else ""
        print(
            f"  {pick.name} {pick.version}  from {pick.index_url}  ({pick.cuda}: {how})"
            f"{yanked}{pure}"
        )
    print(f"releases: {result.releases.described}")
    for exclusion in result.excluded:
        print(f"excluded {exclusion.summary()}")
    for note in result.notes:
        print(f"note: {note}")
    print(result.pip_command())
    print(result.uv_command())
