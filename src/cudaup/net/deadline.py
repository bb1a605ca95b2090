"""The client's connections: response headers that end, and kept-alive ones the server closed.

A socket timeout bounds each read, not the whole: a server that sends a byte of its
headers every few seconds never trips it, and a request would wait forever.  The
downloader's watchdog already bounds its own requests by the stall limit
(:mod:`cudaup.download.watch`); every other request (documents, probes, HEAD) runs
inside :func:`headers_within`, and its connection shuts its socket down when the
headers have not all arrived by then, so the blocked read returns and the request
fails with :class:`HeadersTooSlowError` (not retried: the stall limit is spent).

A connection the pool kept open may have been closed by the server (or a proxy on the
way, which drops idle connections) just as the next request went out over it: it ends
before any byte of the answer.  That is no fault of the server's: the connection says so
with :class:`StaleConnectionError`, and :func:`on_a_new_connection` lets the client send
the request again at once on a connection of its own, as urllib3, pip and requests do
for idempotent requests (a backoff sleep there would only wait on the critical path).

urllib3 hands out the connection only with the response, so the deadline (and the ask
for a new connection) reaches it through this thread's state, set around the request by
the thread that sends it.

A read blocked on a connection is ended from another thread one way only, here and in
the downloader's watchdog: :func:`cut_off`, TCP's own shutdown under the TLS layer.
"""

from __future__ import annotations

import contextlib
import heapq
import http.client
import itertools
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import urllib3
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.util.wait import wait_for_read

if TYPE_CHECKING:
    from cudaup.util.parallel import Stop

_current = threading.local()


class HeadersTooSlowError(http.client.HTTPException):
    """The response headers did not all arrive within the deadline."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"no complete response headers in {seconds:g} s")
        self.seconds = seconds


class RequestStoppedError(http.client.HTTPException):
    """The request was cut off because its answer was no longer wanted (:func:`ended_by`)."""

    def __init__(self) -> None:
        super().__init__("stopped: its answer is no longer wanted")


class StaleConnectionError(http.client.RemoteDisconnected):
    """A kept-alive connection, which had carried an earlier answer, ended before any byte
    of this one: the server had closed it (or did as the request arrived)."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(f"the server closed a kept-alive connection before answering ({cause})")


@contextlib.contextmanager
def _for_this_thread(name: str, value: object) -> Iterator[None]:
    """``name`` of this thread's state is ``value`` in the block, as before after it."""
    before = getattr(_current, name, None)
    setattr(_current, name, value)
    try:
        yield
    finally:
        setattr(_current, name, before)


def on_a_new_connection(wanted: bool = True) -> contextlib.AbstractContextManager[None]:
    """Requests this thread sends in the block go over a newly opened connection, never
    one the pool kept (``wanted`` False: as the pool chooses)."""
    return _for_this_thread("fresh", wanted)


def headers_within(seconds: float | None) -> contextlib.AbstractContextManager[None]:
    """Requests this thread sends in the block must have their headers in ``seconds``
    (None: no deadline, the caller watches them)."""
    return _for_this_thread("seconds", seconds)


@contextlib.contextmanager
def ended_by(stop: Stop | None) -> Iterator[None]:
    """Requests this thread sends in the block are cut off (:func:`cut_off`) once ``stop``
    is set, from the moment each is sent until the block ends, its answer's body read
    included: one that waits for its headers then fails with :class:`RequestStoppedError`
    (not retried), and a body read sees its stream end.  A range read of a line whose
    search is over had the plan's answer wait for it, a round trip and more."""
    if stop is None:
        yield
        return
    sent: list[socket.socket] = []

    def cut() -> None:
        for sock in sent:
            cut_off(sock)

    with stop.on_set(cut), _for_this_thread("ended", (stop, sent)):
        yield


def when_connected(callback: Callable[[bool], None]) -> contextlib.AbstractContextManager[None]:
    """Each request this thread sends in the block calls ``callback`` once it has its
    connection: ``callback(True)`` for one it opened, once its name is looked up and its
    TCP connection made, or that failed (before TLS and the request); ``callback(False)``
    for a kept one the pool handed it."""
    return _for_this_thread("connected", callback)


