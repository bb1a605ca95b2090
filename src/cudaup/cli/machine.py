"""The commands about this machine and compatibility: ``doctor`` and ``compat``."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from cudaup.cli.common import settings_of
from cudaup.cli.output import emit_json
from cudaup.core.compat import FORWARD_NOTE, TABLE_SOURCE, Compatibility
from cudaup.core.driver import DriverVersion
from cudaup.core.libraries import LibraryRequest, parse_library
from cudaup.errors import (
    DriverTooOldError,
    GpuUnsupportedError,
    NotKnownError,
    ProblemsFoundError,
    UsageError,
)
from cudaup.machine.doctor import examine, lookup_from_env
from cudaup.machine.driver_probe import driver_to_check
from cudaup.machine.sysroot import SystemRoot
from cudaup.net.http import HttpClient
from cudaup.resolve.compat_report import (
    DriverVerdict,
    ReleaseCompat,
    driver_compat,
    live_table,
    release_compat,
)
from cudaup.resolve.libraries import LibraryCompat
from cudaup.resolve.resolver import Resolver

if TYPE_CHECKING:
    from cudaup.core.compat import OS


def add_doctor(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--driver", help="assume this driver version (also CUDAUP_DRIVER_VERSION)")
    parser.add_argument(
        "--python", help="the Python whose wheels and torch to inspect (default: python3 on PATH)"
    )
    parser.set_defaults(handler=cmd_doctor)


def add_compat(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "release",
        nargs="?",
        help="a release (13.0.1, 13.0, cu130), or a library release (cudnn==9.27): the CUDA "
        "majors it is built for (exit 21: no source says)",
    )
    parser.add_argument(
        "--driver",
        help="a driver version (default: this machine's); with a release: whether it runs "
        "it (exit 0: it does, 12: it does not, 21: no source says)",
    )
    parser.add_argument(
        "--os",
        choices=("linux", "windows"),
        default="linux",
        help="the driver's OS (default: linux)",
    )
    parser.add_argument(
        "--gpu",
        help="with a release: whether its nvcc compiles for these GPUs (sm_70,sm_90; "
        "exit 20 when it cannot for one)",
    )
    parser.set_defaults(handler=cmd_compat)


def _gib(mib: int | None) -> str:
    return f"{mib / 1024:.0f} GiB" if mib else "memory unknown"


def cmd_doctor(args: argparse.Namespace) -> int:

    report = examine(lookup_from_env(os.environ, python=args.python), driver_override=args.driver)
    # CI gates on this: error-level problems exit non-zero, after the full report.
    code = (
        ProblemsFoundError.exit_code if any(p.severity == "error" for p in report.problems) else 0
    )
    if args.json:
        emit_json(report.to_json())
        return code
    driver = report.driver
    if driver.version is None:
        print("driver    none found")
    else:
        runs = f" · runs CUDA ≤ {report.driver_cuda}" if report.driver_cuda else ""
        how = " (reported by the driver)" if report.driver_cuda_source == "driver" else ""
        print(f"driver    {driver.version} (from {driver.source}){runs}{how}")
    for gpu in driver.gpus:
        cc = (
            f"compute {gpu.compute_capability}"
            if gpu.compute_capability
            else "compute capability unknown"
        )
        print(f"gpu {gpu.index:<5} {gpu.name}, {cc}, {_gib(gpu.memory_mib)}")
    for kernels in report.kernels:
        missing = ", ".join(name for name, _why in kernels.missing)
        print(f"kernels   {kernels.gpu.label}: {len(kernels.covered)} CUDA package(s) carry "
              f"kernels for it" + (f"; none in {missing}" if missing else ""))  # fmt: skip
    if not report.toolkits:
        print("toolkits  none found")
    for toolkit in report.toolkits:
        owner = f" · {toolkit.owner}" if toolkit.owner else ""
        print(
            f"toolkit   {toolkit.path}: CUDA {toolkit.identity.describe()}{owner} · found via {', '.join(toolkit.found_via)}"
        )
        if toolkit.libraries:
            libraries = ", ".join(f"{name} {v}" for name, v in toolkit.libraries.items())
            print(f"          libraries: {libraries}")
    print(f"nvcc      {report.nvcc or 'not on PATH'}")
    if report.python:
        torch = report.torch
        print(
            f"python    {report.python}"
            + (
                f" · torch {torch.version} (CUDA {torch.cuda or 'none, CPU build'})"
                if torch
                else " · no torch"
            )
        )
    if not report.problems:
        print("problems  none found")
    for problem in report.problems:
        print(f"{problem.severity:<9} {problem.message}")
        print(f"{'':<9}   fix: {problem.fix}")
    return code


def _by_line(chosen: list[str], every: list[str]) -> str:
    """``13.0.0 … 13.0.3`` (all of a line) → ``13.0.x``; a partial line lists its releases."""
    lines: dict[str, list[str]] = {}
    for release in chosen:
        lines.setdefault(release.rsplit(".", 1)[0], []).append(release)
    words = []
    for line, members in lines.items():
        whole = [r for r in every if r.rsplit(".", 1)[0] == line]
        words.append(f"{line}.x" if len(members) == len(whole) else ", ".join(members))
    return ", ".join(words)


#: How each verdict reads after "driver V" (``compat RELEASE --driver V``).
_VERDICT_WORDS = {
    "full": "runs it fully",
    "minor-version": "runs it under minor-version compatibility",
    "no": "does not run it",
    "unknown": "runs it or not: unknown",
}


def _per_os(linux: DriverVersion | None, windows: DriverVersion | None, missing: str) -> str:
    """``Linux ≥ 580.82.07 · Windows: N/A in NVIDIA's table``: a driver per OS, or why none."""
    words = []
    for name, driver in (("Linux", linux), ("Windows", windows)):
        words.append(f"{name} ≥ {driver}" if driver else f"{name}: {missing}")
    return " · ".join(words)


