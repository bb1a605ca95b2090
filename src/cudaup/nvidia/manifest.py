"""Redist manifests ``redistrib_X.Y.Z.json``: every component archive of a release.

Format (verified on real 12.8.0 and 13.0.0 manifests)::

    {"release_date": "2025-08-04", "release_label": "13.0.0", "release_product": "cuda",
     "cuda_nvcc": {"name": ..., "license": ..., "license_path": ..., "version": "13.0.48",
                   "linux-x86_64": {"relative_path": ..., "sha256": ..., "md5": ..., "size": "26732376"}}}

Older manifests lack ``release_label``/``release_product``/``license_path``;
cuDNN-style manifests nest one more level of variants under a platform.  Any
key with a ``-`` (or ``source``) is a platform, as in NVIDIA's own parser.
Hostile or broken data is rejected (:mod:`cudaup.core.names` checks every
name): duplicate keys, component keys that are not plain names, ``..``,
absolute, backslash or URL paths, malformed digests, sizes that are not 0 to
2**50 bytes, wrong types, and documents over 10 MB, not UTF-8, with a
byte-order mark or nested too deeply.  Every refusal names the document.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from cudaup.core.documents import load_json
from cudaup.core.names import check_component, check_label, check_relative_path, check_size
from cudaup.errors import SourceFormatError

MAX_MANIFEST_BYTES = 10 * 1024 * 1024
_SHA256 = re.compile(r"^[0-9a-fA-F]{64}$")
_MD5 = re.compile(r"^[0-9a-fA-F]{32}$")
_COMPONENT_FIELDS = {"name", "license", "license_path", "version", "cuda_variant"}
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


class _Duplicates:
    """``object_pairs_hook`` refusing a key given twice (JSON allows it; a manifest must not)."""

    def __init__(self, where: str) -> None:
        self.where = where

    def __call__(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key, value in pairs:
            if key in result:
                raise SourceFormatError(f"duplicate key {key!r} in {self.where}")
            result[key] = value
        return result


def _is_platform_key(key: str) -> bool:
    return ("-" in key or key == "source") and not key.endswith("_variant")


def _parse_archive(
    component: str, platform: str, data: Any, variant: str | None, source: str
) -> Archive:
    where = f"{component} {platform}" + (f" {variant}" if variant else "") + f" in {source}"
    if not isinstance(data, dict):
        raise SourceFormatError(f"{where}: expected an object")
    relative_path = data.get("relative_path")
    sha256 = data.get("sha256")
    md5 = data.get("md5")
    if relative_path is None:
        raise SourceFormatError(f"{where}: missing relative_path")
    if not isinstance(sha256, str) or not _SHA256.match(sha256):
        raise SourceFormatError(f"{where}: missing or malformed sha256")
    if md5 is not None and (not isinstance(md5, str) or not _MD5.match(md5)):
        raise SourceFormatError(f"{where}: malformed md5")
    return Archive(
        component=component,
        platform=platform,
        relative_path=check_relative_path(relative_path, field="relative_path", where=where),
        sha256=sha256.lower(),
        md5=md5.lower() if isinstance(md5, str) else None,
        size=check_size(data.get("size"), field="size", where=where),
        variant=variant,
    )


def _variants(component: str, listed: Any, source: str) -> frozenset[str] | None:
    """The ``cuda_variant`` list (``["12", "13"]``) as the nested keys it allows (``cuda12``)."""
    if listed is None:
        return None
    if not isinstance(listed, list) or not all(
        isinstance(v, str) and v.isdigit() and len(v) <= 3 for v in listed
    ):
        raise SourceFormatError(f"{component} cuda_variant in {source}: expected CUDA majors")
    return frozenset(f"cuda{v}" for v in listed)


def _platform_archives(
    component: str, platform: str, entry: Any, variants: frozenset[str] | None, source: str
) -> list[Archive]:
    """One platform's archives: a direct one (``relative_path`` …), one per CUDA major
    nested under it (cuDNN: ``{"cuda12": {…}, "cuda13": {…}}``), or both (cuDNN 9.27.0's
    windows-arm64 has a nested ``cuda13`` beside a direct archive)."""
    if not isinstance(entry, dict):
        return [_parse_archive(component, platform, entry, None, source)]
    nested = {k: v for k, v in entry.items() if isinstance(v, dict)}
    archives = []
    if "relative_path" in entry:
        direct = {k: v for k, v in entry.items() if k not in nested}
        archives.append(_parse_archive(component, platform, direct, None, source))
    elif not nested:
        archives.append(_parse_archive(component, platform, entry, None, source))
    for variant, archive in nested.items():
        where = f"{component} {platform} in {source}"
        check_component(variant, field="variant", where=where)
        if variants is not None and variant not in variants:
            raise SourceFormatError(
                f"{where}: variant {variant!r} is not in its cuda_variant "
                f"({', '.join(sorted(variants))})"
            )
        archives.append(_parse_archive(component, platform, archive, variant, source))
    return archives


def parse_manifest(data: bytes, source: str = "the redist manifest") -> Manifest:
    """Parse one ``redistrib_X.Y.Z.json`` document; ``source`` (its URL) names it in errors."""
    document = load_json(
        data, what=source, max_bytes=MAX_MANIFEST_BYTES, object_pairs_hook=_Duplicates(source)
    )
    if not isinstance(document, dict):
        raise SourceFormatError(f"{source} is not a JSON object")
    components: dict[str, Component] = {}
    for key, value in document.items():
        if not isinstance(value, dict):
            continue  # release_date, release_label, release_product, and future scalars
        # The key names directories (licenses/<component>/, the unpacked cache): a plain name.
        check_component(key, field="component key", where=source)
        version = value.get("version")
        if version is None:
            raise SourceFormatError(f"component {key!r} has no version in {source}")
        check_label(version, field=f"{key} version", where=source)
        variants = _variants(key, value.get("cuda_variant"), source)
        archives: list[Archive] = []
        for platform, entry in value.items():
            if platform in _COMPONENT_FIELDS or not _is_platform_key(platform):
                continue
            archives += _platform_archives(key, platform, entry, variants, source)
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
