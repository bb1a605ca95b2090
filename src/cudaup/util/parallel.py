"""Run a function over items in a few threads, in order, stopping early on failure."""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from concurrent.futures import Future

T = TypeVar("T")
R = TypeVar("R")


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity), where the system says."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1  # pragma: no cover - macOS, Windows


class CancelledError(Exception):
    """Work stopped because other work failed or the user pressed Ctrl-C."""


class Stop(threading.Event):
    """An event that also runs, once set, what is waiting on it (:meth:`on_set`): work
    blocked where no check reaches it (a read waiting on a connection) ends then, not when
    its answer comes."""

    def __init__(self) -> None:
        super().__init__()
        self._waiting: dict[int, Callable[[], None]] = {}
        self._keys = itertools.count()
        self._guard = threading.Lock()

    def set(self) -> None:
        super().set()
        with self._guard:  # held: a block that ends meanwhile waits, so none runs after it
            for action in self._waiting.values():  # in the setter's thread: quick ones
                action()

    @contextlib.contextmanager
    def on_set(self, action: Callable[[], None]) -> Iterator[None]:
        """``action()`` runs when the event is set during the block (at once if it is set
        already; it may then run twice), never after the block."""
        with self._guard:
            key = next(self._keys)
            self._waiting[key] = action
        try:
            if self.is_set():
                action()
            yield
        finally:
            with self._guard:
                del self._waiting[key]


def check(cancel: threading.Event | None) -> None:
    """Raise :class:`CancelledError` once ``cancel`` is set (call it between steps)."""
    if cancel is not None and cancel.is_set():
        raise CancelledError("cancelled")


def in_background(work: Callable[[], R], name: str) -> tuple[threading.Thread, Future[R]]:
    """Start ``work()`` on a daemon thread named ``name``; the thread and the future of
    its answer, which holds what it raised (Ctrl-C included) for whoever asks."""
    from concurrent.futures import Future  # noqa: PLC0415 - see map_concurrently

    answer: Future[R] = Future()

    def run() -> None:
        try:
            answer.set_result(work())
        except BaseException as exc:  # raised where the answer is asked for
            answer.set_exception(exc)

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    return thread, answer


@contextlib.contextmanager
def in_background_each(
    function: Callable[[T], R], items: Sequence[T], workers: int, name: str
) -> Iterator[dict[T, Future[R]]]:
    """Start ``function(item)`` for every item, in order, in at most ``workers`` threads
    named ``name``; each item's future, for the body of the ``with``, which asks for those
    it needs.  Leaving it waits for the rest to end (their answers or failures dropped):
    no work outlives the block that started it."""
    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415 - see map_concurrently

    if not items:
        yield {}
        return
    workers = min(workers, len(items))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name) as pool:
        yield {item: pool.submit(function, item) for item in items}


def map_concurrently(
    function: Callable[[T], R],
    items: Sequence[T],
    workers: int,
    *,
    cancel: threading.Event | None = None,
) -> list[R]:
    """``[function(x) for x in items]`` in up to ``workers`` threads (inline for one item).

    The first exception (Ctrl-C included), whichever item raised it, cancels what has
    not started, sets ``cancel`` so that running work stops at its next check (a
    download saves its resumable state and returns within a fraction of a second),
    and propagates once the running work has stopped: the caller never waits for a
    sibling to finish its work, only for it to notice ``cancel``.  Ctrl-C reaches only
    the main thread; without ``cancel``, running work finishes before the exception
    leaves this function.
    """
    if len(items) <= 1 or workers <= 1:
        return [function(item) for item in items]
    # Imported here: one item (a download by URL) needs no pool, nor the logging,
    # traceback and queue modules concurrent.futures loads (~3 ms of a start).
    from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait  # noqa: PLC0415

    with ThreadPoolExecutor(max_workers=min(workers, len(items))) as pool:
        futures = [pool.submit(function, item) for item in items]
        try:
            pending: set[Future[R]] = set(futures)
            while pending:
                done, pending = wait(pending, return_when=FIRST_EXCEPTION)
                for future in done:
                    future.result()  # raises the first failure as soon as it happens
            return [future.result() for future in futures]
        except BaseException:
            if cancel is not None:
                cancel.set()
            for future in futures:
                future.cancel()
            raise
