"""A TCP relay on loopback that behaves like a CDN's link, for the download benchmark.

Two things it adds between a client and nginx:

- **a speed cap per TCP connection** (``rate`` bytes per second, paced with a bucket
  of 50 ms): nginx's own ``limit_rate`` is per *request* and lets each request's
  first second of data through at full speed (its limit is
  ``rate * (elapsed + 1) - sent``), so a client that asks for many pieces of a few MiB
  on one connection would never be capped at all.  A CDN that caps connections
  caps the connection.
- **a round trip per request** (``rtt`` seconds): bytes from the client reach the
  server ``rtt`` after they were sent (half out, half back, folded into one
  direction), and a new connection's first bytes wait one round trip more (the TCP
  handshake).  ``tc qdisc ... netem delay`` would be the honest tool, but it needs the
  ``sch_netem`` kernel module, which machines like this one (and most containers)
  lack.  It models what a downloader's piece size has to amortize: the idle round
  trip between the end of one answer and the first byte of the next on the same
  connection.  It models no bandwidth-delay product (loopback windows never limit)
  and no loss.

    with LinkRelay(("127.0.0.1", nginx_port), rtt=0.05, rate=6 * 2**20) as relay:
        url = f"http://127.0.0.1:{relay.port}/file.bin"
"""

from __future__ import annotations

import contextlib
import queue
import socket
import threading
import time
from types import TracebackType

#: Bytes moved per read from the server; at 6 MiB/s, about a hundred reads a second.
CHUNK = 64 * 1024
#: Seconds of unused speed a connection may save up (the cap's bucket).
BURST = 0.05


class LinkRelay:
    def __init__(self, upstream: tuple[str, int], rtt: float, rate: float | None) -> None:
        self.upstream = upstream
        self.rtt = rtt
        self.rate = rate
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._closing = threading.Event()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()

    def __enter__(self) -> LinkRelay:
        threading.Thread(target=self._accept, daemon=True, name="relay-accept").start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._closing.set()
        self._listener.close()
        with self._lock:
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.close()

    def _accept(self) -> None:
        while not self._closing.is_set():
            try:
                client, _address = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            for sock in (client, server):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._sockets += [client, server]
            pending: queue.Queue[tuple[float, bytes]] = queue.Queue()
            accepted = time.monotonic()
            for target, args in (
                (self._stamp, (client, pending, accepted)),
                (self._deliver, (pending, server)),
                (self._pace, (server, client)),
            ):
                threading.Thread(target=target, args=args, daemon=True).start()

    def _stamp(
        self, source: socket.socket, pending: queue.Queue[tuple[float, bytes]], accepted: float
    ) -> None:
        """Read the client's bytes and note when each may reach the server."""
        handshake_done = accepted + self.rtt
        with contextlib.suppress(OSError):
            while data := source.recv(CHUNK):
                pending.put((max(time.monotonic(), handshake_done) + self.rtt, data))
        pending.put((0.0, b""))

    def _deliver(self, pending: queue.Queue[tuple[float, bytes]], target: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while True:
                due, data = pending.get()
                if not data:
                    break
                if (wait := due - time.monotonic()) > 0:
                    time.sleep(wait)
                target.sendall(data)
        with contextlib.suppress(OSError):
            target.shutdown(socket.SHUT_WR)

    def _pace(self, source: socket.socket, target: socket.socket) -> None:
        """Pass the server's bytes on, no faster than ``rate`` on this connection."""
        view = memoryview(bytearray(CHUNK))
        earned = time.monotonic()  # when the bytes sent so far were due
        with contextlib.suppress(OSError):
            while count := source.recv_into(view):
                target.sendall(view[:count])  # the bytes start at once, as on a wire
                if self.rate:
                    now = time.monotonic()
                    earned = max(earned, now - BURST) + count / self.rate
                    if earned > now:
                        time.sleep(earned - now)
        with contextlib.suppress(OSError):
            target.shutdown(socket.SHUT_WR)
