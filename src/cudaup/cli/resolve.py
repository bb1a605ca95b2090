"""The commands that answer from NVIDIA's sources: ``resolve`` and ``versions`` (``probe``:
:mod:`cudaup.cli.probe`)."""

from __future__ import annotations

import argparse
from dataclasses import replace

from cudaup.cli.common import (
    add_channel,
    add_components,
    add_platform,
    human_size,
    platform_of,
    settings_of,
)
from cudaup.cli.output import emit_json
from cudaup.config import Settings
from cudaup.core.components import split_components
from cudaup.core.model import Resolution
from cudaup.core.versions import parse_request
from cudaup.errors import OfflineError
from cudaup.resolve.libraries import LibraryListing
from cudaup.resolve.releases import ReleaseListing, list_releases, offline_summaries
from cudaup.resolve.resolver import Resolver
from cudaup.resolve.snapshot import OfflineCatalog


def add_resolve(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("version", help="13.0.1, 13.0, 13, cu130, '13.0 Update 1' or latest")
    add_platform(parser)
    add_channel(parser, auto=False)
    add_components(parser)
    parser.set_defaults(handler=cmd_resolve)


def add_versions(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--product",
        metavar="LIBRARY",
        help="a library's releases instead of CUDA's (cudnn, cutensor, cusparselt, nvshmem), "
        "with the CUDA majors each builds for",
    )
    parser.set_defaults(handler=cmd_versions)


def _library_versions(settings: Settings, name: str, as_json: bool) -> int:
    releases = Resolver(settings).library_releases(name)
    if as_json:
        emit_json(LibraryListing(name, releases).to_json())
        return 0
    print(f"{'release':<10} {'version':<12} {'date':<10}  CUDA majors (platforms)")
    for r in releases:
        builds = "; ".join(
            f"{major} ({', '.join(platforms)})" for major, platforms in sorted(r.builds.items())
        )
        print(f"{r.label:<10} {r.version or '-':<12} {r.date or '':<10}  {builds or '-'}")
    return 0


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
        print(f"{mark} {head}{artifact.filename}  {human_size(artifact.size)}")
        print(f"    url     {artifact.url}")
        if artifact.sha256:
            print(f"    sha256  {artifact.sha256}")
        print(f"    md5     {artifact.md5 or 'none published'}")
        print(f"    from    {', '.join(s.kind for s in artifact.sources)}")
    for note in resolution.notes:
        print(f"note: {note}")


def cmd_resolve(args: argparse.Namespace) -> int:

    settings = settings_of(args)
    platform = platform_of(args)
    components = split_components(args.components)
    if settings.offline:
        if args.channel != "installer":
            raise OfflineError("--offline answers only --channel installer (from the snapshot)")
        resolution = OfflineCatalog.load().resolve(parse_request(args.version), platform)

        artifacts = tuple(replace(a, url=settings.rewrite(a.url)) for a in resolution.artifacts)
        resolution = replace(resolution, artifacts=artifacts)
    else:
        resolution = Resolver(settings).resolve(
            args.version, platform=platform, channel=args.channel, components=components
        )
    if args.json:
        emit_json(resolution.to_json())
    else:
        _print_resolution(resolution)
    return 0


def _platforms(names: tuple[str, ...] | None) -> str:
    if names is None:
        return "?"
    return ",".join(p.replace("linux-", "").replace("windows-", "win-") for p in names) or "-"


def cmd_versions(args: argparse.Namespace) -> int:
    settings = settings_of(args)
    if args.product:
        if settings.offline:
            raise OfflineError("--offline knows CUDA's releases only, not a library's")
        return _library_versions(settings, args.product, args.json)
    snapshot = OfflineCatalog.load() if settings.offline else None
    releases = offline_summaries(snapshot) if snapshot else list_releases(Resolver(settings))
    if args.json:
        listing = ReleaseListing(releases, snapshot.generated if snapshot else None)
        emit_json(listing.to_json())
        return 0
    print(
        f"{'version':<9} {'label':<30} {'date':<10}  {'driver':<11} platforms (installer | redist)"
    )
    for r in releases:
        print(
            f"{r.version:<9} {r.label:<30} {r.date or '':<10}  {r.driver or '-':<11} "
            f"{_platforms(r.installer_platforms)} | {_platforms(r.redist_platforms)}"
        )
    if snapshot:
        print(
            f"note: from cudaup's offline snapshot of {snapshot.generated} (installers only: "
            "dates and redist platforms are not in it, shown as blank and ?)"
        )
    return 0
