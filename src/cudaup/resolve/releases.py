"""Release lists: ``cudaup versions`` in full, and the live list ``plan`` and ``compat`` use.

:func:`list_releases` is built from the redist listing (releases with a
manifest) plus the archive index (previews such as 13.4.0 that have none), each
release's manifest and ``md5sum.txt`` fetched concurrently through the cache.

:func:`live_releases` answers "which releases exist now" from the first source
that can: NVIDIA's redist listing, else the versions of PyPI's ``cuda-toolkit``
meta-package (NVIDIA publishes one per release), else the shipped tables and
snapshot, named with their date.  The answer always says which source it came
from and why the earlier ones were not used.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

from packaging.version import InvalidVersion, Version

from cudaup.config import Settings
from cudaup.core.compat import CompatTable
from cudaup.core.versions import nvidia_label
from cudaup.errors import CudaupError
from cudaup.net.http import HttpClient
from cudaup.resolve.pypi import PackageIndex

if TYPE_CHECKING:
    from cudaup.resolve.resolver import Resolver
    from cudaup.resolve.snapshot import OfflineCatalog

ReleaseSource = Literal["nvidia", "pypi", "snapshot"]
#: NVIDIA's meta-package on PyPI: one version per CUDA release (``13.4.1`` or ``13.4.1.0``).
TOOLKIT_PROJECT = "cuda-toolkit"


@dataclass(frozen=True, slots=True)
class ReleaseSummary:
    version: str
    label: str
    date: str | None
    driver: str | None
    installer_platforms: tuple[str, ...]
    #: None: not known (the offline snapshot lists installers only)
    redist_platforms: tuple[str, ...] | None
    preview: bool

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class ReleaseListing:
    """``cudaup versions``'s answer: the releases, newest first, and (``--offline``) the
    date of the shipped snapshot they come from."""

    releases: Sequence[ReleaseSummary]
    snapshot: str | None = None

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {"releases": [r.to_json() for r in self.releases]}
        if self.snapshot is not None:
            document["snapshot"] = self.snapshot
        return document


def list_releases(resolver: Resolver, *, include_index: bool = True) -> list[ReleaseSummary]:
    """All known releases, newest first."""
    from cudaup.resolve.choose import installer_platforms  # noqa: PLC0415 - see live_releases

    labels = [str(v) for v in resolver.listed_versions()]
    if include_index:
        known = set(labels)
        for entry in resolver.nvidia.archive_index():
            if entry.label not in known:
                labels.append(entry.label)
                known.add(entry.label)
    facts = resolver._map(lambda label: resolver.facts(label, page=False), labels)
    summaries = []
    for item in facts:
        if item.empty:
            continue
        release = item.release()
        summaries.append(
            ReleaseSummary(
                version=item.label,
                label=nvidia_label(Version(item.label), preview=item.preview),
                date=release.date,
                driver=release.driver,
                installer_platforms=tuple(installer_platforms(item)),
                redist_platforms=item.manifest.platforms if item.manifest else (),
                preview=item.preview,
            )
        )
    return sorted(summaries, key=lambda s: Version(s.version), reverse=True)


def offline_summaries(snapshot: OfflineCatalog) -> list[ReleaseSummary]:
    """The offline snapshot's releases, newest first, in the same shape as the live list;
    what it does not record (dates, redist platforms) is None, never a guess."""
    summaries = []
    for label, entries in snapshot.releases.items():
        drivers = {str(e["driver"]) for e in entries if e.get("driver")}
        summaries.append(
            ReleaseSummary(
                version=label,
                label=nvidia_label(Version(label), preview=snapshot.is_preview(label)),
                date=None,
                driver=drivers.pop() if len(drivers) == 1 else None,
                installer_platforms=tuple(sorted(str(e["platform"]) for e in entries)),
                redist_platforms=None,
                preview=snapshot.is_preview(label),
            )
        )
    return sorted(summaries, key=lambda s: Version(s.version), reverse=True)


def bundled_drivers(resolver: Resolver, known: set[str]) -> dict[str, str]:
    """The driver each listed release bundles (``nvidia_driver`` in its manifest),
    for the releases not in ``known``: how ``compat`` learns about a release
    published after cudaup's tables were made."""
    labels = [str(v) for v in resolver.listed_versions() if str(v) not in known]
    manifests = resolver._map(resolver.nvidia.manifest, labels)
    return {
        label: manifest.driver_version
        for label, manifest in zip(labels, manifests, strict=True)
        if manifest is not None and manifest.driver_version
    }