class Lookups:
    """Each host's name looked up once for the connections opened with these lookups
    (:func:`looking_up_once`): one at a time per host, its first address kept.

    A client that opens dozens of connections to one host at once looks it up as many
    times, and this machine's resolver stalls one of them 5 s now and then (a cold plan's
    index memo met it on one connection in three runs once it opened its connections as
    fast as they connected).  TLS still names the host (SNI, the certificate check): only
    the TCP connection is made to the kept address; a connection that fails to it looks
    the name up again."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._hosts: dict[tuple[str, int], threading.Lock] = {}
        self._found: dict[tuple[str, int], str] = {}

    def address(self, host: str, port: int) -> str | None:
        """``host``'s kept address (looked up now if none is), None when it is not found."""
        key = (host, port)
        with self._lock:
            lock = self._hosts.setdefault(key, threading.Lock())
        with lock:
            if key not in self._found:
                try:
                    info = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
                except OSError:
                    return None  # the connection looks it up itself, and says why it failed
                if not info:
                    return None
                self._found[key] = str(info[0][4][0])
            return self._found.get(key)

    def forget(self, host: str, port: int) -> None:
        with self._lock:
            self._found.pop((host, port), None)


def looking_up_once(lookups: Lookups) -> contextlib.AbstractContextManager[None]:
    """Connections this thread opens in the block connect to ``lookups``' addresses."""
    return _for_this_thread("lookups", lookups)


class _Reports:
    """What both connection classes add to ``_new_conn``: :func:`looking_up_once`'s
    address, and :func:`when_connected`'s call."""

    _dns_host: str
    port: int

    def _new_conn(self) -> socket.socket:
        try:
            lookups: Lookups | None = getattr(_current, "lookups", None)
            address = lookups.address(self._dns_host, self.port) if lookups else None
            if lookups is None or address is None or address == self._dns_host:
                return super()._new_conn()  # type: ignore[misc,no-any-return]
            named, self._dns_host = self._dns_host, address
            try:
                return super()._new_conn()  # type: ignore[misc,no-any-return]
            except (OSError, urllib3.exceptions.HTTPError):  # urllib3 wraps connect's errors
                lookups.forget(named, self.port)
            finally:
                self._dns_host = named
            return super()._new_conn()  # type: ignore[misc,no-any-return]
        finally:
            callback: Callable[[bool], None] | None = getattr(_current, "connected", None)
            if callback is not None:
                callback(True)


class Alarms:
    """Deadlines kept by one thread for the whole process: arming one is a push onto a
    heap, not a thread started.  A ``threading.Timer`` per request had cost ~150 µs of
    CPU each (a thread started, woken and ended), ~700 of them in a cold plan's index
    memo, whose threads share one core through the GIL.

    The thread is a daemon and stays: waiting costs nothing, and an exit does not wait
    for it (:func:`cudaup.cli.main.run` waits only for non-daemon threads, as Python does).
    """

    def __init__(self) -> None:
        self._changed = threading.Condition()
        #: (when, key, action), the earliest first; a cancelled one stays until it is first
        self._due: list[tuple[float, int, Callable[[], None]]] = []
        #: the keys armed, neither gone off nor cancelled
        self._armed: set[int] = set()
        self._keys = itertools.count()
        self._thread: threading.Thread | None = None

    def arm(self, seconds: float, action: Callable[[], None]) -> int:
        """Call ``action`` (in the alarms' thread) in ``seconds`` unless :meth:`cancel`
        is given the key returned first."""
        with self._changed:
            key = next(self._keys)
            heapq.heappush(self._due, (time.monotonic() + seconds, key, action))
            self._armed.add(key)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="cudaup-deadlines", daemon=True
                )
                self._thread.start()
            elif self._due[0][1] == key:
                self._changed.notify()  # earlier than what the thread waits for
        return key

    def cancel(self, key: int) -> None:
        """The alarm ``key`` does not go off (an action already under way ends as it
        would have)."""
        with self._changed:
            self._armed.discard(key)

    def _run(self) -> None:
        while True:
            with self._changed:
                action = self._next_due()
            # One action's failure must not end every deadline after it.
            with contextlib.suppress(Exception):
                action()

    def _next_due(self) -> Callable[[], None]:
        """Wait (holding the condition) for the next alarm due that was not cancelled."""
        while True:
            while self._due and self._due[0][1] not in self._armed:
                heapq.heappop(self._due)  # cancelled
            if not self._due:
                self._changed.wait()
                continue
            when, key, action = self._due[0]
            left = when - time.monotonic()
            if left > 0:
                self._changed.wait(left)
                continue
            heapq.heappop(self._due)
            self._armed.discard(key)
            return action


