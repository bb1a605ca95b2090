"""Pure builder of the fake NVIDIA site: request path -> resource, plus the facts behind it.

One server stands in for NVIDIA's three hosts; each host is a path prefix (see
:data:`HOST_PREFIXES`)::

    https://developer.download.nvidia.com  ->  /download
    https://developer.nvidia.com           ->  /www
    https://packages.nvidia.com            ->  /packages

Content keeps NVIDIA's real absolute URLs (``https://developer.download.nvidia.com/...``);
a client rewrites them onto its configured base.  :func:`nvidia_url_to_path` does the same
mapping for tests.

Paths served by the default site (``<L>`` = release label such as ``13.0.1``,
``<X>-<Y>-<Z>`` = the label with dashes):

* ``/download/compute/cuda/redist/`` -- the auto-generated directory listing, one
  ``redistrib_<L>.json`` per manifest, plus a listing for every sub-directory
  (``cuda_nvcc/``, ``cuda_nvcc/linux-x86_64/``, ...).
* ``/download/compute/cuda/redist/redistrib_<L>.json`` -- for every catalog release except the
  13.4.0 Developer Preview, plus 11.8.0.  12.8.0 and 13.0.0 are the verbatim excerpts (their
  archives are :class:`VirtualFile` of the right size with non-matching hashes); the others are
  synthesized with ``cuda_cudart``, ``cuda_nvcc`` (real tiny archives, true hashes) and
  ``nvidia_driver`` (small virtual archive, true hashes; omitted when the runfile has no driver).
* ``/download/compute/cuda/redist/<relative_path>`` -- every archive named in a manifest, and
  ``/download/compute/cuda/redist/<component>/LICENSE.txt``.
* ``/download/compute/cuda/<L>/docs/sidebar/md5sum.txt`` -- every release with installers on
  developer.download.nvidia.com (not 13.4.0).
* ``/download/compute/cuda/<L>/local_installers/<file>`` -- virtual installers of catalog size;
  13.4.0's live at ``/packages/prerelease/cuda/13.4.0/local_installers/<file>`` next to
  ``sha256sum.txt``.
* ``/www/cuda-<X>-<Y>-<Z>-download-archive`` -- the "JavaScript shell" with one
  ``data-react-props`` attribute, for every catalog release (13.4.0 included, 11.8.0 not).
* ``/www/cuda-toolkit-archive`` -- the archive index, newest first; ``/www/cuda-downloads`` --
  the newest release's page.

Everything else is 404.  :class:`SiteOptions` selects the variants of the points where NVIDIA's
real format is unverified; every combination builds.
"""

from __future__ import annotations

import calendar
import csv
import dataclasses
import datetime
import functools
import hashlib
import html
import io
import json
import lzma
import re
import tarfile
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from .resources import DEFAULT_LAST_MODIFIED, Resource, StaticResource, VirtualFile

DATA_DIR = Path(__file__).parent / "data"
"""Verbatim copies of NVIDIA's samples, kept in ``tests/fakenvidia/data/``."""

DOWNLOAD_HOST = "https://developer.download.nvidia.com"
WWW_HOST = "https://developer.nvidia.com"
PACKAGES_HOST = "https://packages.nvidia.com"
HOST_PREFIXES: Mapping[str, str] = {
    DOWNLOAD_HOST: "/download",
    WWW_HOST: "/www",
    PACKAGES_HOST: "/packages",
}

REDIST_DIR = "/download/compute/cuda/redist/"
ARCHIVE_INDEX_PATH = "/www/cuda-toolkit-archive"
CUDA_DOWNLOADS_PATH = "/www/cuda-downloads"
PREVIEW_LABEL = "13.4.0"
OLD_MANIFEST_LABEL = "11.8.0"
EXCERPT_LABELS = ("12.8.0", "13.0.0")
MD5SUM_SAMPLE_LABEL = "13.0.1"
REACT_SAMPLE_LABEL = "13.0.1"

REACT_MD5_FIELD = "md5"
REACT_SIZE_FIELD = "size"
"""Field names of the ``react_checksums="fields"`` variant (the real names are unknown)."""

PREVIEW_SHA256: Mapping[str, str] = {
    "cuda_13.4.0_windows_x86_64.exe": (
        "b743a3323116bf33404953ef58a9b9a3319368241f6352e933e9461409e9a759"
    ),
    "cuda_13.4.0_windows_arm64.exe": (
        "a1f68c81160b16d519c4087788b9c07de41306c3f1b872471ceee0996621374d"
    ),
}
"""Real SHA-256 values of the 13.4.0 preview installers (from its sha256sum.txt)."""

FUTURE_LABEL = "14.1.0"
FUTURE_DRIVER = "615.20.01"
FUTURE_FILENAMES: Mapping[str, str] = {
    "linux-amd64": f"cuda_{FUTURE_LABEL}_{FUTURE_DRIVER}_linux_x86_64.run",
    "linux-arm64": f"cuda_{FUTURE_LABEL}_{FUTURE_DRIVER}_linux_sbsa_arm64.run",
    "windows-amd64": f"cuda_{FUTURE_LABEL}_windows_x86_64_local.exe",
    "windows-arm64": f"cuda_{FUTURE_LABEL}_windows_arm64_local.exe",
}
"""Installer names of the ``future_release`` variant, in a style no 12.x/13.x name has."""
_FUTURE_SIZES: Mapping[str, int] = {
    "linux-amd64": 4_512_345_678,
    "linux-arm64": 4_398_765_432,
    "windows-amd64": 3_801_234_567,
    "windows-arm64": 3_765_432_109,
}

