"""The one HTTP client: pooled connections, proxies, netrc, TLS, retries, cache.

Built on urllib3 (chosen by measurement, see ``docs/design.md``).  urllib3 does
not read the environment itself, so this module does what users expect of a
well-behaved CLI: ``HTTPS_PROXY``/``HTTP_PROXY``/``ALL_PROXY``/``NO_PROXY`` as
curl reads them (:mod:`cudaup.net.proxies`), ``SSL_CERT_FILE``/``SSL_CERT_DIR``,
and ``~/.netrc`` (or ``$NETRC``) credentials for the host being asked.  TLS is
always verified.  Redirects are followed by hand so that an https→http
downgrade, or a redirect to a host that is not a configured source or on the
list in :mod:`cudaup.net.hosts`, can be refused.

A failure says which host failed: a host that could not be reached at all is a
:class:`~cudaup.errors.HostUnreachableError`, a proxy that could not be reached
or would not connect is named with the variable that chose it; what no retry mends
(a refused TLS certificate, response headers too long, or not ended within the stall
limit: :func:`lasting`) fails at the first try.  :data:`log` is
the one verbose log (``cudaup -v``): every request and its answer, cache hits
and revalidations, redirects, retries and why (the downloader's retries too,
through :meth:`HttpClient.wait_to_retry`).
"""

from __future__ import annotations

import base64
import logging
import os
import re
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal
from urllib.parse import urljoin, urlsplit

from cudaup import __version__
from cudaup.config import (
    DEFAULT_ARCHIVE_URL,
    DEFAULT_DOWNLOAD_URL,
    DEFAULT_PRERELEASE_URL,
    DEFAULT_PYPI_URL,
    Settings,
)
from cudaup.errors import HostUnreachableError, NetworkError, SourceFormatError
from cudaup.net import backoff as backoff_policy
from cudaup.net.backoff import Backoff
from cudaup.net.hosts import check_redirect
from cudaup.net.proxies import Proxy, ProxySettings

if TYPE_CHECKING:
    import netrc

    import urllib3

    from cudaup.net.response_cache import CachedResponse, HttpCache

#: The verbose log: silent unless the CLI (``-v``) or a library user adds a handler.
#: INFO: requests and answers, cache decisions, redirects, retries; DEBUG: headers too.
log = logging.getLogger("cudaup.http")
log.addHandler(logging.NullHandler())

CacheKind = Literal["listing", "manifest", "checksums", "page", "index", "metadata"]

#: How long a cached answer is used without asking the server again, in seconds.
#: Listings and indexes change when NVIDIA or PyPI publish; per-release files
#: almost never change (but were regenerated in place at least once, so they
#: are still revalidated daily); wheel metadata is immutable per file name.
TTL: dict[CacheKind, float] = {
    "listing": 3600,
    "index": 600,
    "manifest": 86400,
    "checksums": 86400,
    "page": 86400,
    "metadata": 30 * 86400,
}
#: A 404 is remembered for at most this long (a release may appear later).
NEGATIVE_TTL = 600.0
MAX_REDIRECTS = 10
RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
#: Requests that may be sent again on a new connection when a kept one was found closed.
IDEMPOTENT = frozenset({"GET", "HEAD"})
#: Connections kept open per host (more at once are opened, used once, and closed).
POOL_SIZE = 48
USER_AGENT = f"cudaup/{__version__} (+https://github.com/cudaup/cudaup)"
#: NVIDIA's and PyPI's own hosts: where a ``--mirror`` can stand in when they are out of reach.
PUBLIC_HOSTS = frozenset(
    {
        *(urlsplit(u).hostname for u in (DEFAULT_DOWNLOAD_URL, DEFAULT_ARCHIVE_URL)),
        *(urlsplit(u).hostname for u in (DEFAULT_PRERELEASE_URL, DEFAULT_PYPI_URL)),
        "files.pythonhosted.org",
    }
)
#: Headers whose values the verbose log never prints.
_SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie"})
#: What every request asks for: the bytes as the server holds them.  A download or a
#: range of a wheel is hashed and parsed as sent (and a range of an encoded body is a
#: range of other bytes), so no response is decoded on the way in but a small document
#: (:meth:`HttpClient.get`) that a server encoded anyway, which is decoded or refused.
_IDENTITY = {"Accept-Encoding": "identity"}


@dataclass(frozen=True, slots=True)
class Response:
    url: str
    status: int
    headers: Mapping[str, str]
    body: bytes
    from_cache: bool = False

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")


