"""The ``cudaup`` command line: argument parsing, output, and exit codes.

Thin by design: each command builds :class:`~cudaup.config.Settings`, calls
the library, and prints either short human output or (``--json``) one JSON
object.  Any :class:`~cudaup.errors.CudaupError` becomes one sentence on
stderr and its exit code; a traceback appears only with ``--debug``.  Heavy
imports happen inside the commands so that ``cudaup --version`` stays fast.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from cudaup import __version__
from cudaup.errors import CudaupError

if TYPE_CHECKING:
    from cudaup.config import Settings
    from cudaup.model import Resolution


def _size(value: int | None) -> str:
    if value is None:
        return "size unknown"
    amount = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if amount < 1024 or unit == "GiB":
            return f"{amount:.0f} {unit}" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1024
    return f"{value} B"  # pragma: no cover


def _emit_json(document: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(document, indent=2) + "\n")


def _settings(args: argparse.Namespace) -> Settings:
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


def _platform(args: argparse.Namespace) -> Any:
    from cudaup.platforms import host_platform, parse_platform  # noqa: PLC0415

    return parse_platform(args.platform) if args.platform else host_platform()


# -- resolve -------------------------------------------------------------------
def _print_resolution(resolution: Resolution) -> None:
    release = resolution.release
    facts = [f"{release.label} ({release.version})"]
    if release.date:
        facts.append(f"released {release.date}")
    if release.driver:
        facts.append(f"bundles driver {release.driver}")
    print(" · ".join(facts))
    status = "verified" if resolution.verified else "NOT verified"
    print(
        f"{resolution.platform} · {resolution.channel} · {len(resolution.artifacts)} file(s) · {status}"
    )
    for artifact in resolution.artifacts:
        print()
        mark = "✓" if artifact.verified else "✗"
        version = f" {artifact.component_version}" if artifact.channel != "installer" else ""
        head = f"{artifact.component}{version}: " if artifact.channel != "installer" else ""
        print(f"{mark} {head}{artifact.filename}  {_size(artifact.size)}")
        print(f"    url     {artifact.url}")
        if artifact.sha256:
            print(f"    sha256  {artifact.sha256}")
        print(f"    md5     {artifact.md5 or 'none published'}")
        print(f"    from    {', '.join(s.kind for s in artifact.sources)}")
    for note in resolution.notes:
        print(f"note: {note}")


def cmd_resolve(args: argparse.Namespace) -> int:
    from cudaup.components import split_components  # noqa: PLC0415

    settings = _settings(args)
    platform = _platform(args)
    components = split_components(args.components)
    if settings.offline:
        from cudaup.errors import OfflineError  # noqa: PLC0415
        from cudaup.snapshot import Snapshot  # noqa: PLC0415
        from cudaup.versions import parse_request  # noqa: PLC0415

        if args.channel != "installer":
            raise OfflineError("--offline answers only --channel installer (from the snapshot)")
        resolution = Snapshot.load().resolve(parse_request(args.version), platform)
        from dataclasses import replace  # noqa: PLC0415

        artifacts = tuple(replace(a, url=settings.rewrite(a.url)) for a in resolution.artifacts)
        resolution = replace(resolution, artifacts=artifacts)
    else:
        from cudaup.resolve import Resolver  # noqa: PLC0415

        resolution = Resolver(settings).resolve(
            args.version, platform=platform, channel=args.channel, components=components
        )
    if args.json:
        _emit_json(resolution.to_json())
    else:
        _print_resolution(resolution)
    return 0


# -- versions ------------------------------------------------------------------
def cmd_versions(args: argparse.Namespace) -> int:
    from cudaup.catalog import list_releases  # noqa: PLC0415
    from cudaup.resolve import Resolver  # noqa: PLC0415

    settings = _settings(args)
    if settings.offline:
        from cudaup.snapshot import Snapshot  # noqa: PLC0415

        snapshot = Snapshot.load()
        rows = [
            {"version": v, "installer_platforms": sorted(e["platform"] for e in entries)}
            for v, entries in snapshot.releases.items()
        ]
        if args.json:
            _emit_json({"schema": 1, "snapshot": snapshot.generated, "releases": rows})
        else:
            for row in rows:
                print(f"{row['version']:<10} {', '.join(row['installer_platforms'])}")
            print(f"note: offline snapshot of {snapshot.generated}")
        return 0
    releases = list_releases(Resolver(settings))
    if args.json:
        _emit_json({"schema": 1, "releases": [r.to_json() for r in releases]})
        return 0
    print(
        f"{'version':<9} {'label':<30} {'date':<10}  {'driver':<11} platforms (installer | redist)"
    )
    for r in releases:
        installers = (
            ",".join(
                p.replace("linux-", "").replace("windows-", "win-") for p in r.installer_platforms
            )
            or "-"
        )
        redist = (
            ",".join(
                p.replace("linux-", "").replace("windows-", "win-") for p in r.redist_platforms
            )
            or "-"
        )
        print(
            f"{r.version:<9} {r.label:<30} {r.date or '':<10}  {r.driver or '-':<11} {installers} | {redist}"
        )
    return 0


# -- probe ---------------------------------------------------------------------
def cmd_probe(args: argparse.Namespace) -> int:
    from cudaup.errors import RemoteFileMissingError  # noqa: PLC0415
    from cudaup.explain import probe_url  # noqa: PLC0415
    from cudaup.resolve import Resolver  # noqa: PLC0415

    report = probe_url(Resolver(_settings(args)), args.url)
    if args.json:
        _emit_json(report.to_json())
    else:
        print(report.url)
        print(report.explanation)
        if report.suggestion:
            print(f"    url     {report.suggestion['url']}")
            print(f"    md5     {report.suggestion['md5'] or 'none published'}")
    if not report.exists:
        sys.stderr.write(f"cudaup: {report.explanation}\n")
        return RemoteFileMissingError.exit_code
    return 0


# -- download ------------------------------------------------------------------
def cmd_download(args: argparse.Namespace) -> int:
    from pathlib import Path  # noqa: PLC0415

    from cudaup.components import split_components  # noqa: PLC0415
    from cudaup.download import DownloadRequest, fetch_many  # noqa: PLC0415
    from cudaup.errors import UsageError  # noqa: PLC0415
    from cudaup.http import HttpClient  # noqa: PLC0415
    from cudaup.progress import display_for  # noqa: PLC0415

    settings = _settings(args)
    http = HttpClient(settings)
    if "://" in args.target:
        requests = [DownloadRequest.from_url(args.target, sha256=args.sha256, md5=args.md5)]
    else:
        if args.sha256 or args.md5:
            raise UsageError(
                "--sha256/--md5 are for a bare URL; a release's checksums come from its sources"
            )
        from cudaup.resolve import Resolver  # noqa: PLC0415

        resolution = Resolver(settings, http).resolve(
            args.target,
            platform=_platform(args),
            channel=args.channel,
            components=split_components(args.components),
        )
        requests = [DownloadRequest.from_artifact(a) for a in resolution.artifacts]
    with display_for(quiet=args.quiet or args.json, terminal=sys.stdout.isatty()) as display:
        results = fetch_many(
            requests,
            Path(args.output),
            http=http,
            connections=args.connections,
            progress=display,
            allow_unverified=args.allow_unverified,
        )
    if args.json:
        _emit_json({"schema": 1, "files": [r.to_json() for r in results]})
        return 0
    for result in results:
        if result.skipped:
            how = "already here"
        else:
            rate = result.fetched / result.seconds / 2**20 if result.seconds else 0.0
            how = f"{result.fetched / 2**20:.1f} MiB in {result.seconds:.1f} s ({rate:.0f} MiB/s)"
            if result.resumed_from:
                how += f", resumed at {result.resumed_from} bytes"
        check = (
            f"{result.algorithm} verified"
            if result.algorithm
            else "NOT verified (--allow-unverified)"
        )
        print(f"{result.path}  {_size(result.size)}  {check}  · {how}")
    return 0


# -- install, uninstall, list ------------------------------------------------------
def cmd_install(args: argparse.Namespace) -> int:
    from pathlib import Path  # noqa: PLC0415

    from cudaup.components import split_components  # noqa: PLC0415
    from cudaup.errors import UsageError  # noqa: PLC0415
    from cudaup.install.installer import InstallOptions, install  # noqa: PLC0415
    from cudaup.install.store import Store  # noqa: PLC0415
    from cudaup.progress import display_for  # noqa: PLC0415

    options = InstallOptions(
        platform=_platform(args),
        channel=args.channel,
        components=split_components(args.components),
        everything=args.all,
        prefix=Path(args.prefix).resolve() if args.prefix else None,
        allow_unverified=args.allow_unverified,
        force=args.force,
        driver=args.driver,
        connections=args.connections,
    )
    with display_for(quiet=args.quiet or args.json, terminal=sys.stdout.isatty()) as display:
        if args.lock:
            from cudaup.install.installer import install_locked  # noqa: PLC0415

            if args.version or args.components or args.all:
                raise UsageError(
                    "--lock decides the release and its files; give no VERSION, --components or --all"
                )
            result = install_locked(
                Path(args.lock), options, settings=_settings(args), store=Store.from_env(),
                mirror=args.mirror, progress=display,
            )  # fmt: skip
        elif not args.version:
            raise UsageError("name a release to install (13.0.1, 13.0, cu130) or give --lock FILE")
        else:
            result = install(
                args.version,
                options,
                settings=_settings(args),
                store=Store.from_env(),
                progress=display,
            )
    if args.json:
        _emit_json({"schema": 1, **result.to_json()})
        return 0
    what = "already installed" if result.skipped else "installed"
    print(
        f"CUDA {result.version} {what} at {result.path} ({result.channel}: {', '.join(result.components)})"
    )
    for note in result.notes:
        print(f"note: {note}")
    return 0


def cmd_uninstall(args: argparse.Namespace) -> int:
    import os  # noqa: PLC0415

    from cudaup.errors import ArtifactNotFoundError, UsageError  # noqa: PLC0415
    from cudaup.install.store import Store  # noqa: PLC0415
    from cudaup.sysroot import SystemRoot  # noqa: PLC0415
    from cudaup.toolkits import Lookup, find_toolkits  # noqa: PLC0415

    store = Store.from_env()
    toolkit = store.find(args.version)
    if toolkit is None:
        others = [
            t
            for t in find_toolkits(
                Lookup(root=SystemRoot.from_env(), env=dict(os.environ), store=store.toolkits_dir)
            )
            if args.version in t.identity.candidates or t.identity.line == args.version
        ]
        if others:
            owner = others[0].owner or "not cudaup"
            hint = (
                f"remove it with {others[0].path}/bin/cuda-uninstaller"
                if owner == "runfile installer"
                else "remove it with the tool that installed it"
            )
            raise UsageError(
                f"CUDA {args.version} at {others[0].path} is owned by {owner}, not cudaup; {hint}"
            )
        installed = ", ".join(t.version for t in store.installed()) or "none"
        raise ArtifactNotFoundError(
            f"cudaup has no CUDA {args.version} installed (installed: {installed})"
        )
    store.remove(toolkit)
    if store.default() in {toolkit.version, str(toolkit.path)}:
        store.set_default(None)
    from cudaup.switch import refresh_shims  # noqa: PLC0415

    refresh_shims(store)
    if args.json:
        _emit_json({"schema": 1, "removed": toolkit.version, "path": str(toolkit.path)})
    else:
        print(f"removed CUDA {toolkit.version} from {toolkit.path}")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    import os  # noqa: PLC0415

    from cudaup.install.store import Store  # noqa: PLC0415
    from cudaup.sysroot import SystemRoot  # noqa: PLC0415
    from cudaup.toolkits import Lookup, find_toolkits  # noqa: PLC0415

    store = Store.from_env()
    installed = store.installed()
    default = store.default()
    mine = {t.path.resolve() for t in installed}
    others = [
        t
        for t in find_toolkits(
            Lookup(root=SystemRoot.from_env(), env=dict(os.environ), store=store.toolkits_dir)
        )
        if t.real.resolve() not in mine
    ]
    if args.json:
        _emit_json({
            "schema": 1,
            "default": default,
            "installed": [
                {"version": t.version, "path": str(t.path), "components": t.components,
                 "channel": (t.record or {}).get("channel"), "default": default in {t.version, str(t.path)}}
                for t in installed
            ],
            "other": [t.to_json() for t in others],
        })  # fmt: skip
        return 0
    if not installed:
        print("installed by cudaup: none")
    for toolkit in installed:
        mark = "*" if default in {toolkit.version, str(toolkit.path)} else " "
        channel = (toolkit.record or {}).get("channel", "?")
        print(
            f"{mark} {toolkit.version:<9} {toolkit.path}  ({channel}: {', '.join(toolkit.components)})"
        )
    for other in others:
        owner = f" · {other.owner}" if other.owner else ""
        via = ", ".join(other.found_via)
        print(f"  {other.identity.describe():<9} {other.path}  (found via {via}{owner})")
    return 0


# -- plan ------------------------------------------------------------------------
def cmd_plan(args: argparse.Namespace) -> int:
    import os  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415

    from cudaup.driver import DriverVersion  # noqa: PLC0415
    from cudaup.install.store import Store  # noqa: PLC0415
    from cudaup.machine import detect_driver  # noqa: PLC0415
    from cudaup.plan import load_indexes, parse_requirements, select_indexes, to_json  # noqa: PLC0415
    from cudaup.planner import Planner, Target, export_pylock, python_version  # noqa: PLC0415
    from cudaup.sysroot import SystemRoot  # noqa: PLC0415

    settings = _settings(args)
    requirements = parse_requirements(args.packages)
    known = load_indexes(Store.from_env().home / "indexes.toml")
    if "pypi" in known:  # --pypi-url / CUDAUP_PYPI_URL moves PyPI here too
        known["pypi"].urls[""] = settings.pypi_url
    indexes = select_indexes(known, args.index or [])
    if args.driver:
        target = Target(
            python_version(args.python), _platform(args), DriverVersion.from_text(args.driver), None
        )
    else:
        info = detect_driver(root=SystemRoot.from_env(), env=os.environ)
        target = Target(
            python_version(args.python), _platform(args), info.version, info.cuda_version, info.gpus
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
        _emit_json(document)
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


# -- lock, mirror ------------------------------------------------------------------
def cmd_lock(args: argparse.Namespace) -> int:
    from pathlib import Path  # noqa: PLC0415

    from cudaup.components import split_components  # noqa: PLC0415
    from cudaup.errors import IntegrityError, UsageError  # noqa: PLC0415
    from cudaup.install.installer import choose_channel  # noqa: PLC0415
    from cudaup.lock import Lock, LockedWheels, compare, locked_toolkit, read_lock  # noqa: PLC0415
    from cudaup.platforms import parse_platform  # noqa: PLC0415
    from cudaup.resolve import Resolver  # noqa: PLC0415

    settings = _settings(args)
    resolver = Resolver(settings)
    if args.check:
        lock = read_lock(Path(args.check))
        changes: list[str] = []
        for toolkit in lock.toolkits:
            live = resolver.resolve(
                toolkit.release, platform=toolkit.platform, channel=toolkit.channel,
                components=None if toolkit.channel == "installer" else list(toolkit.components),
            )  # fmt: skip
            changes += compare(toolkit, locked_toolkit(live, settings.canonical))
        if args.json:
            _emit_json(
                {"schema": 1, "lock": args.check, "unchanged": not changes, "changes": changes}
            )
        else:
            for change in changes:
                print(f"changed: {change}")
            print(
                "the origins still serve exactly these bytes"
                if not changes
                else f"{len(changes)} change(s)"
            )
        if changes:
            raise IntegrityError(
                f"{args.check}: the origins no longer serve what the lock names ({len(changes)} change(s))"
            )
        return 0
    if not args.version:
        raise UsageError("name a release to lock (13.0.1, 13.0, cu130) or give --check FILE")
    components = split_components(args.components)
    if args.all == bool(components) and args.channel != "installer":
        raise UsageError(
            "name what to lock: --components nvcc,cudart (with what they need), or --all"
        )
    platforms = [parse_platform(p) for p in (args.platform or [])] or [_platform(args)]
    notes: list[str] = []
    channel = choose_channel(settings, args.channel, notes)
    lock = Lock(args.version)
    for platform in platforms:
        resolution = resolver.resolve(
            args.version, platform=platform, channel=channel, components=components, closure=True
        )
        lock.toolkits.append(locked_toolkit(resolution, settings.canonical))
    output = Path(args.output)
    if args.with_packages:
        from cudaup.plan import load_indexes, parse_requirements, select_indexes  # noqa: PLC0415
        from cudaup.planner import Planner, Target, export_pylock, python_version  # noqa: PLC0415

        known = load_indexes()
        known["pypi"].urls[""] = settings.pypi_url
        indexes = select_indexes(known, args.index or [])
        requirements = parse_requirements([p for p in args.with_packages.split(",") if p.strip()])
        for platform in platforms:
            target = Target(python_version(args.python), platform, None, None)
            result = Planner(settings).plan(requirements, indexes, target)
            name = f"pylock.{output.stem.replace('.', '-')}-{platform}.toml"  # PEP 751: pylock.<name>.toml
            export_pylock(result, output.parent / name, indexes)
            line = f"{result.choice.line[0]}.{result.choice.line[1]}"
            lock.wheels.append(LockedWheels(platform, name, line))
    output.write_text(lock.to_toml())
    if args.json:
        _emit_json(
            {"schema": 1, "lock": str(output), "toolkits": len(lock.toolkits), "notes": notes}
        )
    else:
        for toolkit in lock.toolkits:
            print(
                f"{toolkit.platform}: CUDA {toolkit.release} ({toolkit.channel}, {len(toolkit.files)} file(s))"
            )
        for wheels in lock.wheels:
            print(f"{wheels.platform}: wheels for CUDA {wheels.cuda_line} in {wheels.pylock}")
        print(f"wrote {output}")
    return 0


def cmd_mirror(args: argparse.Namespace) -> int:
    from pathlib import Path  # noqa: PLC0415

    from cudaup.http import HttpClient  # noqa: PLC0415
    from cudaup.lock import read_lock  # noqa: PLC0415
    from cudaup.mirror import build_mirror  # noqa: PLC0415
    from cudaup.progress import display_for  # noqa: PLC0415

    settings = _settings(args)
    lock_path = Path(args.lock)
    with display_for(quiet=args.quiet or args.json, terminal=sys.stdout.isatty()) as display:
        report = build_mirror(
            read_lock(lock_path), lock_path.parent, Path(args.directory),
            settings=settings, http=HttpClient(settings), progress=display,
        )  # fmt: skip
    if args.json:
        _emit_json({"schema": 1, "directory": args.directory, **report.to_json()})
    else:
        print(
            f"{args.directory}: {len(report.fetched)} fetched, {len(report.kept)} kept (verified), {len(report.documents)} documents"
        )
    return 0


# -- doctor --------------------------------------------------------------------
def _gib(mib: int | None) -> str:
    return f"{mib / 1024:.0f} GiB" if mib else "memory unknown"


def cmd_doctor(args: argparse.Namespace) -> int:
    import os  # noqa: PLC0415

    from cudaup.doctor import examine, lookup_from_env  # noqa: PLC0415

    report = examine(lookup_from_env(os.environ, python=args.python), driver_override=args.driver)
    if args.json:
        _emit_json(report.to_json())
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


# -- compat --------------------------------------------------------------------
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
    settings = _settings(args)
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
            _emit_json(document)
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
        _emit_json(
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


# -- parser --------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print one JSON object")
    common.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    common.add_argument("--refresh", action="store_true", help="bypass the HTTP cache")
    common.add_argument("--offline", action="store_true", help="answer from the shipped snapshot")
    common.add_argument("--no-probe", action="store_true", help="skip the HEAD probe of each file")
    hosts = common.add_argument_group("hosts (also CUDAUP_NVIDIA_*_URL and CUDAUP_PYPI_URL)")
    hosts.add_argument("--download-url", metavar="URL", help="NVIDIA file host or mirror")
    hosts.add_argument("--archive-url", metavar="URL", help="NVIDIA archive-page host")
    hosts.add_argument("--prerelease-url", metavar="URL", help="NVIDIA preview host")
    hosts.add_argument("--pypi-url", metavar="URL", help="simple index (default PyPI)")
    hosts.add_argument(
        "--mirror", metavar="URL", help="a cudaup mirror: every host and the PyPI index at one root"
    )

    parser = argparse.ArgumentParser(
        prog="cudaup",
        description="Find, verify, install and switch NVIDIA CUDA toolkits.",
        parents=[common],
    )
    parser.add_argument("--version", action="version", version=f"cudaup {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    resolve = commands.add_parser(
        "resolve", parents=[common], help="a release to exact, verified artifacts"
    )
    resolve.add_argument("version", help="13.0.1, 13.0, 13, cu130, '13.0 Update 1' or latest")
    resolve.add_argument(
        "--platform",
        help="linux-x86_64, linux-sbsa, linux-aarch64, windows-x86_64, windows-arm64 (default: this host)",
    )
    resolve.add_argument("--channel", choices=("installer", "redist", "pypi"), default="installer")
    resolve.add_argument("--components", help="comma-separated, e.g. nvcc,cudart (redist, pypi)")
    resolve.set_defaults(handler=cmd_resolve)

    versions = commands.add_parser(
        "versions", parents=[common], help="every release: date, bundled driver, platforms"
    )
    versions.set_defaults(handler=cmd_versions)

    probe = commands.add_parser(
        "probe", parents=[common], help="check a URL cheaply and explain a failure"
    )
    probe.add_argument("url")
    probe.set_defaults(handler=cmd_probe)

    download = commands.add_parser(
        "download",
        parents=[common],
        help="fetch a release's files (or a URL), verified and resumable",
    )
    download.add_argument("target", help="a version request (13.0.1, cu130, latest) or a URL")
    download.add_argument(
        "-o", "--output", default=".", help="directory to write into (default: .)"
    )
    download.add_argument("--platform", help="as for resolve (default: this host)")
    download.add_argument("--channel", choices=("installer", "redist", "pypi"), default="installer")
    download.add_argument("--components", help="comma-separated, e.g. nvcc,cudart (redist, pypi)")
    download.add_argument(
        "--connections", type=int, default=8, help="parallel connections per file (1-16, default 8)"
    )
    download.add_argument("--sha256", help="expected SHA-256 of a bare URL")
    download.add_argument("--md5", help="expected MD5 of a bare URL")
    download.add_argument(
        "--allow-unverified", action="store_true", help="download files with no known checksum"
    )
    download.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    download.set_defaults(handler=cmd_download)

    install = commands.add_parser(
        "install", parents=[common], help="install a toolkit side by side (no root needed)"
    )
    install.add_argument("version", nargs="?", help="13.0.1, 13.0, cu130, latest (or --lock)")
    install.add_argument(
        "--lock", metavar="FILE", help="install exactly what a cuda.lock.toml names"
    )
    install.add_argument(
        "--channel", choices=("auto", "installer", "redist", "pypi"), default="auto"
    )
    install.add_argument(
        "--components", help="comma-separated, e.g. nvcc,cudart (nvcc brings crt, nvvm, cudart)"
    )
    install.add_argument("--all", action="store_true", help="the whole toolkit")
    install.add_argument("--prefix", help="install there instead of the cudaup store")
    install.add_argument("--platform", help="a Linux platform (default: this host)")
    install.add_argument("--driver", help="check against this driver instead of the detected one")
    install.add_argument(
        "--force", action="store_true", help="install even if the driver cannot run it"
    )
    install.add_argument(
        "--allow-unverified", action="store_true", help="install files with no published checksum"
    )
    install.add_argument("--connections", type=int, default=8, help="parallel connections per file")
    install.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    install.set_defaults(handler=cmd_install)

    lock = commands.add_parser(
        "lock", parents=[common], help="decide every byte of a toolkit, with hashes"
    )
    lock.add_argument("version", nargs="?", help="13.0.1, 13.0, cu130")
    lock.add_argument(
        "--check", metavar="FILE", help="do the origins still serve exactly what FILE names?"
    )
    lock.add_argument("--components", help="comma-separated, e.g. nvcc,cudart")
    lock.add_argument("--all", action="store_true", help="the whole toolkit")
    lock.add_argument("--channel", choices=("auto", "installer", "redist", "pypi"), default="auto")
    lock.add_argument("--platform", action="append", help="repeatable (default: this host)")
    lock.add_argument(
        "--with",
        dest="with_packages",
        metavar="PKGS",
        help="comma-separated wheels to lock beside it (PEP 751)",
    )
    lock.add_argument("--index", action="append", help="as for plan, for --with")
    lock.add_argument("--python", help="X.Y or an interpreter, for --with")
    lock.add_argument("-o", "--output", default="cuda.lock.toml")
    lock.set_defaults(handler=cmd_lock)

    mirror = commands.add_parser(
        "mirror", parents=[common], help="write a lock's files as a static mirror"
    )
    mirror.add_argument("lock", help="a cuda.lock.toml")
    mirror.add_argument("directory")
    mirror.add_argument("-q", "--quiet", action="store_true")
    mirror.set_defaults(handler=cmd_mirror)

    uninstall = commands.add_parser(
        "uninstall", parents=[common], help="remove a toolkit cudaup installed"
    )
    uninstall.add_argument("version")
    uninstall.set_defaults(handler=cmd_uninstall)

    listing = commands.add_parser(
        "list", parents=[common], help="toolkits cudaup installed, and every other one found"
    )
    listing.set_defaults(handler=cmd_list)

    plan = commands.add_parser(
        "plan",
        parents=[common],
        help="the newest CUDA line the driver and the ML packages agree on",
    )
    plan.add_argument(
        "packages", nargs="+", help='requirements, e.g. torch "vllm>=0.11" sgl-kernel'
    )
    plan.add_argument("--driver", help="plan for this driver (default: this machine's)")
    plan.add_argument("--python", help="X.Y or an interpreter path (default: python3 on PATH)")
    plan.add_argument("--platform", help="as for resolve (default: this host)")
    plan.add_argument(
        "--index",
        action="append",
        help="pypi, pytorch, flashinfer, sglang, vllm or a URL (repeatable)",
    )
    plan.add_argument("--export", metavar="FILE", help="write a PEP 751 pylock.toml (needs uv)")
    plan.set_defaults(handler=cmd_plan)

    doctor = commands.add_parser(
        "doctor", parents=[common], help="driver, GPUs, every toolkit, and problems with fixes"
    )
    doctor.add_argument("--driver", help="assume this driver version (also CUDAUP_DRIVER_VERSION)")
    doctor.add_argument(
        "--python", help="the Python whose wheels and torch to inspect (default: python3 on PATH)"
    )
    doctor.set_defaults(handler=cmd_doctor)

    compat = commands.add_parser(
        "compat",
        parents=[common],
        help="which releases a driver runs, or which drivers run a release",
    )
    compat.add_argument("release", nargs="?", help="a release (13.0.1, 13.0, cu130)")
    compat.add_argument("--driver", help="a driver version (default: this machine's)")
    compat.add_argument("--os", choices=("linux", "windows"), default="linux")
    compat.set_defaults(handler=cmd_compat)

    from cudaup import cli_switch  # noqa: PLC0415 - default, pin, env, run, which, show, undo

    cli_switch.register(commands, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result: int = args.handler(args)
    except CudaupError as exc:
        if args.debug:
            raise
        if args.json:
            _emit_json(
                {
                    "schema": 1,
                    "error": {"kind": exc.kind, "message": str(exc), "exit_code": exc.exit_code},
                }
            )
        hint = ""
        if exc.kind == "network" and not getattr(args, "offline", False):
            hint = " (without network access: --mirror URL, or --offline for resolve)"
        sys.stderr.write(f"cudaup: error: {exc}{hint}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("cudaup: interrupted; run the same command again to resume\n")
        return 130
    except Exception as exc:
        if args.debug:
            raise
        sys.stderr.write(f"cudaup: internal error: {exc!r} (rerun with --debug for a traceback)\n")
        return 1
    return result
