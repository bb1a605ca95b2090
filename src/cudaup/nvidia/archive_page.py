"""Download-archive pages ``developer.nvidia.com/cuda-X-Y-Z-download-archive``.

The page is a JavaScript shell; its data sits in one HTML attribute,
``data-react-props="…"``, holding entity-encoded JSON with a ``releases``
mapping of option paths (``Linux/x86_64/Ubuntu/24.04/runfile_local``) to
entries whose ``details`` HTML carries the download button
``<a id="targetDownloadButtonHref" href="URL">``.  Unverified parts (where the
``releases``/``structure`` keys sit, whether md5 and size are fields or text
in ``details``) are handled by searching rather than by assuming one shape.
Also parses the archive index ``/cuda-toolkit-archive``.

The payload is decoded by :mod:`cudaup.core.documents` (deep nesting, huge
numbers and broken JSON are refused); a download URL must be ``http(s)`` and
end in a plain file name (it names the download), and a size must be 0 to
2**50 bytes; otherwise the page is refused, naming it.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Any

from cudaup.core.documents import load_json
from cudaup.core.names import check_file_name, check_size
from cudaup.core.platforms import Platform
from cudaup.errors import SourceFormatError

MAX_PAGE_BYTES = 10 * 1024 * 1024

_PROPS = re.compile(r"""data-react-props\s*=\s*(?:"([^"]*)"|'([^']*)')""", re.IGNORECASE)
# Tags never span a '<': each match stops at the next one, so a page without '>'
# costs linear time, not a scan to its end from every '<a'.
_ANCHOR = re.compile(r"<a\b([^<>]*)>", re.IGNORECASE)
_TAG = re.compile(r"<[^<>]+>")
_ATTR = re.compile(r"""([\w-]+)\s*=\s*(?:"([^"]*)"|'([^']*)')""")
_ANY_HREF = re.compile(r"""https?://[^\s"'<>]+""")
_MD5_IN_TEXT = re.compile(r"md5[^0-9a-f]{0,40}?\b([0-9a-f]{32})\b", re.IGNORECASE)
# \b before the digits: a match starts only where a run of digits starts (linear time).
_SIZE_IN_TEXT = re.compile(r"(?:size[^0-9]{0,20}?)?\b(\d{6,})\s*(?:bytes|B)\b", re.IGNORECASE)
_TITLE_VERSION = re.compile(r"CUDA Toolkit\s+(\d+\.\d+(?:\.\d+)?)(?:\s+(Update\s+\d+|GA))?", re.I)
_INDEX_LINK = re.compile(
    r"""<a\b[^<>]*href\s*=\s*["']([^"'<>]*cuda-(\d{1,6})-(\d{1,6})-(\d{1,6})-download-archive[^"'<>]*)["'][^<>]*>"""
    r"""\s*(CUDA Toolkit[^<]*)</a>""",
    re.IGNORECASE,
)
_STANDALONE_TYPES = {"runfile_local", "exe_local"}


@dataclass(frozen=True, slots=True)
class PageDownload:
    """One standalone installer offered by the page."""

    key: str
    platform: Platform
    url: str
    md5: str | None
    size: int | None

    @property
    def filename(self) -> str:
        return self.url.rsplit("/", 1)[-1]


@dataclass(frozen=True, slots=True)
class ArchivePage:
    title: str | None
    downloads: tuple[PageDownload, ...]

    def for_platform(self, platform: Platform) -> list[PageDownload]:
        """Distinct downloads for a platform (several distro keys share one URL)."""
        seen: dict[str, PageDownload] = {}
        for download in self.downloads:
            if download.platform == platform and download.url not in seen:
                seen[download.url] = download
        return list(seen.values())

    @property
    def platforms(self) -> tuple[Platform, ...]:
        return tuple(dict.fromkeys(d.platform for d in self.downloads))


@dataclass(frozen=True, slots=True)
class ArchiveIndexEntry:
    label: str
    text: str
    url: str
    preview: bool


def _platform_of(key: str) -> Platform | None:
    parts = [p.lower() for p in key.split("/")]
    if len(parts) < 3:
        return None
    os_name, arch = parts[0], parts[1]
    if os_name == "linux":
        if arch in {"x86_64", "amd64"}:
            return "linux-x86_64"
        if arch in {"arm64-sbsa", "sbsa", "arm64"}:
            return "linux-sbsa"
        if arch in {"aarch64-jetson", "aarch64", "jetson"}:
            return "linux-aarch64"
        if arch == "ppc64le":
            return "linux-ppc64le"
    elif os_name == "windows":
        if arch in {"x86_64", "amd64"}:
            return "windows-x86_64"
        if arch in {"arm64", "aarch64"}:
            return "windows-arm64"
    return None


def _find_releases(payload: Any) -> dict[str, Any] | None:
    """The ``releases`` mapping, wherever it sits in the payload (depth first, in order).

    A loop with its own stack, not recursion: the payload may be nested as deep as
    the JSON decoder allowed, and recursing that deep again would overflow."""
    stack = [payload]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            continue
        releases = node.get("releases")
        if isinstance(releases, dict) and any(isinstance(v, dict) for v in releases.values()):
            return releases
        stack.extend(reversed(node.values()))
    return None


