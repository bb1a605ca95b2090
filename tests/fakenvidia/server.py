"""A loopback HTTP/1.1 server for a :class:`~tests.fakenvidia.site.Site`.

``FakeNvidiaServer(site)`` listens on ``127.0.0.1`` (port chosen by the OS) in a daemon thread.
It answers GET and HEAD (anything else: 501) like a plain static file server:

* every file response carries ``Content-Length``, ``Content-Type``, a strong ``ETag``,
  ``Last-Modified`` and ``Accept-Ranges: bytes``; HEAD sends GET's headers without a body;
* ``Range: bytes=a-b`` / ``bytes=a-`` / ``bytes=-n`` -> 206 with ``Content-Range``;
  unsatisfiable -> 416 with ``Content-Range: bytes */SIZE``; malformed or multi-range headers
  are ignored (200); ``If-Range`` with a validator other than the current ETag or
  Last-Modified date -> the full 200;
* ``If-None-Match`` (takes precedence) / ``If-Modified-Since`` -> 304;
* a directory path without its trailing slash -> 301 to the slash form;
* anything else -> 404 with a small HTML body.

The query string is ignored for lookup.  Every request is recorded in :attr:`log`.
"""

from __future__ import annotations

import contextlib
import email.utils
import re
import socket
import sys
import threading
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import NamedTuple
from urllib.parse import unquote, urlsplit

from .resources import Resource
from .site import HOST_PREFIXES, Site, build_site

NOT_FOUND_BODY = (
    b"<!DOCTYPE html>\n<html><head><title>404 Not Found</title></head>"
    b"<body><h1>Not Found</h1><p>The requested URL was not found on this server.</p>"
    b"</body></html>\n"
)

_RANGE = re.compile(r"\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*", re.IGNORECASE)


class Headers(Mapping[str, str]):
    """Request headers as received; lookup is case-insensitive, iteration keeps the case."""

    def __init__(self, items: list[tuple[str, str]]) -> None:
        self._items = list(items)
        self._lower = {name.lower(): value for name, value in self._items}

    def __getitem__(self, key: str) -> str:
        return self._lower[key.lower()]

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys(name for name, _ in self._items))

    def __len__(self) -> int:
        return len(self._lower)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key.lower() in self._lower

    def __repr__(self) -> str:
        return f"Headers({self._items!r})"


class RequestRecord(NamedTuple):
    """One request: method, raw request target (path and query) and request headers."""

    method: str
    path: str
    headers: Headers


def _http_date(timestamp: int) -> str:
    return email.utils.formatdate(timestamp, usegmt=True)


def _etag_list_matches(header: str, etag: str) -> bool:
    """Weak comparison, as If-None-Match uses."""
    if header.strip() == "*":
        return True
    bare = etag.removeprefix("W/")
    return any(tag.strip().removeprefix("W/") == bare for tag in header.split(","))


def _parse_range(header: str, size: int) -> tuple[int, int] | bool | None:
    """(first, last) inclusive; None: ignore the header; False: unsatisfiable (416)."""
    match = _RANGE.fullmatch(header)
    if match is None:
        return None
    first_text, last_text = match.groups()
    if not first_text and not last_text:
        return None
    if first_text:
        first = int(first_text)
        last = int(last_text) if last_text else size - 1
        if last_text and last < first:
            return None
        if first >= size:
            return False
        return first, min(last, size - 1)
    suffix = int(last_text)
    if suffix == 0 or size == 0:
        return False
    return max(0, size - suffix), size - 1


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, owner: FakeNvidiaServer) -> None:
        self.owner = owner
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Handler)

    def get_request(self) -> tuple[socket.socket, tuple[str, int]]:
        connection, address = super().get_request()
        with self.connections_lock:
            self.connections.add(connection)
        return connection, address

    def shutdown_request(self, request: socket.socket | tuple[bytes, socket.socket]) -> None:
        if isinstance(request, socket.socket):
            with self.connections_lock:
                self.connections.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request: object, client_address: object) -> None:
        error = sys.exc_info()[1]
        if error is not None and not isinstance(error, ConnectionError | TimeoutError):
            self.owner.errors.append(error)

    def close_connections(self) -> None:
        with self.connections_lock:
            connections = list(self.connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes; without TCP_NODELAY, Nagle plus the
    # client's delayed ACK stall every keep-alive response by ~40 ms.
    disable_nagle_algorithm = True
    server_version = "FakeNvidia/1.0"
    sys_version = ""
    timeout = 60
    server: _HTTPServer

    def log_message(self, fmt: str, *args: object) -> None:
        """Quiet: requests go to :attr:`FakeNvidiaServer.log` instead of stderr."""

    def do_GET(self) -> None:
        self._serve(send_body=True)

    def do_HEAD(self) -> None:
        self._serve(send_body=False)

    # -- helpers ----------------------------------------------------------------------------

    def _simple(
        self,
        status: int,
        headers: Mapping[str, str],
        body: bytes,
        send_body: bool,
    ) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if send_body and body:
            self.wfile.write(body)

    def _serve(self, send_body: bool) -> None:
        owner = self.server.owner
        owner.record(self.command, self.path, Headers(list(self.headers.items())))
        path = unquote(urlsplit(self.path).path)
        site = owner.site
        resource = site.resources.get(path)
        if resource is None:
            if not path.endswith("/") and path + "/" in site.resources:
                self._simple(301, {"Location": path + "/"}, b"", send_body)
            else:
                html = {"Content-Type": "text/html; charset=utf-8"}
                self._simple(404, html, NOT_FOUND_BODY, send_body)
            return
        self._serve_resource(resource, send_body)

    def _serve_resource(self, resource: Resource, send_body: bool) -> None:
        etag = resource.etag
        last_modified = _http_date(resource.last_modified)
        validators = {"ETag": etag, "Last-Modified": last_modified}
        if self._not_modified(etag, resource.last_modified):
            self.send_response(304)
            for name, value in validators.items():
                self.send_header(name, value)
            self.end_headers()
            return
        size = resource.size
        common = {
            "Content-Type": resource.content_type,
            "Accept-Ranges": "bytes",
            **validators,
        }
        byte_range: tuple[int, int] | bool | None = None
        range_header = self.headers.get("Range")
        if range_header is not None and self._if_range_ok(etag, last_modified):
            byte_range = _parse_range(range_header, size)
        if byte_range is False:
            headers = {**common, "Content-Range": f"bytes */{size}"}
            self._simple(416, headers, b"", send_body)
            return
        if isinstance(byte_range, tuple):
            first, last = byte_range
            status = 206
            common["Content-Range"] = f"bytes {first}-{last}/{size}"
        else:
            first, last = 0, size - 1
            status = 200
        self.send_response(status)
        for name, value in common.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(last - first + 1))
        self.end_headers()
        if not send_body:
            return
        try:
            for chunk in resource.iter_chunks(first, last + 1):
                self.wfile.write(chunk)
        except (ConnectionError, TimeoutError):
            self.close_connection = True

    def _not_modified(self, etag: str, last_modified: int) -> bool:
        if_none_match = self.headers.get("If-None-Match")
        if if_none_match is not None:
            return _etag_list_matches(if_none_match, etag)
        if_modified_since = self.headers.get("If-Modified-Since")
        if if_modified_since is None:
            return False
        try:
            since = email.utils.parsedate_to_datetime(if_modified_since)
        except (TypeError, ValueError):
            return False
        if since.tzinfo is None:
            return False
        return last_modified <= since.timestamp()

    def _if_range_ok(self, etag: str, last_modified: str) -> bool:
        """Whether Range applies: no If-Range, or If-Range names the current representation."""
        if_range = self.headers.get("If-Range")
        if if_range is None:
            return True
        value = if_range.strip()
        if value.startswith(('"', "W/")):
            return value == etag  # strong comparison; a weak tag never matches
        return value == last_modified


