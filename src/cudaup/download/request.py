"""What to download and what happened: requests, progress events, results."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from cudaup.errors import UsageError

if TYPE_CHECKING:
    from cudaup.core.model import Artifact


@dataclass(frozen=True, slots=True)
class DownloadRequest:
    url: str
    filename: str
    size: int | None = None
    sha256: str | None = None
    md5: str | None = None
    #: who said the checksum: a source cudaup read, or the user (``--sha256``/``--md5``)
    checksum_given: bool = False

    @classmethod
    def from_artifact(cls, artifact: Artifact) -> DownloadRequest:
        return cls(artifact.url, artifact.filename, artifact.size, artifact.sha256, artifact.md5)

    @classmethod
    def from_url(
        cls, url: str, *, sha256: str | None = None, md5: str | None = None
    ) -> DownloadRequest:
        name = url.split("?", 1)[0].split("#", 1)[0].rstrip("/").rsplit("/", 1)[-1]
        if not name:
            raise UsageError(f"{url} names no file; give a URL that ends with a file name")
        for value, length, flag in ((sha256, 64, "--sha256"), (md5, 32, "--md5")):
            if value is not None and not re.fullmatch(rf"[0-9a-fA-F]{{{length}}}", value):
                raise UsageError(f"{flag} takes {length} hex digits, not {value!r}")
        return cls(
            url,
            name,
            None,
            sha256.lower() if sha256 else None,
            md5.lower() if md5 else None,
            checksum_given=bool(sha256 or md5),
        )

    @property
    def checksum(self) -> tuple[str, str] | None:
        """The strongest authoritative checksum: ``("sha256", hex)`` or ``("md5", hex)``."""
        if self.sha256:
            return "sha256", self.sha256
        if self.md5:
            return "md5", self.md5
        return None


@dataclass(frozen=True, slots=True)
class ProgressEvent:
    filename: str
    #: "verifying": every byte is on disk, the hash is behind; ``done`` counts the bytes
    #: hashed so far (until "done", the verdict, or the error).
    #: "unpacked" comes from installs: the file's archive is extracted too.
    #: "discarded": the download stopped and its partial file was deleted, because
    #: nothing could resume it (a server that ignores ranges); a later run starts over.
    kind: Literal["start", "advance", "verifying", "notice", "done", "unpacked", "discarded"]
    done: int
    total: int | None
    message: str | None = None


Progress = Callable[[ProgressEvent], None]


@dataclass(frozen=True, slots=True)
class DownloadResult:
    path: Path
    url: str
    size: int
    algorithm: str | None
    digest: str | None
    resumed_from: int
    fetched: int
    seconds: float
    skipped: bool
    connections: int

    def to_json(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "url": self.url,
            "size": self.size,
            "checksum": {"algorithm": self.algorithm, "digest": self.digest}
            if self.algorithm
            else None,
            "verified": self.algorithm is not None,
            "resumed_from": self.resumed_from,
            "fetched": self.fetched,
            "seconds": round(self.seconds, 3),
            "skipped": self.skipped,
            "connections": self.connections,
        }


def emit(progress: Progress | None, event: ProgressEvent) -> None:
    if progress is not None:
        progress(event)


def notice(
    progress: Progress | None,
    request: DownloadRequest,
    total: int | None,
    message: str,
    *,
    done: int = 0,
) -> None:
    """Tell the progress display something about ``request`` in words."""
    emit(progress, ProgressEvent(request.filename, "notice", done, total, message))
