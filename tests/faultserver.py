"""A misbehaving HTTP server on loopback, for the downloader's fault tests.

Each path serves some bytes, honest by default (HEAD, GET, single ranges,
If-Range, ETag), with faults switched on per path: drop the connection
mid-body or before answering (on every request, or only on a kept-alive connection's
later ones: a proxy dropping idle connections), send fewer or more bytes than Content-Length, ignore Range, answer
another range or a shorter one (a chunk limit), answer 416 or any status (with
Retry-After), stall, throttle down to a trickle of bytes, hang (before the
headers or after some body bytes, until an event), cap the concurrent requests
per client (503 beyond), redirect, answer late (a far server's round trip), add
headers (``Content-Encoding`` on a plain body, a 1 MB header), send headers that never
end or a body that never ends, and speak TLS with a certificate of its own.  A
fault can be limited to the first N requests or to every k-th; faults listed in
order give "honoured for N requests, then ...".  Every request is logged with the bytes it was sent and the client's
port (one per connection); the peak number of concurrent requests is recorded.
"""

from __future__ import annotations

import hashlib
import http.server
import itertools
import random
import re
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest


def payload(size: int, seed: int = 7) -> bytes:
    return random.Random(seed).randbytes(size)


class SharedLink:
    """A link whose bytes per second all the answers share, however many connections:
    a second connection only splits it."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self._lock = threading.Lock()
        self._free_at = 0.0  # when the link has sent everything booked so far

    def send(self, count: int) -> None:
        """Wait until ``count`` more bytes fit on the link."""
        with self._lock:
            now = time.monotonic()
            self._free_at = max(self._free_at, now) + count / self.rate
            ready = self._free_at
        time.sleep(max(0.0, ready - time.monotonic()))


@dataclass
class Fault:
    times: int | None = None  # misbehave on the first N matching requests only (None: always)
    drop_after: int | None = None  # close the connection after this many body bytes
    short_by: int = 0  # promise Content-Length, send this many bytes fewer, close
    extra: int = 0  # send this many bytes more than Content-Length
    ignore_range: bool = False  # answer 200 with the whole body
    wrong_range: bool = False  # answer 206 for a range shifted by one byte
    status: int | None = None  # answer this status instead
    retry_after: str | None = None
    stall: float = 0.0  # sleep this long after the headers and some bytes
    rate: float | None = None  # bytes per second (of each answer)
    burst: int = 0  # with ``rate``: bytes sent at once first (nginx's limit_rate sends a second's)
    link: SharedLink | None = None  # bytes per second of every answer together (a full pipe)
    only_from: int | None = None  # apply only to ranges starting at or below this byte
    redirect: str | None = None
    no_length: bool = False  # no Content-Length: the body ends when the connection closes
    every: int | None = None  # misbehave on every k-th matching request only (k, 2k, ...)
    max_range: int | None = None  # answer a range with at most this many bytes (a 206 prefix)
    unknown_total: bool = False  # a 206's Content-Range says "/*": the size is not told
    cap: int | None = None  # serve at most N requests per client at once; 503 beyond
    # go silent before the headers / mid-body, dribble the headers (a byte every
    # ``dribble_every`` seconds), or send header lines as fast as the client reads them,
    # never ending
    hang: Literal["headers", "body", "dribble", "endless-headers"] | None = None
    headers: dict[str, str] = field(default_factory=dict)  # sent with the answer
    endless: bool = False  # after the body, send it again and again, until the client hangs up
    hang_after: int = 0  # (after this many body bytes) until ``until`` is set, then go on
    dribble_every: float = 0.25  # under the client's socket timeout, so that never fires
    latency: float = 0.0  # wait this long before answering: a round trip to a far server
    # close the connection without answering: "kept" only a kept-alive connection's later
    # requests (an upstream that closed it as the request came), "any" every request
    drop: Literal["kept", "any"] | None = None
    until: threading.Event | None = None  # default: the server's shutdown
    used: int = 0
    seen: int = 0


@dataclass
class Served:
    method: str
    path: str
    range: str | None
    if_range: str | None
    status: int
    sent: int
    port: int = 0  # the client's port: one per connection
    started: float = field(default_factory=time.monotonic)
    accept_encoding: str | None = None


@dataclass
class Resource:
    body: bytes
    etag: str = '"v1"'
    last_modified: str = "Mon, 01 Jan 2024 00:00:00 GMT"
    faults: list[Fault] = field(default_factory=list)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.body).hexdigest()

    @property
    def md5(self) -> str:
        return hashlib.md5(self.body).hexdigest()


_RANGE = re.compile(r"bytes=(\d*)-(\d*)$")


class _QuietServer(http.server.ThreadingHTTPServer):
    #: when set, each connection is wrapped in TLS (the handshake runs at accept)
    tls: ssl.SSLContext | None = None
    #: connections accepted, TLS handshakes that then failed included
    accepted = 0

    def get_request(self) -> tuple[Any, Any]:
        connection, address = self.socket.accept()
        self.accepted += 1
        if self.tls is not None:
            connection.settimeout(10)
            try:
                connection = self.tls.wrap_socket(connection, server_side=True)
            except OSError:  # the client refused the certificate: the server drops it
                connection.close()
                raise
            connection.settimeout(None)
        return connection, address

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up (cudaup dropping a slow connection) is no server error."""
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