# Release dates (YYYY-MM-DD) and component versions (cuda_cudart, cuda_nvcc) of the synthesized
# manifests.  Invented but plausible and in release order; 12.8.0 and 13.0.0 are real (they come
# from the excerpts), as are the 13.0.1-13.0.3 versions (nvcc 13.0.88 shared by all three).
_RELEASES: Mapping[str, tuple[str, str, str]] = {
    "11.8.0": ("2022-10-03", "11.8.89", "11.8.89"),
    "12.0.0": ("2022-12-08", "12.0.107", "12.0.76"),
    "12.0.1": ("2023-01-28", "12.0.146", "12.0.140"),
    "12.1.0": ("2023-02-28", "12.1.55", "12.1.66"),
    "12.1.1": ("2023-04-18", "12.1.105", "12.1.105"),
    "12.2.0": ("2023-06-28", "12.2.53", "12.2.91"),
    "12.2.1": ("2023-07-27", "12.2.128", "12.2.128"),
    "12.2.2": ("2023-08-29", "12.2.140", "12.2.140"),
    "12.3.0": ("2023-10-19", "12.3.52", "12.3.52"),
    "12.3.1": ("2023-11-21", "12.3.101", "12.3.103"),
    "12.3.2": ("2024-01-03", "12.3.101", "12.3.107"),
    "12.4.0": ("2024-03-05", "12.4.99", "12.4.99"),
    "12.4.1": ("2024-04-11", "12.4.127", "12.4.131"),
    "12.5.0": ("2024-05-21", "12.5.39", "12.5.40"),
    "12.5.1": ("2024-06-27", "12.5.82", "12.5.82"),
    "12.6.0": ("2024-08-01", "12.6.37", "12.6.20"),
    "12.6.1": ("2024-08-19", "12.6.68", "12.6.68"),
    "12.6.2": ("2024-10-03", "12.6.77", "12.6.77"),
    "12.6.3": ("2024-11-19", "12.6.77", "12.6.85"),
    "12.8.0": ("2025-01-23", "12.8.57", "12.8.61"),
    "12.8.1": ("2025-03-05", "12.8.90", "12.8.93"),
    "12.8.2": ("2025-04-17", "12.8.90", "12.8.96"),
    "12.9.0": ("2025-04-30", "12.9.37", "12.9.41"),
    "12.9.1": ("2025-06-05", "12.9.79", "12.9.86"),
    "12.9.2": ("2025-07-15", "12.9.79", "12.9.89"),
    "13.0.0": ("2025-08-04", "13.0.48", "13.0.48"),
    "13.0.1": ("2025-09-04", "13.0.88", "13.0.88"),
    "13.0.2": ("2025-10-09", "13.0.96", "13.0.88"),
    "13.0.3": ("2025-11-20", "13.0.96", "13.0.88"),
    "13.1.0": ("2025-12-04", "13.1.80", "13.1.80"),
    "13.1.1": ("2026-01-15", "13.1.80", "13.1.115"),
    "13.1.2": ("2026-02-05", "13.1.118", "13.1.115"),
    "13.2.0": ("2026-03-03", "13.2.51", "13.2.51"),
    "13.2.1": ("2026-04-02", "13.2.75", "13.2.78"),
    "13.2.2": ("2026-05-07", "13.2.75", "13.2.92"),
    "13.3.0": ("2026-06-04", "13.3.33", "13.3.35"),
    "13.3.1": ("2026-07-09", "13.3.72", "13.3.72"),
    "13.4.0": ("2026-08-06", "", ""),
    "13.4.1": ("2026-09-03", "13.4.52", "13.4.55"),
    FUTURE_LABEL: ("2027-03-02", "14.1.21", "14.1.24"),
}
_OLD_MANIFEST_DRIVER = "520.61.05"

_COMPONENT_NAMES: Mapping[str, str] = {
    "cuda_cudart": "CUDA Runtime (cudart)",
    "cuda_nvcc": "CUDA NVCC",
    "nvidia_driver": "NVIDIA Linux Driver",
}
_ARCHIVE_MTIME = 1_704_067_200  # 2024-01-01T00:00:00Z, inside every tiny archive


# --------------------------------------------------------------------------------------------
# Public data types


@dataclass(frozen=True, slots=True)
class SiteOptions:
    """Variants of the points where NVIDIA's real format is unverified; all combinable.

    * ``md5sum_separator``: between digest and name in ``md5sum.txt``/``sha256sum.txt``.
    * ``listing_quote``: attribute quote of the redist listing; ``listing_duplicates``: every
      file ``<li>`` appears twice.
    * ``react_structure``: ``pageData.structure`` (``"inside"``), a top-level ``structure`` next
      to ``pageData`` (``"top"``) or none (``"absent"``).
    * ``react_checksums``: ``md5``/``size`` keys on each local-installer entry (``"fields"``),
      ``<p>MD5: ...</p><p>Size: N bytes</p>`` text inside ``details`` (``"details"``) or nothing
      (``"absent"``).
    * ``details_patch_link_first``: each local-installer ``details`` starts with a
      ``.../patches/1/...`` link that *also* carries ``id="targetDownloadButtonHref"``.
    * ``missing_md5sum`` / ``missing_archive_page``: labels whose file/page is 404.
    * ``future_release``: add release :data:`FUTURE_LABEL` with new-style installer names.
    """

    md5sum_separator: Literal["  ", " "] = "  "
    listing_quote: Literal["'", '"'] = "'"
    listing_duplicates: bool = False
    react_structure: Literal["inside", "top", "absent"] = "inside"
    react_checksums: Literal["fields", "details", "absent"] = "fields"
    details_patch_link_first: bool = False
    missing_md5sum: frozenset[str] = frozenset()
    missing_archive_page: frozenset[str] = frozenset()
    future_release: bool = False

    def describe(self) -> str:
        """The non-default choices, e.g. ``"md5sum_separator=' ',future_release=True"``."""
        default = SiteOptions()
        changed = [
            f"{f.name}={_describe(getattr(self, f.name))}"
            for f in dataclasses.fields(self)
            if getattr(self, f.name) != getattr(default, f.name)
        ]
        return ",".join(changed) or "default"


def _describe(value: object) -> str:
    if isinstance(value, frozenset):
        return "+".join(sorted(str(item) for item in value))
    return repr(value)


@dataclass(frozen=True, slots=True)
class CatalogRow:
    """One standalone installer (a row of ``local-installers-catalog.tsv`` or a future one).

    ``platform`` uses the catalog's own labels: ``linux-amd64``, ``linux-arm64`` (SBSA),
    ``windows-amd64``, ``windows-arm64``.  ``url`` is NVIDIA's real absolute URL.
    """

    version: str
    platform: str
    filename: str
    md5: str
    size: int
    url: str

    @property
    def path(self) -> str:
        """The request path on the fake server."""
        path = nvidia_url_to_path(self.url)
        assert path is not None, self.url
        return path

    @property
    def driver(self) -> str | None:
        """The driver version embedded in the file name, if any."""
        match = re.match(rf"cuda_{re.escape(self.version)}_(\d+\.\d+(?:\.\d+)?)_", self.filename)
        return match.group(1) if match else None

    @property
    def is_linux(self) -> bool:
        return self.platform.startswith("linux")