#: The deadlines of every request's headers (:func:`headers_within`).
_alarms = Alarms()


def cut_off(sock: object) -> None:
    """End the read blocked on ``sock`` (a connection's socket, TLS or not) and every
    read after it, from any thread: they see the end of the stream.

    TCP's own shutdown, under every TLS layer.  ``SSLSocket.shutdown`` (what urllib3's
    ``HTTPResponse.shutdown`` calls) also drops the TLS object, so the next read on that
    socket reads it raw: the TLS records still queued in the kernel came back as if they
    were the body, and a download wrote them into its file.
    """
    while not isinstance(sock, socket.socket):
        # urllib3's SSLTransport (TLS to an https:// proxy) wraps the socket it rides on
        sock = getattr(sock, "socket", None)
        if sock is None:
            return
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


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
            cut_off(sock)  # the blocked read returns

        alarm = _alarms.arm(seconds, give_up)
        try:
            response = super().getresponse()  # type: ignore[misc]
        except (OSError, ValueError, http.client.HTTPException) as exc:
            if state["passed"]:
                raise HeadersTooSlowError(seconds) from exc
            raise
        finally:
            with lock:
                state["answered"] = True
            _alarms.cancel(alarm)
        if state["passed"]:  # the socket was shut as the last header arrived
            response.close()
            raise HeadersTooSlowError(seconds)
        return response


class _Ended:
    """What both connection classes add to ``getresponse``: inside :func:`ended_by`, the
    socket is listed for the stop to cut off, and a request it cut fails as stopped."""

    sock: socket.socket | None

    def getresponse(self) -> Any:
        ended: tuple[Stop, list[socket.socket]] | None = getattr(_current, "ended", None)
        if ended is None or self.sock is None:
            return super().getresponse()  # type: ignore[misc]
        stop, sent = ended
        sent.append(self.sock)
        if stop.is_set():  # set before it was listed: its cut may have missed it
            cut_off(self.sock)
        try:
            response = super().getresponse()  # type: ignore[misc]
        except (OSError, ValueError, http.client.HTTPException) as exc:
            if stop.is_set():
                raise RequestStoppedError from exc
            raise
        return response


class _Kept:
    """What both connection classes add to ``getresponse``: a kept-alive connection that
    ends before its answer raises :class:`StaleConnectionError`."""

    sock: socket.socket | None
    #: The socket over which the last answer came (a closed connection reconnects anew).
    _answered_over: socket.socket | None = None

    def getresponse(self) -> Any:
        sock = self.sock
        kept = sock is not None and self._answered_over is sock
        try:
            response = super().getresponse()  # type: ignore[misc]
        except ConnectionError as exc:  # closed without a status line, reset, broken pipe
            if kept:
                raise StaleConnectionError(exc) from exc
            raise
        self._answered_over = sock
        return response


class _SessionTickets:
    """What the TLS connection class adds to ``is_connected``: a connection opened ahead
    (:func:`open_ahead`) has carried no answer yet, and a TLS 1.3 server sends its session
    tickets after the handshake, so its socket is readable without being closed.  urllib3
    would take that for a dropped connection and open another; here the waiting bytes are
    read, without blocking: TLS records that bring no data mean it is alive, and any byte
    of data, or the end, means it is not (as urllib3 says of a readable socket)."""

    sock: socket.socket | None

    @property
    def is_connected(self) -> bool:
        sock = self.sock
        if sock is None:
            return False
        if not wait_for_read(sock, timeout=0.0):
            return True
        if not isinstance(sock, ssl.SSLSocket):
            return False
        timeout = sock.gettimeout()
        try:
            sock.settimeout(0.0)
            sock.recv(1)  # a byte (nothing was asked) or b"" (the end): not alive
        except ssl.SSLWantReadError:
            return True  # only TLS's own records were waiting
        except (OSError, ValueError):
            pass  # broken: not alive either
        finally:
            with contextlib.suppress(OSError, ValueError):
                sock.settimeout(timeout)
        return False