class FakeNvidiaServer:
    """The fake NVIDIA hosts on one loopback port; a context manager.

    ``download_url``, ``archive_url`` and ``prerelease_url`` replace
    ``https://developer.download.nvidia.com``, ``https://developer.nvidia.com`` and
    ``https://packages.nvidia.com``.  ``log`` is a snapshot of the requests so far.
    """

    def __init__(self, site: Site | None = None) -> None:
        self.site = site if site is not None else build_site()
        self.errors: list[BaseException] = []
        self._log: list[RequestRecord] = []
        self._log_lock = threading.Lock()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> FakeNvidiaServer:
        if self._httpd is not None:
            raise RuntimeError("already started")
        self._httpd = _HTTPServer(self)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"fakenvidia:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening and cut open keep-alive connections."""
        httpd, thread = self._httpd, self._thread
        if httpd is None:
            return
        httpd.shutdown()
        httpd.close_connections()
        httpd.server_close()
        if thread is not None:
            thread.join(timeout=5)
        self._httpd = self._thread = None

    def __enter__(self) -> FakeNvidiaServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    # -- addresses --------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("server not started")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (no trailing slash)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def download_url(self) -> str:
        """Stands for ``https://developer.download.nvidia.com``."""
        return self.base_url + "/download"

    @property
    def archive_url(self) -> str:
        """Stands for ``https://developer.nvidia.com``."""
        return self.base_url + "/www"

    @property
    def prerelease_url(self) -> str:
        """Stands for ``https://packages.nvidia.com``."""
        return self.base_url + "/packages"

    def url(self, path: str) -> str:
        """Absolute loopback URL of a request path such as ``/download/compute/...``."""
        return self.base_url + path

    def local_url(self, nvidia_url: str) -> str:
        """NVIDIA's real absolute URL rewritten onto this server."""
        for host, prefix in HOST_PREFIXES.items():
            if nvidia_url == host or nvidia_url.startswith(host + "/"):
                return self.base_url + prefix + nvidia_url[len(host) :]
        raise ValueError(f"not an NVIDIA host: {nvidia_url}")

    # -- request log ------------------------------------------------------------------------

    def record(self, method: str, path: str, headers: Headers) -> None:
        with self._log_lock:
            self._log.append(RequestRecord(method, path, headers))

    @property
    def log(self) -> list[RequestRecord]:
        """A copy of every request so far: ``(method, path, headers)`` tuples."""
        with self._log_lock:
            return list(self._log)

    def clear_log(self) -> None:
        with self._log_lock:
            self._log.clear()

    def count(self, path_prefix: str | None = None, method: str | None = None) -> int:
        """Requests whose raw path starts with ``path_prefix`` (and of ``method``, if given)."""
        with self._log_lock:
            return sum(
                1
                for record in self._log
                if (path_prefix is None or record.path.startswith(path_prefix))
                and (method is None or record.method == method)
            )