@dataclass(frozen=True, slots=True)
class ArchiveInfo:
    """A redist archive named by a served manifest.

    ``genuine`` is true when the manifest's ``sha256``/``md5``/``size`` are those of the bytes
    served (synthesized manifests); for the verbatim excerpts (12.8.0, 13.0.0) only ``size``
    matches.
    """

    relative_path: str
    component: str
    platform: str
    version: str
    sha256: str
    md5: str
    size: int
    genuine: bool

    @property
    def path(self) -> str:
        return REDIST_DIR + self.relative_path

    @property
    def url(self) -> str:
        return DOWNLOAD_HOST + "/compute/cuda/redist/" + self.relative_path


@dataclass(frozen=True, slots=True)
class ReleaseInfo:
    """What the site says about one release label.

    Paths are request paths on the fake server, ``None`` where nothing is served (including
    when a ``missing_*`` option removed it).  ``components`` maps component name -> component
    version as written in the served manifest.
    """

    label: str
    release_date: str
    title: str
    """Archive-page title without " Downloads": "CUDA Toolkit 13.0 Update 1"."""
    index_text: str
    """Link text on the archive index: "CUDA Toolkit 13.0.1" / "... 13.4 Developer Preview"."""
    preview: bool
    future: bool
    driver: str | None
    """Driver in the Linux runfile name == ``nvidia_driver.version``; None when there is none."""
    components: Mapping[str, str]
    installers: tuple[CatalogRow, ...]
    manifest_path: str | None
    manifest_source: Literal["excerpt", "synthesized", "none"]
    md5sum_path: str | None
    sha256sum_path: str | None
    archive_page_path: str | None

    @property
    def archive_page_url(self) -> str:
        return f"{WWW_HOST}/cuda-{self.label.replace('.', '-')}-download-archive"


@dataclass(frozen=True)
class Site:
    """A built site.  Read-only by convention; :func:`build_site` caches and shares it.

    Attributes:
        options: the variant choices it was built with.
        resources: request path (``/download/...``, ``/www/...``, ``/packages/...``; no query)
            -> :class:`StaticResource` or :class:`VirtualFile`.
        catalog: the real catalog rows (12.0.0 - 13.4.1), in file order.
        installers: every installer served: ``catalog`` plus the future release's rows.
        releases: label -> :class:`ReleaseInfo`, oldest first (11.8.0, the catalog labels,
            and :data:`FUTURE_LABEL` when enabled).
        archives: ``relative_path`` -> :class:`ArchiveInfo` for every archive of every
            served manifest.
        manifests: label -> the parsed JSON of the served ``redistrib_<label>.json``.
        react_props: label -> the payload embedded in the served archive page.
        future_release: the :class:`ReleaseInfo` of :data:`FUTURE_LABEL`, or None.
    """

    options: SiteOptions
    resources: Mapping[str, Resource]
    catalog: tuple[CatalogRow, ...]
    installers: tuple[CatalogRow, ...]
    releases: Mapping[str, ReleaseInfo]
    archives: Mapping[str, ArchiveInfo]
    manifests: Mapping[str, Mapping[str, Any]] = field(repr=False)
    react_props: Mapping[str, Mapping[str, Any]] = field(repr=False)
    future_release: ReleaseInfo | None = None

    def get(self, path: str) -> Resource | None:
        """The resource at a request path (query string ignored), or None (404)."""
        return self.resources.get(path.split("?", 1)[0])

    def resource_for_url(self, url: str) -> Resource | None:
        """The resource NVIDIA's real absolute ``url`` maps to, or None."""
        path = nvidia_url_to_path(url)
        return None if path is None else self.get(path)

    def body(self, path: str) -> bytes:
        """The full content at ``path``; KeyError when nothing is served there."""
        resource = self.get(path)
        if resource is None:
            raise KeyError(path)
        return resource.read()

    @property
    def manifest_labels(self) -> list[str]:
        """Labels with a served ``redistrib_<label>.json``, oldest first."""
        return [r.label for r in self.releases.values() if r.manifest_path is not None]

    def installer(self, label: str, platform: str) -> CatalogRow:
        """The installer of ``label`` for a catalog platform (``linux-amd64`` ...)."""
        for row in self.installers:
            if row.version == label and row.platform == platform:
                return row
        raise KeyError((label, platform))


# --------------------------------------------------------------------------------------------
# Helpers shared with tests


def nvidia_url_to_path(url: str) -> str | None:
    """Map NVIDIA's real absolute URL onto the fake server's request path, or None."""
    for host, prefix in HOST_PREFIXES.items():
        if url == host or url.startswith(host + "/"):
            return prefix + url[len(host) :]
    return None


def version_key(label: str) -> tuple[int, ...]:
    return tuple(int(part) for part in label.split("."))


def sample_bytes(name: str) -> bytes:
    """A sample file copied verbatim into ``tests/fakenvidia/data``."""
    return (DATA_DIR / name).read_bytes()


def decode_react_props(page: str) -> Any:
    """The JSON payload of an archive page (entity-decoded ``data-react-props``)."""
    match = re.search(r'data-react-props="([^"]*)"', page)
    if match is None:
        raise ValueError("no data-react-props attribute")
    return json.loads(html.unescape(match.group(1)))


