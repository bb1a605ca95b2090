"""``cudaup install``: resolve, check the driver, download, stage, lay out, publish.

Every channel builds the same CUDA_HOME layout in a staging directory on the
same filesystem as its destination, then publishes it with one rename:

* ``redist``: each manifest archive (sha256-verified) is extracted safely into
  its own directory, then merged;
* ``pypi``: each wheel (sha256 from PyPI) is unpacked with its file modes, and
  its ``nvidia/cu13`` (13.x) or ``nvidia/<component>`` (12.x) tree merged;
* ``installer``: the runfile runs silently with ``--toolkitpath`` in staging,
  its log kept in the store, ``/usr/local/cuda`` checked before and after;
* ``auto``: ``redist`` when NVIDIA's host answers, else ``pypi`` (and says so).

A lock per release serialises concurrent installs; a re-run with nothing new
to add does nothing.  A toolkit the driver cannot run is refused unless
``force``; with no driver (a build host), the install goes on and says so.
"""

from __future__ import annotations

import datetime
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from cudaup import __version__
from cudaup.config import Settings
from cudaup.core.compat import CompatTable
from cudaup.core.model import Channel, Resolution
from cudaup.core.platforms import Platform, is_linux
from cudaup.download import Progress, fetch_many
from cudaup.errors import ArtifactNotFoundError, CudaupError, DriverTooOldError, UsageError
from cudaup.install.layout import finish_layout, keep_wheel_record, merge_tree, wheel_roots
from cudaup.install.runfile import run_runfile
from cudaup.install.store import InstalledToolkit, Store
from cudaup.install.unpacked import link_tree, unpack_all
from cudaup.machine.driver_probe import detect_driver
from cudaup.machine.sysroot import SystemRoot
from cudaup.net.http import HttpClient
from cudaup.resolve.resolver import Resolver
from cudaup.util.cachedir import CacheLayout
from cudaup.util.cachedir import using as using_cache

InstallChannel = Literal["auto", "installer", "redist", "pypi"]


@dataclass
class InstallResult:
    version: str
    path: Path
    channel: Channel
    components: list[str]
    skipped: bool
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "path": str(self.path),
            "channel": self.channel,
            "components": self.components,
            "skipped": self.skipped,
            "notes": self.notes,
        }


@dataclass(frozen=True, slots=True)
class InstallOptions:
    platform: Platform
    channel: InstallChannel = "auto"
    components: tuple[str, ...] | None = None
    everything: bool = False
    prefix: Path | None = None
    allow_unverified: bool = False
    force: bool = False
    driver: str | None = None
    connections: int = 8


def choose_channel(settings: Settings, channel: InstallChannel, notes: list[str]) -> Channel:
    """``auto``: NVIDIA's redist when its host answers (one quick request), else PyPI."""
    if channel != "auto":
        return channel
    quick = HttpClient(replace(settings, timeout=5.0), retries=0)
    try:
        Resolver(quick.settings, quick).nvidia.listing()
    except CudaupError as exc:
        notes.append(f"channel auto: NVIDIA's host did not answer ({exc}); using pypi")
        return "pypi"
    notes.append(f"channel auto: using redist from {settings.download_url}")
    return "redist"


def check_driver(
    settings: Settings, release: str, override: str | None, force: bool, notes: list[str]
) -> None:
    """Refuse a toolkit the driver cannot run (unless forced); note what was checked."""

    info = detect_driver(root=SystemRoot.from_env(), override=override)
    if info.version is None:
        notes.append("no NVIDIA driver found: the toolkit was not checked against a driver")
        return
    verdict = CompatTable.load().check(info.version, release, reported=info.cuda_version)
    if verdict.verdict == "no":
        message = f"driver {info.version} cannot run CUDA {release}: {verdict.reason}"
        if not force:
            raise DriverTooOldError(message + " (--force installs it anyway)")
        notes.append(message + "; installed anyway (--force)")
    elif verdict.verdict == "minor-version":
        notes.append(f"driver {info.version} runs CUDA {release} under {verdict.reason}")
    else:
        notes.append(f"driver {info.version} runs CUDA {release}")


def _record(resolution: Resolution, components: dict[str, str]) -> dict[str, Any]:
    return {
        "schema": 1,
        "version": resolution.release.version,
        "label": resolution.release.label,
        "channel": resolution.channel,
        "platform": resolution.platform,
        "components": sorted(components),
        "component_versions": components,
        "artifacts": [
            {
                k: a.to_json()[k]
                for k in (
                    "filename",
                    "url",
                    "size",
                    "sha256",
                    "md5",
                    "component",
                    "component_version",
                )
            }
            for a in resolution.artifacts
        ],
        "installed_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "cudaup": __version__,
    }


