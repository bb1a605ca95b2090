"""The shipped snapshot of standalone installers, for air-gapped ``--offline`` use.

Never preferred over a live answer: it is read only when ``--offline`` is
given, every answer from it names the snapshot and its date, and nothing from
it counts as verified (no probe confirmed the file).  It is read like any other
document: every release, file name, URL, size and digest is checked on load, and
a damaged file is refused (:class:`~cudaup.errors.SourceFormatError`), never a crash.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

from packaging.version import Version

from cudaup.config import DEFAULT_PRERELEASE_URL
from cudaup.core.documents import load_json
from cudaup.core.model import Artifact, Release, Resolution, SourceRef
from cudaup.core.names import check_file_url, check_label, check_release, check_size
from cudaup.core.platforms import PLATFORMS, Platform
from cudaup.core.versions import ReleaseRequest, nearest, nvidia_label
from cudaup.errors import (
    ArtifactNotFoundError,
    OfflineError,
    ReleaseNotFoundError,
    SourceFormatError,
)
from cudaup.resolve.choose import jetson_has_no_runfile

MAX_SNAPSHOT_BYTES = 16 * 1024 * 1024
_MD5 = re.compile(r"^[0-9a-f]{32}$")
#: Where NVIDIA publishes developer previews (13.4.0), and nothing else.
PREVIEW_FILES = DEFAULT_PRERELEASE_URL + "/prerelease/"


@dataclass(frozen=True, slots=True)
class OfflineCatalog:
    generated: str
    releases: dict[str, list[dict[str, Any]]]

    @classmethod
    def load(cls) -> OfflineCatalog:
        path = resources.files("cudaup").joinpath("data/snapshot.json")
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise OfflineError(f"cudaup's offline snapshot cannot be read ({exc})") from None
        return cls.parse(data, f"cudaup's offline snapshot {path}")

    @classmethod
    def parse(cls, data: bytes, where: str) -> OfflineCatalog:
        """Check every entry of a snapshot document (see the module docstring)."""
        document = load_json(data, what=where, max_bytes=MAX_SNAPSHOT_BYTES)
        if not isinstance(document, dict) or not isinstance(document.get("releases"), dict):
            raise SourceFormatError(f"{where} has no 'releases' object")
        generated = check_label(document.get("generated"), field="generated", where=where)
        releases: dict[str, list[dict[str, Any]]] = {}
        for label, entries in document["releases"].items():
            check_release(label, field="release", where=where)
            if not isinstance(entries, list):
                raise SourceFormatError(f"{where}: release {label} is not a list")
            releases[label] = [_entry(entry, f"{label} in {where}") for entry in entries]
        return cls(generated=generated, releases=releases)

    def is_preview(self, label: str) -> bool:
        """Whether a release is a developer preview: its installers are on NVIDIA's
        preview host, as 13.4.0's are (the snapshot records no label of its own)."""
        entries = self.releases.get(label, [])
        return bool(entries) and all(str(e["url"]).startswith(PREVIEW_FILES) for e in entries)

    def resolve(self, request: ReleaseRequest, platform: Platform) -> Resolution:
        if platform == "linux-aarch64":
            raise jetson_has_no_runfile()
        versions = [Version(label) for label in self.releases]
        picked = request.pick(versions)
        if not picked:
            close = tuple(str(v) for v in nearest(request, versions))
            hint = f"; nearest: {' and '.join(close)}" if close else ""
            raise ReleaseNotFoundError(
                f"there is no CUDA {request.describe()} in the offline snapshot of {self.generated}{hint}",
                close,
            )
        source = SourceRef(
            f"offline snapshot of {self.generated}", None, ("filename", "url", "md5", "size")
        )
        for version in picked:
            entry = next(
                (e for e in self.releases[str(version)] if e["platform"] == platform), None
            )
            if entry is None:
                if request.exact_label:
                    have = ", ".join(e["platform"] for e in self.releases[str(version)])
                    raise ArtifactNotFoundError(
                        f"CUDA {version} has no standalone installer for {platform}; it has {have}"
                    )
                continue
            driver = entry.get("driver")
            artifact = Artifact(
                filename=entry["filename"],
                url=entry["url"],
                size=entry["size"],
                md5=entry["md5"],
                sha256=None,
                component="cuda_installer",
                component_version=str(version),
                platform=platform,
                channel="installer",
                driver=driver,
                sources=(source,),
            )
            preview = self.is_preview(str(version))
            release = Release(
                str(version), nvidia_label(version, preview=preview), None, driver, preview
            )
            note = (
                f"offline: from cudaup's snapshot of {self.generated}; not probed, "
                "so not verified; newer releases may exist"
            )
            return Resolution(request.text, platform, "installer", release, (artifact,), (note,))
        raise ArtifactNotFoundError(
            f"no release matching {request.describe()} in the offline snapshot has an installer for {platform}"
        )


def _entry(entry: object, where: str) -> dict[str, Any]:
    """One installer of the snapshot, every field checked; the filename is the URL's."""
    if not isinstance(entry, dict):
        raise SourceFormatError(f"{where}: an installer entry is not an object")
    platform = entry.get("platform")
    if platform not in PLATFORMS:
        raise SourceFormatError(f"{where}: unknown platform {str(platform)[:80]!r}")
    url = check_file_url(entry.get("url"), field="url", where=where)
    filename = entry.get("filename")
    if filename != url.rsplit("/", 1)[-1]:
        raise SourceFormatError(f"{where}: filename {str(filename)[:200]!r} is not the URL's")
    md5 = entry.get("md5")
    if not isinstance(md5, str) or not _MD5.match(md5):
        raise SourceFormatError(f"{where}: md5 of {filename} is not 32 lower-case hex digits")
    driver = entry.get("driver")
    return {
        "platform": platform,
        "url": url,
        "filename": filename,
        "size": check_size(entry.get("size"), field="size", where=where, text=False),
        "md5": md5,
        "driver": None if driver is None else check_label(driver, field="driver", where=where),
    }