def _attr_escape(text: str) -> str:
    return (
        text.replace("&", "&amp;")
        .replace('"', "&quot;")
        .replace("'", "&#39;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
    )


def _epoch(date: str) -> int:
    return calendar.timegm(datetime.date.fromisoformat(date).timetuple())


def _human_size(size: int) -> str:
    if size < 1024 * 1024:
        return f"{max(1, round(size / 1024))} KB"
    if size < 1024**3:
        return f"{size / 1024**2:.1f} MB"
    return f"{size / 1024**3:.1f} GB"


def _content_type(path: str) -> str:
    if path.endswith(".json"):
        return "application/json"
    if path.endswith(".txt"):
        return "text/plain"
    if path.endswith(".tar.xz"):
        return "application/x-xz"
    if path.endswith(".zip"):
        return "application/zip"
    return "application/octet-stream"


@functools.cache
def load_catalog() -> tuple[CatalogRow, ...]:
    """The rows of ``local-installers-catalog.tsv``."""
    text = sample_bytes("local-installers-catalog.tsv").decode("utf-8")
    rows = csv.DictReader(io.StringIO(text), delimiter="\t")
    return tuple(
        CatalogRow(
            version=row["version"],
            platform=row["platform"],
            filename=row["filename"],
            md5=row["md5"],
            size=int(row["bytes"]),
            url=row["url"],
        )
        for row in rows
    )


def _future_rows() -> tuple[CatalogRow, ...]:
    rows = []
    for platform, filename in FUTURE_FILENAMES.items():
        url = f"{DOWNLOAD_HOST}/compute/cuda/{FUTURE_LABEL}/local_installers/{filename}"
        md5 = hashlib.md5(f"fakenvidia future installer {filename}".encode()).hexdigest()
        rows.append(CatalogRow(FUTURE_LABEL, platform, filename, md5, _FUTURE_SIZES[platform], url))
    return tuple(rows)


# --------------------------------------------------------------------------------------------
# Tiny, deterministic redist archives


def _nvcc_script(version: str) -> bytes:
    major, minor, _ = version.split(".", 2)
    return (
        "#!/bin/sh\n"
        "# Stand-in for nvcc from the cudaup test fixture (tests/fakenvidia).\n"
        'case "$1" in\n'
        "  --version|-V)\n"
        '    echo "nvcc: NVIDIA (R) Cuda compiler driver"\n'
        '    echo "Copyright (c) 2005-2026 NVIDIA Corporation"\n'
        f'    echo "Cuda compilation tools, release {major}.{minor}, V{version}"\n'
        f'    echo "Build cuda_{major}.{minor}.r{major}.{minor}/compiler.00000000_0"\n'
        "    exit 0 ;;\n"
        "esac\n"
        'echo "nvcc fatal   : No input files specified; use option --help for more '
        'information" >&2\n'
        "exit 1\n"
    ).encode()


def _archive_members(
    component: str, platform: str, version: str
) -> list[tuple[str, bytes | str, int]]:
    """(path inside the top directory, content or symlink target, mode) of a tiny archive."""
    major, minor, _ = version.split(".", 2)
    cudart_version = int(major) * 1000 + int(minor) * 10
    license_text = f"Fake license of {component} {version} (cudaup test fixture).\n".encode()
    members: list[tuple[str, bytes | str, int]] = [("LICENSE", license_text, 0o644)]
    windows = platform.startswith("windows")
    if component == "cuda_nvcc":
        if windows:
            members.append(("bin/nvcc.exe", b"MZ fake nvcc " + version.encode(), 0o755))
        else:
            members.append(("bin/nvcc", _nvcc_script(version), 0o755))
        members.append(("include/fatbinary_section.h", b"#pragma once\n", 0o644))
    elif component == "cuda_cudart":
        api = (
            "#pragma once\n"
            "/* Stand-in header from the cudaup test fixture. */\n"
            f"#define CUDART_VERSION {cudart_version}\n"
        ).encode()
        members.append(("include/cuda_runtime_api.h", api, 0o644))
        members.append(
            ("include/cuda_runtime.h", b'#pragma once\n#include "cuda_runtime_api.h"\n', 0o644)
        )
        if windows:
            dll = b"MZ fake cudart " + version.encode()
            members.append((f"bin/cudart64_{major}.dll", dll, 0o755))
            members.append(("lib/x64/cudart.lib", b"!<arch>\n", 0o644))
        else:
            real = f"libcudart.so.{version}"
            members.append((f"lib/{real}", b"\x7fELF fake cudart " + version.encode(), 0o755))
            members.append((f"lib/libcudart.so.{major}", real, 0o777))
            members.append(("lib/libcudart.so", f"libcudart.so.{major}", 0o777))
            members.append(("lib/libcudart_static.a", b"!<arch>\n", 0o644))
    else:  # pragma: no cover - only the two components above get real archives
        raise ValueError(component)
    return sorted(members)


def _directories(names: Iterable[str]) -> list[str]:
    found: set[str] = set()
    for name in names:
        parts = name.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            found.add("/".join(parts[:depth]))
    return sorted(found)


@functools.cache
def _tiny_archive(relative_path: str, component: str, platform: str, version: str) -> bytes:
    basename = relative_path.rsplit("/", 1)[-1]
    members = _archive_members(component, platform, version)
    buffer = io.BytesIO()
    if basename.endswith(".zip"):
        top = basename.removesuffix(".zip")
        with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as zipped:
            entries: list[tuple[str, bytes | str | None, int]] = [(top + "/", None, 0o755)]
            entries += [(f"{top}/{d}/", None, 0o755) for d in _directories(m[0] for m in members)]
            entries += [(f"{top}/{name}", data, mode) for name, data, mode in members]
            for name, data, mode in sorted(entries):
                zip_info = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
                zip_info.create_system = 3
                if data is None:
                    zip_info.external_attr = ((0o040000 | mode) << 16) | 0x10
                    zipped.writestr(zip_info, b"")
                else:
                    zip_info.external_attr = (0o100000 | mode) << 16
                    zip_info.compress_type = zipfile.ZIP_DEFLATED
                    zipped.writestr(zip_info, data.encode() if isinstance(data, str) else data)
        return buffer.getvalue()
    top = basename.removesuffix(".tar.xz")
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as archive:
        names = [top] + [f"{top}/{d}" for d in _directories(m[0] for m in members)]
        infos: list[tuple[tarfile.TarInfo, bytes | None]] = []
        for name in names:
            info = tarfile.TarInfo(name)
            info.type = tarfile.DIRTYPE
            info.mode = 0o755
            infos.append((info, None))
        for name, data, mode in members:
            info = tarfile.TarInfo(f"{top}/{name}")
            info.mode = mode
            if isinstance(data, str):
                info.type = tarfile.SYMTYPE
                info.linkname = data
                infos.append((info, None))
            else:
                info.size = len(data)
                infos.append((info, data))
        for info, payload in sorted(infos, key=lambda item: item[0].name):
            info.mtime = _ARCHIVE_MTIME
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            archive.addfile(info, None if payload is None else io.BytesIO(payload))
    filters = [{"id": lzma.FILTER_LZMA2, "preset": 6, "dict_size": 1 << 20}]
    return lzma.compress(
        buffer.getvalue(), format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64, filters=filters
    )


# --------------------------------------------------------------------------------------------
# The builder


class _Builder:
    def __init__(self, options: SiteOptions) -> None:
        self.options = options
        self.resources: dict[str, Resource] = {}
        self.archives: dict[str, ArchiveInfo] = {}
        self.manifests: dict[str, Mapping[str, Any]] = {}
        self.react_props: dict[str, Mapping[str, Any]] = {}
        self.catalog = load_catalog()
        self.future_rows = _future_rows() if options.future_release else ()
        self.installers = self.catalog + self.future_rows
        self.by_url = {row.url: row for row in self.installers}
        labels = {row.version for row in self.installers} | {OLD_MANIFEST_LABEL}
        self.labels = sorted(labels, key=version_key)
        unknown = (options.missing_md5sum | options.missing_archive_page) - labels
        if unknown:
            raise ValueError(f"unknown release labels in SiteOptions: {sorted(unknown)}")

    # -- bookkeeping ------------------------------------------------------------------------

    def add(self, path: str, resource: Resource) -> None:
        existing = self.resources.get(path)
        if existing is not None and existing != resource:
            raise ValueError(f"two different resources at {path}")
        self.resources[path] = resource

    def add_text(self, path: str, text: str, content_type: str, date: str | None = None) -> None:
        body = text.encode("utf-8")
        if date is None:
            self.add(path, StaticResource(body, content_type))
        else:
            self.add(path, StaticResource(body, content_type, _epoch(date)))

    def rows(self, label: str) -> tuple[CatalogRow, ...]:
        return tuple(row for row in self.installers if row.version == label)

    # -- manifests --------------------------------------------------------------------------

    def driver_of(self, label: str) -> str | None:
        if label == OLD_MANIFEST_LABEL:
            return _OLD_MANIFEST_DRIVER
        for row in self.rows(label):
            if row.platform == "linux-amd64":
                return row.driver
        return None

    def manifest(
        self, label: str
    ) -> tuple[Mapping[str, Any], Literal["excerpt", "synthesized"]] | None:
        """Serve ``redistrib_<label>.json`` and its archives; (parsed manifest, source)."""
        if label == PREVIEW_LABEL:
            return None
        path = f"{REDIST_DIR}redistrib_{label}.json"
        date = _RELEASES[label][0]
        if label in EXCERPT_LABELS:
            body = sample_bytes(f"redistrib_{label}.excerpt.json")
            document: dict[str, Any] = json.loads(body)
            date = document["release_date"]
            self.add(path, StaticResource(body, "application/json", _epoch(date)))
            for component, platform, entry in _manifest_entries(document):
                resource = VirtualFile(
                    int(entry["size"]),
                    seed=entry["relative_path"],
                    content_type=_content_type(entry["relative_path"]),
                    last_modified=_epoch(date),
                )
                version = document[component]["version"]
                self.add_archive(component, platform, version, entry, resource, genuine=False)
            return document, "excerpt"
        document = {"release_date": date, "release_label": label, "release_product": "cuda"}
        _, cudart, nvcc = _RELEASES[label]
        platforms = ["linux-x86_64", "linux-sbsa", "windows-x86_64"]
        if version_key(label) < (13,):
            platforms.append("linux-aarch64")
        for component, version in (("cuda_cudart", cudart), ("cuda_nvcc", nvcc)):
            document[component] = self.synth_component(component, version, platforms, date)
        driver = self.driver_of(label)
        if driver is not None:
            document["nvidia_driver"] = self.synth_component(
                "nvidia_driver", driver, ["linux-x86_64", "linux-sbsa"], date
            )
        body = (json.dumps(document, indent=4) + "\n").encode()
        self.add(path, StaticResource(body, "application/json", _epoch(date)))
        return document, "synthesized"

    def synth_component(
        self, component: str, version: str, platforms: list[str], date: str
    ) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "name": _COMPONENT_NAMES[component],
            "license": "NVIDIA Driver" if component == "nvidia_driver" else "CUDA Toolkit",
            "license_path": f"{component}/LICENSE.txt",
            "version": version,
        }
        for platform in platforms:
            extension = "zip" if platform.startswith("windows") else "tar.xz"
            relative_path = (
                f"{component}/{platform}/{component}-{platform}-{version}-archive.{extension}"
            )
            resource: Resource
            if component == "nvidia_driver":
                seed_size = int(hashlib.sha256(relative_path.encode()).hexdigest()[:4], 16)
                resource = VirtualFile(
                    100_000 + seed_size,
                    seed=relative_path,
                    content_type=_content_type(relative_path),
                    last_modified=_epoch(date),
                )
            else:
                body = _tiny_archive(relative_path, component, platform, version)
                resource = StaticResource(body, _content_type(relative_path), _epoch(date))
            info = {
                "relative_path": relative_path,
                "sha256": resource.sha256(),
                "md5": resource.md5(),
                "size": str(resource.size),
            }
            entry[platform] = info
            self.add_archive(component, platform, version, info, resource, genuine=True)
        return entry

    def add_archive(
        self,
        component: str,
        platform: str,
        version: str,
        entry: Mapping[str, str],
        resource: Resource,
        *,
        genuine: bool,
    ) -> None:
        relative_path = entry["relative_path"]
        existing = self.resources.get(REDIST_DIR + relative_path)
        if existing is not None and existing.size != resource.size:
            raise ValueError(f"conflicting archives at {relative_path}")
        if existing is None:
            self.add(REDIST_DIR + relative_path, resource)
        self.archives[relative_path] = ArchiveInfo(
            relative_path=relative_path,
            component=component,
            platform=platform,
            version=version,
            sha256=entry["sha256"],
            md5=entry["md5"],
            size=int(entry["size"]),
            genuine=genuine,
        )
        license_text = f"Fake license of {component} (cudaup test fixture).\n"
        self.add_text(f"{REDIST_DIR}{component}/LICENSE.txt", license_text, "text/plain")

    # -- directory listings -----------------------------------------------------------------

    def listings(self) -> None:
        """One auto-generated index per directory under the redist tree."""
        q = self.options.listing_quote
        tree: dict[str, tuple[set[str], dict[str, Resource]]] = {REDIST_DIR: (set(), {})}
        for path, resource in sorted(self.resources.items()):
            if not path.startswith(REDIST_DIR) or path == REDIST_DIR:
                continue
            parts = path[len(REDIST_DIR) :].split("/")
            directory = REDIST_DIR
            for part in parts[:-1]:
                tree.setdefault(directory, (set(), {}))[0].add(part)
                directory += part + "/"
                tree.setdefault(directory, (set(), {}))
            tree[directory][1][parts[-1]] = resource
        for directory, (subdirs, files) in tree.items():
            lines = [
                "<!DOCTYPE html>",
                "<html>",
                "<head>",
                '<meta charset="utf-8">',
                f"<title>Index of {directory[len('/download') :]}</title>",
                "</head>",
                "<body>",
                "<!-- Auto-generated directory index; do not edit -->",
                f"<ul class={q}directorycontents{q}>",
                f"<li><span class={q}dir{q}><a href={q}..{q}>..</a></span></li>",
            ]
            for name in sorted(subdirs):
                lines.append(
                    f"<li><span class={q}dir{q}><a href={q}{name}/{q}>{name}/</a></span></li>"
                )
            latest = 0
            for name, resource in sorted(files.items()):
                latest = max(latest, resource.last_modified)
                date = datetime.datetime.fromtimestamp(resource.last_modified, datetime.UTC)
                line = (
                    f"<li><span class={q}file{q}><a href={q}{name}{q}>{name}</a></span> "
                    f"<span class={q}size{q}>{_human_size(resource.size)}</span> "
                    f"<span class={q}date{q}>{date:%Y-%m-%d %H:%M:%S}</span></li>"
                )
                lines.append(line)
                if self.options.listing_duplicates and name.startswith("redistrib_"):
                    lines.append(line)
            lines += ["</ul>", "</body>", "</html>", ""]
            body = "\n".join(lines).encode()
            mtime = latest or DEFAULT_LAST_MODIFIED
            self.add(directory, StaticResource(body, "text/html; charset=utf-8", mtime))

    # -- checksum files ---------------------------------------------------------------------

    def md5sum(self, label: str) -> str | None:
        rows = [r for r in self.rows(label) if r.url.startswith(DOWNLOAD_HOST)]
        if not rows or label in self.options.missing_md5sum:
            return None
        path = f"/download/compute/cuda/{label}/docs/sidebar/md5sum.txt"
        separator = self.options.md5sum_separator
        text = "".join(f"{row.md5}{separator}{row.filename}\n" for row in rows)
        if label == MD5SUM_SAMPLE_LABEL and separator == "  ":
            sample = sample_bytes("md5sum-13.0.1.reconstructed.txt").decode()
            assert sample == text, "md5sum sample and catalog disagree"
        self.add_text(path, text, "text/plain", _RELEASES[label][0])
        return path

    def sha256sum(self, label: str) -> str | None:
        rows = [r for r in self.rows(label) if r.url.startswith(PACKAGES_HOST)]
        if not rows:
            return None
        directory = rows[0].path.rsplit("/", 1)[0]
        separator = self.options.md5sum_separator
        text = "".join(f"{PREVIEW_SHA256[r.filename]}{separator}{r.filename}\n" for r in rows)
        self.add_text(f"{directory}/sha256sum.txt", text, "text/plain", _RELEASES[label][0])
        return f"{directory}/sha256sum.txt"

    def installer_files(self) -> None:
        for row in self.installers:
            self.add(
                row.path,
                VirtualFile(
                    row.size,
                    seed=row.url,
                    content_type="application/octet-stream",
                    last_modified=_epoch(_RELEASES[row.version][0]),
                ),
            )

    # -- archive pages ----------------------------------------------------------------------

    def archive_page(self, label: str, title: str) -> str | None:
        rows = self.rows(label)
        if not rows or label in self.options.missing_archive_page:
            return None
        if label == REACT_SAMPLE_LABEL:
            payload = self.sample_payload()
        else:
            payload = self.generated_payload(label, rows, title)
        self.react_props[label] = payload
        dashed = label.replace(".", "-")
        page = _archive_page_html(title, f"{WWW_HOST}/cuda-{dashed}-download-archive", payload)
        path = f"/www/cuda-{dashed}-download-archive"
        self.add_text(path, page, "text/html; charset=utf-8", _RELEASES[label][0])
        return path

    def checksum_fields(self, entry: dict[str, Any], row: CatalogRow) -> None:
        mode = self.options.react_checksums
        if mode == "fields":
            entry[REACT_MD5_FIELD] = row.md5
            entry[REACT_SIZE_FIELD] = str(row.size)
        elif mode == "details":
            entry["details"] += f"<p>MD5: {row.md5}</p><p>Size: {row.size} bytes</p>"

    def patch_link(self, details: str, row: CatalogRow) -> str:
        if not self.options.details_patch_link_first:
            return details
        rest = row.filename.removeprefix(f"cuda_{row.version}_")
        base = row.url.rsplit("/local_installers/", 1)[0]
        patch_url = f"{base}/patches/1/local_installers/cuda_{row.version}.1_{rest}"
        link = (
            f'<p>Patch 1 for CUDA {row.version}: <a id="targetDownloadButtonHref" '
            f'href="{patch_url}">Download Patch 1</a></p>'
        )
        marker = '<a id="targetDownloadButtonHref"'
        index = details.find(marker)
        return details + link if index < 0 else details[:index] + link + details[index:]

    def installer_entry(self, row: CatalogRow) -> dict[str, Any]:
        gib = f"{row.size / 1024**3:.1f} GB"
        button = f'<a id="targetDownloadButtonHref" href="{row.url}">Download ({gib})</a>'
        if row.is_linux:
            details = (
                "<p>Installation Instructions:</p>"
                f'<span class="cudaBash">wget {row.url}</span>'
                f'<span class="cudaBash">sudo sh {row.filename}</span>'
            )
        else:
            details = (
                "<p>Installation Instructions:</p>"
                f"<ol><li>Double click {row.filename}</li>"
                "<li>Follow the installer's on-screen prompts &amp; restart if asked</li></ol>"
            )
        entry: dict[str, Any] = {"details": self.patch_link(details + button, row)}
        self.checksum_fields(entry, row)
        return entry

    def generated_payload(
        self, label: str, rows: tuple[CatalogRow, ...], title: str
    ) -> dict[str, Any]:
        by_platform = {row.platform: row for row in rows}
        major, minor, _ = label.split(".")
        dashed = f"{major}-{minor}"
        driver = self.driver_of(label)
        deb_version = f"{label}-{driver}-1" if driver else f"{label}-1"
        releases: dict[str, dict[str, Any]] = {}
        if "linux-amd64" in by_platform:
            entry = self.installer_entry(by_platform["linux-amd64"])
            releases["Linux/x86_64/Ubuntu/24.04/runfile_local"] = entry
            releases["Linux/x86_64/Ubuntu/22.04/runfile_local"] = dict(entry)
            deb = f"cuda-repo-ubuntu2404-{dashed}-local_{deb_version}_amd64.deb"
            repo = f"{DOWNLOAD_HOST}/compute/cuda/repos/ubuntu2404/x86_64"
            releases["Linux/x86_64/Ubuntu/24.04/deb_local"] = {
                "details": _bash(
                    f"wget {repo}/cuda-ubuntu2404.pin",
                    "sudo mv cuda-ubuntu2404.pin /etc/apt/preferences.d/cuda-repository-pin-600",
                    f"wget {DOWNLOAD_HOST}/compute/cuda/{label}/local_installers/{deb}",
                    f"sudo dpkg -i {deb}",
                    f"sudo cp /var/cuda-repo-ubuntu2404-{dashed}-local/cuda-*-keyring.gpg "
                    "/usr/share/keyrings/",
                    "sudo apt-get update",
                    f"sudo apt-get -y install cuda-toolkit-{dashed}",
                )
            }
            releases["Linux/x86_64/Ubuntu/24.04/deb_network"] = _deb_network("x86_64", dashed)
        if "linux-arm64" in by_platform:
            entry = self.installer_entry(by_platform["linux-arm64"])
            releases["Linux/arm64-sbsa/Native/Ubuntu/24.04/runfile_local"] = entry
            releases["Linux/arm64-sbsa/Native/Ubuntu/24.04/deb_network"] = _deb_network(
                "sbsa", dashed
            )
        if "windows-amd64" in by_platform:
            releases["Windows/x86_64/11/exe_local"] = self.installer_entry(
                by_platform["windows-amd64"]
            )
            if label != PREVIEW_LABEL:
                name = f"cuda_{label}_windows_network.exe"
                if label == "12.9.2":  # the one real naming anomaly
                    name = "cuda_12.9.2_windows_x86_64_network.exe"
                url = f"{DOWNLOAD_HOST}/compute/cuda/{label}/network_installers/{name}"
                button = f'<a id="targetDownloadButtonHref" href="{url}">Download (28.0 MB)</a>'
                releases["Windows/x86_64/11/exe_network"] = {"details": button}
        if "windows-arm64" in by_platform:
            releases["Windows/arm64/11/exe_local"] = self.installer_entry(
                by_platform["windows-arm64"]
            )
        page_data: dict[str, Any] = {"header": {"title": f"{title} Downloads"}}
        structure = _structure(releases)
        if self.options.react_structure == "inside":
            page_data["structure"] = structure
        page_data["releases"] = releases
        payload: dict[str, Any] = {"pageData": page_data}
        if self.options.react_structure == "top":
            payload["structure"] = structure
        return payload

    def sample_payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = json.loads(
            sample_bytes("download-archive-react-props.reconstructed.json")
        )
        page_data: dict[str, Any] = payload["pageData"]
        structure = page_data.pop("structure")
        if self.options.react_structure == "inside":
            releases = page_data.pop("releases")
            page_data["structure"] = structure
            page_data["releases"] = releases
        elif self.options.react_structure == "top":
            payload["structure"] = structure
        for entry in page_data["releases"].values():
            match = re.search(r'id="targetDownloadButtonHref" href="([^"]+)"', entry["details"])
            row = self.by_url.get(match.group(1)) if match else None
            if self.options.react_checksums != "fields":
                for key in [k for k in entry if k.startswith("_fixture_")]:
                    del entry[key]
            if row is not None:
                entry["details"] = self.patch_link(entry["details"], row)
                self.checksum_fields(entry, row)
        return payload

    def archive_index(self, infos: list[ReleaseInfo]) -> None:
        listed = [info for info in infos if info.installers]
        listed.sort(key=lambda info: version_key(info.label), reverse=True)
        latest = next((info for info in listed if not info.preview), None)
        lines = [
            "<!DOCTYPE html>",
            '<html lang="en-us">',
            "<head>",
            '<meta charset="utf-8">',
            "<title>CUDA Toolkit Archive | NVIDIA Developer</title>",
            f'<link rel="canonical" href="{WWW_HOST}/cuda-toolkit-archive">',
            "</head>",
            "<body>",
            '<div class="content">',
            "<h1>CUDA Toolkit Archive</h1>",
            "<p>Previous releases of the CUDA Toolkit, GPU Computing SDK, documentation and "
            "developer drivers can be found using the links below. Please select the release "
            "you want from the list below, and be sure to check www.nvidia.com/drivers for more "
            "recent production drivers appropriate for your hardware configuration.</p>",
        ]
        if latest is not None:
            lines += [
                "<h2>Latest Release</h2>",
                f'<p><a href="{WWW_HOST}/cuda-downloads">{latest.index_text}</a> '
                f"({_month(latest.release_date)}), "
                '<a href="https://docs.nvidia.com/cuda/">Versioned Online Documentation</a></p>',
            ]
        lines += ["<h2>Archived Releases</h2>", "<p>"]
        for info in listed:
            docs = f"https://docs.nvidia.com/cuda/archive/{info.label}/"
            lines.append(
                f'<a href="{info.archive_page_url}">{info.index_text}</a> '
                f"({_month(info.release_date)}), "
                f'<a href="{docs}">Versioned Online Documentation</a><br>'
            )
        lines += ["</p>", "</div>", "</body>", "</html>", ""]
        self.add_text(ARCHIVE_INDEX_PATH, "\n".join(lines), "text/html; charset=utf-8")
        if latest is not None and latest.archive_page_path is not None:
            self.add(CUDA_DOWNLOADS_PATH, self.resources[latest.archive_page_path])

    # -- all together -----------------------------------------------------------------------

    def build(self) -> Site:
        infos: list[ReleaseInfo] = []
        self.installer_files()
        for label in self.labels:
            built = self.manifest(label)
            components: dict[str, str] = {}
            if built is not None:
                document, source = built
                self.manifests[label] = document
                components = {k: v["version"] for k, v in document.items() if isinstance(v, dict)}
            title = _title(label)
            preview = label == PREVIEW_LABEL
            major_minor = ".".join(label.split(".")[:2])
            infos.append(
                ReleaseInfo(
                    label=label,
                    release_date=_RELEASES[label][0],
                    title=title,
                    index_text=(
                        f"CUDA Toolkit {major_minor} Developer Preview"
                        if preview
                        else f"CUDA Toolkit {label}"
                    ),
                    preview=preview,
                    future=label == FUTURE_LABEL and self.options.future_release,
                    driver=self.driver_of(label),
                    components=components,
                    installers=self.rows(label),
                    manifest_path=(
                        None if built is None else f"{REDIST_DIR}redistrib_{label}.json"
                    ),
                    manifest_source="none" if built is None else source,
                    md5sum_path=self.md5sum(label),
                    sha256sum_path=self.sha256sum(label),
                    archive_page_path=self.archive_page(label, title),
                )
            )
        self.listings()
        self.archive_index(infos)
        releases = {info.label: info for info in infos}
        return Site(
            options=self.options,
            resources=self.resources,
            catalog=self.catalog,
            installers=self.installers,
            releases=releases,
            archives=self.archives,
            manifests=self.manifests,
            react_props=self.react_props,
            future_release=releases.get(FUTURE_LABEL) if self.options.future_release else None,
        )


