"""A package index as PyPI really answers: PEP 691 JSON, PEP 503 HTML, PEP 658.

Parsing (:func:`parse_simple_json`, :func:`parse_simple_html`) is pure.
:class:`PackageIndex` is the I/O edge: one request per project page (cached),
and wheel metadata from the PEP 658 ``.metadata`` file when the index offers
one; otherwise from the wheel itself, downloaded when small (the
``cuda-toolkit`` meta-package is ~2 KB) or read with HTTP range requests on the
zip's central directory when large.  Versions come from file names, never the
``versions`` array, which PyPI leaves incomplete.
"""

from __future__ import annotations

import html
import io
import json
import re
import zipfile
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any
from urllib.parse import unquote, urldefrag, urljoin

from packaging.metadata import Metadata
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import Version

from cudaup.errors import NetworkError, RemoteFileMissingError, SourceFormatError
from cudaup.net.http import HttpClient

ACCEPT = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"
#: Wheels up to this size are downloaded whole to read METADATA; larger ones are range-read.
SMALL_WHEEL = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class DistFile:
    filename: str
    url: str
    sha256: str | None
    size: int | None
    requires_python: str | None
    yanked: bool
    core_metadata: bool

    @property
    def is_wheel(self) -> bool:
        return self.filename.endswith(".whl")

    @property
    def version(self) -> Version | None:
        try:
            if self.is_wheel:
                return parse_wheel_filename(self.filename)[1]
            return parse_sdist_filename(self.filename)[1]
        except (InvalidWheelFilename, InvalidSdistFilename):
            return None


def _truthy_metadata(value: Any) -> bool:
    return bool(value) and value is not False


def parse_simple_json(data: bytes, page_url: str) -> list[DistFile]:
    """Files of a PEP 691 JSON project page."""
    try:
        document = json.loads(data)
        entries = document["files"]
    except (ValueError, KeyError, TypeError):
        raise SourceFormatError(f"{page_url} is not a PEP 691 project page") from None
    files: list[DistFile] = []
    for entry in entries:
        if not isinstance(entry, dict) or "filename" not in entry or "url" not in entry:
            continue
        hashes = entry.get("hashes") or {}
        yanked = entry.get("yanked", False)
        size = entry.get("size")
        files.append(
            DistFile(
                filename=entry["filename"],
                url=urljoin(page_url, entry["url"]),
                sha256=hashes.get("sha256") if isinstance(hashes, dict) else None,
                size=size if isinstance(size, int) else None,
                requires_python=entry.get("requires-python"),
                yanked=bool(yanked),
                core_metadata=_truthy_metadata(
                    entry.get("core-metadata", entry.get("dist-info-metadata"))
                ),
            )
        )
    return files


class _AnchorParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.anchors: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.anchors.append(dict(attrs))


def parse_simple_html(text: str, page_url: str) -> list[DistFile]:
    """Files of a PEP 503 HTML project page (relative and cross-host links)."""
    parser = _AnchorParser()
    parser.feed(text)
    files: list[DistFile] = []
    for attrs in parser.anchors:
        href = attrs.get("href")
        if not href:
            continue
        absolute, fragment = urldefrag(urljoin(page_url, href))
        filename = unquote(absolute.rsplit("/", 1)[-1])
        sha256 = fragment.split("=", 1)[1] if fragment.startswith("sha256=") else None
        requires = attrs.get("data-requires-python")
        metadata = attrs.get("data-core-metadata", attrs.get("data-dist-info-metadata"))
        files.append(
            DistFile(
                filename=filename,
                url=absolute,
                sha256=sha256,
                size=None,
                requires_python=html.unescape(requires) if requires else None,
                yanked="data-yanked" in attrs,
                core_metadata=metadata is not None and metadata != "false",
            )
        )
    return files


class _HttpRangeFile(io.RawIOBase):
    """A seekable read-only view of a remote file, fetched in ranges (for zipfile)."""

    def __init__(self, http: HttpClient, url: str, size: int) -> None:
        self._http, self._url, self._size, self._pos = http, url, size, 0
        self._blocks: dict[int, bytes] = {}

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        end = min(self._pos + len(view), self._size)
        if end <= self._pos:
            return 0
        data = self._fetch(self._pos, end)
        view[: len(data)] = data
        self._pos += len(data)
        return len(data)

    def _fetch(self, start: int, end: int) -> bytes:
        # Ask for at least 64 KiB so zipfile's many small reads cost few requests.
        key = start
        cached = self._blocks.get(key)
        if cached is not None and len(cached) >= end - start:
            return cached[: end - start]
        want_end = min(self._size, max(end, start + 65536))
        raw = self._http.open("GET", self._url, {"Range": f"bytes={start}-{want_end - 1}"})
        try:
            if raw.status != 206:
                raise SourceFormatError(f"{self._url} does not honour Range requests")
            data = raw.read()
        finally:
            raw.release_conn()
        self._blocks[key] = data
        return data[: end - start]


class PackageIndex:
    """One simple-API index (PyPI by default), through cudaup's HTTP client."""

    def __init__(self, http: HttpClient, index_url: str) -> None:
        self.http = http
        self.index_url = index_url.rstrip("/")

    def project_url(self, project: str) -> str:
        return f"{self.index_url}/{canonicalize_name(project)}/"

    def files(self, project: str) -> list[DistFile]:
        url = self.project_url(project)
        response = self.http.get(url, cache="index", accept=ACCEPT)
        if response.status == 404:
            raise RemoteFileMissingError(
                f"the index {self.index_url} has no project {project!r}", url, 404
            )
        if not response.ok:
            raise NetworkError(f"{url} answered HTTP {response.status}")
        body = response.body.lstrip()
        if body.startswith(b"{"):
            return parse_simple_json(response.body, url)
        return parse_simple_html(response.text(), url)

    def metadata(self, file: DistFile) -> Metadata:
        """Core metadata of a wheel, as cheaply as the index allows."""
        if file.core_metadata:
            response = self.http.get(file.url + ".metadata", cache="metadata")
            if response.ok:
                return _parse_metadata(response.body, file.filename)
        if file.size is not None and file.size > SMALL_WHEEL:
            return self._metadata_by_range(file, file.size)
        response = self.http.get(file.url, cache="metadata", max_bytes=64 * 1024 * 1024)
        if not response.ok:
            raise RemoteFileMissingError(
                f"{file.url} answered HTTP {response.status}", file.url, response.status
            )
        return _metadata_from_wheel(zipfile.ZipFile(io.BytesIO(response.body)), file.filename)

    def _metadata_by_range(self, file: DistFile, size: int) -> Metadata:
        view = io.BufferedReader(_HttpRangeFile(self.http, file.url, size), buffer_size=65536)
        return _metadata_from_wheel(zipfile.ZipFile(view), file.filename)


def _metadata_from_wheel(archive: zipfile.ZipFile, filename: str) -> Metadata:
    names = [n for n in archive.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
    if len(names) != 1:
        raise SourceFormatError(f"{filename} has no single *.dist-info/METADATA")
    return _parse_metadata(archive.read(names[0]), filename)


def _parse_metadata(data: bytes, filename: str) -> Metadata:
    try:
        return Metadata.from_email(data, validate=False)
    except Exception as exc:  # packaging raises an ExceptionGroup of field errors
        raise SourceFormatError(f"cannot read the metadata of {filename}: {exc}") from None
