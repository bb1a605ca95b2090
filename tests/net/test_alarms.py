"""The deadlines of requests' headers, kept by one thread (:class:`cudaup.net.deadline.Alarms`):
an alarm goes off when due and never once cancelled, the earliest first, one armed
earlier than the one waited for wakes the thread, and however many are armed one thread
keeps them.  (That a request whose headers dribble past the stall limit fails through
them: ``tests/net/test_answers.py``.)"""

from __future__ import annotations

import threading
from functools import partial

from cudaup.net.deadline import Alarms

WAIT = 30.0  # far past any alarm here: reaching it means the alarm never went off


def test_an_alarm_goes_off_when_due_and_a_cancelled_one_never() -> None:
    alarms = Alarms()
    fired: list[str] = []
    last = threading.Event()
    cancelled = alarms.arm(0.05, lambda: fired.append("cancelled"))
    alarms.arm(0.1, lambda: fired.append("kept"))
    alarms.arm(0.2, last.set)
    alarms.cancel(cancelled)
    assert last.wait(WAIT)
    assert fired == ["kept"]


def test_an_earlier_alarm_wakes_the_thread_waiting_for_a_later_one() -> None:
    alarms = Alarms()
    alarms.arm(3600.0, lambda: None)  # the thread now waits an hour
    early = threading.Event()
    alarms.arm(0.0, early.set)
    assert early.wait(WAIT), "the alarm armed later but due first waited for the first"


def test_alarms_go_off_in_the_order_they_are_due() -> None:
    alarms = Alarms()
    order: list[int] = []
    done = threading.Event()
    for tenths in (3, 1, 2):
        alarms.arm(tenths / 10, partial(order.append, tenths))
    alarms.arm(0.4, done.set)
    assert done.wait(WAIT)
    assert order == [1, 2, 3]


def test_a_failing_action_ends_no_later_alarm() -> None:
    alarms = Alarms()

    def broken() -> None:
        raise RuntimeError("a bug in one action")

    after = threading.Event()
    alarms.arm(0.0, broken)
    alarms.arm(0.05, after.set)
    assert after.wait(WAIT)


def test_one_thread_keeps_every_alarm() -> None:
    alarms = Alarms()
    before = {thread.ident for thread in threading.enumerate()}
    keys = [alarms.arm(60.0, lambda: None) for _ in range(200)]
    for key in keys:
        alarms.cancel(key)
    started = [t for t in threading.enumerate() if t.ident not in before]
    assert [t.name for t in started] == ["cudaup-deadlines"]
    assert started[0].daemon  # an exit waits for it no more than Python's own would
