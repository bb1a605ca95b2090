"""``cudaup install``: resolve, check the driver, download, stage, lay out, publish.

Every channel builds the same CUDA_HOME layout in a staging directory on the
same filesystem as its destination, then publishes it with one rename:

* ``redist``: each manifest archive (sha256-verified) is extracted safely into
  its own directory, then merged;
* ``pypi``: each wheel (sha256 from PyPI) is unpacked (with pip's modes), and
  its ``nvidia/cu13`` (13.x) or ``nvidia/<component>`` (12.x) tree merged;
* ``installer``: the runfile runs silently with ``--toolkitpath`` in staging,
  its log kept in the store, ``/usr/local/cuda`` checked before and after;
* ``auto``: ``redist`` when NVIDIA's host answers, else ``pypi`` (and says so).

A component that lacks the tool its name promises (``cuda_nvcc`` without
``bin/nvcc``: PyPI's CUDA 12 nvcc wheels hold only ptxas) is refused before
anything is published, naming the archive and the channel that has it.  A
toolkit for another platform than this machine's (``--platform linux-sbsa`` on
x86_64) goes only to a ``--prefix``: the store holds what runs here.  A ``--prefix``
holding another release is replaced only with ``force``, and one holding anything but
a toolkit cudaup installed never (:func:`check_prefix`).  Files get
pip's modes (0755 when executable, else 0644) whatever the archive stored.

The redist and pypi channels take each archive's tree from the unpacked cache
(:mod:`cudaup.install.unpack_cache`), hard-linked or copied (``link_mode``) and
checked against its manifest; the record names what was checked for each
archive.  A lock per release serialises concurrent installs; a re-run with
nothing new to add does nothing.  A toolkit the driver cannot run is refused
unless ``force``; with no driver (a build host), the install goes on and says
so.  A full disk or a refused write ends in :class:`InsufficientSpaceError` or
:class:`PermissionDeniedError` naming the path, never in a traceback.
"""

from __future__ import annotations

import datetime
import json
import shutil
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from cudaup import __version__
from cudaup.config import Settings
from cudaup.core.components import (
    DEFAULT_PROFILE,
    PROFILES,
    REQUIRED_TOOLS,
    check_profile,
    nvidia_name,
)
from cudaup.core.driver import DriverInfo
from cudaup.core.libraries import LIBRARIES, cuda_major
from cudaup.core.model import Channel, Resolution
from cudaup.core.platforms import Platform, is_linux
from cudaup.download import Progress, download_many
from cudaup.errors import (
    ArtifactNotFoundError,
    ConflictError,
    CudaupError,
    DriverTooOldError,
    UsageError,
)
from cudaup.install.head_start import HeadStart
from cudaup.install.layout import finish_layout, keep_wheel_record, merge_tree, wheel_roots
from cudaup.install.linking import LinkMode
from cudaup.install.store import InstalledToolkit, Store
from cudaup.install.unpack_cache import (
    STAGE_WORKERS,
    Staged,
    StagedTrees,
    stage_all,
    stamps_kept,
)
from cudaup.machine.driver_probe import detect_driver
from cudaup.machine.host import host_platform
from cudaup.machine.sysroot import SystemRoot
from cudaup.net.http import HttpClient
from cudaup.resolve.resolver import Resolver
from cudaup.util.cachedir import downloads_for
from cudaup.util.cachedir import using as using_cache
from cudaup.util.faults import Place, cache_place, explained, prefix_place, store_place
from cudaup.util.parallel import in_background
from cudaup.util.paths import inside

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
    #: connections per file; None adapts (see cudaup.download.ramp)
    connections: int | None = None
    #: hardlink: share the cache's files (copies across filesystems); copy: files of its own
    link_mode: LinkMode = "hardlink"
    #: check the sha256 of every cached file before it is used, whatever its stamp says
    verify: bool = False
    #: ``--profile``: what to install when no components are named (else the setting's)
    profile: str | None = None


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


