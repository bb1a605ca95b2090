"""A kept-alive connection the server closed is sent again at once; real faults still back off.

An upstream that drops idle keep-alive connections (an intercepting proxy does) closes one
just as the client sends its next request over it: the request ends before any byte of an
answer.  The client sends it again on a new connection at once, without a backoff sleep
and without counting a try; a server that closes every connection unanswered is a fault
like any other: three waits, then exit 5 naming the host and the URL.
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import struct
import threading
from pathlib import Path

import pytest

import cudaup.net.backoff
import cudaup.net.deadline as deadline_module
from cudaup.config import Settings
from cudaup.errors import EXIT_CODES, NetworkError
from cudaup.net.backoff import Backoff
from cudaup.net.deadline import StaleConnectionError
from cudaup.net.http import HttpClient
from tests.faultserver import Fault, FaultServer
from tests.net.test_answers import ATTEMPTS, resolve
from tests.resolve.test_hostile_sources import MANIFEST_PATH, manifest
from tests.sandbox import Sandbox, sandbox  # noqa: F401 - fixture

DOCUMENT = b"a document " * 100


def client(tmp_path: Path, slept: list[float]) -> HttpClient:
    settings = Settings.from_env(cache_dir=tmp_path / "cache")
    return HttpClient(settings, backoff=Backoff(sleep=slept.append))


def test_a_kept_connection_the_server_closed_costs_no_wait(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    """Every request after a connection's first is dropped unanswered: each is sent again
    on a new connection, at once, and answered there."""
    fault_server.add("/doc", DOCUMENT, Fault(drop="kept"))
    slept: list[float] = []
    http = client(tmp_path, slept)
    bodies = [http.get(fault_server.url + "/doc").body for _ in range(3)]
    assert http.head(fault_server.url + "/doc").status == 200
    assert bodies == [DOCUMENT] * 3 and slept == []
    # four requests answered, each on a connection of its own; three dropped on kept ones
    gets, heads = fault_server.requests("/doc"), fault_server.requests("/doc", "HEAD")
    assert [r.status for r in gets + heads] == [200, 0, 200, 0, 200, 0, 200]
    assert len({r.port for r in gets + heads if r.status == 200}) == 4
    assert fault_server.accepted == 4


def test_a_range_on_a_kept_connection_is_sent_again_too(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    """The index memo's requests: ``open`` with a range, the connection released, again."""
    fault_server.add("/wheel", DOCUMENT, Fault(drop="kept"))
    slept: list[float] = []
    http = client(tmp_path, slept)
    for start in (0, 10):
        raw = http.open("GET", fault_server.url + "/wheel", {"Range": f"bytes={start}-{start + 9}"})
        assert (raw.status, raw.read()) == (206, DOCUMENT[start : start + 10])
        raw.release_conn()
    assert slept == [] and fault_server.accepted == 2


def test_a_server_that_closes_every_connection_still_backs_off(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    """Unanswered on new connections too: that is the server failing, and no try is free."""
    fault_server.add("/doc", DOCUMENT, Fault(drop="any"))
    slept: list[float] = []
    with pytest.raises(NetworkError) as caught:
        client(tmp_path, slept).get(fault_server.url + "/doc")
    host = fault_server.url.removeprefix("http://")
    assert str(caught.value) == (
        f"{host} did not answer in full (the server closed the connection "
        "without answering) "
        f"for {fault_server.url}/doc"
    )
    assert len(fault_server.requests("/doc")) == ATTEMPTS and len(slept) == ATTEMPTS - 1


def test_a_kept_connection_dropped_then_a_failing_one_backs_off(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    """The free retry is one: the new connection failing as well is a try like any other."""
    fault_server.add("/doc", DOCUMENT, Fault(times=1), Fault(times=2, drop="any"))
    slept: list[float] = []
    http = client(tmp_path, slept)
    assert http.get(fault_server.url + "/doc").body == DOCUMENT  # answered, kept
    assert http.get(fault_server.url + "/doc").body == DOCUMENT
    # dropped on the kept connection (free), then on the new one (a try, one wait), then answered
    assert [r.status for r in fault_server.requests("/doc")] == [200, 0, 0, 200]
    assert len(slept) == 1


def test_cli_a_server_that_closes_every_connection_is_exit_5(
    sandbox: Sandbox,  # noqa: F811 - fixture
    fault_server: FaultServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    slept: list[float] = []
    monkeypatch.setattr(cudaup.net.backoff, "DEFAULT", Backoff(sleep=slept.append))
    fault_server.add(MANIFEST_PATH, json.dumps(manifest()).encode(), Fault(drop="any"))
    before = sandbox.snapshot()
    run = resolve(fault_server, capsys, "--json")
    assert run.code == EXIT_CODES["network"] == 5, run.err
    url = fault_server.url + MANIFEST_PATH
    assert run.json()["error"]["message"] == (
        f"{fault_server.url.removeprefix('http://')} did not answer in full (the server "
        f"closed the connection without answering) for {url}"
    )
    assert len(fault_server.requests(MANIFEST_PATH)) == ATTEMPTS and len(slept) == ATTEMPTS - 1
    assert sandbox.changed_outside(before, sandbox.snapshot(), [sandbox.cache]) == set()


def test_a_request_a_reset_kept_connection_could_not_send_is_stale() -> None:
    """A server that resets a kept connection (not a FIN: an RST) as the next request
    comes: the request cannot be sent, and the answer is a stale connection, which the
    client sends again at once.  The pool's own check before reuse misses a reset that
    comes after it; the test stands for that by sending on the connection itself, as
    urllib3's ``_make_request`` does (it swallows the send's error)."""
    listener = socket.create_server(("127.0.0.1", 0))
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

    def serve() -> None:
        peer, _ = listener.accept()
        peer.recv(65536)
        peer.sendall(answer)
        # a reset, not a FIN: linger 0
        peer.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        peer.close()

    server = threading.Thread(target=serve)
    server.start()
    connection = deadline_module._Connection("127.0.0.1", listener.getsockname()[1], timeout=10)
    connection.request("GET", "/doc")
    assert connection.getresponse().data == b"ok"  # read whole (preloaded)
    server.join(10)
    assert connection.sock is not None
    select.select([connection.sock], [], [], 10)  # the reset has come
    with contextlib.suppress(OSError):  # as urllib3's _make_request does
        connection.request("GET", "/doc")
    with pytest.raises(StaleConnectionError):
        connection.getresponse()
    connection.close()
    listener.close()


def test_each_request_says_whether_its_connection_is_new_or_kept(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    """``when_connected``: a request on a connection it opened reports True, one the pool
    handed a kept connection False (the index memo's ramp frees that request's opening
    place then); one whose kept connection the server had closed reports both, the kept
    one and then the new one it sends again on (the ramp counts a request's first)."""
    fault_server.add("/doc", DOCUMENT)
    fault_server.add("/dropped", DOCUMENT, Fault(drop="kept"))
    http = client(tmp_path, [])
    reported: list[bool] = []
    with deadline_module.when_connected(reported.append):
        http.get(fault_server.url + "/doc")
        http.get(fault_server.url + "/doc")
    assert reported == [True, False] and fault_server.accepted == 1
    calls: list[bool] = []
    with deadline_module.when_connected(calls.append):
        assert http.get(fault_server.url + "/dropped").body == DOCUMENT
    assert calls == [False, True] and fault_server.accepted == 2
