"""map_concurrently: results in order; the first failure, wherever it is, stops the others."""

from __future__ import annotations

import threading

import pytest

from cudaup.util.parallel import CancelledError, Stop, check, in_background_each, map_concurrently


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


def test_in_background_each_answers_every_item_on_at_most_its_workers() -> None:
    """Each item's answer or failure in its own future; never more than ``workers`` at
    once; leaving the block waits for the work it did not ask for."""
    lock, running, most = threading.Lock(), [0], [0]
    third, last = threading.Event(), threading.Event()

    def work(item: int) -> int:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        try:
            if item == 2:
                third.set()
                raise ValueError("item 2")
            third.wait(10)  # the first ones run together until the third has started
            if item == 7:
                last.wait(10)  # ends only once the block is being left
            return item * item
        finally:
            with lock:
                running[0] -= 1

    with in_background_each(work, list(range(8)), 3, "test-ahead") as answers:
        assert list(answers) == list(range(8))
        with pytest.raises(ValueError, match="item 2"):
            answers[2].result(timeout=10)
        assert [answers[i].result(timeout=10) for i in range(7) if i != 2] == [
            0, 1, 9, 16, 25, 36
        ]  # fmt: skip
        assert not answers[7].done()
        last.set()
    assert answers[7].done() and running[0] == 0
    assert most[0] == 3


def test_a_stop_runs_what_waits_on_it_while_it_waits_and_never_after() -> None:
    stop, ran = Stop(), []
    with stop.on_set(lambda: ran.append("during")):
        assert ran == []
        stop.set()  # in this thread: the action has run when set returns
        assert ran == ["during"] and stop.is_set()
    stop.clear()
    with stop.on_set(lambda: ran.append("left")):
        pass
    stop.set()
    assert ran == ["during"]  # its block had ended
    with stop.on_set(lambda: ran.append("late")):
        assert ran == ["during", "late"]  # set already: at once