def _download_url(details: str) -> str | None:
    fallback: str | None = None
    for match in _ANCHOR.finditer(details):
        attrs = {
            m.group(1).lower(): m.group(2) or m.group(3) or ""
            for m in _ATTR.finditer(match.group(1))
        }
        href = attrs.get("href", "")
        if "patches" in href:
            continue  # old pages listed patch installers next to the toolkit
        if attrs.get("id") == "targetDownloadButtonHref" and href:
            return href
        if fallback is None and "/compute/cuda/" in href:
            fallback = href
    if fallback is None:
        for found in _ANY_HREF.finditer(details):
            href = found.group(0)
            if (
                "/compute/cuda/" in href
                and "patches" not in href
                and href.endswith((".run", ".exe"))
            ):
                return href
    return fallback


def _field(entry: dict[str, Any], *needles: str) -> Any:
    for key, value in entry.items():
        lowered = key.lower()
        if any(n in lowered for n in needles) and isinstance(value, (str, int)):
            return value
    return None


def _md5_of(entry: dict[str, Any], details: str) -> str | None:
    value = _field(entry, "md5")
    if isinstance(value, str) and re.fullmatch(r"[0-9a-fA-F]{32}", value.strip()):
        return value.strip().lower()
    match = _MD5_IN_TEXT.search(html.unescape(_TAG.sub(" ", details)))
    return match.group(1).lower() if match else None


def _size_of(entry: dict[str, Any], details: str, where: str) -> int | None:
    value = _field(entry, "size", "bytes", "length")
    if isinstance(value, int) or (isinstance(value, str) and value.strip().isdigit()):
        return check_size(value, field="size", where=where)
    match = _SIZE_IN_TEXT.search(_TAG.sub(" ", details).replace(",", ""))
    return check_size(match.group(1), field="size", where=where) if match else None


def _checked_url(url: str, where: str) -> str:
    """The download URL, refused unless it is http(s) and names a plain file."""
    url = url.strip()
    if not url.lower().startswith(("https://", "http://")):
        raise SourceFormatError(f"download URL {url[:200]!r} in {where} is not an http(s) URL")
    check_file_name(url.rsplit("/", 1)[-1], field="installer file name", where=where)
    return url


def parse_archive_page(page: str, source: str = "the download-archive page") -> ArchivePage:
    """Every standalone installer (runfile, local exe) the page offers."""
    if len(page) > MAX_PAGE_BYTES:
        raise SourceFormatError(f"{source} is larger than {MAX_PAGE_BYTES} bytes")
    match = _PROPS.search(page)
    if match is None:
        raise SourceFormatError(f"{source} has no data-react-props payload")
    payload = load_json(
        html.unescape(match.group(1) or match.group(2) or ""),
        what=f"the data-react-props payload of {source}",
        max_bytes=MAX_PAGE_BYTES,
    )
    releases = _find_releases(payload)
    if releases is None:
        raise SourceFormatError(f"the data-react-props payload of {source} has no releases mapping")
    title: str | None = None
    if isinstance(payload, dict):
        header = (
            payload.get("pageData", {}).get("header", {})
            if isinstance(payload.get("pageData"), dict)
            else {}
        )
        title = header.get("title") if isinstance(header, dict) else None
    downloads: list[PageDownload] = []
    for key, entry in releases.items():
        if not isinstance(entry, dict) or key.rsplit("/", 1)[-1] not in _STANDALONE_TYPES:
            continue
        platform = _platform_of(key)
        details = entry.get("details")
        details = details if isinstance(details, str) else ""
        url = _download_url(details)
        if platform is None or url is None:
            continue
        where = f"{key} in {source}"
        downloads.append(
            PageDownload(
                key,
                platform,
                _checked_url(url, where),
                _md5_of(entry, details),
                _size_of(entry, details, where),
            )
        )
    return ArchivePage(title=title if isinstance(title, str) else None, downloads=tuple(downloads))


def title_label(title: str | None) -> str | None:
    """``CUDA Toolkit 13.0 Update 1 Downloads`` → ``13.0.1``."""
    if not title or not (match := _TITLE_VERSION.search(title)):
        return None
    parts = match.group(1).split(".")
    if len(parts) == 3:
        return match.group(1)
    update = match.group(2) or ""
    patch = update.split()[-1] if update.lower().startswith("update") else "0"
    return f"{parts[0]}.{parts[1]}.{patch}"


def parse_archive_index(page: str, source: str = "the archive index") -> list[ArchiveIndexEntry]:
    """Releases linked from ``/cuda-toolkit-archive`` (previews included)."""
    if len(page) > MAX_PAGE_BYTES:
        raise SourceFormatError(f"{source} is larger than {MAX_PAGE_BYTES} bytes")
    entries: dict[str, ArchiveIndexEntry] = {}
    for match in _INDEX_LINK.finditer(page):
        url, major, minor, patch, text = match.groups()
        label = f"{major}.{minor}.{patch}"
        text = " ".join(text.split())
        entries.setdefault(label, ArchiveIndexEntry(label, text, url, "preview" in text.lower()))
    return list(entries.values())