def _manifest_entries(
    document: Mapping[str, Any],
) -> Iterable[tuple[str, str, Mapping[str, str]]]:
    for component, value in document.items():
        if not isinstance(value, dict):
            continue
        for platform, entry in value.items():
            if isinstance(entry, dict) and "relative_path" in entry:
                yield component, platform, entry


def _title(label: str) -> str:
    major, minor, patch = label.split(".")
    if label == PREVIEW_LABEL:
        return f"CUDA Toolkit {major}.{minor} Developer Preview"
    if patch == "0":
        return f"CUDA Toolkit {major}.{minor}"
    return f"CUDA Toolkit {major}.{minor} Update {patch}"


def _month(date: str) -> str:
    parsed = datetime.date.fromisoformat(date)
    return f"{calendar.month_name[parsed.month]} {parsed.year}"


def _bash(*commands: str) -> str:
    return "".join(f'<span class="cudaBash">{command}</span>' for command in commands)


def _deb_network(arch: str, dashed: str) -> dict[str, Any]:
    repo = f"{DOWNLOAD_HOST}/compute/cuda/repos/ubuntu2404/{arch}"
    return {
        "details": _bash(
            f"wget {repo}/cuda-keyring_1.1-1_all.deb",
            "sudo dpkg -i cuda-keyring_1.1-1_all.deb",
            "sudo apt-get update",
            f"sudo apt-get -y install cuda-toolkit-{dashed}",
        )
    }


