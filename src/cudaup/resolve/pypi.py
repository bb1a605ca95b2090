"""A package index as PyPI really answers: PEP 691 JSON, PEP 503 HTML, PEP 658.

Parsing (:func:`parse_simple_json`, :func:`parse_simple_html`) is pure, and so are
page digests (:func:`page_digest`, :func:`files_from_digest`: a page's files as parsed,
kept beside its cached answer for the next read of the same bytes).
:class:`PackageIndex` is the I/O edge: one request per project page (cached),
and wheel metadata from the PEP 658 ``.metadata`` file when the index offers
one; otherwise from the wheel itself, downloaded when small (the
``cuda-toolkit`` meta-package is ~2 KB) or, when large, read by :mod:`zipfile` over a
:class:`~cudaup.net.ranged_file.RangedFile` (HTTP range requests: the zip's tail,
then the metadata member).  Versions come from file names, never the
``versions`` array, which PyPI leaves incomplete.

Every file name an index gives is a plain file name (checked by
:mod:`cudaup.core.names`: it becomes the name of a download), every field has
the type PEP 691 gives it, sizes are 0 to 2**50 bytes, and a page or metadata
file that is broken, oversized, not UTF-8 or nested too deeply is refused as
:class:`~cudaup.errors.SourceFormatError` naming its URL.
"""

from __future__ import annotations

import functools
import hashlib
import html
import io
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any
from urllib.parse import unquote, urldefrag, urljoin

from packaging.utils import (
    InvalidSdistFilename,
    canonicalize_name,
    parse_sdist_filename,
)
from packaging.version import InvalidVersion, Version

from cudaup.core.documents import decode_text, load_json
from cudaup.core.names import MAX_SIZE, check_file_name, check_file_names, check_size
from cudaup.core.wheels import wheel_name
from cudaup.errors import (
    IntegrityError,
    NetworkError,
    RemoteFileMissingError,
    SourceFormatError,
)
from cudaup.net.http import HttpClient, Response
from cudaup.net.ranged_file import RangedFile, wheel_archive

if TYPE_CHECKING:  # read where a wheel's metadata or an HTML page is: a warm plan reads none
    from packaging.metadata import Metadata

ACCEPT = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"
#: Wheels up to this size are downloaded whole to read METADATA; larger ones are range-read.
SMALL_WHEEL = 4 * 1024 * 1024
#: The largest project page read (PyPI's largest are a few MB).
MAX_PAGE_BYTES = 32 * 1024 * 1024
#: The largest core metadata file read (NVIDIA's are a few KB).
MAX_METADATA_BYTES = 4 * 1024 * 1024
_SHA256 = re.compile(r"^[0-9a-fA-F]{64}$")


@dataclass(frozen=True, slots=True)
class DistFile:
    filename: str
    url: str
    sha256: str | None
    size: int | None
    requires_python: str | None
    yanked: bool
    core_metadata: bool
    #: Why it was yanked (PEP 592), when the index says.
    yank_reason: str | None = None
    #: The sha256 of its core metadata file (PEP 658/714), when the index gives one.
    metadata_sha256: str | None = None

    @property
    def is_wheel(self) -> bool:
        return self.filename.endswith(".whl")

    @property
    def version(self) -> Version | None:
        return _file_version(self.filename)


@functools.lru_cache(maxsize=1 << 16)
def _file_version(filename: str) -> Version | None:
    """The version a wheel or sdist name carries (None: not a distribution's name); kept,
    since a plan asks it of the same thousands of files on every line it resolves."""
    if filename.endswith(".whl"):
        parts = wheel_name(filename)
        return parts[1] if parts is not None else None
    try:
        return parse_sdist_filename(filename)[1]
    except (InvalidSdistFilename, InvalidVersion):
        return None


def files_of_version(files: Sequence[DistFile], version: Version) -> list[DistFile]:
    """The files of ``version``.  Each name's version field is parsed alone first (once per
    distinct text): a name whose field is another version is no file of it, whatever the
    rest says, so of numpy's 4,415 files only one version's are parsed whole (the name
    and tags, :attr:`DistFile.version`), not all of them.  A page's files (a tuple of
    more than :data:`_INDEXED_FROM`) are sorted by that field once (:func:`_by_field`):
    a plan asks the same pages for hundreds of versions."""
    if isinstance(files, tuple) and len(files) > _INDEXED_FROM:
        candidates: Sequence[DistFile] = _by_field(files).get(version, ())
    else:
        candidates = [f for f in files if _field_version(f.filename) == version]
    return [f for f in candidates if f.version == version]


