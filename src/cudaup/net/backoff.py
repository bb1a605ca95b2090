"""The one retry policy: exponential backoff with jitter, and ``Retry-After``.

The HTTP client (per request) and the downloader (per byte range) both wait
through the :class:`Backoff` their client carries, so tests inject one that
does not wait, and a server's ``Retry-After`` is read in one place.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Backoff:
    """Attempt ``n`` (from 0) waits ``base * 2**n`` seconds, at most ``cap``, times a
    jitter factor between 0.5 and 1.5, so that a fleet retrying together spreads out.
    A server's ``Retry-After`` is honoured up to ``retry_after_cap``."""

    base: float = 0.25
    cap: float = 10.0
    retry_after_cap: float = 60.0
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False)

    def delay(self, attempt: int) -> float:
        return min(self.base * 2.0**attempt, self.cap) * (0.5 + random.random())  # noqa: S311

    def delay_for(self, attempt: int, retry_after: str | None = None) -> float:
        """Seconds to wait before retry ``attempt``: the server's ``Retry-After`` when it
        gave one (up to :attr:`retry_after_cap`), else :meth:`delay`."""
        asked = parse_retry_after(retry_after)
        return min(asked, self.retry_after_cap) if asked is not None else self.delay(attempt)

    def wait(self, attempt: int, retry_after: str | None = None) -> None:
        """Sleep before retry ``attempt``: the server's ``Retry-After`` when it gave one."""
        self.sleep(self.delay_for(attempt, retry_after))


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """``Retry-After`` as seconds from now: delta-seconds or an HTTP date (RFC 9110)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    import email.utils  # noqa: PLC0415 - an HTTP date is rare; every command imports this module

    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


#: What every client uses unless given another.
DEFAULT = Backoff()
#: For tests: retries happen at once.
NO_WAIT = Backoff(base=0.0, cap=0.0, retry_after_cap=0.0, sleep=lambda _seconds: None)