def _structure(releases: Mapping[str, Any]) -> dict[str, Any]:
    """The option tree of the release keys; leaves are lists of installer types."""
    tree: dict[str, Any] = {}
    for key in releases:
        *levels, kind = key.split("/")
        node = tree
        for level in levels[:-1]:
            node = node.setdefault(level, {})
        node.setdefault(levels[-1], []).append(kind)
    return tree


def _archive_page_html(title: str, canonical: str, payload: Mapping[str, Any]) -> str:
    props = _attr_escape(json.dumps(payload, separators=(",", ":")))
    ld_json = json.dumps({"@context": "https://schema.org", "@type": "WebPage", "name": title})
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en-us" dir="ltr">',
            "<head>",
            '<meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1.0">',
            f"<title>{title} Downloads | NVIDIA Developer</title>",
            f'<link rel="canonical" href="{canonical}">',
            f'<link rel="stylesheet" href="{WWW_HOST}/sites/default/files/css/cuda-downloads.css">',
            f'<script type="application/ld+json">{ld_json}</script>',
            f'<script src="{WWW_HOST}/sites/default/files/js/downloads-bundle.js" defer></script>',
            "</head>",
            "<body>",
            '<div id="page-wrapper">',
            "<noscript>Please enable JavaScript to select a download.</noscript>",
            f'<div data-react-class="NestedOptionSelector" data-react-props="{props}"></div>',
            "</div>",
            "<script>window.ReactRailsUJS && window.ReactRailsUJS.mountComponents();</script>",
            "</body>",
            "</html>",
            "",
        ]
    )