class HttpClient:
    """Thread-safe HTTP access for every part of cudaup."""

    def __init__(
        self,
        settings: Settings,
        *,
        cache: HttpCache | None = None,
        backoff: Backoff | None = None,
        retries: int = 3,
    ) -> None:
        self.settings = settings
        self._cache = cache
        #: How every retry through this client waits (the downloader's too).
        self.backoff = backoff if backoff is not None else backoff_policy.DEFAULT
        self._retries = retries
        self._lock = threading.Lock()
        #: one pool manager per proxy, and per whether it needs TLS: a plain-HTTP mirror
        #: never waits for the CA certificates to load
        self._managers: dict[tuple[Proxy | None, bool], urllib3.PoolManager] = {}
        self._proxies = ProxySettings.from_env(os.environ)
        self._netrc: netrc.netrc | Literal[False] | None = False
        self.requests_sent = 0

    @property
    def cache(self) -> HttpCache:
        """The cache of answers (built at first use: a download never asks it)."""
        with self._lock:
            if self._cache is None:
                from cudaup.net.response_cache import HttpCache  # noqa: PLC0415

                self._cache = HttpCache(self.settings.cache_root)
            return self._cache

    # -- connection plumbing -------------------------------------------------
    def proxy_for(self, url: str) -> Proxy | None:
        """The proxy ``url`` goes through (see :mod:`cudaup.net.proxies`), or None."""
        proxy = self._proxies.for_url(url)
        if log.isEnabledFor(logging.DEBUG):
            if proxy is not None:
                log.debug("%s goes through the proxy %s (%s)", url, proxy.url, proxy.variable)
            elif self._proxies.proxies:
                log.debug("%s goes direct (no_proxy=%r)", url, self._proxies.no_proxy)
        return proxy

    def _manager(self, url: str, proxy: Proxy | None) -> urllib3.PoolManager:
        import urllib3  # noqa: PLC0415 - the wire's modules load with the first request

        from cudaup.net.deadline import POOL_CLASSES  # noqa: PLC0415
        from cudaup.net.tls import default_context  # noqa: PLC0415

        tls = urlsplit(url).scheme == "https" or (
            proxy is not None and proxy.url.startswith("https:")
        )
        with self._lock:
            manager = self._managers.get((proxy, tls))
            if manager is None:
                kwargs: dict[str, object] = {
                    "num_pools": 16,
                    "maxsize": POOL_SIZE,
                    "block": False,
                    "headers": {"User-Agent": USER_AGENT},
                }
                if tls:
                    kwargs["ssl_context"] = default_context()
                if proxy is None:
                    manager = urllib3.PoolManager(**kwargs)  # type: ignore[arg-type]
                else:
                    auth = proxy.basic_auth
                    manager = urllib3.ProxyManager(
                        proxy.url,
                        proxy_headers=urllib3.make_headers(proxy_basic_auth=auth) if auth else None,
                        proxy_ssl_context=default_context() if tls else None,
                        **kwargs,  # type: ignore[arg-type]
                    )
                manager.pool_classes_by_scheme = POOL_CLASSES
                self._managers[(proxy, tls)] = manager
            return manager

    def _auth_header(self, url: str) -> dict[str, str]:
        host = urlsplit(url).hostname
        if not host:
            return {}
        with self._lock:
            if self._netrc is False:
                path = Path(os.environ.get("NETRC") or Path("~/.netrc").expanduser())
                self._netrc = _read_netrc(path)
            table = self._netrc
        if not table:
            return {}
        found = table.authenticators(host)
        if not found:
            return {}
        login, _account, password = found
        token = base64.b64encode(f"{login}:{password or ''}".encode()).decode()
        return {"Authorization": f"Basic {token}"}

    def _count(self) -> None:
        with self._lock:
            self.requests_sent += 1

    def open(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str] | None = None,
        *,
        preload: bool = False,
        timeout: float | None = None,
        retry: bool = True,
    ) -> urllib3.BaseHTTPResponse:
        """Send one request, following redirects; the raw streaming response.

        Connection errors, timeouts and retryable statuses (5xx, 408, 429 with
        ``Retry-After``) are retried with exponential backoff and jitter; other
        statuses are returned for the caller to interpret.  With ``retry=False``
        each hop is tried once, every status comes back as it is and a connection
        that fails raises urllib3's exception (:func:`describe` puts it in words): the
        downloader keeps its own budget and lowers its connections on 503/429.  A
        refused redirect, and a failure that would recur on every try (a TLS
        certificate refused, response headers too long to read or, with ``retry``, not
        ended within the stall limit: :func:`lasting`), always raise
        :class:`NetworkError`, at the first try.  The response's body is read as sent:
        ``Accept-Encoding: identity`` is asked for, and nothing is decoded.
        """
        current = url
        for _hop in range(MAX_REDIRECTS + 1):
            response = self._send_with_retries(method, current, headers, preload, timeout, retry)
            location = response.headers.get("Location")
            if response.status in {301, 302, 303, 307, 308} and location:
                response.drain_conn()
                response.release_conn()
                target = urljoin(current, location)
                check_redirect(self.settings, current, target)
                log.info("redirect: %s → %d → %s", current, response.status, target)
                current = target
                continue
            response.url = current
            return response
        raise NetworkError(f"more than {MAX_REDIRECTS} redirects starting at {url}")

    def _send_with_retries(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str] | None,
        preload: bool,
        timeout: float | None,
        retry: bool,
    ) -> urllib3.BaseHTTPResponse:
        import urllib3  # noqa: PLC0415

        from cudaup.net import deadline  # noqa: PLC0415

        retries = self._retries if retry else 0
        all_headers = {**_IDENTITY, **self._auth_header(url), **(headers or {})}
        read_timeout = timeout if timeout is not None else self.settings.timeout
        proxy = self.proxy_for(url)
        manager = self._manager(url, proxy)
        if ahead := deadline.pending_ahead():  # this request goes out: see opening_ahead
            deadline.open_ahead(manager.connection_from_url(url), ahead, min(10.0, read_timeout))
        failure: urllib3.exceptions.HTTPError | int = 0
        attempt, anew = 0, False
        while True:
            self._count()
            started = time.monotonic()
            if log.isEnabledFor(logging.DEBUG):
                log.debug("%s %s headers: %s", method, url, _shown_headers(all_headers))
            try:
                # the downloader's watchdog bounds its own requests (retry=False)
                with (
                    deadline.headers_within(self.settings.stall_timeout if retry else None),
                    deadline.on_a_new_connection(anew),
                ):
                    response = manager.request(
                        method,
                        url,
                        headers=all_headers,
                        preload_content=preload,
                        decode_content=False,
                        redirect=False,
                        retries=False,
                        timeout=urllib3.Timeout(connect=min(10.0, read_timeout), read=read_timeout),
                    )
            except urllib3.exceptions.HTTPError as exc:
                log.info("%s %s%s failed: %s", method, url, _via(proxy, all_headers), describe(exc))
                if (refusal := lasting(url, proxy, exc)) is not None:
                    raise refusal from None
                if not retry:
                    raise
                failure = exc
                if not anew and method in IDEMPOTENT and kept_then_closed(exc):
                    # Not the server failing: it had closed the connection the pool kept
                    # (a proxy dropping idle ones), and never saw or dropped the request.
                    # A new connection is no guess, so no wait and no try counted; the
                    # retry on it, which cannot meet a kept connection, is bounded.
                    log.info("%s %s: sent again at once on a new connection", method, url)
                    anew = True
                    continue
                anew = False
                if attempt >= 1 and unresolved(exc):
                    break  # a name that did not resolve twice will not resolve a third time
                if attempt >= retries:
                    break
                self.wait_to_retry(url, attempt, describe(exc))
                attempt += 1
                continue
            anew = False
            log.info(
                "%s %s%s → %d (%.2f s)",
                method,
                url,
                _via(proxy, all_headers),
                response.status,
                time.monotonic() - started,
            )
            if log.isEnabledFor(logging.DEBUG):
                log.debug("%s answered: %s", url, _shown_headers(response.headers))
            if response.status not in RETRY_STATUSES or not retry:
                return response
            failure = response.status
            retry_after = response.headers.get("Retry-After")
            response.drain_conn()
            response.release_conn()
            if attempt >= retries:
                break
            self.wait_to_retry(url, attempt, f"HTTP {response.status}", retry_after)
            attempt += 1
        raise gave_up(url, proxy, failure, attempt + 1)

    def wait_to_retry(
        self, url: str, attempt: int, why: str, retry_after: str | None = None
    ) -> None:
        """Wait before retry ``attempt`` (from 0) of ``url``, which failed because ``why``:
        the one retry policy (:attr:`backoff`), logged.  The downloader waits here too."""
        seconds = self.backoff.delay_for(attempt, retry_after)
        log.info("retry %d of %s in %.1f s: %s", attempt + 1, url, seconds, why)
        self.backoff.sleep(seconds)

    # -- convenience -----------------------------------------------------------
    def head(self, url: str) -> Response:
        raw = self.open("HEAD", url, preload=True)
        return Response(str(raw.url or url), raw.status, dict(raw.headers.items()), b"")

    def get(
        self,
        url: str,
        *,
        cache: CacheKind | None = None,
        accept: str | None = None,
        max_bytes: int = 20 * 1024 * 1024,
    ) -> Response:
        """GET a small document, through the cache when ``cache`` names its kind.

        A body that breaks off is asked for again, like a request that failed; one a
        server encoded anyway is decoded (see :func:`_read_document`)."""
        entry: CachedResponse | None = None
        if cache is not None and not self.settings.refresh:
            entry = self.cache.lookup(url)
            if entry is not None:
                ttl = TTL[cache] if entry.status == 200 else min(TTL[cache], NEGATIVE_TTL)
                if entry.age() < ttl:
                    log.info(
                        "cache: %s (HTTP %d) is %.0f s old, fresh for %.0f s: not asked",
                        url,
                        entry.status,
                        entry.age(),
                        ttl,
                    )
                    return Response(url, entry.status, {}, entry.body, from_cache=True)
                log.info("cache: %s is %.0f s old, past its %.0f s", url, entry.age(), ttl)
        headers: dict[str, str] = {}
        if accept:
            headers["Accept"] = accept
        if entry is not None and entry.status == 200:
            if entry.etag:
                headers["If-None-Match"] = entry.etag
            if entry.last_modified:
                headers["If-Modified-Since"] = entry.last_modified
        if "If-None-Match" in headers or "If-Modified-Since" in headers:
            log.info("cache: revalidating %s (its ETag or Last-Modified)", url)
        import urllib3  # noqa: PLC0415 - not for an answer from the cache (a warm plan's all)

        for attempt in range(self._retries + 1):
            raw = self.open("GET", url, headers)
            try:
                if raw.status == 304 and entry is not None:
                    log.info("cache: %s has not changed (304): the cached copy is used", url)
                    self.cache.touch(entry)
                    return Response(url, 200, {}, entry.body, from_cache=True)
                body = _read_document(raw, max_bytes, str(raw.url or url))
                break
            except urllib3.exceptions.HTTPError as exc:  # the body broke off or timed out
                if attempt == self._retries:
                    host = urlsplit(url).netloc
                    raise NetworkError(
                        f"{host} did not answer in full ({describe(exc)}) for {url}"
                    ) from None
                self.wait_to_retry(url, attempt, describe(exc))
            finally:
                raw.release_conn()
        response = Response(str(raw.url or url), raw.status, dict(raw.headers.items()), body)
        if cache is not None and (raw.status == 200 or raw.status in {404, 410}):
            self.cache.store_answer(url, raw.status, response.headers, body)
        return response


