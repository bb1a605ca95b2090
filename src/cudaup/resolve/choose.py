"""Choosing artifacts, purely: fetched documents in, vouched-for candidates out.

Every ``choose_*`` function takes parsed documents (manifests, ``md5sum.txt``,
archive pages, PyPI file lists) and returns what a release offers for a
platform, naming every source that vouched for each fact.  Nothing here does
I/O; :class:`cudaup.resolve.resolver.Resolver` fetches and calls these.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from packaging.requirements import Requirement
from packaging.version import Version

from cudaup.core import components as comp
from cudaup.core.model import Artifact, Release, SourceRef
from cudaup.core.platforms import Platform, describe
from cudaup.core.versions import nvidia_label
from cudaup.core.wheels import marker_environment, wheel_fits
from cudaup.errors import (
    ArtifactNotFoundError,
    IntegrityError,
)
from cudaup.nvidia.installers import classify_installer
from cudaup.resolve.pypi import DistFile

if TYPE_CHECKING:  # parsed where NVIDIA is asked (resolve.sources): PyPI's answers need neither
    from cudaup.nvidia.archive_page import ArchivePage
    from cudaup.nvidia.manifest import Archive, Manifest


# ----------------------------------------------------------------------------
# Facts about one release, as fetched
# ----------------------------------------------------------------------------
def jetson_has_no_runfile() -> ArtifactNotFoundError:
    """The answer to a runfile asked for linux-aarch64, with the ways that exist."""
    return ArtifactNotFoundError(
        "Jetson (linux-aarch64) never had a runfile installer; from 13.0 Jetson Thor uses "
        "linux-sbsa",
        hint="--channel redist installs its archives (up to 12.x), or use JetPack's L4T "
        "repositories",
    )


@dataclass(frozen=True, slots=True)
class ReleaseFacts:
    label: str
    manifest: Manifest | None
    manifest_url: str
    md5sums: dict[str, str] | None
    md5sum_url: str
    page: ArchivePage | None
    page_url: str
    listed_date: str | None = None

    @property
    def empty(self) -> bool:
        return self.manifest is None and self.md5sums is None and self.page is None

    @property
    def preview(self) -> bool:
        title = (self.page.title or "") if self.page else ""
        return "preview" in title.lower() or (self.manifest is None and self.md5sums is None)

    def release(self, driver: str | None = None) -> Release:
        version = Version(self.label)
        date = (self.manifest.date if self.manifest else None) or self.listed_date
        bundled = driver or (self.manifest.driver_version if self.manifest else None)
        return Release(
            self.label, nvidia_label(version, preview=self.preview), date, bundled, self.preview
        )


@dataclass(frozen=True, slots=True)
class InstallerChoice:
    """The standalone installer a release offers for a platform, before probing."""

    filename: str
    url: str
    md5: str | None
    size: int | None
    driver: str | None
    sources: tuple[SourceRef, ...]
    notes: tuple[str, ...]


def installer_platforms(facts: ReleaseFacts) -> list[Platform]:
    """Platforms for which any source lists a standalone installer."""
    found: dict[Platform, None] = {}
    if facts.page:
        found.update(dict.fromkeys(facts.page.platforms))
    for name in facts.md5sums or {}:
        info = classify_installer(name)
        if info and not info.network and info.version in {None, facts.label}:
            found[info.platform] = None
    return list(found)


@dataclass(frozen=True, slots=True)
class _Offered:
    """One installer file a source names, with what that source says of it."""

    filename: str
    url: str
    md5: str | None = None
    size: int | None = None


def choose_installer(
    facts: ReleaseFacts, platform: Platform, local_dir_url: str
) -> InstallerChoice:
    """Pick the standalone installer of ``facts`` for ``platform`` (pure).

    The archive page names the URL per platform; ``md5sum.txt`` names every
    file with its md5.  Where the page is missing, a file that ``md5sum.txt``
    lists is looked for in NVIDIA's documented ``local_installers/`` directory
    (the probe must then confirm it).  Raises when no source lists one.
    """
    if platform == "linux-aarch64":
        raise jetson_has_no_runfile()
    notes: list[str] = []
    sources: list[SourceRef] = []
    listed = _listed_installers(facts, platform)
    offered = _from_page(facts, platform, listed, sources, notes) or _from_md5sums(
        listed, platform, local_dir_url, notes
    )
    if offered is None:
        raise _no_installer(facts, platform)
    md5 = _agreed_md5(facts, offered, listed, sources)
    driver = _installer_driver(facts, offered.filename, platform, sources, notes)
    return InstallerChoice(
        offered.filename, offered.url, md5, offered.size, driver, tuple(sources), tuple(notes)
    )


def _listed_installers(facts: ReleaseFacts, platform: Platform) -> dict[str, str]:
    """The local installers for ``platform`` that ``md5sum.txt`` lists, with their md5."""
    return {
        name: digest
        for name, digest in (facts.md5sums or {}).items()
        if (info := classify_installer(name))
        and info.platform == platform
        and not info.network
        and info.version in {None, facts.label}
    }


def _from_page(
    facts: ReleaseFacts,
    platform: Platform,
    listed: Mapping[str, str],
    sources: list[SourceRef],
    notes: list[str],
) -> _Offered | None:
    """The download-archive page's installer for ``platform`` (one ``md5sum.txt`` lists
    when it offers several), or ``None`` when there is no page or it offers none."""
    offered = facts.page.for_platform(platform) if facts.page else []
    if not offered:
        return None
    pick = next((d for d in offered if d.filename in listed), offered[0])
    vouches = ["url"] + (["md5"] if pick.md5 else []) + (["size"] if pick.size else [])
    sources.append(SourceRef("download-archive page", facts.page_url, tuple(vouches)))
    if len(offered) > 1:
        others = ", ".join(d.filename for d in offered if d is not pick)
        notes.append(f"the page also offers {others} for {platform}")
    return _Offered(pick.filename, pick.url, pick.md5, pick.size)


def _from_md5sums(
    listed: Mapping[str, str], platform: Platform, local_dir_url: str, notes: list[str]
) -> _Offered | None:
    """Without a page: ``md5sum.txt``'s file in NVIDIA's ``local_installers/``, which the
    probe must confirm; ``None`` when it lists none."""
    if not listed:
        return None
    if len(listed) > 1:
        notes.append(f"md5sum.txt lists several {platform} installers: {', '.join(sorted(listed))}")
    filename = sorted(listed)[0]
    notes.append(
        "no download-archive page; the URL is md5sum.txt's file name in NVIDIA's "
        "local_installers/ directory, to be confirmed by the probe"
    )
    return _Offered(filename, local_dir_url + filename)


def _no_installer(facts: ReleaseFacts, platform: Platform) -> ArtifactNotFoundError:
    have = installer_platforms(facts)
    what = f"CUDA {facts.label}" + (" (a developer preview)" if facts.preview else "")
    elsewhere = f"; it has installers for {', '.join(have)}" if have else ""
    return ArtifactNotFoundError(
        f"{what} has no standalone installer for {platform} ({describe(platform)}){elsewhere}"
    )


def _agreed_md5(
    facts: ReleaseFacts, offered: _Offered, listed: Mapping[str, str], sources: list[SourceRef]
) -> str | None:
    """The installer's md5: ``md5sum.txt``'s, else the page's; refused when the two disagree."""
    listed_md5 = listed.get(offered.filename) or (facts.md5sums or {}).get(offered.filename)
    if listed_md5:
        sources.append(SourceRef("md5sum.txt", facts.md5sum_url, ("filename", "md5")))
    if listed_md5 and offered.md5 and listed_md5 != offered.md5:
        raise IntegrityError(
            f"md5sum.txt and the download-archive page disagree on {offered.filename}'s md5 "
            f"({listed_md5} vs {offered.md5}); refusing to guess"
        )
    return listed_md5 or offered.md5


