"""Run a function over items in a few threads, in order, stopping early on failure."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def map_concurrently(function: Callable[[T], R], items: Sequence[T], workers: int) -> list[R]:
    """``[function(x) for x in items]`` in up to ``workers`` threads (inline for one item).

    The first exception (Ctrl-C included) cancels what has not started and propagates.
    """
    if len(items) <= 1 or workers <= 1:
        return [function(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(workers, len(items))) as pool:
        futures = [pool.submit(function, item) for item in items]
        try:
            return [future.result() for future in futures]
        except BaseException:
            for future in futures:
                future.cancel()
            raise