@functools.lru_cache(maxsize=64)
def _build_cached(options: SiteOptions) -> Site:
    return _Builder(options).build()


def build_site(options: SiteOptions | None = None) -> Site:
    """Build (or return the cached) site for ``options`` (default: ``SiteOptions()``).

    Pure: reads only the samples in ``data/``.  Equal options return the same object.
    """
    return _build_cached(options if options is not None else SiteOptions())


def variant_options() -> tuple[SiteOptions, ...]:
    """Every non-default value of every option once, plus all of them combined."""
    single = (
        SiteOptions(md5sum_separator=" "),
        SiteOptions(listing_quote='"'),
        SiteOptions(listing_duplicates=True),
        SiteOptions(react_structure="top"),
        SiteOptions(react_structure="absent"),
        SiteOptions(react_checksums="details"),
        SiteOptions(react_checksums="absent"),
        SiteOptions(details_patch_link_first=True),
        SiteOptions(missing_md5sum=frozenset({"13.0.1", "12.8.0"})),
        SiteOptions(missing_archive_page=frozenset({"13.0.1", "13.4.1"})),
        SiteOptions(future_release=True),
    )
    combined = SiteOptions(
        md5sum_separator=" ",
        listing_quote='"',
        listing_duplicates=True,
        react_structure="top",
        react_checksums="details",
        details_patch_link_first=True,
        missing_md5sum=frozenset({"13.0.1"}),
        missing_archive_page=frozenset({"12.8.0"}),
        future_release=True,
    )
    return (*single, combined)


__all__ = [
    "ARCHIVE_INDEX_PATH",
    "CUDA_DOWNLOADS_PATH",
    "DOWNLOAD_HOST",
    "FUTURE_DRIVER",
    "FUTURE_FILENAMES",
    "FUTURE_LABEL",
    "HOST_PREFIXES",
    "PACKAGES_HOST",
    "PREVIEW_LABEL",
    "PREVIEW_SHA256",
    "REACT_MD5_FIELD",
    "REACT_SIZE_FIELD",
    "REDIST_DIR",
    "WWW_HOST",
    "ArchiveInfo",
    "CatalogRow",
    "ReleaseInfo",
    "Resource",
    "Site",
    "SiteOptions",
    "StaticResource",
    "VirtualFile",
    "build_site",
    "decode_react_props",
    "load_catalog",
    "nvidia_url_to_path",
    "sample_bytes",
    "variant_options",
]
