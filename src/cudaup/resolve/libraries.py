"""A library asked for beside a toolkit (``cudnn``, ``nccl==2.30``) to exact artifacts.

The build is always the one for the toolkit's CUDA major; by default the newest release
of the library that has one for the platform, else the newest under the user's prefix pin.
The redist channel reads the library's own manifests (``/compute/<product>/redist/``), the
pypi channel the library's per-major project; every artifact carries its checksum and the
sources that vouched for it, as a toolkit component's does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from packaging.requirements import Requirement
from packaging.version import Version

from cudaup.core.libraries import Library, LibraryRequest, version_matches
from cudaup.core.model import Artifact, SourceRef
from cudaup.core.platforms import PLATFORMS, Platform
from cudaup.core.wheels import wheel_fits
from cudaup.errors import (
    ArtifactNotFoundError,
    NetworkError,
    NotKnownError,
    ReleaseNotFoundError,
    RemoteFileMissingError,
)
from cudaup.nvidia.listing import ListedRelease
from cudaup.nvidia.manifest import Archive, Manifest
from cudaup.resolve.choose import choose_wheel, redist_artifact, wheel_artifact
from cudaup.resolve.pypi import DistFile, PackageIndex
from cudaup.resolve.sources import NvidiaSource


def _requested(request: LibraryRequest, major: int, platform: Platform) -> str:
    pin = f" {request.version}.x" if request.version else ""
    return f"{request.library.title}{pin} for CUDA {major} on {platform}"


def pypi_library(
    index: PackageIndex, request: LibraryRequest, major: int, platform: Platform
) -> Artifact:
    """The newest wheel of the library's project for CUDA ``major`` (under the pin)."""
    project = request.library.project(major)
    files = [
        f
        for f in index.files(project)
        if f.version is not None
        and not f.version.is_prerelease
        and version_matches(str(f.version), request.version)
    ]
    wheel = choose_wheel(files, Requirement(project), platform)
    if wheel is None:
        raise ArtifactNotFoundError(
            f"PyPI has no {project} wheel for {_requested(request, major, platform)}"
        )
    index_source = SourceRef(
        "PyPI simple API", index.project_url(project), ("url", "sha256", "size")
    )
    return wheel_artifact(wheel, request.library.name, platform, [index_source])


def _archives(
    manifest: Manifest, request: LibraryRequest, variant: str, platform: Platform
) -> list[tuple[str, Archive]]:
    """The (version, archive) of each component that makes the library, or [] when this
    release has no build of it for ``variant`` on ``platform``."""
    library = request.library
    keys = library.redist_components or tuple(manifest.components)
    found: list[tuple[str, Archive]] = []
    for key in keys:
        component = manifest.components.get(key)
        if component is None:
            if library.redist_components is not None:
                return []  # a release that lacks a part of the library is not a candidate
            continue
        archive = next(
            (a for a in component.archives if a.platform == platform and a.variant == variant),
            None,
        )
        if archive is None:
            if library.redist_components is not None:
                return []
            continue
        if not version_matches(component.version, request.version):
            return []
        found.append((component.version, archive))
    return found


def redist_library(
    nvidia: NvidiaSource,
    request: LibraryRequest,
    major: int,
    platform: Platform,
    probe: Callable[[Artifact], Artifact],
) -> list[Artifact]:
    """The library's archives for CUDA ``major`` from its own redist manifests: newest
    release first, the first that has a build for the platform and the major wins."""
    library = request.library
    if library.product is None:
        raise ArtifactNotFoundError(
            f"NVIDIA publishes no redist manifest for {library.title}, so no archive of it "
            "can be verified on the redist channel",
            hint=f"--channel pypi installs its wheel ({library.project(major)})",
        )
    variant = library.variant(major)
    for listed in nvidia.listing(library.product):
        label = listed.label
        if request.version and not version_matches(label, request.version):
            continue
        manifest = nvidia.manifest(label, library.product)
        if manifest is None:
            continue
        archives = _archives(manifest, request, variant, platform)
        if not archives:
            continue
        url = nvidia.manifest_url(label, library.product)
        source = SourceRef(f"redistrib_{label}.json ({library.title})", url, ("sha256", "size"))
        return [
            probe(
                redist_artifact(
                    archive,
                    nvidia.redist_url(archive.relative_path, library.product),
                    component=library.name,
                    version=version,
                    platform=platform,
                    driver=None,
                    source=source,
                )
            )
            for version, archive in archives
        ]
    raise ArtifactNotFoundError(
        f"no {library.title} release on {nvidia.listing_url(library.product)} has a "
        f"{variant} build for {_requested(request, major, platform)}"
    )