def check_prefix_text(options: InstallOptions) -> None:
    """A prefix is printed into shell lines (``cudaup env``): a control character in it
    would start a command there."""
    if options.prefix is not None and not str(options.prefix).isprintable():
        raise UsageError(
            f"--prefix {str(options.prefix)!r} holds a control character (a newline, a tab, "
            "an escape); cudaup prints toolkit paths into shell lines (`cudaup env`): name a "
            "directory without one"
        )


def check_platform(options: InstallOptions) -> None:
    """A toolkit for another platform goes to a ``--prefix``, never into the store: its
    tools cannot run here, so it must never be selected, shimmed or made the default."""
    here = host_platform()
    if options.platform != here and options.prefix is None:
        raise UsageError(
            f"a {options.platform} toolkit cannot run on this {here} machine, so cudaup does "
            "not put it in its store (where `default`, `pin` and the shims would run it)",
            hint="--prefix DIR installs it into a directory of its own",
        )


def detect_driver_ahead(override: str | None) -> Future[DriverInfo]:
    """Start finding the driver on a thread of its own, for :func:`check_driver`: NVML's
    start and the fallbacks took 11 ms on a machine without a driver (more where NVML has
    GPUs to start), which then pass beside the resolution's requests, not after them."""
    _thread, found = in_background(
        lambda: detect_driver(root=SystemRoot.from_env(), override=override), "cudaup-driver"
    )
    return found


def check_driver(release: str, driver: Future[DriverInfo], force: bool, notes: list[str]) -> None:
    """Refuse a toolkit the driver cannot run (unless forced); note what was checked.
    ``driver``: the driver as :func:`detect_driver_ahead` finds it."""

    info = driver.result()
    if info.version is None:
        notes.append("no NVIDIA driver found: the toolkit was not checked against a driver")
        return
    # The compatibility table (and its CSV and JSON readers) only where there is a driver.
    from cudaup.core.compat import CompatTable  # noqa: PLC0415

    verdict = CompatTable.load().check(info.version, release, reported=info.cuda_version)
    if verdict.verdict == "no":
        message = f"driver {info.version} cannot run CUDA {release}: {verdict.reason}"
        if not force:
            raise DriverTooOldError(message, hint="--force installs it anyway")
        notes.append(message + "; installed anyway (--force)")
    elif verdict.verdict == "minor-version":
        notes.append(f"driver {info.version} runs CUDA {release} under {verdict.reason}")
    else:
        notes.append(f"driver {info.version} runs CUDA {release}")


def _record(
    resolution: Resolution,
    components: dict[str, str],
    staged: Sequence[Staged],
    link_mode: LinkMode,
) -> dict[str, Any]:
    """The store's record of an install: what came from where, with which hashes, and
    (redist, pypi) how each archive's tree was made and checked."""
    how = {tree.artifact.filename: tree for tree in staged}
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
            | _checks(how.get(a.filename))
            for a in resolution.artifacts
        ],
        **({"libraries": _libraries(resolution)} if _libraries(resolution) else {}),
        **({"link_mode": link_mode} if staged else {}),
        "installed_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "cudaup": __version__,
    }


def _libraries(resolution: Resolution) -> dict[str, dict[str, str | None]]:
    """Each library beside the toolkit: its product, version, CUDA build and source."""
    found: dict[str, dict[str, str | None]] = {}
    for artifact in resolution.artifacts:
        library = LIBRARIES.get(artifact.component)
        if library is not None and library.name not in found:
            found[library.name] = {
                "product": library.title,
                "version": artifact.component_version,
                "cuda_variant": library.variant(cuda_major(resolution.release.version)),
                "channel": artifact.channel,
                "source": artifact.sources[0].url if artifact.sources else None,
            }
    return found


def _checks(tree: Staged | None) -> dict[str, Any]:
    """What the record says about one archive's tree: where it came from, what was checked."""
    if tree is None:
        return {}
    return {"tree": tree.source, "checks": list(tree.checks), "hard_links": tree.linked}


def uninstall(store: Store, toolkit: InstalledToolkit, cache_root: Path) -> None:
    """Delete ``toolkit`` (:meth:`Store.remove`).  The unpacked trees it was hard-linked
    from keep their stamps: installing those archives again checks sizes and modes, not
    every file's sha256."""
    with stamps_kept(cache_root, _linked_from(toolkit)):
        store.remove(toolkit)


