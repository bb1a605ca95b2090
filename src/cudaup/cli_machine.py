"""The commands about this machine and compatibility: ``doctor``, ``compat``, ``plan``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Literal

from cudaup.cli_common import emit_json, platform_of, settings_of

if TYPE_CHECKING:
    pass


def _gib(mib: int | None) -> str:
    return f"{mib / 1024:.0f} GiB" if mib else "memory unknown"


def cmd_doctor(args: argparse.Namespace) -> int:
    import os  # noqa: PLC0415

    from cudaup.doctor import examine, lookup_from_env  # noqa: PLC0415

    report = examine(lookup_from_env(os.environ, python=args.python), driver_override=args.driver)
    if args.json:
        emit_json(report.to_json())
        return 0
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
    if not report.toolkits:
        print("toolkits  none found")
    for toolkit in report.toolkits:
        owner = f" · {toolkit.owner}" if toolkit.owner else ""
        print(
            f"toolkit   {toolkit.path}: CUDA {toolkit.identity.describe()}{owner} · found via {', '.join(toolkit.found_via)}"
        )
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
    return 0


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


def cmd_compat(args: argparse.Namespace) -> int:
    import os  # noqa: PLC0415

    from packaging.version import Version  # noqa: PLC0415

    from cudaup.compat import FORWARD_NOTE, CompatTable  # noqa: PLC0415
    from cudaup.driver import DriverVersion  # noqa: PLC0415
    from cudaup.errors import ReleaseNotFoundError, UsageError  # noqa: PLC0415
    from cudaup.machine import detect_driver  # noqa: PLC0415
    from cudaup.sysroot import SystemRoot  # noqa: PLC0415
    from cudaup.versions import nearest, parse_request  # noqa: PLC0415

    table = CompatTable.load()
    notes: list[str] = []
    settings = settings_of(args)
    if not settings.offline:
        # Releases newer than cudaup's tables: their manifests name the bundled driver.
        from cudaup.catalog import bundled_drivers  # noqa: PLC0415
        from cudaup.errors import CudaupError  # noqa: PLC0415
        from cudaup.http import HttpClient  # noqa: PLC0415
        from cudaup.resolve import Resolver  # noqa: PLC0415

        try:
            resolver = Resolver(settings, HttpClient(settings, retries=0))
            table = table.with_bundled(bundled_drivers(resolver, set(table.drivers)))
        except CudaupError as exc:
            notes.append(f"releases newer than cudaup's tables were not checked ({exc})")
    if args.release:
        request = parse_request(args.release)
        known = [Version(r) for r in table.releases()]
        picked = request.pick(known)
        if not picked:
            close = tuple(str(v) for v in nearest(request, known))
            hint = f"; nearest: {' and '.join(close)}" if close else ""
            raise ReleaseNotFoundError(f"cudaup knows no CUDA {request.describe()}{hint}", close)
        release = str(picked[0])
        linux, linux_source = table.toolkit_driver(release, "linux")
        windows, windows_source = table.toolkit_driver(release, "windows")
        floor = table.floor(release, "linux")
        targets = table.targets(release)
        document = {
            "schema": 1,
            "release": release,
            "toolkit_driver": {
                "linux": str(linux) if linux else None,
                "windows": str(windows) if windows else None,
                "source": linux_source or windows_source,
            },
            "minor_version_floor": {
                "linux": str(floor) if floor else None,
                "windows": str(table.floor(release, "windows") or "") or None,
            },
            "backward_compatibility": "any newer driver runs it",
            "forward_compatibility": FORWARD_NOTE,
            "targets": [
                {"compute_capability": a.compute_capability, "sm": a.sm, "architecture": a.name}
                for a in targets
            ],
            "notes": notes,
        }
        if args.json:
            emit_json(document)
            return 0
        print(f"CUDA {release}")
        print(
            f"  runs fully on      Linux ≥ {linux or 'unknown'} · "
            + (f"Windows ≥ {windows}" if windows else "Windows: not in NVIDIA's table (N/A)")
        )
        print(
            f"  minor-version      Linux ≥ {floor or 'unknown'} (runs; PTX JIT and newer-driver features need the toolkit driver)"
        )
        print("  newer drivers      always run it (backward compatibility)")
        print(f"  older drivers      {FORWARD_NOTE}")
        if linux_source:
            print(f"  source             {linux_source}")
        if targets:
            print(f"  GPU targets        {', '.join(a.sm for a in targets)}")
        return 0
    override = args.driver or os.environ.get("CUDAUP_DRIVER_VERSION")
    if override:
        driver, reported = DriverVersion.from_text(override), None
    else:
        info = detect_driver(root=SystemRoot.from_env(), env=os.environ)
        if info.version is None:
            raise UsageError(
                "no NVIDIA driver found on this machine; pass --driver VERSION or a release"
            )
        driver, reported = info.version, info.cuda_version
    os_name: Literal["linux", "windows"] = "windows" if args.os == "windows" else "linux"
    results = [table.check(driver, r, os_name, reported) for r in table.releases()]
    cuda = reported or table.reported_cuda(driver)
    if args.json:
        emit_json(
            {
                "schema": 1,
                "driver": str(driver),
                "os": os_name,
                "reported_cuda": str(cuda) if cuda else None,
                "releases": [r.to_json() for r in results],
                "notes": notes,
            }
        )
        return 0
    print(f"driver {driver} ({os_name}) reports CUDA {cuda or 'unknown'}")
    for verdict, title in (
        ("full", "runs fully"),
        ("minor-version", "runs under minor-version compatibility"),
        ("no", "does not run"),
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


def cmd_plan(args: argparse.Namespace) -> int:
    import os  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415

    from cudaup.driver import DriverVersion  # noqa: PLC0415
    from cudaup.install.store import Store  # noqa: PLC0415
    from cudaup.machine import detect_driver  # noqa: PLC0415
    from cudaup.plan import indexes_for, parse_requirements, to_json  # noqa: PLC0415
    from cudaup.planner import Planner, Target, export_pylock, python_version  # noqa: PLC0415
    from cudaup.sysroot import SystemRoot  # noqa: PLC0415

    settings = settings_of(args)
    requirements = parse_requirements(args.packages)
    indexes = indexes_for(
        settings.pypi_url, args.index or [], Store.from_env().home / "indexes.toml"
    )
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
    import shlex  # noqa: PLC0415

    words = ["pip", "install", *pins]
    for url in extra_urls:
        words += ["--extra-index-url", url]
    return " ".join(shlex.quote(w) for w in words)