def gave_up(
    url: str, proxy: Proxy | None, failure: urllib3.exceptions.HTTPError | int, attempts: int
) -> NetworkError:
    """The error after ``attempts`` tries of ``url`` ended with ``failure`` (a status or
    urllib3's exception): it names what failed, the host, the proxy or the answer."""
    import urllib3  # noqa: PLC0415

    host = urlsplit(url).netloc
    tries = f"{attempts} tries" if attempts > 1 else "1 try"
    if isinstance(failure, int):
        return NetworkError(f"{host} answered HTTP {failure} to {tries} for {url}")
    if isinstance(failure, urllib3.exceptions.ProxyError) and proxy is not None:
        where = f"the proxy {proxy.url} ({proxy.variable})"
        refused, why = _proxy_failure(failure)
        if refused:
            return NetworkError(f"{where} would not connect to {host} for {url} ({why})")
        return NetworkError(f"cannot reach {where} for {url} ({why})")
    reason = describe(failure)
    if isinstance(failure, urllib3.exceptions.ConnectTimeoutError):
        public = (urlsplit(url).hostname or "") in PUBLIC_HOSTS
        return HostUnreachableError(f"cannot reach {host} ({reason}) for {url}", url, public=public)
    return NetworkError(f"{host} did not answer in full ({reason}) for {url}")


