"""The index memo: one plan's loopback view of its package indexes, each page read once.

A plan runs uv several times (the lines of a window at once, later rounds on a line,
the install check), and every run asks the indexes again for the pages and metadata
files it touches: an index (or a proxy in front of it) that sends neither validators
nor cache lifetimes makes each of those runs cost the whole network again.  The memo
is an HTTP server on 127.0.0.1 (a port of its own, a random path prefix), alive for
one plan, that uv is pointed at instead of the flat indexes
(:meth:`IndexMemo.local`): it forwards each GET/HEAD with cudaup's own HTTP client
(its proxies, TLS and timeouts), keeps the answer in memory keyed by method, URL,
``Accept`` and ``Range``, and answers concurrent identical requests with one upstream
request.  Index pages name their files by absolute URL, so their file URLs (HTML
``href``\\ s, PEP 691 ``url``\\ s; fragments and hashes untouched) are rewritten to go
through the memo too: PEP 658 ``.metadata`` files and uv's range reads of wheels are
read once as well.  A body above :data:`MEMO_LIMIT` (a whole wheel) streams through
and is not kept.

It is no open proxy: it forwards only below the indexes it was given and to the file
URLs it rewrote from their pages, only under its random prefix (another local user
cannot aim it, nor read a private index through cudaup's credentials); nothing is
written to disk; file bytes are passed as the upstream sent them, and uv checks them
against the page's hashes as it would have.  An upstream that fails is a 502 (504 on
a timeout) to uv, and :attr:`IndexMemo.failure` keeps cudaup's own error for the plan
to raise.  What leaves the plan names the upstream URLs (:meth:`IndexMemo.upstream_text`),
never the loopback port.
"""

from __future__ import annotations

import contextlib
import copy
import html
import http.server
import json
import re
import secrets
import socket
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from urllib.parse import urljoin, urlsplit

import urllib3

from cudaup.errors import CudaupError, NetworkError
from cudaup.net.http import HttpClient, describe

#: The largest body kept in memory; a larger one (a whole wheel) streams through.
MEMO_LIMIT = 16 * 1024 * 1024
#: The response headers passed through to uv.
PASSED = ("Content-Type", "Content-Range", "Accept-Ranges", "Content-Encoding")
_PAGE_TYPES = ("text/html", "application/vnd.pypi.simple.v1+html")
_JSON_TYPE = "application/vnd.pypi.simple.v1+json"
_HREF = re.compile(r"""(\bhref\s*=\s*)(["'])(.*?)\2""", re.IGNORECASE | re.DOTALL)
_CHUNK = 256 * 1024


@dataclass(frozen=True, slots=True)
class _Answer:
    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes


@dataclass
class _Flight:
    """One upstream request and those waiting for its answer."""

    done: threading.Event = field(default_factory=threading.Event)
    answer: _Answer | None = None
    #: The body is above the limit: each request streams its own.
    streamed: bool = False