#: A tuple of files longer than this is sorted by version once, not scanned on each ask.
_INDEXED_FROM = 32
#: The pages sorted so far, by the tuple's identity (kept with it, so that the identity
#: stays its own); emptied past :data:`_PAGES_SORTED`, so that a process making plan
#: after plan (``upgrade``, a test run) holds a bounded number of pages: one cold plan
#: sorts 2-18 (``vllm==0.20.0``; ``vllm flashinfer-python``).
_SORTED: dict[int, tuple[tuple[DistFile, ...], dict[Version, list[DistFile]]]] = {}
_PAGES_SORTED = 128


def _by_field(files: tuple[DistFile, ...]) -> dict[Version, list[DistFile]]:
    """``files`` by the version field of their names (:func:`_field_version`), page order
    kept.  Threads may sort the same page at once: each gets a whole answer, one is kept.
    In a cold ``torch flashinfer-python sgl-kernel`` plan, 489 scans of up to 4,415 names
    took 55-70 ms of its CPU."""
    kept = _SORTED.get(id(files))
    if kept is not None and kept[0] is files:
        return kept[1]
    by_field: dict[Version, list[DistFile]] = {}
    for file in files:
        if (field := _field_version(file.filename)) is not None:
            by_field.setdefault(field, []).append(file)
    if len(_SORTED) >= _PAGES_SORTED:
        _SORTED.clear()
    _SORTED[id(files)] = (files, by_field)
    return by_field


def _field_version(filename: str) -> Version | None:
    """The version field of a wheel or sdist name, split as ``packaging`` splits it (a
    wheel's second dash-separated field, an sdist's text after its last dash)."""
    if filename.endswith(".whl"):
        fields = filename.split("-")
        return _text_version(fields[1]) if len(fields) in (5, 6) else None
    for suffix in (".tar.gz", ".zip"):
        if filename.endswith(suffix):
            return _text_version(filename[: -len(suffix)].rpartition("-")[2])
    return None


@functools.lru_cache(maxsize=1 << 14)
def _text_version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


def _yank_reason(value: Any) -> str | None:
    """PEP 592's reason (a string), one line and bounded; None when none is given."""
    if not isinstance(value, str) or not value.strip():
        return None
    text = " ".join(value.split())
    return text if len(text) <= 300 else text[:297] + "…"


def _truthy_metadata(value: Any) -> bool:
    return bool(value) and value is not False


def _metadata_sha256(value: Any, where: str) -> str | None:
    """The sha256 a JSON page's ``core-metadata`` gives (``{"sha256": ...}``), if any."""
    return (
        _sha256(value.get("sha256"), f"{where} core-metadata") if isinstance(value, dict) else None
    )


def _optional_text(entry: dict[str, Any], key: str, where: str) -> str | None:
    value = entry.get(key)
    if value is not None and not isinstance(value, str):
        raise SourceFormatError(f"{where}: {key!r} is {type(value).__name__}, not a string")
    return value