def _linked_from(toolkit: InstalledToolkit | None) -> list[str]:
    """The cache keys (archives' sha256) of the unpacked trees ``toolkit``'s record says
    its files are hard links into: the trees whose stamps its removal would void
    (:func:`~cudaup.install.unpack_cache.stamps_kept` checks each key)."""
    artifacts = ((toolkit.record if toolkit else None) or {}).get("artifacts")
    linked = [
        a.get("sha256")
        for a in (artifacts if isinstance(artifacts, list) else [])
        if isinstance(a, dict) and a.get("hard_links") is True
    ]
    return [key for key in linked if isinstance(key, str)]


def _merge_trees(
    resolution: Resolution, staged: Sequence[Staged], staging: Path
) -> tuple[Path, dict[str, str]]:
    """Merge each artifact's staged tree into one CUDA_HOME."""
    tree = staging / "tree"
    tree.mkdir()
    versions: dict[str, str] = {}
    for artifact, part in zip(resolution.artifacts, staged, strict=True):
        library = LIBRARIES.get(artifact.component)
        if resolution.channel == "redist":
            merge_tree(part.path, tree, artifact.component)
        elif library is not None:
            # A library's wheel keeps its CUDA_HOME-shaped tree at a known place
            # (nvidia/cudnn, nvidia/cu13, cutensor): that tree, and nothing else of it.
            major = cuda_major(resolution.release.version)
            root = inside(part.path, *library.wheel_root.format(major=major).split("/"))
            if not root.is_dir():
                raise ArtifactNotFoundError(
                    f"{artifact.filename} has no {library.wheel_root.format(major=major)}/ "
                    "tree to install"
                )
            merge_tree(root, tree, artifact.component)
            keep_wheel_record(part.path, tree)
        else:
            roots = wheel_roots(part.path)
            if not roots:
                raise ArtifactNotFoundError(f"{artifact.filename} has no nvidia/ tree to install")
            for root in roots:
                merge_tree(root, tree, artifact.component)
            keep_wheel_record(part.path, tree)
        if artifact.component_version:
            versions[artifact.component] = artifact.component_version
        shutil.rmtree(part.path, ignore_errors=True)
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
    check_prefix_text(options)
    check_platform(options)  # before any request: materialize checks again, for --lock
    notes: list[str] = []
    http = http or HttpClient(settings)
    channel = choose_channel(settings, options.channel, notes)
    if channel == "installer" and options.components:
        raise UsageError("the installer channel installs the whole toolkit; drop --components")
    if options.profile is not None and (options.components or options.everything):
        raise UsageError("--profile, --components and --all each say what to install: give one")
    if channel == "installer" and options.profile is not None:
        raise UsageError("the installer channel installs the whole toolkit; drop --profile")
    components = None if options.everything else options.components
    profile: tuple[str, tuple[str, ...]] | None = None
    if components is None and not options.everything and channel != "installer":
        name, wanted = install_profile(options.profile, settings.profile)
        if wanted is not None:
            profile, components = (name, wanted), wanted
        notes.append(f"profile {name}{_profile_origin(options.profile, settings.profile)}")
    driver = detect_driver_ahead(options.driver)
    ahead = None
    if channel == "pypi" and options.connections is None:  # a count given is staging's to share

        def may_stage(release: str) -> bool:  # as materialize would: nothing there, driver fits
            check_driver(release, driver, options.force, [])
            return not _destination(options, store, release).exists()

        places = _places(settings, store, options.prefix)
        ahead = HeadStart(
            settings.cache_root,
            http=http,
            verify=options.verify,
            places=places,
            progress=progress,
            may_stage=may_stage,
        )
    try:
        # No HEAD probes here: the download checks existence, size and hash of every byte.
        resolver = Resolver(
            replace(settings, probe=False),
            http,
            downloads_next=STAGE_WORKERS,
            head_start=ahead.offer_release if ahead is not None else None,
        )
        resolution = resolver.resolve(
            request,
            platform=options.platform,
            channel=channel,
            components=components,
            closure=True,
            only_offered=profile is not None,
        )
        if profile is not None:
            got = {a.component for a in resolution.artifacts}
            lacking = [nvidia_name(n) for n in profile[1] if nvidia_name(n) not in got]
            if lacking:
                notes.append(
                    f"CUDA {resolution.release.version} offers no {', '.join(lacking)} for "
                    f"{options.platform}: profile {profile[0]} goes without"
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
            driver=driver,
            ahead=ahead,
        )
    finally:
        if ahead is not None:
            ahead.close()