def _print_release(report: ReleaseCompat) -> None:
    in_table = report.source == TABLE_SOURCE
    print(f"CUDA {report.release}")
    missing = "N/A in NVIDIA's table" if in_table else "no source names it yet"
    print(f"  runs fully on      {_per_os(report.linux, report.windows, missing)}")
    floors = _per_os(report.linux_floor, report.windows_floor, "none known")
    print(
        f"  minor-version      {floors} (runs; PTX JIT and newer-driver features need the "
        "toolkit driver)"
    )
    print("  newer drivers      always run it (backward compatibility)")
    print(f"  older drivers      {FORWARD_NOTE}")
    if report.source:
        print(f"  source             {report.source}")
    if report.targets:
        print(f"  GPU targets        {', '.join(a.sm for a in report.targets)}")
    if report.driver is not None:
        asked = report.driver
        print(
            f"  driver {str(asked.driver) + ' (' + asked.os + ')':<11} "
            f"{_VERDICT_WORDS[asked.verdict.verdict]}: {asked.verdict.reason}"
        )
    for gpu in report.gpus:
        print(f"  {gpu.sm:<18} {gpu.reason}")
    for note in report.notes:
        print(f"  note: {note}")


def _verdict_code(asked: DriverVerdict | None) -> int:
    """The exit code of ``compat RELEASE --driver V``: 0 when the driver runs it, 12 when
    it does not, 21 when no source says (see the README's table)."""
    verdict: Compatibility | None = asked.verdict if asked else None
    if verdict is None or verdict.verdict in {"full", "minor-version"}:
        return 0
    return DriverTooOldError.exit_code if verdict.verdict == "no" else NotKnownError.exit_code