def _installer_driver(
    facts: ReleaseFacts,
    filename: str,
    platform: Platform,
    sources: list[SourceRef],
    notes: list[str],
) -> str | None:
    """The driver the installer bundles: the manifest's on Linux (it says so for the
    release), else the one the file's name carries; a disagreement is noted."""
    info = classify_installer(filename)
    name_driver = info.driver if info else None
    manifest_driver = facts.manifest.driver_version if facts.manifest else None
    if not (platform.startswith("linux-") and manifest_driver):
        return name_driver
    sources.append(SourceRef(f"redistrib_{facts.label}.json", facts.manifest_url, ("driver",)))
    if name_driver and name_driver != manifest_driver:
        notes.append(
            f"{filename} names driver {name_driver} but the manifest bundles {manifest_driver}"
        )
    return manifest_driver


def choose_redist(
    manifest: Manifest,
    platform: Platform,
    wanted: Sequence[str] | None,
    archive_url: Callable[[str], str],
    manifest_url: str,
    *,
    closure: bool = False,
) -> list[Artifact]:
    """The manifest's archives for ``platform`` (pure); all toolkit components by default.

    With ``closure``, each wanted component brings what it needs (nvcc: crt, nvvm,
    cudart), as far as this release has it for this platform.
    """
    from cudaup.nvidia.manifest import DRIVER_COMPONENTS  # noqa: PLC0415 - see the imports

    label = manifest.label or "?"
    available = {k: c for k, c in manifest.components.items() if c.archive_for(platform)}
    if wanted is not None and closure:
        wanted = comp.with_closure(wanted, available)
    if wanted is None:
        keys = [k for k in available if k not in DRIVER_COMPONENTS]
    else:
        keys = []
        for name in wanted:
            key = comp.nvidia_name(name)
            if key not in manifest.components:
                raise comp.unknown_component(name, manifest.components, f"CUDA {label}'s manifest")
            if key not in available:
                have = ", ".join(manifest.components[key].platforms) or "no platform"
                hint = ""
                if platform == "linux-aarch64" and label.startswith("13"):
                    hint = "; from 13.0 Jetson (Thor) uses the linux-sbsa archives"
                raise ArtifactNotFoundError(
                    f"CUDA {label} has no {key} archive for {platform} (only {have}){hint}"
                )
            keys.append(key)
    if not keys:
        raise ArtifactNotFoundError(f"CUDA {label} has no redist archives for {platform}")
    source = SourceRef(f"redistrib_{label}.json", manifest_url, ("url", "size", "sha256", "md5"))
    artifacts: list[Artifact] = []
    for key in keys:
        component = manifest.components[key]
        archive = component.archive_for(platform)
        assert archive is not None
        artifacts.append(
            redist_artifact(
                archive,
                archive_url(archive.relative_path),
                component=key,
                version=component.version,
                platform=platform,
                driver=manifest.driver_version,
                source=source,
            )
        )
    return artifacts