@dataclass(frozen=True, slots=True)
class LiveReleases:
    """The CUDA releases that exist, newest first, and where that list came from."""

    versions: tuple[str, ...]
    source: ReleaseSource
    described: str
    notes: tuple[str, ...] = ()

    def newest(self, line: tuple[int, int]) -> str | None:
        return next((v for v in self.versions if _line(v) == line), None)

    def lines(self) -> list[tuple[int, int]]:
        return sorted({_line(v) for v in self.versions}, reverse=True)

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "described": self.described, "notes": list(self.notes)}


def _line(release: str) -> tuple[int, int]:
    parts = Version(release).release
    return parts[0], parts[1] if len(parts) > 1 else 0


def toolkit_release(version: Version) -> str | None:
    """``cuda-toolkit`` 13.4.1.0 → ``13.4.1``; pre-releases and placeholders → None."""
    if version.is_prerelease or version.is_devrelease or version.local or len(version.release) < 2:
        return None
    if version.release[0] < 1:
        return None  # 0.0.0a0: a name reservation, not a release
    parts = (*version.release[:3], 0, 0)[:3]
    return ".".join(str(p) for p in parts)


def pypi_toolkit_releases(http: HttpClient, index_url: str) -> list[str]:
    """Every final release PyPI's ``cuda-toolkit`` has a file for, newest first.

    Versions come from file names (never the index's ``versions`` array, which PyPI
    leaves incomplete); yanked files do not count."""
    found: set[str] = set()
    for file in PackageIndex(http, index_url).files(TOOLKIT_PROJECT):
        if file.yanked or file.version is None:
            continue
        release = toolkit_release(file.version)
        if release is not None:
            found.add(release)
    return sorted(found, key=Version, reverse=True)


def live_releases(settings: Settings, http: HttpClient) -> LiveReleases:
    """The release list from the first source that answers (see the module docstring)."""
    notes: list[str] = []
    if settings.offline:
        notes.append("--offline: the release list was not fetched")
    else:
        # Imported here: a plan whose release list is remembered (plan/listing.py) needs
        # none of NVIDIA's parsers, ~10 modules of a warm plan's start.
        from cudaup.resolve.resolver import Resolver  # noqa: PLC0415

        try:
            listed = [str(v) for v in Resolver(settings, http).listed_versions()]
        except CudaupError as exc:
            notes.append(f"NVIDIA's release listing could not be read ({exc})")
        else:
            if listed:
                ordered = tuple(sorted(set(listed), key=Version, reverse=True))
                return LiveReleases(ordered, "nvidia", "NVIDIA's redist listing", tuple(notes))
            notes.append("NVIDIA's release listing named no release")
        try:
            from_pypi = pypi_toolkit_releases(http, settings.pypi_url)
        except CudaupError as exc:
            notes.append(f"PyPI's {TOOLKIT_PROJECT} versions could not be read ({exc})")
        else:
            if from_pypi:
                described = f"the versions of {TOOLKIT_PROJECT} on {settings.pypi_url}"
                return LiveReleases(tuple(from_pypi), "pypi", described, tuple(notes))
            notes.append(f"{settings.pypi_url} lists no {TOOLKIT_PROJECT} release")
    return snapshot_releases(notes)


def snapshot_releases(notes: list[str] | None = None) -> LiveReleases:
    """The releases cudaup's shipped tables and snapshot know, named with the snapshot's date."""
    known: set[str] = set()
    for release in CompatTable.load().releases():
        try:
            known.add(str(Version(release)))
        except InvalidVersion:
            continue
    from cudaup.resolve.snapshot import OfflineCatalog  # noqa: PLC0415 - see live_releases

    generated = OfflineCatalog.load().generated
    return LiveReleases(
        tuple(sorted(known, key=Version, reverse=True)),
        "snapshot",
        f"cudaup's shipped tables and snapshot of {generated} (may be stale)",
        tuple(notes or ()),
    )


def learn_releases(table: CompatTable, live: LiveReleases) -> CompatTable:
    """``table`` plus the live releases it does not know, with unknown toolkit drivers."""
    newer = [v for v in live.versions if v not in table.drivers]
    return table.with_releases(newer, live.described) if newer else table