def _print_library(report: LibraryCompat) -> None:
    majors = ", ".join(str(major) for major in report.cuda_majors)
    print(f"{report.request.library.title} {report.release} is built for CUDA {majors}")
    for major in report.cuda_majors:
        for source in report.sources:
            if major in source.builds:
                platforms = ", ".join(source.builds[major]) or "no platform"
                print(f"  CUDA {major:<4} {source.channel:<7} {source.version:<12} {platforms}")
    for url in dict.fromkeys(source.url for source in report.sources):
        print(f"  source     {url}")
    for note in report.notes:
        print(f"  note: {note}")


def _library_compat(args: argparse.Namespace, request: LibraryRequest) -> int:
    """``compat cudnn==9.27``: the CUDA majors a library release is built for."""
    if args.driver or args.gpu:
        raise UsageError(
            f"--driver and --gpu ask about a CUDA release; {request.text} is a library's "
            "(compat cudnn==9.27 names the CUDA majors it is built for)"
        )
    settings = settings_of(args)
    if settings.offline:
        # No answer is a guess: the shipped tables hold no library's builds.
        raise NotKnownError(
            f"no source says which CUDA majors {request.text} is built for: --offline reads "
            "cudaup's shipped tables, which name no library's builds (its manifests and "
            "PyPI's projects are read live)"
        )
    table, _notes = live_table(settings)
    majors = sorted({int(release.split(".", 1)[0]) for release in table.releases()})
    # No retries, as for a CUDA release: an unreachable source is a note at once.
    report = Resolver(settings, HttpClient(settings, retries=0)).library_compat(request, majors)
    if args.json:
        emit_json(report.to_json())
    else:
        _print_library(report)
    return 0


def cmd_compat(args: argparse.Namespace) -> int:
    library = parse_library(args.release) if args.release else None
    if library is not None:
        return _library_compat(args, library)
    settings = settings_of(args)
    table, notes = live_table(settings)
    os_name: OS = "windows" if args.os == "windows" else "linux"
    if args.gpu and not args.release:
        raise UsageError(
            "--gpu asks what a release compiles for: name one (compat 13.0 --gpu sm_70)"
        )
    if args.release:
        report = release_compat(
            table,
            args.release,
            notes,
            driver=args.driver,
            os_name=os_name,
            offline=settings.offline,
            gpus=args.gpu.split(",") if args.gpu else (),
        )
        if args.json:
            emit_json(report.to_json())
        else:
            _print_release(report)
        if any(g.verdict == "no" for g in report.gpus):
            return GpuUnsupportedError.exit_code
        return _verdict_code(report.driver)
    driver, reported = driver_to_check(args.driver, root=SystemRoot.from_env())
    verdicts = driver_compat(table, driver, os_name, notes, reported)
    if args.json:
        emit_json(verdicts.to_json())
        return 0
    results = verdicts.results
    cuda = verdicts.reported_cuda
    if cuda is None:
        runs = f"NVIDIA's table names no CUDA release it runs fully on {verdicts.os.title()}"
    elif verdicts.reported_by == "driver":
        runs = f"reports CUDA {cuda}"
    else:
        runs = f"runs CUDA ≤ {cuda} fully by NVIDIA's table"
    print(f"driver {verdicts.driver} ({verdicts.os}) {runs}")
    for verdict, title in (
        ("full", "runs fully"),
        ("minor-version", "runs under minor-version compatibility"),
        ("no", "does not run"),
        ("unknown", "unknown (no source names the driver they need)"),
    ):
        chosen = [r.release for r in results if r.verdict == verdict]
        if chosen:
            print(f"  {title}: {_by_line(chosen, [r.release for r in results])}")
    if any(r.verdict == "minor-version" for r in results):
        print(
            "  note: minor-version compatibility runs applications, but PTX JIT and features that need a newer driver fail"
        )
    if any(r.verdict == "no" for r in results):
        print(f"  note: {FORWARD_NOTE}")
    for note in notes:
        print(f"  note: {note}")
    return 0
