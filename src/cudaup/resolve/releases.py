"""``cudaup versions``: every release with its date, bundled driver and platforms.

Built from the redist listing (releases with a manifest) plus the archive
index (previews such as 13.4.0 that have none), each release's manifest and
``md5sum.txt`` fetched concurrently through the cache.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from packaging.version import Version

from cudaup.core.versions import nvidia_label
from cudaup.resolve.choose import installer_platforms
from cudaup.resolve.resolver import Resolver
from cudaup.resolve.snapshot import Snapshot


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


def list_releases(resolver: Resolver, *, include_index: bool = True) -> list[ReleaseSummary]:
    """All known releases, newest first."""
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


def snapshot_releases(snapshot: Snapshot) -> list[ReleaseSummary]:
    """The offline snapshot's releases, newest first, in the same shape as the live list;
    what it does not record (dates, redist platforms) is None, never a guess."""
    summaries = []
    for label, entries in snapshot.releases.items():
        drivers = {str(e["driver"]) for e in entries if e.get("driver")}
        summaries.append(
            ReleaseSummary(
                version=label,
                label=nvidia_label(Version(label)),
                date=None,
                driver=drivers.pop() if len(drivers) == 1 else None,
                installer_platforms=tuple(sorted(str(e["platform"]) for e in entries)),
                redist_platforms=None,
                preview=False,
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