class FaultServer:
    def __init__(self, host: str = "127.0.0.1", tls: ssl.SSLContext | None = None) -> None:
        self.resources: dict[str, Resource] = {}
        self.log: list[Served] = []
        self.active = 0
        self.peak = 0
        #: requests being served (not refused) per client address, for ``Fault.cap``
        self.serving: dict[str, int] = {}
        self.serving_peak = 0
        #: set at shutdown: every hang without its own event ends
        self.released = threading.Event()
        self._lock = threading.Lock()
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *args: object) -> None:
                pass

            def do_HEAD(self) -> None:
                owner.handle(self, body=False)

            def do_GET(self) -> None:
                owner.handle(self, body=True)

        self.server = _QuietServer((host, 0), Handler)
        self.server.tls = tls
        self.host = host
        self.server.daemon_threads = True
        self.server.block_on_close = False
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        scheme = "https" if self.server.tls is not None else "http"
        return f"{scheme}://{self.host}:{self.server.server_address[1]}"

    @property
    def accepted(self) -> int:
        """Connections accepted (with TLS: each handshake begun, failed ones too)."""
        return self.server.accepted

    def add(self, path: str, body: bytes, *faults: Fault, etag: str = '"v1"') -> Resource:
        resource = Resource(body, etag, faults=list(faults))
        self.resources[path] = resource
        return resource

    def sent(self, path: str | None = None, since: float = 0.0) -> int:
        """Body bytes sent (for requests that started at or after ``since``)."""
        with self._lock:
            return sum(
                s.sent for s in self.log if (path is None or s.path == path) and s.started >= since
            )

    def requests(self, path: str | None = None, method: str = "GET") -> list[Served]:
        with self._lock:
            return [s for s in self.log if s.method == method and (path is None or s.path == path)]

    def connections(self, path: str | None = None) -> int:
        """How many connections the requests (to ``path``) came over."""
        return len({s.port for s in self.requests(path)})

    def wait_for_requests(self, count: int, path: str | None = None, deadline: float = 30) -> None:
        """Block until ``count`` requests (to ``path``) have arrived."""
        end = time.monotonic() + deadline
        while len(self.requests(path)) < count:
            if time.monotonic() > end:
                raise AssertionError(f"only {len(self.requests(path))} of {count} requests came")
            time.sleep(0.01)

    def _fault_for(self, resource: Resource, start: int | None, kept: bool) -> Fault | None:
        with self._lock:
            for fault in resource.faults:
                if fault.drop == "kept" and not kept:
                    continue
                if fault.only_from is not None and (start is None or start > fault.only_from):
                    continue
                if fault.times is not None and fault.used >= fault.times:
                    continue
                fault.seen += 1
                if fault.every is not None and fault.seen % fault.every:
                    continue
                fault.used += 1
                return fault
        return None

    def handle(self, request: http.server.BaseHTTPRequestHandler, body: bool) -> None:
        record = Served(
            request.command,
            request.path,
            request.headers.get("Range"),
            request.headers.get("If-Range"),
            0,
            0,
            request.client_address[1],
            accept_encoding=request.headers.get("Accept-Encoding"),
        )
        # The handler is one per connection: requests it served before this one.
        kept = getattr(request, "served_before", 0) > 0
        request.served_before = getattr(request, "served_before", 0) + 1  # type: ignore[attr-defined]
        with self._lock:
            self.active += 1
            self.peak = max(self.peak, self.active)
            self.log.append(record)  # logged before answering: the client may look right after
        try:
            self._respond(request, body, record, kept)
        except OSError:  # the client went away (or dropped a slow connection)
            request.close_connection = True
        finally:
            with self._lock:
                self.active -= 1

    def _respond(
        self, request: http.server.BaseHTTPRequestHandler, body: bool, record: Served, kept: bool
    ) -> None:
        resource = self.resources.get(request.path)
        if resource is None:
            self._send(request, record, 404, {}, b"", body)
            return
        size = len(resource.body)
        start, end = 0, size - 1
        ranged = False
        header = request.headers.get("Range")
        if_range = request.headers.get("If-Range")
        if header and (if_range is None or if_range in {resource.etag, resource.last_modified}):
            match = _RANGE.match(header.strip())
            if match and (match.group(1) or match.group(2)):
                if match.group(1):
                    start = int(match.group(1))
                    end = min(int(match.group(2)), size - 1) if match.group(2) else size - 1
                else:
                    start, end = max(0, size - int(match.group(2))), size - 1
                ranged = True
        fault = self._fault_for(resource, start if ranged else 0, kept)
        if fault and fault.drop:  # no byte of an answer: the handler closes the connection
            request.close_connection = True
            return
        if fault and fault.latency:
            time.sleep(fault.latency)
        if fault and fault.hang == "headers":
            (fault.until or self.released).wait()
        if fault and fault.hang == "dribble":  # no socket timeout ever fires on this
            request.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slowly: ")
            while not (fault.until or self.released).wait(fault.dribble_every):
                request.wfile.write(b"z")
                request.wfile.flush()
            request.close_connection = True
            return
        if fault and fault.hang == "endless-headers":  # until the client hangs up (OSError)
            request.wfile.write(b"HTTP/1.1 200 OK\r\n")
            for number in itertools.count():
                request.wfile.write(b"X-Header-%d: never the last\r\n" % number)
            return
        if fault and fault.cap is not None:
            client = request.client_address[0]
            with self._lock:
                refused = self.serving.get(client, 0) >= fault.cap
                if not refused:
                    self.serving[client] = self.serving.get(client, 0) + 1
                    self.serving_peak = max(self.serving_peak, self.serving[client])
            if refused:
                headers = {"Retry-After": fault.retry_after} if fault.retry_after else {}
                self._send(request, record, 503, headers, b"", body)
                return
            try:
                self._answer(request, body, record, resource, fault, start, end, ranged)
            finally:
                with self._lock:
                    self.serving[client] -= 1
            return
        self._answer(request, body, record, resource, fault, start, end, ranged)

    def _answer(
        self,
        request: http.server.BaseHTTPRequestHandler,
        body: bool,
        record: Served,
        resource: Resource,
        fault: Fault | None,
        start: int,
        end: int,
        ranged: bool,
    ) -> None:
        size = len(resource.body)
        if fault and fault.redirect:
            self._send(request, record, 302, {"Location": fault.redirect}, b"", body)
            return
        if fault and fault.status:
            headers = {"Retry-After": fault.retry_after} if fault.retry_after else {}
            if fault.status == 416:
                headers["Content-Range"] = f"bytes */{size}"
            self._send(request, record, fault.status, headers, b"", body)
            return
        if ranged and start >= size:
            self._send(request, record, 416, {"Content-Range": f"bytes */{size}"}, b"", body)
            return
        headers = {
            "ETag": resource.etag,
            "Last-Modified": resource.last_modified,
            "Accept-Ranges": "bytes",
        }
        if ranged and not (fault and fault.ignore_range):
            shift = 1 if fault and fault.wrong_range else 0
            a, b = min(start + shift, size - 1), min(end + shift, size - 1)
            if fault and fault.max_range is not None:
                b = min(b, a + fault.max_range - 1)
            total = "*" if fault and fault.unknown_total else str(size)
            headers["Content-Range"] = f"bytes {a}-{b}/{total}"
            self._stream(request, record, 206, headers, resource.body[a : b + 1], body, fault)
        else:
            self._stream(request, record, 200, headers, resource.body, body, fault)

    def _send(
        self,
        request: http.server.BaseHTTPRequestHandler,
        record: Served,
        status: int,
        headers: dict[str, str],
        data: bytes,
        body: bool,
    ) -> None:
        record.status = status
        request.send_response(status)
        for name, value in headers.items():
            request.send_header(name, value)
        request.send_header("Content-Length", str(len(data)))
        request.end_headers()
        if body and data:
            request.wfile.write(data)
            record.sent += len(data)

    def _stream(
        self,
        request: http.server.BaseHTTPRequestHandler,
        record: Served,
        status: int,
        headers: dict[str, str],
        data: bytes,
        body: bool,
        fault: Fault | None,
    ) -> None:
        record.status = status
        request.send_response(status)
        for name, value in {**headers, **(fault.headers if fault else {})}.items():
            request.send_header(name, value)
        if fault and fault.no_length:
            request.send_header("Connection", "close")
        else:
            request.send_header("Content-Length", str(len(data)))
        request.end_headers()
        if not body:
            return
        to_send = data
        if fault and fault.short_by:
            to_send = data[: max(0, len(data) - fault.short_by)]
        if fault and fault.extra:
            to_send = data + b"\0" * fault.extra
        if fault and fault.drop_after is not None:
            to_send = to_send[: fault.drop_after]
        # A slow rate goes out in small pieces (about 20 a second): a trickle, not a burst.
        pace = fault and (fault.rate or (fault.link.rate if fault.link else None))
        step = 64 * 1024 if not pace else max(1, min(64 * 1024, int(pace / 20)))
        hang_at = fault.hang_after if fault and fault.hang == "body" else None
        started = time.monotonic()
        for offset in range(0, len(to_send), step):
            piece = to_send[offset : offset + step]
            if fault and hang_at is not None and offset <= hang_at < offset + len(piece):
                request.wfile.write(piece[: hang_at - offset])
                record.sent += hang_at - offset
                request.wfile.flush()
                (fault.until or self.released).wait()
                piece = piece[hang_at - offset :]
            if fault and fault.link:
                fault.link.send(len(piece))
            request.wfile.write(piece)
            record.sent += len(piece)
            if fault and fault.stall and offset == 0:
                request.wfile.flush()
                time.sleep(fault.stall)
            if fault and fault.rate:
                paced = max(0, record.sent - fault.burst)
                ahead = paced / fault.rate - (time.monotonic() - started)
                if ahead > 0:
                    time.sleep(ahead)
        while fault and fault.endless:  # until the client hangs up (OSError)
            request.wfile.write(to_send)
            record.sent += len(to_send)
        request.wfile.flush()
        if fault and (
            fault.short_by or fault.drop_after is not None or fault.extra or fault.no_length
        ):
            request.close_connection = True
            request.connection.close()

    def __enter__(self) -> FaultServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()