class _Connection(_Ended, _Kept, _Deadline, _Reports, urllib3.connection.HTTPConnection):
    pass


class _TlsConnection(
    _SessionTickets, _Ended, _Kept, _Deadline, _Reports, urllib3.connection.HTTPSConnection
):
    pass


class _NewWhenAsked:
    """What both pools add: inside :func:`on_a_new_connection`, a kept connection taken
    from the pool is closed first, so that the request opens a new one; one kept and
    used is said to :func:`when_connected`'s callback."""

    def _get_conn(self, timeout: float | None = None) -> Any:
        conn = super()._get_conn(timeout)  # type: ignore[misc]
        if getattr(_current, "fresh", False) and conn.sock is not None:
            conn.close()
        if conn.sock is not None:  # kept and alive (the pool closed it if it was dropped)
            callback: Callable[[bool], None] | None = getattr(_current, "connected", None)
            if callback is not None:
                callback(False)
        return conn


class _Pool(_NewWhenAsked, HTTPConnectionPool):
    ConnectionCls = _Connection


class _TlsPool(_NewWhenAsked, HTTPSConnectionPool):
    ConnectionCls = _TlsConnection


#: ``PoolManager.pool_classes_by_scheme`` for connections that keep the deadline.
POOL_CLASSES: dict[str, type[HTTPConnectionPool]] = {"http": _Pool, "https": _TlsPool}


def opening_ahead(count: int) -> contextlib.AbstractContextManager[None]:
    """The first request this thread sends in the block that goes out (not one the cache
    answers) also makes ``count`` connections to its host stand open (:func:`open_ahead`)
    for the requests about to follow there: an install's downloads, once its resolution
    returns.  A new connection waits a round trip for TCP and another for TLS before its
    first request can go; these then pass while the resolution waits on that answer.
    Where the cache answers everything, nothing waits on the network, and nothing opens."""
    return _for_this_thread("ahead", count)


def pending_ahead() -> int:
    """The connections :func:`opening_ahead` asked this thread for, now that its request
    goes out (once: a later request in the block finds none)."""
    count: int = getattr(_current, "ahead", None) or 0
    if count:  # every request asks: most find nothing, and write nothing
        _current.ahead = None
    return count


def open_ahead(pool: HTTPConnectionPool, count: int, timeout: float) -> None:
    """Make ``count`` connections stand open in ``pool`` for the requests about to follow,
    those it holds open already counting: the others are opened side by side, each in a
    thread of its own, and go into the pool once connected; this returns at once.  Each
    counts as kept: one the server closes before its first answer is a
    :class:`StaleConnectionError`, and its request goes again at once on a new
    connection.  Nothing waits for them and none fails aloud: a request that finds none
    ready opens a connection of its own, and says why that one failed."""
    taken = []
    # A pool the manager closed since its lookup (its least recently used): nothing opens.
    with contextlib.suppress(urllib3.exceptions.PoolError):
        taken += [pool._get_conn() for _ in range(count)]
    for conn in taken:
        if isinstance(conn, _Connection | _TlsConnection) and conn.sock is None:
            threading.Thread(
                target=_connect,
                args=(pool, conn, timeout),
                name="cudaup-connect-ahead",
                daemon=True,  # an exit does not wait for a connection nobody asked for yet
            ).start()
        else:
            pool._put_conn(conn)  # open already: it counts, and is at once back for others


def _connect(pool: HTTPConnectionPool, conn: _Connection | _TlsConnection, timeout: float) -> None:
    try:
        conn.timeout = timeout
        conn.connect()
        conn._answered_over = conn.sock
    except Exception:  # see open_ahead
        conn.close()
    finally:
        pool._put_conn(conn)