def _sha256(value: object, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _SHA256.match(value):
        raise SourceFormatError(f"{where}: sha256 {str(value)[:80]!r} is not 64 hex digits")
    return value.lower()


#: An absolute URL that ``urljoin`` returns unchanged: a lower-case http(s) scheme, a
#: plain host (no user, no IPv6 brackets), a path of URL-safe characters, no query,
#: fragment, parameters or whitespace (what PyPI's JSON pages list for every file).
_PLAIN_URL = re.compile(
    r"https?://[A-Za-z0-9.-]+(?::[0-9]{1,5})?(?:/[A-Za-z0-9._~%/+=!$&'()*,:@-]*)?"
)


def _joined(page_url: str, url: str) -> str:
    """``urljoin(page_url, url)``, without its parse for the plain absolute URLs that a
    page lists by the thousand (it was 40 % of parsing numpy's page)."""
    if _PLAIN_URL.fullmatch(url):
        return url
    return urljoin(page_url, url)


def parse_simple_json(data: bytes, page_url: str) -> list[DistFile]:
    """Files of a PEP 691 JSON project page."""
    document = load_json(data, what=page_url, max_bytes=MAX_PAGE_BYTES)
    entries = document.get("files") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise SourceFormatError(f"{page_url} is not a PEP 691 project page")
    files: list[DistFile] = []
    for entry in entries:
        if not isinstance(entry, dict) or "filename" not in entry or "url" not in entry:
            continue
        filename = check_file_name(entry["filename"], field="filename", where=page_url)
        where = f"{filename} in {page_url}"
        url = entry["url"]
        if not isinstance(url, str):
            raise SourceFormatError(f"{where}: 'url' is not a string")
        hashes = entry.get("hashes") or {}
        if not isinstance(hashes, dict):
            raise SourceFormatError(f"{where}: 'hashes' is not an object")
        size = entry.get("size")
        metadata = entry.get("core-metadata", entry.get("dist-info-metadata"))
        files.append(
            DistFile(
                filename=filename,
                url=_joined(page_url, url),
                sha256=_sha256(hashes.get("sha256"), where),
                size=None
                if size is None
                else check_size(size, field="size", where=where, text=False),
                requires_python=_optional_text(entry, "requires-python", where),
                yanked=bool(entry.get("yanked", False)),
                core_metadata=_truthy_metadata(metadata),
                yank_reason=_yank_reason(entry.get("yanked")),
                metadata_sha256=_metadata_sha256(metadata, where),
            )
        )
    return files


def parse_simple_html(text: str, page_url: str) -> list[DistFile]:
    """Files of a PEP 503 HTML project page (relative and cross-host links).

    A link to a directory (``../``, a name ending in ``/``) is not a file and is
    passed over; any other link must end in a plain file name."""
    if len(text) > MAX_PAGE_BYTES:
        raise SourceFormatError(f"{page_url} is larger than {MAX_PAGE_BYTES} bytes")
    from html.parser import HTMLParser  # noqa: PLC0415

    class AnchorParser(HTMLParser):
        def __init__(self) -> None:
            super().__init__(convert_charrefs=True)
            self.anchors: list[dict[str, str | None]] = []

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag == "a":
                self.anchors.append(dict(attrs))

    parser = AnchorParser()
    try:
        parser.feed(text)
        parser.close()
    except (AssertionError, ValueError) as exc:  # html.parser's own complaints
        raise SourceFormatError(f"{page_url} is not an HTML page ({exc})") from None
    files: list[DistFile] = []
    for attrs in parser.anchors:
        href = attrs.get("href")
        if not href:
            continue
        try:
            absolute, fragment = urldefrag(urljoin(page_url, href))
        except ValueError:  # e.g. an unbalanced '[' in the host
            raise SourceFormatError(f"{page_url} links to {href[:200]!r}, not a URL") from None
        if absolute.endswith("/"):
            continue
        filename = check_file_name(
            unquote(absolute.rsplit("/", 1)[-1]), field="file name", where=page_url
        )
        where = f"{filename} in {page_url}"
        sha256 = (
            _sha256(fragment.split("=", 1)[1], where) if fragment.startswith("sha256=") else None
        )
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
                yank_reason=_yank_reason(attrs.get("data-yanked")),
                metadata_sha256=_sha256(metadata.split("=", 1)[1], f"{where} core-metadata")
                if metadata is not None and metadata.startswith("sha256=")
                else None,
            )
        )
    return files


def parse_page(body: bytes, page_url: str) -> list[DistFile]:
    """The files of a project page, JSON (PEP 691) or HTML (PEP 503) as its body says."""
    if body.lstrip().startswith(b"{"):
        return parse_simple_json(body, page_url)
    text = decode_text(body, what=page_url, max_bytes=MAX_PAGE_BYTES, bom="strip")
    return parse_simple_html(text, page_url)


