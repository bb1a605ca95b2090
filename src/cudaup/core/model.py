"""The answer types of resolution, and their stable JSON shape (``schema: 1``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from cudaup.core.platforms import Platform

Channel = Literal["installer", "redist", "pypi"]
SCHEMA = 1


@dataclass(frozen=True, slots=True)
class SourceRef:
    """One source that vouched for part of an answer, and what it vouched for."""

    kind: str
    url: str | None
    vouches: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "url": self.url, "vouches": list(self.vouches)}


@dataclass(frozen=True, slots=True)
class Release:
    version: str
    label: str
    date: str | None
    driver: str | None = None
    preview: bool = False

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Artifact:
    """One file to download, with everything known about it and who said so."""

    filename: str
    url: str
    size: int | None
    md5: str | None
    sha256: str | None
    component: str
    component_version: str | None
    platform: Platform
    channel: Channel
    driver: str | None
    sources: tuple[SourceRef, ...]
    verified: bool = False
    probed: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "filename": self.filename,
            "url": self.url,
            "size": self.size,
            "md5": self.md5,
            "sha256": self.sha256,
            "component": self.component,
            "component_version": self.component_version,
            "platform": self.platform,
            "channel": self.channel,
            "driver": self.driver,
            "sources": [s.to_json() for s in self.sources],
            "probed": self.probed,
            "verified": self.verified,
        }


@dataclass(frozen=True, slots=True)
class Resolution:
    request: str
    platform: Platform
    channel: Channel
    release: Release
    artifacts: tuple[Artifact, ...]
    notes: tuple[str, ...] = field(default=())

    @property
    def verified(self) -> bool:
        return bool(self.artifacts) and all(a.verified for a in self.artifacts)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "request": self.request,
            "platform": self.platform,
            "channel": self.channel,
            "release": self.release.to_json(),
            "artifacts": [a.to_json() for a in self.artifacts],
            "verified": self.verified,
            "notes": list(self.notes),
        }
