"""Redist manifests ``redistrib_X.Y.Z.json``: every component archive of a release.

Format (verified on real 12.8.0 and 13.0.0 manifests)::

    {"release_date": "2025-08-04", "release_label": "13.0.0", "release_product": "cuda",
     "cuda_nvcc": {"name": ..., "license": ..., "license_path": ..., "version": "13.0.48",
                   "linux-x86_64": {"relative_path": ..., "sha256": ..., "md5": ..., "size": "26732376"}}}

Older manifests lack ``release_label``/``release_product``/``license_path``;
cuDNN-style manifests nest one more level of variants under a platform.  Any
key with a ``-`` (or ``source``) is a platform, as in NVIDIA's own parser.
Hostile or broken data is rejected: duplicate keys, ``..``/absolute/URL paths,
malformed digests or sizes, and documents over 10 MB.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from cudaup.errors import SourceFormatError

MAX_MANIFEST_BYTES = 10 * 1024 * 1024
_SHA256 = re.compile(r"^[0-9a-fA-F]{64}$")
_MD5 = re.compile(r"^[0-9a-fA-F]{32}$")
_COMPONENT_FIELDS = {"name", "license", "license_path", "version"}
#: Components that belong to the driver branch, not the toolkit: cudaup never installs these.
DRIVER_COMPONENTS = frozenset(
    {"nvidia_driver", "driver_assistant", "fabricmanager", "imex", "libnvidia_nscq", "nvidia_fs"}
)


@dataclass(frozen=True, slots=True)
class Archive:
    """One downloadable archive of a component for one platform (and variant)."""

    component: str
    platform: str
    relative_path: str
    sha256: str
    md5: str | None
    size: int
    variant: str | None = None

    @property
    def filename(self) -> str:
        return self.relative_path.rsplit("/", 1)[-1]


@dataclass(frozen=True, slots=True)
class Component:
    key: str
    name: str
    license: str | None
    version: str
    archives: tuple[Archive, ...]

    def archive_for(self, platform: str, variant: str | None = None) -> Archive | None:
        for archive in self.archives:
            if archive.platform == platform and (variant is None or archive.variant == variant):
                return archive
        return None

    @property
    def platforms(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(a.platform for a in self.archives))


@dataclass(frozen=True, slots=True)
class Manifest:
    label: str | None
    date: str | None
    product: str | None
    components: dict[str, Component] = field(default_factory=dict)

    @property
    def driver_version(self) -> str | None:
        """The driver the release bundles (= the driver in its runfile name)."""
        driver = self.components.get("nvidia_driver")
        return driver.version if driver else None

    @property
    def platforms(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for component in self.components.values():
            if component.key not in DRIVER_COMPONENTS:
                seen.update(dict.fromkeys(component.platforms))
        return tuple(seen)


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise SourceFormatError(f"duplicate key {key!r} in the redist manifest")
        result[key] = value
    return result


def _is_platform_key(key: str) -> bool:
    return ("-" in key or key == "source") and not key.endswith("_variant")


def _check_relative_path(path: str, where: str) -> str:
    if (
        not path
        or path.startswith(("/", "\\"))
        or "://" in path
        or re.match(r"^[A-Za-z]:", path)
        or any(part in {"..", ""} for part in path.replace("\\", "/").split("/"))
    ):
        raise SourceFormatError(f"unsafe relative_path {path!r} for {where} in the redist manifest")
    return path


def _parse_archive(component: str, platform: str, data: Any, variant: str | None) -> Archive:
    where = f"{component} {platform}" + (f" {variant}" if variant else "")
    if not isinstance(data, dict):
        raise SourceFormatError(f"{where}: expected an object in the redist manifest")
    relative_path = data.get("relative_path")
    sha256 = data.get("sha256")
    md5 = data.get("md5")
    size = data.get("size")
    if not isinstance(relative_path, str):
        raise SourceFormatError(f"{where}: missing relative_path in the redist manifest")
    if not isinstance(sha256, str) or not _SHA256.match(sha256):
        raise SourceFormatError(f"{where}: missing or malformed sha256 in the redist manifest")
    if md5 is not None and (not isinstance(md5, str) or not _MD5.match(md5)):
        raise SourceFormatError(f"{where}: malformed md5 in the redist manifest")
    if isinstance(size, bool) or not isinstance(size, (str, int)) or not str(size).isdigit():
        raise SourceFormatError(f"{where}: missing or malformed size in the redist manifest")
    return Archive(
        component=component,
        platform=platform,
        relative_path=_check_relative_path(relative_path, where),
        sha256=sha256.lower(),
        md5=md5.lower() if isinstance(md5, str) else None,
        size=int(size),
        variant=variant,
    )


def parse_manifest(data: bytes) -> Manifest:
    """Parse one ``redistrib_X.Y.Z.json`` document."""
    if len(data) > MAX_MANIFEST_BYTES:
        raise SourceFormatError("the redist manifest is larger than 10 MB; refusing to parse it")
    if data.startswith(b"\xef\xbb\xbf"):
        raise SourceFormatError("the redist manifest starts with a byte-order mark")
    try:
        document = json.loads(data, object_pairs_hook=_reject_duplicates)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SourceFormatError(f"the redist manifest is not valid JSON ({exc})") from None
    if not isinstance(document, dict):
        raise SourceFormatError("the redist manifest is not a JSON object")
    components: dict[str, Component] = {}
    for key, value in document.items():
        if not isinstance(value, dict):
            continue  # release_date, release_label, release_product, and future scalars
        version = value.get("version")
        if not isinstance(version, str):
            raise SourceFormatError(f"component {key!r} has no version in the redist manifest")
        archives: list[Archive] = []
        for platform, entry in value.items():
            if platform in _COMPONENT_FIELDS or not _is_platform_key(platform):
                continue
            if isinstance(entry, dict) and "relative_path" not in entry:
                # cuDNN-style variants: {"cuda12": {relative_path, ...}, ...}
                for variant, nested in entry.items():
                    archives.append(_parse_archive(key, platform, nested, variant))
            else:
                archives.append(_parse_archive(key, platform, entry, None))
        name = value.get("name")
        license_name = value.get("license")
        components[key] = Component(
            key=key,
            name=name if isinstance(name, str) else key,
            license=license_name if isinstance(license_name, str) else None,
            version=version,
            archives=tuple(archives),
        )
    label, date, product = (
        document.get(k) for k in ("release_label", "release_date", "release_product")
    )
    return Manifest(
        label=label if isinstance(label, str) else None,
        date=date if isinstance(date, str) else None,
        product=product if isinstance(product, str) else None,
        components=components,
    )
