"""The index memo's side of the wire: the loopback server uv talks to, and the answers
it writes (:mod:`cudaup.plan.index_memo` decides what each request gets).

An answer is kept as :class:`Answer` (status, the headers passed on, the body) and
written whole by :func:`send`; a body too large to keep is passed on as it arrives by
:func:`stream`, framed as the upstream framed it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from cudaup.errors import CudaupError
from cudaup.net.http import log

if TYPE_CHECKING:  # the server's and the wire's modules load when the memo starts
    import http.server
    import socket

    import urllib3

    from cudaup.plan.index_memo import IndexMemo

#: The response headers passed through to uv.
PASSED = ("Content-Type", "Content-Range", "Accept-Ranges", "Content-Encoding")
_CHUNK = 256 * 1024
#: An answer the memo keeps stays the same for the rest of the plan, and it tells uv so:
#: uv's cache is the plan's own (its scratch directory), and later uv runs then take the
#: pages, and the metadata they read from wheels, from it without asking at all.
_FRESH_FOR_THE_PLAN = ("Cache-Control", "max-age=86400, immutable")


def server_on(listener: socket.socket, memo: IndexMemo) -> http.server.ThreadingHTTPServer:
    """The memo's server on ``listener``, made in the memo's thread once uv may already be
    starting: a warm plan loads no server module, and a cold one's first uv run waits for
    none (importing them costs 50-80 ms, about what uv takes to send its first request,
    which waits in the listening socket's backlog meanwhile)."""
    import http.server  # noqa: PLC0415

    class Server(http.server.ThreadingHTTPServer):
        def handle_error(self, request: object, client_address: object) -> None:
            """A request not served (most often: uv hung up) goes to the verbose log only."""
            log.info("index memo: a request from uv failed", exc_info=True)

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body leave in two writes: with Nagle's algorithm the body waits
        # for the client's delayed ACK (40 ms a response, on every chain uv follows).
        disable_nagle_algorithm = True

        def setup(self) -> None:
            super().setup()
            threading.current_thread().name = "cudaup-index-memo-connection"
            memo.connected(self.connection)

        def finish(self) -> None:
            memo.disconnected(self.connection)
            super().finish()

        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            memo.serve(self, "GET")

        def do_HEAD(self) -> None:
            memo.serve(self, "HEAD")

    server = Server(listener.getsockname(), Handler, bind_and_activate=False)
    server.socket.close()  # its own, unbound: the memo's listener serves instead
    server.socket = listener
    # Handler threads are joined on close: none outlives the plan.
    server.daemon_threads, server.block_on_close = False, True
    return server


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes


def for_the_plan(answer: Answer) -> Answer:
    """A success as the memo keeps and serves it: said to stay the same for the rest of the
    plan (:data:`_FRESH_FOR_THE_PLAN`); any other answer as it came."""
    if answer.status not in {200, 206}:
        return answer
    return replace(answer, headers=(*answer.headers, _FRESH_FOR_THE_PLAN))


def passed(headers: Mapping[str, str], exclude: str = "") -> tuple[tuple[str, str], ...]:
    """The headers of :data:`PASSED` ``headers`` has, whatever their case."""
    lowered = {name.lower(): value for name, value in headers.items()}
    return tuple(
        (name, value)
        for name in PASSED
        if name != exclude and (value := lowered.get(name.lower())) is not None
    )


def head_answer(size: int) -> Answer:
    """A wheel's HEAD answered from its tail: the size its 206 gave."""
    headers = (
        ("Content-Type", "application/octet-stream"),
        ("Accept-Ranges", "bytes"),
        ("Content-Length", str(size)),
        _FRESH_FOR_THE_PLAN,
    )
    return Answer(200, headers, b"")


def range_answer(first: int, body: bytes, total: int) -> Answer:
    """A range answered from bytes read ahead: the upstream's bytes, as a 206 of them."""
    last = first + len(body) - 1
    headers = (
        ("Content-Type", "application/octet-stream"),
        ("Content-Range", f"bytes {first}-{last}/{total}"),
        ("Accept-Ranges", "bytes"),
        _FRESH_FOR_THE_PLAN,
    )
    return Answer(206, headers, body)


def failed(error: CudaupError | None) -> Answer:
    """What uv is told when the upstream failed: a gateway error, never a page."""
    why = str(error) if error is not None else "the upstream failed"
    status = 504 if "timed out" in why or "timeout" in why else 502
    return Answer(status, (("Content-Type", "text/plain"),), why.encode() + b"\n")


def send(request: http.server.BaseHTTPRequestHandler, answer: Answer) -> None:
    request.send_response(answer.status)
    for name, value in answer.headers:
        if name != "Content-Length":
            request.send_header(name, value)
    length = dict(answer.headers).get("Content-Length") if request.command == "HEAD" else None
    request.send_header("Content-Length", length or str(len(answer.body)))
    request.end_headers()
    if request.command != "HEAD":
        request.wfile.write(answer.body)


def stream(request: http.server.BaseHTTPRequestHandler, raw: urllib3.BaseHTTPResponse) -> None:
    """A body too large to keep, passed on as it arrives."""
    import urllib3  # noqa: PLC0415

    # urllib3's reading of the framing, before any of the body is read: the Content-Length,
    # or None where there is none, it is unusable, or it stands beside chunked transfer
    # (RFC 9112 6.3: the chunks frame the body, and an intermediary drops the length).
    # Passing such a length on would frame uv's answer by it: the bytes past it would be
    # read by uv as the answer to its next request on the connection.
    length = raw.length_remaining
    request.send_response(raw.status)
    for name, value in passed(raw.headers):
        request.send_header(name, value)
    if length is not None:
        request.send_header("Content-Length", str(length))
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
