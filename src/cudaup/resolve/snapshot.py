"""The shipped snapshot of standalone installers, for air-gapped ``--offline`` use.

Never preferred over a live answer: it is read only when ``--offline`` is
given, every answer from it names the snapshot and its date, and nothing from
it counts as verified (no probe confirmed the file).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

from packaging.version import Version

from cudaup.core.model import Artifact, Release, Resolution, SourceRef
from cudaup.core.platforms import Platform
from cudaup.core.versions import ReleaseRequest, nearest, nvidia_label
from cudaup.errors import ArtifactNotFoundError, OfflineError, ReleaseNotFoundError
from cudaup.resolve.choose import JETSON_NO_RUNFILE


@dataclass(frozen=True, slots=True)
class Snapshot:
    generated: str
    releases: dict[str, list[dict[str, Any]]]

    @classmethod
    def load(cls) -> Snapshot:
        try:
            text = resources.files("cudaup").joinpath("data/snapshot.json").read_text()
            data = json.loads(text)
        except (OSError, ValueError) as exc:
            raise OfflineError(f"cudaup's offline snapshot cannot be read ({exc})") from None
        return cls(generated=data["generated"], releases=data["releases"])

    def resolve(self, request: ReleaseRequest, platform: Platform) -> Resolution:
        if platform == "linux-aarch64":
            raise ArtifactNotFoundError(JETSON_NO_RUNFILE)
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
            release = Release(str(version), nvidia_label(version), None, driver)
            note = (
                f"offline: from cudaup's snapshot of {self.generated}; not probed, "
                "so not verified; newer releases may exist"
            )
            return Resolution(request.text, platform, "installer", release, (artifact,), (note,))
        raise ArtifactNotFoundError(
            f"no release matching {request.describe()} in the offline snapshot has an installer for {platform}"
        )
