"""A library asked for beside a toolkit (``cudnn``, ``nccl==2.30``) to exact artifacts.

The build is always the one for the toolkit's CUDA major; by default the newest release
of the library that has one for the platform, else the newest under the user's prefix pin.
The redist channel reads the library's own manifests (``/compute/<product>/redist/``), the
pypi channel the library's per-major project; every artifact carries its checksum and the
sources that vouched for it, as a toolkit component's does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from packaging.requirements import Requirement

from cudaup.core.libraries import Library, LibraryRequest, version_matches
from cudaup.core.model import Artifact, SourceRef
from cudaup.core.platforms import Platform
from cudaup.errors import ArtifactNotFoundError
from cudaup.nvidia.listing import ListedRelease
from cudaup.nvidia.manifest import Archive, Manifest
from cudaup.resolve.choose import choose_wheel, wheel_artifact
from cudaup.resolve.pypi import PackageIndex
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
                Artifact(
                    filename=archive.filename,
                    url=nvidia.redist_url(archive.relative_path, library.product),
                    size=archive.size,
                    md5=archive.md5,
                    sha256=archive.sha256,
                    component=library.name,
                    component_version=version,
                    platform=platform,
                    channel="redist",
                    driver=None,
                    sources=(source,),
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
        builds: dict[int, set[str]] = {}
        version = None
        if manifest is not None:
            keys = library.redist_components or tuple(manifest.components)
            for key in keys:
                component = manifest.components.get(key)
                if component is None:
                    continue
                version = version or component.version
                for archive in component.archives:
                    variant = archive.variant or ""
                    if variant.startswith("cuda") and variant[4:].isdigit():
                        builds.setdefault(int(variant[4:]), set()).add(archive.platform)
        found = {major: tuple(sorted(p)) for major, p in builds.items()}
        return LibraryRelease(entry.label, entry.date, version, found)

    return map_all(one, listed)