def _stage_trees(
    resolution: Resolution, unpacked: Sequence[Path], staging: Path, notes: list[str]
) -> tuple[Path, dict[str, str]]:
    """Merge each artifact's unpacked tree (linked from the cache) into one CUDA_HOME."""
    tree = staging / "tree"
    tree.mkdir()
    parts = staging / "parts"
    parts.mkdir()
    versions: dict[str, str] = {}
    copied = False
    for index, (artifact, source) in enumerate(zip(resolution.artifacts, unpacked, strict=True)):
        part = parts / str(index)
        copied |= not link_tree(source, part)
        if resolution.channel == "redist":
            merge_tree(part, tree, artifact.component)
        else:
            roots = wheel_roots(part)
            if not roots:
                raise ArtifactNotFoundError(f"{artifact.filename} has no nvidia/ tree to install")
            for root in roots:
                merge_tree(root, tree, artifact.component)
            keep_wheel_record(part, tree)
        if artifact.component_version:
            versions[artifact.component] = artifact.component_version
        shutil.rmtree(part, ignore_errors=True)
    if copied:
        notes.append("the cache is on another filesystem: files were copied, not hard-linked")
    return tree, versions


def install(
    request: str,
    options: InstallOptions,
    *,
    settings: Settings,
    store: Store,
    http: HttpClient | None = None,
    progress: Progress | None = None,
) -> InstallResult:
    """Install one release; see the module docstring."""
    if not is_linux(options.platform):
        raise UsageError(
            "cudaup installs toolkits on Linux; resolve and download work for every platform"
        )
    if options.everything and options.components:
        raise UsageError("--all and --components exclude each other")
    notes: list[str] = []
    http = http or HttpClient(settings)
    channel = choose_channel(settings, options.channel, notes)
    if channel == "installer" and options.components:
        raise UsageError("the installer channel installs the whole toolkit; drop --components")
    components = None if options.everything else options.components
    if components is None and not options.everything and channel != "installer":
        raise UsageError(
            "name what to install: --components nvcc,cudart (with what they need), or --all"
        )
    # No HEAD probes here: the download checks existence, size and hash of every byte anyway.
    resolver = Resolver(replace(settings, probe=False), http)
    resolution = resolver.resolve(
        request, platform=options.platform, channel=channel, components=components, closure=True
    )
    return materialize(
        resolution,
        resolver,
        options,
        settings=settings,
        store=store,
        http=http,
        progress=progress,
        notes=notes,
    )


def materialize(
    resolution: Resolution,
    resolver: Resolver | None,
    options: InstallOptions,
    *,
    settings: Settings,
    store: Store,
    http: HttpClient,
    progress: Progress | None,
    notes: list[str],
) -> InstallResult:
    """Download, stage, lay out and publish a resolved (or locked) toolkit."""
    channel = resolution.channel
    release = resolution.release.version
    check_driver(settings, release, options.driver, options.force, notes)
    unverified = [a.filename for a in resolution.artifacts if a.md5 is None and a.sha256 is None]
    if unverified and not options.allow_unverified:
        raise UsageError(
            f"no checksum is published for {', '.join(unverified)}; --allow-unverified installs it anyway"
        )
    wanted = {a.component for a in resolution.artifacts}
    final = options.prefix if options.prefix is not None else store.toolkit_dir(release)
    # The cache lock (shared) keeps `cudaup cache prune` from removing unpacked trees
    # (or a runfile) between their download and their use here.
    with store.lock(release), using_cache(settings.cache_root):
        store.sweep(final.parent, final.name)
        existing = _existing(store, release, final)
        if (
            existing is not None
            and wanted <= set(existing.components)
            and _same_channel(existing, channel)
        ):
            return InstallResult(
                release,
                existing.path,
                channel,
                existing.components,
                True,
                [*notes, "already installed"],
            )
        if (
            existing is not None
            and existing.record
            and channel != "installer"
            and resolver is not None
        ):
            # Adding components: rebuild with the union, so the swap keeps what was there.
            previous = set(existing.components)
            if not previous <= wanted:
                merged = sorted(previous | wanted)
                resolution = resolver.resolve(
                    release,
                    platform=options.platform,
                    channel=channel,
                    components=merged,
                    closure=True,
                )
        with store.staging(final.parent, final.name) as staging:
            if channel == "installer":
                [runfile] = fetch_many(
                    resolution.artifacts, CacheLayout(settings.cache_root).downloads, http=http,
                    connections=options.connections, progress=progress,
                    allow_unverified=options.allow_unverified,
                )  # fmt: skip
                tree = staging / "tree"
                log = run_runfile(runfile.path, tree, store.home / "logs", SystemRoot.from_env())
                notes.append(f"installer log: {log}")
                versions = {"cuda_installer": release}
            else:
                unpacked = unpack_all(
                    resolution.artifacts, settings.cache_root, http=http,
                    strip_top=channel == "redist", connections=options.connections, progress=progress,
                )  # fmt: skip
                tree, versions = _stage_trees(resolution, unpacked, staging, notes)
                notes += finish_layout(tree, release, versions)
            store.write_record(tree, _record(resolution, versions))
            store.publish(tree, final)
        if options.prefix is not None:
            store.add_external(release, final)
    return InstallResult(release, final, channel, sorted(versions), False, notes)


def _existing(store: Store, release: str, final: Path) -> InstalledToolkit | None:
    toolkit = store.get(release)
    if toolkit is not None and toolkit.path == final:
        return toolkit
    return None


def _same_channel(toolkit: InstalledToolkit, channel: Channel) -> bool:
    return (toolkit.record or {}).get("channel") == channel
