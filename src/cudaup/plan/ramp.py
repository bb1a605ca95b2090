"""How many of the index memo's requests to one upstream host run at once (:class:`Ramp`)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # urllib3 loads with it, where the memo first asks upstream
    from cudaup.net.deadline import Lookups

#: New connections to one upstream host being opened at once (see :class:`Ramp`).
OPENING_AT_ONCE = 2


class Ramp:
    """How many requests to one host run at once: one per connection opened so far, and
    at most :data:`OPENING_AT_ONCE` opening a new one, up to ``most`` connections.

    uv asks ~50 things at once.  Sent at once, that many requests each open a connection,
    and each looks the host up at the same instant: a resolver that drops simultaneous
    queries then stalls them 5 s each (its retry), as this machine's does from about eight.
    Past the client's pool, each extra request would also open a connection that is
    dropped after one use.  A request counts as opening one when every connection opened
    so far is busy, and the connection counts as open once it is connected (the lookup
    and the TCP handshake: a few ms here), not once the request is answered: counted at
    the answer (~100 ms through this machine's proxy), the memo reached 20 connections
    only after ten answers, while uv straight to PyPI multiplexes one HTTP/2 connection.
    A request counted as opening that the pool hands a kept connection opens none: its
    place is free as soon as it has that connection, and each connection a request does
    open counts, whether or not it was counted as opening one."""

    def __init__(self, most: int, lookups: Lookups) -> None:
        self._changed = threading.Condition()
        self._most, self._busy, self._opened, self._opening = most, 0, 0, 0
        self._lookups = lookups

    def _may_start(self) -> bool:
        idle = self._busy < self._opened + self._opening
        return idle or (self._opening < OPENING_AT_ONCE and self._opened < self._most)

    @contextlib.contextmanager
    def slot(self) -> Iterator[None]:
        with self._changed:
            self._changed.wait_for(self._may_start)
            opening = self._busy >= self._opened + self._opening
            self._opening += opening
            self._busy += 1

        reported = False

        def connected(new: bool) -> None:
            nonlocal opening, reported
            with self._changed:
                if reported:  # once: a request may reconnect (a stale kept connection)
                    return
                reported = True
                # A request that found every connection busy may still be handed a kept
                # one (another request's, just returned): it opens nothing, and must not
                # hold an opening place for its whole answer (a page of megabytes held
                # one 0.5 s, and uv's ~45 pages waited up to 1.3 s for connections).
                self._opening -= opening
                self._opened += new
                opening = False
                self._changed.notify_all()

        from cudaup.net.deadline import looking_up_once, when_connected  # noqa: PLC0415

        try:
            with when_connected(connected), looking_up_once(self._lookups):
                yield
        finally:
            connected(False)  # it failed before it had a connection
            with self._changed:
                self._busy -= 1
                self._changed.notify_all()
