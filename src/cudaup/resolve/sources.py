"""NVIDIA's download server as cudaup reads it: one method per document.

The I/O edge for the resolver.  Each method fetches one document through the
cached HTTP client and hands it to the matching pure parser in
:mod:`cudaup.nvidia`; a 404 is an answer (``None``), not an error.  URLs the
documents give on NVIDIA's default hosts are moved onto the configured bases.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from cudaup.errors import NetworkError
from cudaup.net.http import CacheKind, HttpClient, Response
from cudaup.nvidia.archive_page import (
    ArchiveIndexEntry,
    ArchivePage,
    parse_archive_index,
    parse_archive_page,
)
from cudaup.nvidia.checksums import Algorithm, parse_checksum_file
from cudaup.nvidia.listing import ListedRelease, parse_redist_listing
from cudaup.nvidia.manifest import Manifest, parse_manifest


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """What a cheap request says about a file, without downloading it."""

    url: str
    status: int
    size: int | None
    etag: str | None
    last_modified: str | None
    accept_ranges: bool

    @property
    def exists(self) -> bool:
        return 200 <= self.status < 300


class NvidiaSource:
    def __init__(self, http: HttpClient) -> None:
        self.http = http
        self.settings = http.settings

    # -- URLs (NVIDIA's documented locations) --------------------------------
    def listing_url(self) -> str:
        return f"{self.settings.download_url}/compute/cuda/redist/"

    def manifest_url(self, label: str) -> str:
        return f"{self.settings.download_url}/compute/cuda/redist/redistrib_{label}.json"

    def redist_url(self, relative_path: str) -> str:
        return f"{self.settings.download_url}/compute/cuda/redist/{relative_path}"

    def md5sum_url(self, label: str) -> str:
        return f"{self.settings.download_url}/compute/cuda/{label}/docs/sidebar/md5sum.txt"

    def local_installers_url(self, label: str) -> str:
        return f"{self.settings.download_url}/compute/cuda/{label}/local_installers/"

    def page_url(self, label: str) -> str:
        return f"{self.settings.archive_url}/cuda-{label.replace('.', '-')}-download-archive"

    def archive_index_url(self) -> str:
        return f"{self.settings.archive_url}/cuda-toolkit-archive"

    # -- documents -------------------------------------------------------------
    def _get(self, url: str, kind: CacheKind) -> Response | None:
        response = self.http.get(url, cache=kind)
        if response.status in {404, 410}:
            return None
        if not response.ok:
            raise NetworkError(f"{url} answered HTTP {response.status}")
        return response

    def listing(self) -> list[ListedRelease]:
        response = self._get(self.listing_url(), "listing")
        if response is None:
            raise NetworkError(f"{self.listing_url()} answered 404: is this an NVIDIA mirror?")
        return parse_redist_listing(response.text())

    def manifest(self, label: str) -> Manifest | None:
        response = self._get(self.manifest_url(label), "manifest")
        return parse_manifest(response.body) if response else None

    def checksums(self, url: str, algorithm: Algorithm) -> dict[str, str] | None:
        response = self._get(url, "checksums")
        return parse_checksum_file(response.text(), algorithm) if response else None

    def md5sums(self, label: str) -> dict[str, str] | None:
        return self.checksums(self.md5sum_url(label), "md5")

    def archive_page(self, label: str) -> ArchivePage | None:
        response = self._get(self.page_url(label), "page")
        if response is None:
            return None
        page = parse_archive_page(response.text())
        downloads = tuple(replace(d, url=self.settings.rewrite(d.url)) for d in page.downloads)
        return replace(page, downloads=downloads)

    def archive_index(self) -> list[ArchiveIndexEntry]:
        response = self._get(self.archive_index_url(), "listing")
        if response is None:
            return []
        return [
            replace(e, url=self.settings.rewrite(e.url))
            for e in parse_archive_index(response.text())
        ]

    # -- probing ---------------------------------------------------------------
    def probe(self, url: str) -> ProbeResult:
        """HEAD a file; fall back to a one-byte ranged GET where HEAD is refused."""
        response = self.http.head(url)
        size_text = response.headers.get("Content-Length")
        if response.status in {403, 405, 501}:
            raw = self.http.open("GET", url, {"Range": "bytes=0-0"})
            try:
                headers = dict(raw.headers.items())
                status = raw.status
            finally:
                raw.release_conn()
            total = headers.get("Content-Range", "").rsplit("/", 1)[-1]
            size_text = total if status == 206 else headers.get("Content-Length")
            response = Response(url, 200 if status == 206 else status, headers, b"")
        size = int(size_text) if size_text and size_text.isdigit() else None
        return ProbeResult(
            url=response.url,
            status=response.status,
            size=size,
            etag=response.headers.get("ETag"),
            last_modified=response.headers.get("Last-Modified"),
            accept_ranges=response.headers.get("Accept-Ranges", "").lower() == "bytes",
        )