class IndexMemo:
    """A context manager: the server runs inside ``with``, and nothing of it after."""

    def __init__(self, client: HttpClient, *, limit: int = MEMO_LIMIT) -> None:
        self.http, self.limit = client, limit
        self.failure: CudaupError | None = None
        #: Requests sent upstream (each answered from the memo afterwards).
        self.upstream_requests = 0
        #: Requests that waited for an identical one's upstream answer.
        self.coalesced = 0
        self._upstreams: list[str] = []
        self._files: set[str] = set()
        self._flights: dict[tuple[str, str, str, str], _Flight] = {}
        self._connections: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._token = secrets.token_urlsafe(16)
        self._server: http.server.ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._base = ""
        #: The loopback port it listens on while open.
        self.port = 0
        self._text_urls: re.Pattern[str] | None = None

    # -- lifetime -----------------------------------------------------------------
    def __enter__(self) -> IndexMemo:
        memo = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                threading.current_thread().name = "cudaup-index-memo-connection"
                with memo._lock:
                    memo._connections.add(self.connection)

            def finish(self) -> None:
                with memo._lock:
                    memo._connections.discard(self.connection)
                super().finish()

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                memo._serve(self, "GET")

            def do_HEAD(self) -> None:
                memo._serve(self, "HEAD")

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # Handler threads are joined on close: none outlives the plan.
        server.daemon_threads, server.block_on_close = False, True
        self._server, self.port = server, server.server_address[1]
        self._base = f"http://127.0.0.1:{self.port}/{self._token}"
        self._text_urls = re.compile(re.escape(self._base) + r"/(?:i/(\d+)|f/(https?)/)")
        self._thread = threading.Thread(
            target=server.serve_forever, name="cudaup-index-memo", daemon=True
        )
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop serving, end every connection (uv's kept-alive ones) and join each thread."""
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return
        server.shutdown()
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):  # already closed by its client
                connection.shutdown(socket.SHUT_RDWR)
        server.server_close()  # joins the handler threads
        thread.join()
        self._server = self._thread = None

    # -- what the plan sees -------------------------------------------------------
    def local(self, upstream: str) -> str:
        """The memo's URL for the index at ``upstream`` (a ``file:`` index is its own)."""
        if not upstream.startswith(("https://", "http://")):
            return upstream
        normal = upstream.rstrip("/")
        with self._lock:
            if normal not in self._upstreams:
                self._upstreams.append(normal)
            number = self._upstreams.index(normal)
        return f"{self._base}/i/{number}"

    def upstream_text(self, text: str) -> str:
        """``text`` with every memo URL in it named by the upstream URL it stands for."""
        if self._text_urls is None:
            return text

        def upstream(match: re.Match[str]) -> str:
            number, scheme = match.group(1), match.group(2)
            if scheme is not None:
                return f"{scheme}://"
            with self._lock:
                known = int(number) < len(self._upstreams)
                return self._upstreams[int(number)] if known else match.group(0)

        return self._text_urls.sub(upstream, text)

    def error(self) -> CudaupError | None:
        """A copy of the first upstream failure (each raiser gets its own)."""
        with self._lock:
            return copy.copy(self.failure) if self.failure is not None else None

    # -- serving ------------------------------------------------------------------
    def _target(self, path: str) -> tuple[str, bool] | None:
        """The upstream URL a request path stands for, and whether it is an index page;
        None for any path the memo did not hand out."""
        prefix = f"/{self._token}/"
        if not path.startswith(prefix):
            return None
        rest, _, query = path[len(prefix) :].partition("?")
        parts = rest.split("/")
        if any(part in {".", ".."} for part in parts):
            return None
        if parts[0] == "i" and len(parts) >= 2 and parts[1].isdigit():
            with self._lock:
                if int(parts[1]) >= len(self._upstreams):
                    return None
                base = self._upstreams[int(parts[1])]
            url = "/".join([base, *parts[2:]])
            return (f"{url}?{query}" if query else url), True
        if parts[0] == "f" and len(parts) >= 4 and parts[1] in {"http", "https"}:
            url = f"{parts[1]}://{'/'.join(parts[2:])}" + (f"?{query}" if query else "")
            with self._lock:
                allowed = url in self._files or url.removesuffix(".metadata") in self._files
            return (url, False) if allowed else None
        return None

    def _serve(self, request: http.server.BaseHTTPRequestHandler, method: str) -> None:
        target = self._target(request.path)
        try:
            if target is None:
                _send(request, _Answer(404, (("Content-Type", "text/plain"),), b"not here\n"))
                return
            url, page = target
            accept = request.headers.get("Accept", "")
            ranged = request.headers.get("Range", "")
            key = (method, url, accept, ranged)
            with self._lock:
                flight = self._flights.get(key)
                leader = flight is None
                if flight is None:
                    flight = self._flights[key] = _Flight()
                elif not flight.done.is_set():
                    self.coalesced += 1
            if not leader:
                flight.done.wait()
                if flight.answer is not None:
                    _send(request, flight.answer)
                    return
                if not flight.streamed:
                    _send(request, _failed(self.error()))
                    return
            self._fetch(request, flight if leader else None, key, page)
        except (ConnectionError, TimeoutError):
            request.close_connection = True  # uv went away: nothing to answer

    def _fetch(
        self,
        request: http.server.BaseHTTPRequestHandler,
        flight: _Flight | None,
        key: tuple[str, str, str, str],
        page: bool,
    ) -> None:
        """Ask upstream; keep the answer on ``flight`` (None: a body too large to keep)."""
        method, url, accept, ranged = key
        headers = {name: value for name, value in (("Accept", accept), ("Range", ranged)) if value}
        with self._lock:
            self.upstream_requests += 1
        raw: urllib3.BaseHTTPResponse | None = None
        answer: _Answer | None
        try:
            if page and method == "GET" and not ranged:
                answer = self._page(url, accept)
            else:
                raw = self.http.open(method, url, headers)
                answer = self._kept_body(raw, method, url)
        except CudaupError as exc:
            with self._lock:
                self.failure = self.failure or exc
                if flight is not None:
                    del self._flights[key]  # a later request asks again
            if flight is not None:
                flight.done.set()
            _send(request, _failed(exc))
            return
        if answer is not None:
            if flight is not None:
                flight.answer = answer
                flight.done.set()
            _send(request, answer)
            return
        assert raw is not None
        if flight is not None:
            flight.streamed = True
            flight.done.set()
        try:
            _stream(request, raw)
        finally:
            raw.release_conn()

    def _page(self, url: str, accept: str) -> _Answer:
        """An index page with its file URLs pointed at the memo."""
        response = self.http.get(url, accept=accept or None, max_bytes=self.limit)
        kind = response.headers.get("Content-Type", "")
        body = response.body
        if response.status == 200:
            base = response.url or url
            if kind.split(";")[0].strip() == _JSON_TYPE:
                body = self._rewrite_json(body, base)
            elif kind.split(";")[0].strip() in _PAGE_TYPES:
                body = self._rewrite_html(body, base)
        return _Answer(response.status, _passed(response.headers, exclude="Content-Encoding"), body)

    def _kept_body(self, raw: urllib3.BaseHTTPResponse, method: str, url: str) -> _Answer | None:
        """The whole answer when it is small enough to keep; None to stream it."""
        headers = _passed(raw.headers)
        if method == "HEAD":
            raw.release_conn()
            announced = raw.headers.get("Content-Length")
            extra = (("Content-Length", announced),) if announced is not None else ()
            return _Answer(raw.status, headers + extra, b"")
        length = _length(raw.headers)
        if length is None or length > self.limit:
            return None
        try:
            body = raw.read()
        except urllib3.exceptions.HTTPError as exc:
            raise NetworkError(
                f"{urlsplit(url).netloc} did not answer in full ({describe(exc)}) for {url}"
            ) from None
        finally:
            raw.release_conn()
        if len(body) != length:
            raise NetworkError(
                f"{urlsplit(url).netloc} sent {len(body)} of {length} bytes for {url}"
            )
        return _Answer(raw.status, headers, body)

    # -- rewriting pages ----------------------------------------------------------
    def _file_url(self, href: str, page_url: str) -> str:
        """The memo's URL for a file a page links (absolute or relative to the page)."""
        absolute, hashed, fragment = urljoin(page_url, href).partition("#")
        parts = urlsplit(absolute)
        if parts.scheme not in {"http", "https"} or not parts.netloc or "@" in parts.netloc:
            return href  # not one the memo forwards: uv asks for it itself
        with self._lock:
            self._files.add(absolute)
        local = f"{self._base}/f/{parts.scheme}/{absolute.split('://', 1)[1]}"
        return local + hashed + fragment

    def _rewrite_json(self, body: bytes, page_url: str) -> bytes:
        try:
            document = json.loads(body)
        except ValueError:
            return body  # uv says what is wrong with it, as it would have
        files = document.get("files") if isinstance(document, dict) else None
        if not isinstance(files, list):
            return body
        for entry in files:
            if isinstance(entry, dict) and isinstance(entry.get("url"), str):
                entry["url"] = self._file_url(entry["url"], page_url)
        return json.dumps(document).encode()

    def _rewrite_html(self, body: bytes, page_url: str) -> bytes:
        text = body.decode("utf-8", errors="surrogateescape")

        def rewritten(match: re.Match[str]) -> str:
            href = html.unescape(match.group(3))
            local = self._file_url(href, page_url)
            return f"{match.group(1)}{match.group(2)}{html.escape(local)}{match.group(2)}"

        return _HREF.sub(rewritten, text).encode("utf-8", errors="surrogateescape")


