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
from typing import TYPE_CHECKING, Any

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
        sys.stderr.write(f"cudaup: error: {exc}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("cudaup: interrupted\n")
        return 130
    except Exception as exc:
        if args.debug:
            raise
        sys.stderr.write(f"cudaup: internal error: {exc!r} (rerun with --debug for a traceback)\n")
        return 1
    return result
