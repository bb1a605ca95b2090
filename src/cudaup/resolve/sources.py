"""NVIDIA's download server as cudaup reads it: one method per document.

The I/O edge for the resolver.  Each method fetches one document through the
cached HTTP client and hands it to the matching pure parser in
:mod:`cudaup.nvidia`; a 404 is an answer (``None``), not an error.  URLs the
documents give on NVIDIA's default hosts are moved onto the configured bases.
Text is decoded strictly (UTF-8; a byte-order mark only before HTML), and every
parser is told the document's URL, so a refusal names where it came from.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from cudaup.core.documents import decode_text
from cudaup.core.names import check_size
from cudaup.errors import NetworkError
from cudaup.net.http import CacheKind, HttpClient, Response
from cudaup.nvidia.archive_page import (
    MAX_PAGE_BYTES,
    ArchiveIndexEntry,
    ArchivePage,
    parse_archive_index,
    parse_archive_page,
)
from cudaup.nvidia.checksums import MAX_CHECKSUM_FILE_BYTES, Algorithm, parse_checksum_file
from cudaup.nvidia.listing import MAX_LISTING_BYTES, ListedRelease, parse_redist_listing
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
    # ``product`` is the directory below /compute/: CUDA's, or a library's (cudnn, cutensor, …),
    # whose redist trees have the same shape.
    def listing_url(self, product: str = "cuda") -> str:
        return f"{self.settings.download_url}/compute/{product}/redist/"

    def manifest_url(self, label: str, product: str = "cuda") -> str:
        return f"{self.settings.download_url}/compute/{product}/redist/redistrib_{label}.json"

    def redist_url(self, relative_path: str, product: str = "cuda") -> str:
        return f"{self.settings.download_url}/compute/{product}/redist/{relative_path}"

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

    def listing(self, product: str = "cuda") -> list[ListedRelease]:
        url = self.listing_url(product)
        response = self._get(url, "listing")
        if response is None:
            raise NetworkError(f"{url} answered 404: is this an NVIDIA mirror?")
        return parse_redist_listing(_html(response, MAX_LISTING_BYTES), url)

    def manifest(self, label: str, product: str = "cuda") -> Manifest | None:
        url = self.manifest_url(label, product)
        response = self._get(url, "manifest")
        return parse_manifest(response.body, url) if response else None

    def checksums(self, url: str, algorithm: Algorithm) -> dict[str, str] | None:
        response = self._get(url, "checksums")
        if response is None:
            return None
        text = decode_text(response.body, what=url, max_bytes=MAX_CHECKSUM_FILE_BYTES)
        return parse_checksum_file(text, algorithm, url)

    def md5sums(self, label: str) -> dict[str, str] | None:
        return self.checksums(self.md5sum_url(label), "md5")

    def archive_page(self, label: str) -> ArchivePage | None:
        url = self.page_url(label)
        response = self._get(url, "page")
        if response is None:
            return None
        page = parse_archive_page(_html(response, MAX_PAGE_BYTES), url)
        downloads = tuple(replace(d, url=self.settings.rewrite(d.url)) for d in page.downloads)
        return replace(page, downloads=downloads)

    def archive_index(self) -> list[ArchiveIndexEntry]:
        url = self.archive_index_url()
        response = self._get(url, "listing")
        if response is None:
            return []
        return [
            replace(e, url=self.settings.rewrite(e.url))
            for e in parse_archive_index(_html(response, MAX_PAGE_BYTES), url)
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
        size = (
            check_size(size_text, field="size", where=f"the answer of {url}") if size_text else None
        )
        return ProbeResult(
            url=response.url,
            status=response.status,
            size=size,
            etag=response.headers.get("ETag"),
            last_modified=response.headers.get("Last-Modified"),
            accept_ranges=response.headers.get("Accept-Ranges", "").lower() == "bytes",
        )


def _html(response: Response, max_bytes: int) -> str:
    """An HTML document's text: UTF-8, a leading byte-order mark allowed (HTML allows one)."""
    return decode_text(response.body, what=response.url, max_bytes=max_bytes, bom="strip")