def redist_artifact(
    archive: Archive,
    url: str,
    *,
    component: str,
    version: str,
    platform: Platform,
    driver: str | None,
    source: SourceRef,
) -> Artifact:
    """The artifact for an archive a redist manifest (the toolkit's or a library's) lists:
    its size and digests as the manifest states them, at ``url``."""
    return Artifact(
        filename=archive.filename,
        url=url,
        size=archive.size,
        md5=archive.md5,
        sha256=archive.sha256,
        component=component,
        component_version=version,
        platform=platform,
        channel="redist",
        driver=driver,
        sources=(source,),
    )


def choose_wheel(
    files: Iterable[DistFile], requirement: Requirement, platform: Platform
) -> DistFile | None:
    """Newest wheel of the pinned versions (prefix pins such as ``==13.0.88.*``) for a platform."""
    best: tuple[Version, str, DistFile] | None = None
    for file in files:
        version = file.version
        if not file.is_wheel or file.yanked or version is None:
            continue
        if not requirement.specifier.contains(version, prereleases=True):
            continue
        if not wheel_fits(file.filename, platform):
            continue
        key = (version, file.filename, file)
        if best is None or (key[0], key[1]) > (best[0], best[1]):
            best = key
    return best[2] if best else None


def wheel_artifact(
    wheel: DistFile, component: str, platform: Platform, sources: Sequence[SourceRef]
) -> Artifact:
    """The artifact for a wheel the simple API listed (its URL, size and sha256)."""
    return Artifact(
        filename=wheel.filename,
        url=wheel.url,
        size=wheel.size,
        md5=None,
        sha256=wheel.sha256,
        component=component,
        component_version=str(wheel.version),
        platform=platform,
        channel="pypi",
        driver=None,
        sources=tuple(sources),
    )


def requirements_for(
    requires: Iterable[Requirement], extras: Iterable[str], platform: Platform
) -> list[Requirement]:
    """The requirements a meta-package pulls in for ``extras`` on ``platform``."""
    environment = marker_environment(platform)
    chosen: dict[str, Requirement] = {}
    for requirement in requires:
        if requirement.marker is None or any(
            requirement.marker.evaluate({**environment, "extra": extra}) for extra in extras
        ):
            chosen.setdefault(requirement.name, requirement)
    return list(chosen.values())