@dataclass(frozen=True, slots=True)
class LibraryRelease:
    """One release of a library product as its manifest states it."""

    label: str
    date: str | None
    version: str | None
    #: CUDA major → the platforms with a build for it
    builds: dict[int, tuple[str, ...]]

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "date": self.date,
            "version": self.version,
            "cuda_majors": {str(major): list(p) for major, p in sorted(self.builds.items())},
        }


@dataclass(frozen=True, slots=True)
class LibraryListing:
    """``cudaup versions --product NAME``'s answer: the product as asked, and its releases."""

    product: str
    releases: Sequence[LibraryRelease]

    def to_json(self) -> dict[str, Any]:
        return {"product": self.product, "releases": [r.to_json() for r in self.releases]}


def library_releases(
    nvidia: NvidiaSource, library: Library, map_all: Callable[..., list[Any]]
) -> list[LibraryRelease]:
    """Every release on the library's redist listing, newest first, with the CUDA majors and
    platforms each one's manifest has builds for (``versions --product``)."""
    if library.product is None:
        raise ArtifactNotFoundError(
            f"NVIDIA publishes no redist manifests for {library.title}: its releases are "
            f"{library.pypi_project.format(major='NN')}'s versions on PyPI"
        )
    product = library.product
    listed = nvidia.listing(product)

    def one(entry: ListedRelease) -> LibraryRelease:
        manifest = nvidia.manifest(entry.label, product)
        version, builds = manifest_builds(manifest, library) if manifest else (None, {})
        return LibraryRelease(entry.label, entry.date, version, builds)

    return map_all(one, listed)


def manifest_builds(
    manifest: Manifest, library: Library
) -> tuple[str | None, dict[int, tuple[str, ...]]]:
    """The library's version in a product manifest and, per CUDA major, the platforms its
    nested ``cudaNN`` archives are built for (a direct archive names no major: not counted)."""
    builds: dict[int, set[str]] = {}
    version = None
    for key in library.redist_components or tuple(manifest.components):
        component = manifest.components.get(key)
        if component is None:
            continue
        version = version or component.version
        for archive in component.archives:
            variant = archive.variant or ""
            if variant.startswith("cuda") and variant[4:].isdigit():
                builds.setdefault(int(variant[4:]), set()).add(archive.platform)
    return version, {major: tuple(sorted(p)) for major, p in builds.items()}


def _release_of(version: Version) -> tuple[int, ...]:
    """A library release as both channels name it: NVIDIA's label (``9.27.0``) and PyPI's
    version (``9.27.0.42``) agree on the first three numbers."""
    return version.release[:3]


def _shown(release: tuple[int, ...]) -> str:
    return ".".join(map(str, release))


@dataclass(frozen=True, slots=True)
class LibraryBuilds:
    """What one source says about one library release: its exact version there and, per
    CUDA major, the platforms it has a build for."""

    channel: str  # "redist" or "pypi"
    url: str
    version: str
    builds: dict[int, tuple[str, ...]]

    def to_json(self) -> dict[str, Any]:
        return {
            "channel": self.channel,
            "url": self.url,
            "version": self.version,
            "cuda_majors": {str(major): list(p) for major, p in sorted(self.builds.items())},
        }


@dataclass(frozen=True, slots=True)
class LibraryCompat:
    """``compat cudnn==9.27``: the CUDA majors one library release is built for, as each
    source that answered states it."""

    request: LibraryRequest
    release: str
    sources: list[LibraryBuilds]
    notes: list[str]

    @property
    def cuda_majors(self) -> list[int]:
        return sorted({major for source in self.sources for major in source.builds})

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": 1,
            "library": self.request.library.name,
            "product": self.request.library.title,
            "request": self.request.text,
            "release": self.release,
            "cuda_majors": [str(major) for major in self.cuda_majors],
            "sources": [source.to_json() for source in self.sources],
            "notes": self.notes,
        }