def _passed(headers: Mapping[str, str], exclude: str = "") -> tuple[tuple[str, str], ...]:
    return tuple(
        (name, value)
        for name in PASSED
        if name != exclude and (value := headers.get(name)) is not None
    )


def _length(headers: Mapping[str, str]) -> int | None:
    try:
        return int(headers["Content-Length"])
    except (KeyError, ValueError):
        return None


def _failed(error: CudaupError | None) -> _Answer:
    """What uv is told when the upstream failed: a gateway error, never a page."""
    why = str(error) if error is not None else "the upstream failed"
    status = 504 if "timed out" in why or "timeout" in why else 502
    return _Answer(status, (("Content-Type", "text/plain"),), why.encode() + b"\n")


def _send(request: http.server.BaseHTTPRequestHandler, answer: _Answer) -> None:
    request.send_response(answer.status)
    for name, value in answer.headers:
        if name != "Content-Length":
            request.send_header(name, value)
    length = dict(answer.headers).get("Content-Length") if request.command == "HEAD" else None
    request.send_header("Content-Length", length or str(len(answer.body)))
    request.end_headers()
    if request.command != "HEAD":
        request.wfile.write(answer.body)


def _stream(request: http.server.BaseHTTPRequestHandler, raw: urllib3.BaseHTTPResponse) -> None:
    """A body too large to keep, passed on as it arrives."""
    request.send_response(raw.status)
    for name, value in _passed(raw.headers):
        request.send_header(name, value)
    length = raw.headers.get("Content-Length")
    if length is not None:
        request.send_header("Content-Length", length)
    else:
        request.send_header("Connection", "close")
        request.close_connection = True
    request.end_headers()
    try:
        for chunk in _chunks(raw):
            request.wfile.write(chunk)
    except urllib3.exceptions.HTTPError:
        request.close_connection = True  # uv sees the body break off, as upstream's did


def _chunks(raw: urllib3.BaseHTTPResponse) -> Iterator[bytes]:
    while chunk := raw.read(_CHUNK):
        yield chunk