# ----------------------------------------------------------------------------
# Page digests: a parsed page, kept for the next read of the same bytes
# ----------------------------------------------------------------------------
#: The kind of a page digest in the HTTP cache (:meth:`HttpCache.derived`).
DIGEST_KIND = "files"
#: Bumped whenever parsing a page gives other files or fields: an older digest is then
#: not used (its ``format`` differs), and the page is parsed again.
DIGEST_FORMAT = 2


#: A digest's columns: the fields of :class:`DistFile` in order, each with the types its
#: values may have.
_COLUMNS: dict[str, frozenset[type]] = {
    "filename": frozenset({str}),
    "url": frozenset({str}),
    "sha256": frozenset({str, type(None)}),
    "size": frozenset({int, type(None)}),
    "requires_python": frozenset({str, type(None)}),
    "yanked": frozenset({bool}),
    "core_metadata": frozenset({bool}),
    "yank_reason": frozenset({str, type(None)}),
    "metadata_sha256": frozenset({str, type(None)}),
}
#: Deletes lower-case hex digits: a digest's sha256 column, joined, must leave nothing.
_NOT_HEX = str.maketrans("", "", "0123456789abcdef")


def page_digest(files: Sequence[DistFile], page_url: str) -> bytes:
    """``files`` (a page's, as parsed) as a digest: one JSON column per field, so that
    reading it back checks each column's types at once, not each file's."""
    columns = {name: [getattr(f, name) for f in files] for name in _COLUMNS}
    document = {"format": DIGEST_FORMAT, "page": page_url, "files": columns}
    return json.dumps(document, separators=(",", ":")).encode()


def files_from_digest(payload: bytes, page_url: str) -> list[DistFile] | None:
    """The files a digest of ``page_url`` holds, or None when it is not one this version
    of cudaup wrote (another format, another page, columns of other lengths or a value of
    the wrong type, a sha256 not in lower-case hex, a size out of range, a file name
    :func:`~cudaup.core.names.check_file_name` refuses): the page is then parsed again."""
    try:
        document = json.loads(payload)
    except (ValueError, RecursionError):
        return None
    if (
        not isinstance(document, dict)
        or document.get("format") != DIGEST_FORMAT
        or document.get("page") != page_url
        or not isinstance(columns := document.get("files"), dict)
        or set(columns) != set(_COLUMNS)
        or not all(isinstance(column, list) for column in columns.values())
        or len({len(column) for column in columns.values()}) > 1
        # A column's types in one pass (bool is not int here: type(True) is bool).
        or any(not set(map(type, columns[name])) <= kinds for name, kinds in _COLUMNS.items())
    ):
        return None
    sizes = [size for size in columns["size"] if size is not None]
    hashes = [h for h in columns["sha256"] + columns["metadata_sha256"] if h is not None]
    if sizes and not 0 <= min(sizes) <= max(sizes) <= MAX_SIZE:
        return None
    if not set(map(len, hashes)) <= {64} or "".join(hashes).translate(_NOT_HEX):
        return None
    try:  # as a page's own are checked: its names become downloads' names
        check_file_names(columns["filename"], field="filename", where=page_url)
    except SourceFormatError:
        return None
    return list(map(DistFile, *(columns[name] for name in _COLUMNS)))


