"""``cut_off``: the one way a read blocked on a connection is ended from another thread.
(That a dropped TLS download reads no raw record after it:
``tests/download/test_faults.py``.)"""

from __future__ import annotations

import socket
import threading

from cudaup.net.deadline import cut_off

WAIT = 30.0  # far past any read here: reaching it means the read was never ended


def read_in_a_thread(sock: socket.socket) -> tuple[threading.Thread, list[bytes]]:
    got: list[bytes] = []
    thread = threading.Thread(target=lambda: got.append(sock.recv(1024)), daemon=True)
    thread.start()
    return thread, got


class Transport:
    """What urllib3's SSLTransport (TLS to an https:// proxy) offers: the socket it rides on."""

    def __init__(self, sock: socket.socket | Transport) -> None:
        self.socket = sock


def test_a_blocked_read_sees_the_end_of_the_stream() -> None:
    mine, peer = socket.socketpair()
    with mine, peer:
        thread, got = read_in_a_thread(mine)
        cut_off(mine)
        thread.join(WAIT)
        assert got == [b""]
        assert mine.recv(1024) == b""  # and every read after it


def test_the_socket_under_a_transport_is_the_one_shut() -> None:
    mine, peer = socket.socketpair()
    with mine, peer:
        thread, got = read_in_a_thread(mine)
        cut_off(Transport(Transport(mine)))
        thread.join(WAIT)
        assert got == [b""]


def test_nothing_to_cut_is_no_error() -> None:
    cut_off(None)
    cut_off(object())
    mine, peer = socket.socketpair()
    peer.close()
    mine.close()
    cut_off(mine)  # closed: nothing to end