def _wheels(
    index: PackageIndex, request: LibraryRequest, major: int
) -> tuple[int, list[DistFile], str | None]:
    """The released wheels of the library's project for CUDA ``major`` under the pin; a
    project PyPI lacks has none; an index that cannot be reached says why."""
    try:
        files = index.files(request.library.project(major))
    except RemoteFileMissingError:
        return major, [], None
    except NetworkError as exc:
        return major, [], str(exc)
    wheels = [
        f
        for f in files
        if f.is_wheel
        and not f.yanked
        and f.version is not None
        and not f.version.is_prerelease
        and version_matches(str(f.version), request.version)
    ]
    return major, wheels, None


def library_compat(
    nvidia: NvidiaSource,
    index: PackageIndex,
    request: LibraryRequest,
    majors: Sequence[int],
    map_all: Callable[..., list[Any]],
) -> LibraryCompat:
    """The CUDA majors the newest release under ``request``'s pin is built for: from the
    library's redist manifest (its nested ``cudaNN`` builds) and PyPI's per-major projects
    (``nvidia-cudnn-cu12``, ``-cu13``: one for each of ``majors``).  An unreachable source
    is a note; when no source that answered names the release, the answer is not known
    (exit 21) if one could not be reached, else there is no such release (exit 3)."""
    library = request.library
    unreached: list[str] = []
    listed: list[ListedRelease] | None = None  # None: no listing (NCCL) or not reached
    if library.product is not None:
        try:
            listed = [
                entry
                for entry in nvidia.listing(library.product)
                if version_matches(entry.label, request.version)
            ]
        except NetworkError as exc:
            unreached.append(str(exc))
    wheels = {}
    for major, files, failure in map_all(lambda m: _wheels(index, request, m), list(majors)):
        wheels[major] = files
        if failure:
            unreached.append(failure)
    releases = {_release_of(e.version) for e in listed or []} | {
        _release_of(f.version) for files in wheels.values() for f in files if f.version
    }
    where = ", ".join(
        ([nvidia.listing_url(library.product)] if library.product else [])
        + [index.project_url(library.project(m)) for m in majors]
    )
    wanted = f"{library.title} {request.version + '.x' if request.version else 'release'}"
    if not releases:
        if unreached:
            raise NotKnownError(
                f"no source says which CUDA majors {wanted} is built for: " + "; ".join(unreached)
            )
        raise ReleaseNotFoundError(f"there is no {wanted} on {where}")
    chosen = max(releases)
    sources: list[LibraryBuilds] = []
    notes = [f"not reached: {failure}" for failure in unreached]
    entry = next((e for e in listed or [] if _release_of(e.version) == chosen), None)
    if entry is not None and library.product is not None:
        manifest = nvidia.manifest(entry.label, library.product)
        url = nvidia.manifest_url(entry.label, library.product)
        if manifest is None:
            notes.append(f"{url} is listed but missing (404)")
        else:
            version, builds = manifest_builds(manifest, library)
            sources.append(LibraryBuilds("redist", url, version or entry.label, builds))
    elif library.product is None:
        notes.append(f"NVIDIA publishes no redist manifest for {library.title}: PyPI's alone")
    elif listed is not None:
        listing = nvidia.listing_url(library.product)
        notes.append(f"{listing} lists no {library.title} {_shown(chosen)}: PyPI's alone")
    for major, files in sorted(wheels.items()):
        of_release = [f for f in files if f.version and _release_of(f.version) == chosen]
        if of_release:
            newest = max(f.version for f in of_release if f.version)
            fits = tuple(
                p
                for p in PLATFORMS
                if any(wheel_fits(f.filename, p) for f in of_release if f.version == newest)
            )
            url = index.project_url(library.project(major))
            sources.append(LibraryBuilds("pypi", url, str(newest), {major: fits}))
    result = LibraryCompat(request, _shown(chosen), sources, notes)
    if not result.cuda_majors:
        raise NotKnownError(
            f"no source names a CUDA major {library.title} {result.release} is built for"
            + (f" ({'; '.join(notes)})" if notes else "")
        )
    return result