def _via(proxy: Proxy | None, headers: Mapping[str, str]) -> str:
    """`` [bytes=0-99] via proxy http://p:3128``: what the log line adds to the URL."""
    ranged = f" [{headers['Range']}]" if "Range" in headers else ""
    return ranged + (f" via proxy {proxy.url}" if proxy is not None else "")


def _shown_headers(headers: Mapping[str, str]) -> str:
    return ", ".join(
        f"{name}: {'(hidden)' if name.lower() in _SECRET_HEADERS else value}"
        for name, value in headers.items()
    )


def _read_document(raw: urllib3.BaseHTTPResponse, limit: int, url: str) -> bytes:
    """A document's body, at most ``limit`` bytes once decoded.  cudaup asks for identity;
    a server that encodes the body anyway (gzip, deflate) gets it decoded, and one whose
    encoding is unknown or whose body is not what the encoding says is refused (exit 8)."""
    import urllib3  # noqa: PLC0415

    encoding = raw.headers.get("Content-Encoding", "").strip()
    codings = [c.strip().lower() for c in encoding.split(",") if c.strip()]
    decoders = urllib3.response.HTTPResponse.CONTENT_DECODERS
    if unknown := [c for c in codings if c != "identity" and c not in decoders]:
        raise SourceFormatError(
            f"{url} answered with Content-Encoding: {encoding}, which cudaup cannot decode "
            f"({', '.join(unknown)}; it asked for identity)"
        )
    too_large = f"{url} is larger than {limit} bytes; refusing to read it"
    # urllib3's reading of Content-Length: None when absent, unusable or beside chunking.
    length = raw.length_remaining if not codings or codings == ["identity"] else None
    if length is not None:
        # Sent as it is and of a said length (PyPI's pages: 30 MB for a vllm plan's
        # first round): read whole in one call, not 64 KiB at a time through urllib3's
        # decoding buffers (a quarter of the reading's CPU, on the index memo's threads).
        # A body cut short raises urllib3's IncompleteRead, as a chunk read does.
        if length > limit:
            raise SourceFormatError(too_large)
        return raw.read(decode_content=False)
    chunks: list[bytes] = []
    total = 0
    try:
        for chunk in raw.stream(64 * 1024, decode_content=True):
            total += len(chunk)
            if total > limit:
                raise SourceFormatError(too_large)
            chunks.append(chunk)
    except urllib3.exceptions.DecodeError as exc:
        why = exc.args[1] if len(exc.args) > 1 else exc
        raise SourceFormatError(
            f"{url} answered with Content-Encoding: {encoding} but its body cannot be "
            f"decoded as such ({why}); the server or a proxy on the way is broken"
        ) from None
    return b"".join(chunks)


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and every exception it wraps (urllib3 nests the real cause deep)."""
    seen: set[int] = set()
    todo: list[object] = [exc]
    while todo:
        current = todo.pop()
        if not isinstance(current, BaseException) or id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        todo += [current.__cause__, current.__context__, *current.args]
        todo += [getattr(current, "reason", None), getattr(current, "original_error", None)]


def kept_then_closed(exc: BaseException) -> bool:
    """Whether ``exc`` is a connection the pool had kept open that the server closed
    before answering (:class:`~cudaup.net.deadline.StaleConnectionError`)."""
    from cudaup.net.deadline import StaleConnectionError  # noqa: PLC0415

    return any(isinstance(cause, StaleConnectionError) for cause in _causes(exc))


def unresolved(exc: BaseException) -> bool:
    """Whether ``exc`` is a host name that did not resolve (DNS): worth one retry, as a
    resolver's hiccup may pass, but not a backoff's worth of them."""
    import socket  # noqa: PLC0415

    import urllib3  # noqa: PLC0415

    return any(
        isinstance(cause, (urllib3.exceptions.NameResolutionError, socket.gaierror))
        for cause in _causes(exc)
    )


def lasting(
    url: str, proxy: Proxy | None, exc: urllib3.exceptions.HTTPError
) -> NetworkError | None:
    """The error for a failure that every retry would meet again, or None if ``exc``
    may be transient: a TLS certificate that is not trusted or names another host,
    response headers longer than any real server sends (a line over 64 KiB, more than
    100 headers: a header that never ends stops there), headers that did not end within
    the stall limit, and a request its asker cut off (both: :mod:`cudaup.net.deadline`)."""
    import http.client  # noqa: PLC0415
    import ssl  # noqa: PLC0415

    import urllib3  # noqa: PLC0415

    from cudaup.net.deadline import HeadersTooSlowError, RequestStoppedError  # noqa: PLC0415

    host = urlsplit(url).netloc
    for cause in _causes(exc):
        if isinstance(cause, ssl.SSLCertVerificationError):
            where = (
                f"the proxy {proxy.url} ({proxy.variable})"
                if isinstance(exc, urllib3.exceptions.ProxyError) and proxy is not None
                else host
            )
            why = cause.verify_message or cause.reason or str(cause)
            return NetworkError(
                f"the TLS certificate of {where} was refused (certificate verify failed: "
                f"{why}) for {url}; not retried, as it would be refused again "
                "(SSL_CERT_FILE or SSL_CERT_DIR adds a CA you trust)"
            )
        if isinstance(cause, RequestStoppedError):
            return NetworkError(f"the request for {url} {cause}")
        if isinstance(cause, HeadersTooSlowError):
            return NetworkError(
                f"the server stalled: {host} sent no complete response headers in "
                f"{cause.seconds:g} s for {url}; not retried, as the stall limit "
                "(CUDAUP_STALL_TIMEOUT) is spent"
            )
        if isinstance(cause, http.client.LineTooLong) or type(cause) is http.client.HTTPException:
            return NetworkError(
                f"{host} sent response headers too long to read ({cause}) for {url}; "
                "not retried, as the server would send them again"
            )
    return None


_INCOMPLETE = re.compile(r"IncompleteRead\((\d+) bytes read, (\d+) more expected\)")
_TIMEOUT_VALUE = re.compile(r" \((?:read|connect) timeout=[^)]*\)")
_CONNECTION_PREFIX = re.compile(r"^\w*Connection(?:Pool)?\(host='[^']*', port=\d+\): ")


_TUNNEL_REFUSED = "Tunnel connection failed: "


def _proxy_failure(exc: urllib3.exceptions.ProxyError) -> tuple[bool, str]:
    """Whether the proxy answered but refused the tunnel, and why, in a few words."""
    import urllib3  # noqa: PLC0415

    cause = exc.original_error
    text = str(cause)
    if text.startswith(_TUNNEL_REFUSED):
        return True, text.removeprefix(_TUNNEL_REFUSED)
    return False, describe(cause) if isinstance(cause, urllib3.exceptions.HTTPError) else text


def _read_netrc(path: Path) -> netrc.netrc | None:
    """The credentials in ``path``, or None when it is absent or cannot be read or parsed
    (a directory on its way this user may not search included: no credentials, as before
    any were configured, not a failure of every request)."""
    try:
        if not path.exists():
            return None
    except OSError:
        return None
    import netrc  # noqa: PLC0415 - with shlex, only where there is a .netrc to read

    try:
        return netrc.netrc(str(path))
    except (OSError, netrc.NetrcParseError):
        return None


def describe(exc: urllib3.exceptions.HTTPError) -> str:
    """urllib3's error in a few words: "Failed to resolve 'host' (name not known)"; a
    proxy's failure names the proxy: "cannot reach the proxy 10.0.0.1:3128 (...)"."""
    import http.client  # noqa: PLC0415

    import urllib3  # noqa: PLC0415

    if isinstance(exc, urllib3.exceptions.ProxyError):
        refused, why = _proxy_failure(exc)
        if refused:
            return f"the proxy refused the tunnel ({why})"
        conn = getattr(exc.original_error, "conn", None)
        where = f" {conn.host}:{conn.port}" if conn is not None else ""
        return f"cannot reach the proxy{where} ({why})"
    reason = getattr(exc, "reason", None)
    text = str(reason or exc)
    if isinstance(exc, urllib3.exceptions.ProtocolError) and exc.args:
        text = str(exc.args[0])  # not the tuple of the message and the cause
        cause = exc.args[1] if len(exc.args) > 1 else None
        if isinstance(cause, http.client.RemoteDisconnected):
            text = "the server closed the connection without answering"
        elif isinstance(cause, OSError) and cause.strerror:
            text = f"{text.rstrip('.')}: {cause.strerror}"  # "Connection aborted: Connection reset by peer"
    if short := _INCOMPLETE.search(text):
        return f"the connection broke {short[1]} bytes into the body, {short[2]} bytes short"
    text = text.split(": ", 1)[-1] if "NewConnectionError" in text else text
    text = _CONNECTION_PREFIX.sub("", text)
    text = _TIMEOUT_VALUE.sub("", text)  # "Read timed out. (read timeout=0.99666285)"
    return text.replace("([Errno -2] Name or service not known)", "(name not known)")
