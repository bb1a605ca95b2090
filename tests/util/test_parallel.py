"""map_concurrently: results in order; the first failure, wherever it is, stops the others."""

from __future__ import annotations

import threading

import pytest

from cudaup.util.parallel import CancelledError, check, map_concurrently


def test_results_come_back_in_order() -> None:
    assert map_concurrently(lambda x: x * x, list(range(20)), workers=4) == [
        x * x for x in range(20)
    ]


def test_a_failure_behind_a_long_sibling_stops_it_at_once() -> None:
    # Item 0 is a long download that only stops when told; item 1 fails right away.
    # Before, the caller waited on item 0's result first, so item 1's failure (and the
    # cancel event) came only once item 0 had run to its end.
    cancel = threading.Event()
    failed = threading.Event()
    outcome: dict[str, object] = {}

    def work(item: int) -> str:
        if item == 1:
            failed.set()
            raise OSError("disk on fire")
        assert failed.wait(30), "the failing sibling never ran"
        told = cancel.wait(60)  # a "multi-GB" transfer checking the event as it goes
        outcome["stopped_by_cancel"] = told
        check(cancel)
        return "finished"  # pragma: no cover - reached only if cancel never came

    with pytest.raises(OSError, match="disk on fire"):
        map_concurrently(work, [0, 1], workers=2, cancel=cancel)
    assert cancel.is_set()
    # the sibling had stopped (not finished) by the time the caller saw the error
    assert outcome == {"stopped_by_cancel": True}


def test_a_cancelled_sibling_reports_nothing_of_its_own() -> None:
    cancel = threading.Event()

    def work(item: int) -> int:
        if item == 1:
            raise KeyError("the real cause")
        cancel.wait(30)
        raise CancelledError("cancelled")

    with pytest.raises(KeyError, match="the real cause"):
        map_concurrently(work, [0, 1, 2], workers=3, cancel=cancel)
