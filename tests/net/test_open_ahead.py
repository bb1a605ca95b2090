"""Connections opened ahead (``cudaup.net.deadline.opening_ahead``) carry the requests that
follow.

An install opens its downloads' connections while its resolution still waits on an
answer (``tests/resolve/test_pages_ahead.py``): each new connection's round trips (TCP's,
then TLS's) are then paid before the downloads start, not by them.  Such a connection
has carried no answer yet, and a TLS 1.3 server sends its session tickets after the
handshake, so its socket is readable while it waits: it must still count as open.
"""

from __future__ import annotations

import socket
import ssl
import threading
import time
from pathlib import Path

import pytest
import urllib3

from cudaup.errors import NetworkError
from cudaup.net.deadline import open_ahead, opening_ahead
from tests.faultserver import Fault, FaultServer, self_signed
from tests.net.test_kept_connections import client

DOCUMENT = b"a document " * 100


def opened_ahead() -> None:
    """Wait until the connections being opened ahead are all in their pool."""
    end = time.monotonic() + 10
    while any(t.name == "cudaup-connect-ahead" for t in threading.enumerate()):
        assert time.monotonic() < end, "the connections opened ahead never got into the pool"
        time.sleep(0.01)


def accepted(server: FaultServer, count: int) -> int:
    """The server's count of connections accepted, once it reached ``count``: a plain TCP
    connect returns when the kernel completes the handshake, before the server's thread
    has accepted it (under load, ``accepted`` lagged one behind the client: a CI flake)."""
    end = time.monotonic() + 10
    while server.accepted < count and time.monotonic() < end:
        time.sleep(0.01)
    return server.accepted


def test_connections_opened_ahead_carry_the_requests_that_follow_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TLS 1.3, whose server sends session tickets once the handshake is done: two opened
    ahead of the first request (which took its own, or one of them); as many requests as
    there are connections then, all open at once, open none."""
    context = self_signed(tmp_path)
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    assert context.num_tickets > 0
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "cert.pem"))
    with FaultServer(tls=context) as server:
        server.add("/doc", DOCUMENT)
        http = client(tmp_path, [])
        with opening_ahead(2):
            assert http.get(server.url + "/doc").body == DOCUMENT
        opened_ahead()
        standing = server.accepted
        assert standing in {2, 3} and server.connections() == 1
        answers = [http.open("GET", server.url + "/doc") for _ in range(standing)]  # all held
        assert [a.read() for a in answers] == [DOCUMENT] * standing
        for answer in answers:
            answer.release_conn()
        assert server.accepted == standing == server.connections()


def test_a_connection_opened_ahead_and_dropped_unanswered_is_replaced_at_once(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    """It counts as kept: the request it drops goes again on a new connection without a
    backoff wait, as one a kept connection drops does (``test_kept_connections.py``)."""
    fault_server.add("/first", DOCUMENT)
    fault_server.add("/doc", DOCUMENT, Fault(drop="any", times=1))
    slept: list[float] = []
    http = client(tmp_path, slept)
    with opening_ahead(2):
        first = http.open("GET", fault_server.url + "/first")  # held: its connection busy
    opened_ahead()
    # over one opened ahead: /first took its own, or the other one opened ahead
    assert http.get(fault_server.url + "/doc").body == DOCUMENT
    first.release_conn()
    assert [r.status for r in fault_server.requests("/doc")] == [0, 200]
    assert slept == []


def test_what_the_cache_answers_opens_nothing_ahead(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    """Nothing waits on the network, so nothing is opened (a warm install's resolution);
    the first request in the block that goes out opens them, once, the connection kept
    from the first request counting as one of the two."""
    http = client(tmp_path, [])
    fault_server.add("/page", DOCUMENT)
    http.get(fault_server.url + "/page", cache="index")
    with opening_ahead(2):
        assert http.get(fault_server.url + "/page", cache="index").from_cache
        opened_ahead()
        assert fault_server.accepted == 1
        http.get(fault_server.url + "/page")
        http.get(fault_server.url + "/page")
    opened_ahead()
    assert accepted(fault_server, 2) == 2


def test_a_host_that_takes_no_connection_ahead_fails_only_the_request(tmp_path: Path) -> None:
    """Opening ahead raises nothing: the request that needs the host says why it failed,
    after its own tries, as without connections ahead."""
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    url = f"http://127.0.0.1:{port}/doc"
    failures: list[str] = []
    waits: list[int] = []
    for ahead in (2, 0):
        slept: list[float] = []
        http = client(tmp_path, slept)
        with opening_ahead(ahead), pytest.raises(NetworkError) as caught:
            http.get(url)
        opened_ahead()
        failures.append(str(caught.value))
        waits.append(len(slept))
    assert failures[0] == failures[1] and f"127.0.0.1:{port}" in failures[0]
    assert waits[0] == waits[1] > 0


def test_a_pool_closed_under_it_opens_nothing_and_raises_nothing() -> None:
    """A pool the manager closed between its lookup and the opening (its least recently
    used, when more hosts are asked for than it keeps): nothing opens, and the request
    that follows fails or succeeds on its own, never on this."""
    pool = urllib3.HTTPConnectionPool("127.0.0.1", 9)
    pool.close()
    open_ahead(pool, 2, 1.0)
    assert not [t for t in threading.enumerate() if t.name == "cudaup-connect-ahead"]