def install_profile(given: str | None, setting: str) -> tuple[str, tuple[str, ...] | None]:
    """The profile an install with no components uses (``--profile``, else the
    ``CUDAUP_PROFILE`` setting), and its components (``None``: the whole toolkit)."""
    name = check_profile(given, "--profile") if given else check_profile(setting, "CUDAUP_PROFILE")
    return name, PROFILES[name]


def _profile_origin(given: str | None, setting: str) -> str:
    if given:
        return ""
    if setting != DEFAULT_PROFILE:
        return " (from CUDAUP_PROFILE)"
    return " (the default: --profile minimal|default|complete or CUDAUP_PROFILE chooses)"


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
    driver: Future[DriverInfo] | None = None,
    ahead: HeadStart | None = None,
) -> InstallResult:
    """Download, stage, lay out and publish a resolved (or locked) toolkit (``driver``:
    the driver as :func:`detect_driver_ahead` finds it, else found here; ``ahead``: the
    archives a head start began to unpack)."""
    channel = resolution.channel
    release = resolution.release.version
    check_prefix_text(options)
    check_platform(options)
    if driver is None:  # a locked install: nothing resolved before this
        driver = detect_driver_ahead(options.driver)
    check_driver(release, driver, options.force, notes)
    unverified = [a.filename for a in resolution.artifacts if a.md5 is None and a.sha256 is None]
    if unverified and not options.allow_unverified:
        raise UsageError(
            f"no checksum is published for {', '.join(unverified)}",
            hint="--allow-unverified installs it anyway",
        )
    wanted = {a.component for a in resolution.artifacts}
    store.check_links()  # a link planted in the home is refused before anything is written
    final = _destination(options, store, release)
    places = _places(settings, store, options.prefix)
    # A write refused or a disk full anywhere below the store, the prefix or the cache
    # becomes the error naming the path and the way round it (exit 14 or 10).  The
    # cache lock (shared) keeps `cudaup cache prune` from removing unpacked trees (or
    # a runfile) between their download and their use here.
    with (
        explained(f"cannot install CUDA {release} at {final}", final.parent, places),
        store.lock(release),
        using_cache(settings.cache_root),
    ):
        store.sweep(final.parent, final.name)
        existing = store.at(final)
        replaced = None  # another release at the prefix, which the publish deletes
        if options.prefix is not None and check_prefix(final, existing, release, options.force):
            assert existing is not None
            notes.append(f"replaced CUDA {existing.version} at {final} (--force)")
            replaced, existing = existing, None  # nothing of another release is kept or merged
        if (
            existing is not None
            and existing.version == release
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
            and existing.version == release
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
            staged: list[Staged] = []
            trees: StagedTrees | None = None
            if channel == "installer":
                from cudaup.install.runfile import run_runfile  # noqa: PLC0415 - this channel's only

                downloads, refused = downloads_for(settings.cache_root, staging)
                notes += [refused] if refused is not None else []
                [runfile] = download_many(
                    resolution.artifacts,
                    downloads,
                    http=http,
                    connections=options.connections,
                    progress=progress,
                    allow_unverified=options.allow_unverified,
                )
                tree = staging / "tree"
                log = run_runfile(runfile.path, tree, store.logs_dir, SystemRoot.from_env())
                notes.append(f"installer log: {log}")
                versions = {"cuda_installer": release}
            else:
                (staging / "parts").mkdir()
                trees = stage_all(
                    resolution.artifacts,
                    settings.cache_root,
                    staging / "parts",
                    http=http,
                    strip_top=channel == "redist",
                    link_mode=options.link_mode,
                    verify=options.verify,
                    places=places,
                    connections=options.connections,
                    progress=progress,
                    ahead=ahead,
                )
                staged = trees.trees
                notes += trees.notes
                cached = [t for t in staged if t.source != "private"]
                if options.link_mode == "hardlink" and not all(t.linked for t in cached):
                    notes.append(
                        "the cache is on another filesystem: files were copied, not hard-linked"
                    )
                tree, versions = _merge_trees(resolution, staged, staging)
                check_tools(tree, resolution, notes)
                notes += finish_layout(tree, release, versions)
            record = _record(resolution, versions, staged, options.link_mode)
            needed = len(json.dumps(record, indent=1, sort_keys=True)) + 1
            with explained(f"cannot publish CUDA {release} at {final}", final, places, needed):
                store.write_record(tree, record)
                with stamps_kept(settings.cache_root, _linked_from(replaced)):
                    store.publish(tree, final)
            if trees is not None:
                trees.stamp()
        if options.prefix is not None:
            foreign = options.platform if options.platform != host_platform() else None
            store.add_external(release, final, foreign)
    return InstallResult(release, final, channel, sorted(versions), False, notes)


def check_prefix(
    prefix: Path, existing: InstalledToolkit | None, release: str, force: bool
) -> bool:
    """Whether installing ``release`` at ``prefix`` replaces another release there.

    An absent or empty directory takes the install; so does this release's own toolkit
    (components are added).  Another release cudaup installed there is replaced only
    with ``force``; a directory holding anything else is never replaced: cudaup deletes
    only what it installed."""
    if existing is not None and existing.record is not None:
        if existing.version == release:
            return False
        if force:
            return True
        components = ", ".join(existing.components) or "no components"
        raise ConflictError(
            f"{prefix} holds CUDA {existing.version} ({components}), not {release}",
            hint=f"--force replaces it with CUDA {release}, or choose another --prefix",
        )
    try:
        entries = sorted(entry.name for entry in prefix.iterdir())
    except FileNotFoundError:
        return False
    except NotADirectoryError:
        entries = None
    if entries == []:
        return False
    holds = "is a file" if entries is None else f"holds {_named(entries)}"
    raise ConflictError(
        f"{prefix} {holds}, not a toolkit this cudaup installed, so cudaup will not replace "
        "it (not even with --force)",
        hint="choose another --prefix, or empty that directory",
    )


def _named(entries: list[str], shown: int = 5) -> str:
    more = len(entries) - shown
    return ", ".join(entries[:shown]) + (f" and {more} more" if more > 0 else "")


def check_tools(tree: Path, resolution: Resolution, notes: Sequence[str]) -> None:
    """Refuse a component without the tool it exists for (:data:`REQUIRED_TOOLS`)."""
    release = resolution.release.version
    for artifact in resolution.artifacts:
        for tool in REQUIRED_TOOLS.get(artifact.component, ()):
            path = tree / "bin" / tool
            if path.is_file():
                continue
            message = (
                f"{artifact.filename} ({artifact.component} of CUDA {release}, from "
                f"{resolution.channel}) has no bin/{tool}, so this toolkit could not run {tool}"
            )
            if resolution.channel == "pypi":
                fallback = next((n for n in notes if n.startswith("channel auto:")), None)
                why = f" ({fallback})" if fallback else ""
                message += (
                    f"{why}; NVIDIA's redist archive of {artifact.component} has {tool}: "
                    "install with --channel redist"
                )
            raise ArtifactNotFoundError(message)


def _destination(options: InstallOptions, store: Store, release: str) -> Path:
    """Where ``release`` is installed: the ``--prefix``, else its directory in the store."""
    return options.prefix if options.prefix is not None else store.toolkit_dir(release)


def _places(settings: Settings, store: Store, prefix: Path | None) -> tuple[Place, ...]:
    """Where an install writes, each with what to do when a write there is refused."""
    places = [cache_place(settings.cache_root), store_place(store.home)]
    if prefix is not None:
        places.append(prefix_place(prefix))
    return tuple(places)


def _same_channel(toolkit: InstalledToolkit, channel: Channel) -> bool:
    return (toolkit.record or {}).get("channel") == channel
