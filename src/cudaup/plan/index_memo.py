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
through the memo too: PEP 658 ``.metadata`` files and uv's range reads of wheels are read
once as well, and where an index offers no PEP 658 metadata a wheel's tail (which answers
uv's HEAD), directory and METADATA are read ahead of uv's ranges from its HEAD on
(:mod:`cudaup.plan.read_ahead`).  A body above :data:`MEMO_LIMIT` (a whole wheel), or of no
stated length, streams through and is not kept.  What is kept is fresh for the plan
(``Cache-Control``), so the plan's uv runs, which share a uv cache of the plan's own, ask
for each thing once at all; and the plan's read-back takes the pages read for uv from here
(:meth:`IndexMemo.page_read`).

It is no open proxy: it forwards only below the indexes it was given and to the file
URLs it rewrote from their pages, only under its random prefix (another local user
cannot aim it, nor read a private index through cudaup's credentials); nothing is
written to disk; file bytes are passed as the upstream sent them, and uv checks them
against the page's hashes as it would have.  An upstream that fails is a 502 (504 on
a timeout) to uv, and :attr:`IndexMemo.failures` keeps cudaup's own error for the plan
to raise.  What leaves the plan names the upstream URLs (:meth:`IndexMemo.upstream_text`),
never the loopback port.
"""

from __future__ import annotations

import contextlib
import copy
import re
import secrets
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from cudaup.errors import CudaupError, NetworkError
from cudaup.net.http import POOL_SIZE, HttpClient, Response, describe
from cudaup.plan.memo_server import (
    Answer,
    failed,
    for_the_plan,
    head_answer,
    passed,
    range_answer,
    send,
    server_on,
    stream,
)
from cudaup.plan.page_rewrite import Rewritten, rewrite_html, rewrite_json
from cudaup.plan.ramp import Ramp
from cudaup.plan.read_ahead import ReadAhead

if TYPE_CHECKING:  # the server's and the wire's modules load when the memo starts
    import http.server
    import socket

    import urllib3
    from packaging.utils import NormalizedName
    from packaging.version import Version

    from cudaup.net.deadline import Lookups

#: The largest body kept in memory; a larger one (a whole wheel) streams through.
MEMO_LIMIT = 16 * 1024 * 1024
_PAGE_TYPES = ("text/html", "application/vnd.pypi.simple.v1+html")
_JSON_TYPE = "application/vnd.pypi.simple.v1+json"
#: How long the server's loop waits between looks for a stop: what closing waits where
#: shutting the listener down does not wake it (:meth:`IndexMemo.close`).
POLL_INTERVAL = 0.05
#: What uv asks an index page with (uv 0.13): a page read ahead of uv is kept under it,
#: and so answers uv only when uv asks alike (another uv's page is read again, not wrong).
UV_ACCEPT = f"{_JSON_TYPE}, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01"


#: uv opens dozens of connections at once; a backlog of 5 (socketserver's) drops their
#: SYNs under load, and each dropped one waits out TCP's retransmission (1 s, 3 s, 7 s …
#: a plan stalled 40 s on it).
_BACKLOG = 1024


@dataclass
class _Flight:
    """One upstream request and those waiting for its answer."""

    done: threading.Event = field(default_factory=threading.Event)
    answer: Answer | None = None
    #: The body is above the limit: each request streams its own.
    streamed: bool = False


class IndexMemo:
    """A context manager: the server runs inside ``with`` (from the first :meth:`local`),
    and nothing of it after."""

    def __init__(self, client: HttpClient, *, limit: int = MEMO_LIMIT) -> None:
        self.http, self.limit = client, limit
        #: Why each upstream URL that failed did (the first failure of each).
        self.failures: dict[str, CudaupError] = {}
        self._forwarded = 0
        #: Requests uv sent it; and those that waited for an identical one's upstream answer.
        self.served = 0
        self.coalesced = 0
        self._upstreams: list[str] = []
        self._files: set[str] = set()
        self._flights: dict[tuple[str, str, str, str], _Flight] = {}
        self._connections: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._starting = threading.Lock()
        self._closed = False
        self._ramps: dict[str, Ramp] = {}
        #: Each upstream host looked up once for the plan (``Lookups``; at the first request).
        self._lookups: Lookups | None = None
        self._token = secrets.token_urlsafe(16)
        self._server: http.server.ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        #: Set once the memo's thread has made its server (or failed to).
        self._ready = threading.Event()
        self._base = ""
        #: The loopback port it listens on once started (0 before).
        self.port = 0
        self._text_urls: re.Pattern[str] | None = None
        self.ahead = ReadAhead(client, limit, lambda url: self._ramp(url).slot())
        #: Each index page read for uv, by its upstream URL, as the index sent it.
        self._pages: dict[str, Response] = {}

    @property
    def upstream_requests(self) -> int:
        """Requests sent upstream (each answered from the memo afterwards), read-ahead's too."""
        with self._lock:
            return self._forwarded + self.ahead.requests

    @property
    def answered_ahead(self) -> int:
        """uv's ranges answered from what was read ahead of it."""
        return self.ahead.answered

    @property
    def walked_ahead(self) -> int:
        """Wheels read ahead because uv was walking their project down."""
        return self.ahead.walked

    # -- lifetime -----------------------------------------------------------------
    def __enter__(self) -> IndexMemo:
        return self

    def _start(self) -> None:
        """Serve from the first URL asked for: a plan that runs no uv (a warm one, its
        answers kept) starts no server and waits for none to stop.  The port listens at
        once; the server is made beside it (:func:`server_on`)."""
        import socket  # noqa: PLC0415

        if self._closed:
            raise CudaupError("the index memo was used after its plan ended")
        listener = socket.create_server(("127.0.0.1", 0), backlog=_BACKLOG)
        self.port = listener.getsockname()[1]
        self._base = f"http://127.0.0.1:{self.port}/{self._token}"
        self._text_urls = re.compile(re.escape(self._base) + r"/(?:i/(\d+)|f/(https?)/)")
        self._thread = threading.Thread(
            target=self._serve_on, args=(listener,), name="cudaup-index-memo", daemon=True
        )
        self._thread.start()

    def _serve_on(self, listener: socket.socket) -> None:
        try:
            self._server = server_on(listener, self)
        except BaseException:
            listener.close()
            raise
        finally:
            self._ready.set()
        self._server.serve_forever(poll_interval=POLL_INTERVAL)

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop serving, end every connection (uv's kept-alive ones) and join each thread."""
        import socket  # noqa: PLC0415

        with self._starting:
            self._closed = True
            thread = self._thread
        self.ahead.close(wait=False)  # its reads end beside the server's
        if thread is not None:
            self._ready.wait()  # the server is made, or failed to be
        server = self._server
        if server is not None:
            # The loop sees the stop only between its waits (POLL_INTERVAL, 50 ms): a
            # listener shut down wakes it at once, its accept fails, and it stops.
            with contextlib.suppress(OSError):
                server.socket.shutdown(socket.SHUT_RDWR)
            server.shutdown()
            with self._lock:
                connections = list(self._connections)
            for connection in connections:
                with contextlib.suppress(OSError):  # already closed by its client
                    connection.shutdown(socket.SHUT_RDWR)
            server.server_close()  # joins the handler threads
        if thread is not None:
            thread.join()
        self.ahead.close()
        self._server = self._thread = None

    # -- what the plan sees -------------------------------------------------------
    def local(self, upstream: str) -> str:
        """The memo's URL for the index at ``upstream`` (a ``file:`` index is its own)."""
        if not upstream.startswith(("https://", "http://")):
            return upstream
        with self._starting:
            if self._thread is None:
                self._start()
        normal = upstream.rstrip("/")
        with self._lock:
            if normal not in self._upstreams:
                self._upstreams.append(normal)
            number = self._upstreams.index(normal)
        return f"{self._base}/i/{number}"

    def read_ahead(self, find: Callable[[], list[str]]) -> Future[None] | None:
        """Read ahead of uv the metadata of the wheels ``find`` names (upstream URLs; only
        files the memo's pages listed are read), found in a thread of the memo's: the next
        round will ask for them in turn, and should start once the future is done (uv's
        requests then wait for what is being read rather than ask for it too)."""

        def listed() -> list[str]:
            urls = find()
            with self._lock:
                return [url for url in urls if unquote(url) in self._files]

        return self.ahead.later(listed)

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

    def error(self, url: str | None = None) -> CudaupError | None:
        """Why ``url`` (an upstream URL) failed, else why the first that failed did; a
        copy, so that each raiser has its own."""
        with self._lock:
            found = self.failures.get(url or "") or next(iter(self.failures.values()), None)
            return copy.copy(found) if found is not None else None

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
            named = unquote(url)  # uv may quote what the page did not, or the reverse
            with self._lock:
                allowed = named in self._files or named.removesuffix(".metadata") in self._files
            return (url, False) if allowed else None
        return None

    def connected(self, connection: socket.socket) -> None:
        """A connection from uv, closed by :meth:`close` if it outlives the plan."""
        with self._lock:
            self._connections.add(connection)

    def disconnected(self, connection: socket.socket) -> None:
        with self._lock:
            self._connections.discard(connection)

    def serve(self, request: http.server.BaseHTTPRequestHandler, method: str) -> None:
        """Answer one of uv's requests (``method``: GET or HEAD), from what is kept, read
        ahead or in flight, else upstream; 404 for a path the memo does not forward."""
        target = self._target(request.path)
        try:
            if target is None:
                send(request, Answer(404, (("Content-Type", "text/plain"),), b"not here\n"))
                return
            url, page = target
            accept = request.headers.get("Accept", "")
            ranged = request.headers.get("Range", "")
            key = (method, url, accept, ranged)
            with self._lock:
                self.served += 1
            if not page and method == "HEAD" and urlsplit(url).path.endswith(".whl"):
                # uv's HEAD: answered from the wheel's tail (one upstream costs as much or more)
                self.ahead.start(url)  # read now unless read ahead, queued before a walk's reads
                self.ahead.asked(url)  # uv walking a project down: its next versions
                if (size := self.ahead.size(url)) is not None:  # None: no ranges, failed
                    send(request, head_answer(size))
                    return
            if not page and method == "GET" and ranged:
                held = self.ahead.answer(url, ranged)
                if held is not None:
                    send(request, range_answer(*held))
                    return
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
                    send(request, flight.answer)
                    return
                if not flight.streamed:
                    send(request, failed(self.error(url)))
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
            self._forwarded += 1
        raw: urllib3.BaseHTTPResponse | None = None
        answer: Answer | None = None
        failure: CudaupError | None = None
        try:
            with self._ramp(url).slot():
                if self._closed:  # the plan is over: no uv waits for this answer
                    raise CudaupError(f"the plan ended before {url} was asked for")
                if page and method == "GET" and not ranged:
                    answer, _ = self._page(url, accept)
                else:
                    raw = self.http.open(method, url, headers)
                    answer = self._kept_body(raw, method, url)
            if answer is not None:
                answer = for_the_plan(answer)
        except CudaupError as exc:
            failure = exc
            with self._lock:
                self.failures.setdefault(url, exc)
        finally:
            # Whatever happened, the waiters go on (a bug here must not hang uv).
            if flight is not None:
                streamed = failure is None and answer is None and raw is not None
                self._land(flight, key, answer, streamed)
        if failure is not None:
            send(request, failed(failure))
            return
        if answer is not None:
            send(request, answer)
            return
        assert raw is not None
        try:
            stream(request, raw)
        finally:
            raw.release_conn()

    def _ramp(self, url: str) -> Ramp:
        host = urlsplit(url).netloc
        with self._lock:
            if self._lookups is None:
                from cudaup.net.deadline import Lookups  # noqa: PLC0415 - urllib3 with it

                self._lookups = Lookups()
            return self._ramps.setdefault(host, Ramp(POOL_SIZE, self._lookups))

    def _land(
        self,
        flight: _Flight,
        key: tuple[str, str, str, str],
        answer: Answer | None,
        streamed: bool,
    ) -> None:
        """Hand the waiters ``answer``, or tell them to stream their own; a request that
        failed is not kept (the next one asks again), its waiters answer a gateway error."""
        flight.answer, flight.streamed = answer, streamed
        if answer is None and not streamed:
            with self._lock:
                self._flights.pop(key, None)
        flight.done.set()

    def page_read(self, url: str) -> Response | None:
        """The index page at ``url`` as its index sent it for uv (None: not read for uv): a
        plan's read-back takes the page its resolution was made from, without asking again
        (numpy's, 1.9 MB, took 0.3 s to ask again in a cold `vllm flashinfer-python`)."""
        with self._lock:
            return self._pages.get(url)

    def _page(self, url: str, accept: str) -> tuple[Answer, list[str]]:
        """An index page with its file URLs pointed at the memo, and their upstream URLs."""
        response = self.http.get(url, accept=accept or None, max_bytes=self.limit)
        kind = dict(passed(response.headers)).get("Content-Type", "").split(";")[0].strip()
        body, files = response.body, []
        if response.status == 200 and (kind == _JSON_TYPE or kind in _PAGE_TYPES):
            with self._lock:
                self._pages[url] = response
            base = response.url or url
            rewrite = rewrite_json if kind == _JSON_TYPE else rewrite_html
            rewritten = rewrite(body, base, self._base)
            body, files = self._allow(rewritten, base), rewritten.files
        headers = passed(response.headers, exclude="Content-Encoding")
        return Answer(response.status, headers, body), files

    def read_pinned(
        self,
        upstream: str,
        pins: Mapping[NormalizedName, Version],
        choose: Callable[[list[str], Version], str | None],
    ) -> list[Future[None]]:
        """Read ahead, beside the first uv run's start, what a resolution of exact pins
        asks for first: each pinned project's page of the index at ``upstream`` (as uv
        asks for it: :data:`UV_ACCEPT`), then the metadata of the wheel ``choose`` picks
        among its files for the pinned version (uv's HEAD of it then finds it read).
        Each future is done once its wheel's tail is being read."""
        if not upstream.startswith(("https://", "http://")):
            return []
        self.local(upstream)  # the pages are the memo's, as if uv had asked
        found = (
            self.ahead.later(partial(self._pinned, f"{upstream.rstrip('/')}/{name}/", v, choose))
            for name, v in pins.items()
        )
        return [future for future in found if future is not None]

    def _pinned(
        self, url: str, version: Version, choose: Callable[[list[str], Version], str | None]
    ) -> list[str]:
        chosen = choose(self._page_ahead(url), version)
        return [chosen] if chosen is not None else []

    def _page_ahead(self, url: str) -> list[str]:
        """``url``'s page read and kept as uv will ask for it, its files' URLs; nothing
        when uv (or another) asked first.  A failure is kept as uv's own would be: a uv
        request that waited for this one is answered as if it had failed itself."""
        key = ("GET", url, UV_ACCEPT, "")
        with self._lock:
            if key in self._flights:
                return []
            flight = self._flights[key] = _Flight()
            self._forwarded += 1
        answer: Answer | None = None
        files: list[str] = []
        try:
            with self._ramp(url).slot():
                answer, files = self._page(url, UV_ACCEPT)
            answer = for_the_plan(answer)
        except CudaupError as exc:
            with self._lock:
                self.failures.setdefault(url, exc)
        finally:
            self._land(flight, key, answer, False)
        return files

    def _kept_body(self, raw: urllib3.BaseHTTPResponse, method: str, url: str) -> Answer | None:
        """The whole answer when its length is stated and small enough to keep; None to
        stream it."""
        import urllib3  # noqa: PLC0415

        headers = passed(raw.headers)
        if method == "HEAD":
            # Read to its (empty) end before the connection goes back: http.client keeps
            # an unread answer as the connection's, and the next request sent over it then
            # fails once sent ("Connection aborted.": ResponseNotReady), and waits a retry.
            raw.drain_conn()
            raw.release_conn()
            announced = raw.headers.get("Content-Length")
            extra = (("Content-Length", announced),) if announced is not None else ()
            return Answer(raw.status, headers + extra, b"")
        length = raw.length_remaining  # the body's framing: see stream
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
        return Answer(raw.status, headers, body)

    # -- rewriting pages ----------------------------------------------------------
    def _allow(self, rewritten: Rewritten, page_url: str) -> bytes:
        """``rewritten``'s body, its files now the memo's to forward."""
        # Kept unquoted, as uv may quote what the page did not (see _target); a page with no
        # escape in any URL (PyPI's) is kept as it is, with no call per URL (72,000 files).
        files = rewritten.files
        named = map(unquote, files) if "%" in "".join(files) else files
        # One lock for a page's thousands of files, not one each (contended, each wait
        # for the lock is a wait for the GIL).
        with self._lock:
            self._files.update(named)
        # A PEP 503 page's URL ends in its project's name (``…/simple/numpy/``).
        project = urlsplit(page_url).path.rstrip("/").rsplit("/", 1)[-1]
        self.ahead.listed(project, rewritten.files)
        return rewritten.body
