"""Response headers that end: a deadline for all of a request's headers.

A socket timeout bounds each read, not the whole: a server that sends a byte of its
headers every few seconds never trips it, and a request would wait forever.  The
downloader's watchdog already bounds its own requests by the stall limit
(:mod:`cudaup.download.watch`); every other request (documents, probes, HEAD) runs
inside :func:`headers_within`, and its connection shuts its socket down when the
headers have not all arrived by then, so the blocked read returns and the request
fails with :class:`HeadersTooSlowError` (not retried: the stall limit is spent).

urllib3 hands out the connection only with the response, so the deadline reaches it
through this thread's state, set around the request by the thread that sends it.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
from collections.abc import Iterator
from typing import Any

import urllib3
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

_current = threading.local()


class HeadersTooSlowError(http.client.HTTPException):
    """The response headers did not all arrive within the deadline."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"no complete response headers in {seconds:g} s")
        self.seconds = seconds


@contextlib.contextmanager
def headers_within(seconds: float | None) -> Iterator[None]:
    """Requests this thread sends in the block must have their headers in ``seconds``
    (None: no deadline, the caller watches them)."""
    before = getattr(_current, "seconds", None)
    _current.seconds = seconds
    try:
        yield
    finally:
        _current.seconds = before


class _Deadline:
    """What both connection classes add to ``getresponse``."""

    sock: socket.socket | None

    def getresponse(self) -> Any:
        seconds: float | None = getattr(_current, "seconds", None)
        if seconds is None or self.sock is None:
            return super().getresponse()  # type: ignore[misc]
        sock = self.sock
        lock = threading.Lock()
        state = {"answered": False, "passed": False}

        def give_up() -> None:
            with lock:
                if state["answered"]:
                    return  # the headers came as the deadline passed: keep them
                state["passed"] = True
            # the blocked read returns; socket's own shutdown, not SSLSocket's: that one
            # also drops the TLS object, and a read after it raises ValueError, not EOF
            with contextlib.suppress(OSError):
                socket.socket.shutdown(sock, socket.SHUT_RDWR)

        timer = threading.Timer(seconds, give_up)
        timer.daemon = True
        timer.start()
        try:
            response = super().getresponse()  # type: ignore[misc]
        except (OSError, ValueError, http.client.HTTPException) as exc:
            if state["passed"]:
                raise HeadersTooSlowError(seconds) from exc
            raise
        finally:
            with lock:
                state["answered"] = True
            timer.cancel()
        if state["passed"]:  # the socket was shut as the last header arrived
            response.close()
            raise HeadersTooSlowError(seconds)
        return response


class _Connection(_Deadline, urllib3.connection.HTTPConnection):
    pass


class _TlsConnection(_Deadline, urllib3.connection.HTTPSConnection):
    pass


class _Pool(HTTPConnectionPool):
    ConnectionCls = _Connection


class _TlsPool(HTTPSConnectionPool):
    ConnectionCls = _TlsConnection


#: ``PoolManager.pool_classes_by_scheme`` for connections that keep the deadline.
POOL_CLASSES: dict[str, type[HTTPConnectionPool]] = {"http": _Pool, "https": _TlsPool}