class PackageIndex:
    """One simple-API index (PyPI by default), through cudaup's HTTP client."""

    def __init__(self, http: HttpClient, index_url: str) -> None:
        self.http = http
        self.index_url = index_url.rstrip("/")

    def project_url(self, project: str) -> str:
        return f"{self.index_url}/{canonicalize_name(project)}/"

    def files(self, project: str, read: Response | None = None) -> list[DistFile]:
        """``project``'s files; ``read``: its page as this client read it a moment ago (a
        plan's index memo, for uv), used as if asked now, and cached as that would be."""
        url = self.project_url(project)
        if read is not None and read.status == 200:
            response = read
            self.http.cache.store_answer(url, 200, read.headers, read.body)
        else:
            response = self.http.get(url, cache="index", accept=ACCEPT)
        if response.status == 404:
            raise RemoteFileMissingError(
                f"the index {self.index_url} has no project {project!r}", url, 404
            )
        if not response.ok:
            raise NetworkError(f"{url} answered HTTP {response.status}")
        # A page read again (every warm plan reads the same ones: numpy's 4,415 files took
        # 0.09 s to parse) is taken from its digest, kept beside the cached answer and
        # bound to these very bytes by their SHA-256; a missing or unusable one is parsed.
        source = hashlib.sha256(response.body).hexdigest()
        kept = self.http.cache.derived(url, DIGEST_KIND, source)
        if kept is not None and (files := files_from_digest(kept, url)) is not None:
            return files
        files = parse_page(response.body, url)
        self.http.cache.keep_derived(url, DIGEST_KIND, source, page_digest(files, url))
        return files

    def metadata(self, file: DistFile) -> Metadata:
        """Core metadata of a wheel, as cheaply as the index allows."""
        if file.core_metadata:
            response = self.http.get(
                file.url + ".metadata", cache="metadata", max_bytes=MAX_METADATA_BYTES
            )
            if response.ok:
                self._check_vouched(response.body, file.metadata_sha256, f"{file.url}.metadata")
                return parse_metadata(response.body, f"{file.url}.metadata")
        if file.size is not None and file.size > SMALL_WHEEL:
            return _metadata_from_wheel(lambda: RangedFile(self.http, file.url), file.url)
        response = self.http.get(file.url, cache="metadata", max_bytes=64 * 1024 * 1024)
        if not response.ok:
            raise RemoteFileMissingError(
                f"{file.url} answered HTTP {response.status}", file.url, response.status
            )
        # Read whole, the wheel is checked as its download would be (a range read cannot
        # be: uv and pip read such metadata unchecked too).
        self._check_vouched(response.body, file.sha256, file.url)
        return _metadata_from_wheel(lambda: io.BytesIO(response.body), file.url)

    def _check_vouched(self, body: bytes, sha256: str | None, url: str) -> None:
        """Refuse metadata (a ``.metadata`` file, or the wheel it was read from) that is
        not the file the index vouched for by its sha256 (none given: nothing to check);
        its cached answer goes too, so that the next run asks again."""
        found = hashlib.sha256(body).hexdigest()
        if sha256 is not None and found != sha256:
            self.http.cache.forget(url)
            raise IntegrityError(
                f"{url}: sha256 mismatch: the index says {sha256}, the file served is "
                f"{found}; the index and the host of its files disagree (a mirror out of "
                "sync, or tampering)"
            )

    def members(self, url: str) -> list[str]:
        """The paths inside a remote wheel, from its zip directory alone (range reads: the
        tail of the file, never its members)."""
        with wheel_archive(RangedFile(self.http, url), url) as archive:
            return archive.namelist()


def _metadata_from_wheel(open_wheel: Callable[[], IO[bytes] | RangedFile], url: str) -> Metadata:
    """The core metadata inside a wheel (its one ``*.dist-info/METADATA``, bounded); a
    file that is not a zip is refused, not a crash."""
    with wheel_archive(open_wheel(), url) as archive:
        members = [
            info
            for info in archive.infolist()
            if re.fullmatch(r"[^/]+\.dist-info/METADATA", info.filename)
        ]
        if len(members) != 1:
            raise SourceFormatError(f"{url} has no single *.dist-info/METADATA")
        if members[0].file_size > MAX_METADATA_BYTES:
            raise SourceFormatError(
                f"{url}: {members[0].filename} is larger than {MAX_METADATA_BYTES} bytes"
            )
        data = archive.read(members[0])
    return parse_metadata(data, url)


def parse_metadata(data: bytes, where: str) -> Metadata:
    """Core metadata, with the fields cudaup reads (extras, requirements) validated here
    so that a malformed one is a refusal now, not an exception where it is used."""
    if len(data) > MAX_METADATA_BYTES:
        raise SourceFormatError(f"{where} is larger than {MAX_METADATA_BYTES} bytes")
    from packaging.metadata import Metadata  # noqa: PLC0415

    try:
        metadata = Metadata.from_email(data, validate=False)
        _ = metadata.requires_dist, metadata.provides_extra
    except Exception as exc:  # packaging raises InvalidMetadata or an ExceptionGroup of them
        raise SourceFormatError(f"cannot read the core metadata of {where}: {exc}") from None
    return metadata
