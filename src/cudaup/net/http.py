"""The one HTTP client: pooled connections, proxies, netrc, TLS, retries, cache.

Built on urllib3 (chosen by measurement, see ``docs/design.md``).  urllib3 does
not read the environment itself, so this module does what users expect of a
well-behaved CLI: ``HTTPS_PROXY``/``HTTP_PROXY``/``NO_PROXY`` (via the
standard library's reading of them), ``SSL_CERT_FILE``/``SSL_CERT_DIR``, and
``~/.netrc`` (or ``$NETRC``) credentials for the host being asked.  TLS is
always verified.  Redirects are followed by hand so that an https→http
downgrade, or a redirect to a host that is not a configured source or on the
list in :mod:`cudaup.net.hosts`, can be refused.
"""

from __future__ import annotations

import base64
import netrc
import os
import re
import threading
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import urljoin, urlsplit

import urllib3

from cudaup import __version__
from cudaup.config import Settings
from cudaup.errors import NetworkError, SourceFormatError
from cudaup.net import backoff as backoff_policy
from cudaup.net.backoff import Backoff
from cudaup.net.hosts import check_redirect
from cudaup.net.response_cache import CachedResponse, HttpCache
from cudaup.net.tls import default_context

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
USER_AGENT = f"cudaup/{__version__} (+https://github.com/cudaup/cudaup)"


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
        self.cache = cache if cache is not None else HttpCache(settings.cache_root)
        #: How every retry through this client waits (the downloader's too).
        self.backoff = backoff if backoff is not None else backoff_policy.DEFAULT
        self._retries = retries
        self._lock = threading.Lock()
        #: one pool manager per proxy, and per whether it needs TLS: a plain-HTTP mirror
        #: never waits for the CA certificates to load
        self._managers: dict[tuple[str | None, bool], urllib3.PoolManager] = {}
        self._netrc: netrc.netrc | Literal[False] | None = False
        self.requests_sent = 0

    # -- connection plumbing -------------------------------------------------
    def _manager(self, url: str) -> urllib3.PoolManager:
        parts = urlsplit(url)
        proxy: str | None = None
        proxies = urllib.request.getproxies()
        candidate = proxies.get(parts.scheme)
        if candidate and not urllib.request.proxy_bypass(parts.hostname or ""):
            proxy = candidate
        tls = parts.scheme == "https" or (proxy or "").startswith("https:")
        with self._lock:
            manager = self._managers.get((proxy, tls))
            if manager is None:
                kwargs: dict[str, object] = {
                    "num_pools": 16,
                    "maxsize": 16,
                    "block": False,
                    "headers": {"User-Agent": USER_AGENT},
                }
                if tls:
                    kwargs["ssl_context"] = default_context()
                manager = (
                    urllib3.ProxyManager(proxy, **kwargs)  # type: ignore[arg-type]
                    if proxy
                    else urllib3.PoolManager(**kwargs)  # type: ignore[arg-type]
                )
                self._managers[(proxy, tls)] = manager
            return manager

    def _auth_header(self, url: str) -> dict[str, str]:
        host = urlsplit(url).hostname
        if not host:
            return {}
        with self._lock:
            if self._netrc is False:
                path = Path(os.environ.get("NETRC") or Path("~/.netrc").expanduser())
                try:
                    self._netrc = netrc.netrc(str(path)) if path.exists() else None
                except (OSError, netrc.NetrcParseError):
                    self._netrc = None
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
        refused redirect always raises :class:`NetworkError`.
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
        retries = self._retries if retry else 0
        all_headers = {**self._auth_header(url), **(headers or {})}
        read_timeout = timeout if timeout is not None else self.settings.timeout
        last_error = ""
        for attempt in range(retries + 1):
            self._count()
            try:
                response = self._manager(url).request(
                    method,
                    url,
                    headers=all_headers,
                    preload_content=preload,
                    redirect=False,
                    retries=False,
                    timeout=urllib3.Timeout(connect=min(10.0, read_timeout), read=read_timeout),
                )
            except urllib3.exceptions.HTTPError as exc:
                if not retry:
                    raise
                last_error = describe(exc)
            else:
                if response.status not in RETRY_STATUSES or not retry:
                    return response
                last_error = f"HTTP {response.status}"
                retry_after = response.headers.get("Retry-After")
                response.drain_conn()
                response.release_conn()
                if attempt < retries:
                    self.backoff.wait(attempt, retry_after)
                continue
            if attempt < retries:
                self.backoff.wait(attempt)
        host = urlsplit(url).netloc
        raise NetworkError(f"cannot reach {host} ({last_error}) for {url}")

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
        """GET a small document, through the cache when ``cache`` names its kind."""
        entry: CachedResponse | None = None
        if cache is not None and not self.settings.refresh:
            entry = self.cache.lookup(url)
            if entry is not None:
                ttl = TTL[cache] if entry.status == 200 else min(TTL[cache], NEGATIVE_TTL)
                if entry.age() < ttl:
                    return Response(url, entry.status, {}, entry.body, from_cache=True)
        headers: dict[str, str] = {}
        if accept:
            headers["Accept"] = accept
        if entry is not None and entry.status == 200:
            if entry.etag:
                headers["If-None-Match"] = entry.etag
            if entry.last_modified:
                headers["If-Modified-Since"] = entry.last_modified
        raw = self.open("GET", url, headers)
        try:
            if raw.status == 304 and entry is not None:
                self.cache.touch(entry)
                return Response(url, 200, {}, entry.body, from_cache=True)
            body = _read_limited(raw, max_bytes, url)
        finally:
            raw.release_conn()
        response = Response(str(raw.url or url), raw.status, dict(raw.headers.items()), body)
        if cache is not None and (raw.status == 200 or raw.status in {404, 410}):
            self.cache.store(
                url, raw.status, raw.headers.get("ETag"), raw.headers.get("Last-Modified"), body
            )
        return response


def _read_limited(raw: urllib3.BaseHTTPResponse, limit: int, url: str) -> bytes:
    chunks: list[bytes] = []
    total = 0
    for chunk in raw.stream(64 * 1024):
        total += len(chunk)
        if total > limit:
            raise SourceFormatError(f"{url} is larger than {limit} bytes; refusing to read it")
        chunks.append(chunk)
    return b"".join(chunks)


_INCOMPLETE = re.compile(r"IncompleteRead\((\d+) bytes read, (\d+) more expected\)")
_TIMEOUT_VALUE = re.compile(r" \((?:read|connect) timeout=[^)]*\)")
_CONNECTION_PREFIX = re.compile(r"^\w*Connection(?:Pool)?\(host='[^']*', port=\d+\): ")


def describe(exc: urllib3.exceptions.HTTPError) -> str:
    """urllib3's error in a few words: "Failed to resolve 'host' (name not known)"."""
    reason = getattr(exc, "reason", None)
    text = str(reason or exc)
    if isinstance(exc, urllib3.exceptions.ProtocolError) and exc.args:
        text = str(exc.args[0])  # not the tuple of the message and the cause
    if short := _INCOMPLETE.search(text):
        return f"the connection broke {short[1]} bytes into the body, {short[2]} bytes short"
    text = text.split(": ", 1)[-1] if "NewConnectionError" in text else text
    text = _CONNECTION_PREFIX.sub("", text)
    text = _TIMEOUT_VALUE.sub("", text)  # "Read timed out. (read timeout=0.99666285)"
    return text.replace("([Errno -2] Name or service not known)", "(name not known)")