def self_signed(folder: Path, host: str = "127.0.0.1") -> ssl.SSLContext:
    """A server context with a new self-signed certificate for ``host``, which no
    client trusts unless told to (its PEM is ``folder/cert.pem``)."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-subj", f"/CN={host}", "-addext", f"subjectAltName=IP:{host}",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context


def signed_by_a_new_ca(folder: Path, host: str = "127.0.0.1") -> tuple[Path, Path, Path]:
    """A new CA and a certificate it signed for ``host``, as a real server has (a client
    such as uv refuses a self-signed one that is its own CA): the CA's certificate (what a
    client is told to trust), the server's certificate and its key, all PEM, in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    ca, ca_key = folder / "ca.pem", folder / "ca-key.pem"
    cert, key, request = folder / "cert.pem", folder / "key.pem", folder / "cert.csr"
    extensions = folder / "cert.ext"
    extensions.write_text(
        f"subjectAltName=IP:{host}\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
    )
    for command in (
        ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=cudaup test CA",
         "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
         "-keyout", str(ca_key), "-out", str(ca)],
        ["req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={host}", "-keyout", str(key),
         "-out", str(request)],
        ["x509", "-req", "-in", str(request), "-CA", str(ca), "-CAkey", str(ca_key),
         "-CAcreateserial", "-days", "2", "-extfile", str(extensions), "-out", str(cert)],
    ):  # fmt: skip
        subprocess.run(["openssl", *command], check=True, capture_output=True)
    return ca, cert, key


@pytest.fixture
def fault_server() -> Iterator[FaultServer]:
    with FaultServer() as server:
        yield server
