"""The search's gate on fresh uv runs (plan/window.py), with real threads: an older line
waits while a newer one reads back, and goes on when it answers or is cancelled."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from dataclasses import dataclass

import pytest

from cudaup.errors import CudaupError
from cudaup.plan.window import UvGate

NEWER, LINE, OLDER = (13, 0), (12, 8), (12, 6)


@dataclass(frozen=True)
class Ended:
    ok: bool


def ended(*, ok: bool) -> Future[Ended]:
    """A line's attempt that ended, resolved (``ok``) or not."""
    future: Future[Ended] = Future()
    future.set_result(Ended(ok))
    return future


class Waiter(threading.Thread):
    """``gate.wait(line)`` (``fetch``: ``gate.before_fetch(line)``) in a thread of its own;
    what it ended with."""

    def __init__(self, gate: UvGate, line: tuple[int, int], *, fetch: bool = False) -> None:
        super().__init__(daemon=True)
        self.gate, self.line = gate, line
        self.waits = gate.before_fetch if fetch else gate.wait
        self.error: BaseException | None = None
        self.returned = threading.Event()

    def run(self) -> None:
        try:
            self.waits(self.line)
        except BaseException as exc:
            self.error = exc
        self.returned.set()


def test_an_older_line_waits_while_a_newer_one_reads_back_until_it_answers() -> None:
    gate = UvGate(threading.Event())
    gate.turn(LINE).resolved(refutes=False)
    older, newer = Waiter(gate, OLDER), Waiter(gate, NEWER)
    older.start()
    newer.start()
    assert newer.returned.wait(30) and newer.error is None  # a newer line never waits
    assert not older.returned.wait(0.2)  # still held: 12.8 reads back
    gate.turn(LINE).done(ended(ok=False))
    assert older.returned.wait(30) and older.error is None


def test_a_line_that_resolved_holds_older_ones_until_the_search_weighs_it() -> None:
    """An attempt that ended with a resolution is most likely the search's answer: an
    older line let go when it ended started a uv run before the search stopped it."""
    gate = UvGate(threading.Event())
    turn = gate.turn(LINE)
    turn.resolved(refutes=False)
    older = Waiter(gate, OLDER)
    older.start()
    turn.done(ended(ok=True))
    assert not older.returned.wait(0.2)  # ended, not yet weighed
    gate.weighed(LINE)  # passed over (a driver refusal, requests held back)
    assert older.returned.wait(30) and older.error is None


def test_the_proof_is_told_of_a_line_that_ended_before_the_line_stops_reading() -> None:
    """A line that failed after resolving refutes the conflict proof as it ends: told only
    once the line had stopped reading, the proof (waiting for no line to be reading) could
    start its uv run in between."""
    gate = UvGate(threading.Event())
    reading_when_told: list[bool] = []
    gate.ended = lambda _: reading_when_told.append(gate.held(OLDER))
    turn = gate.turn(LINE)
    turn.done(ended(ok=False))
    assert reading_when_told == [True]
    assert not gate.held(OLDER)


def test_a_line_that_resolves_again_holds_no_one_back() -> None:
    gate = UvGate(threading.Event())
    turn = gate.turn(NEWER)
    turn.resolved(refutes=False)
    turn.before_uv()  # its next round: it is no longer reading back, and waits for no one
    older = Waiter(gate, LINE)
    older.start()
    assert older.returned.wait(30) and older.error is None


@pytest.mark.parametrize("fetch", [False, True], ids=["uv run", "fetch"])
def test_a_cancelled_search_stops_the_waiting_line(fetch: bool) -> None:
    """The newer line answered: the older line's uv run, or its wheel read, is never made."""
    cancel = threading.Event()
    gate = UvGate(cancel)
    gate.turn(NEWER).resolved(refutes=False)
    older = Waiter(gate, LINE, fetch=fetch)
    older.start()
    assert not older.returned.wait(0.2)
    cancel.set()
    gate.wake()
    assert older.returned.wait(30)
    assert isinstance(older.error, CudaupError)
    with pytest.raises(CudaupError, match="cancelled"):
        older.waits(LINE)


def test_a_line_reads_from_its_start_until_it_starts_a_uv_run() -> None:
    """A line just started may be answered by its kept answers: an older line's fresh uv
    run waits for it as for a read-back, until it starts a uv run of its own."""
    gate = UvGate(threading.Event())
    newer = gate.turn(NEWER)
    older = Waiter(gate, LINE)
    older.start()
    assert not older.returned.wait(0.2)  # held: 13.0 may answer from what it kept
    newer.before_uv()  # 13.0 resolves afresh: no reason to hold 12.8 back
    assert older.returned.wait(30) and older.error is None


def test_quiet_waits_while_any_line_is_reading() -> None:
    """What the conflict proof waits for: no line that may answer without a uv run, or
    the end of the search."""
    gate = UvGate(threading.Event())
    turn = gate.turn(OLDER)  # even an older line: its answer would refute the proof
    quiet = threading.Thread(target=gate.quiet, daemon=True)
    quiet.start()
    quiet.join(0.2)
    assert quiet.is_alive()
    turn.done(ended(ok=False))
    quiet.join(30)
    assert not quiet.is_alive()
    cancel = threading.Event()
    cancelled = UvGate(cancel)
    cancelled.turn(NEWER)
    waiting = threading.Thread(target=cancelled.quiet, daemon=True)
    waiting.start()
    cancel.set()
    cancelled.wake()
    waiting.join(30)
    assert not waiting.is_alive()


def test_an_older_lines_fetch_waits_while_a_newer_line_reads_what_is_kept() -> None:
    """A newer line reading back from kept facts answers in milliseconds (a warm plan):
    an older line's wheel read over the network waits for it, until it reads over the
    network itself (and so may take long), or stops reading.  A newer line never waits."""
    gate = UvGate(threading.Event())
    newer = gate.turn(NEWER)
    gate.turn(LINE)
    older = Waiter(gate, LINE, fetch=True)
    older.start()
    assert not older.returned.wait(0.2)  # held: 13.0 answers from what it kept
    newer.before_fetch()  # 13.0 reads a wheel over the network: returns at once
    assert older.returned.wait(30) and older.error is None
    oldest = Waiter(gate, OLDER, fetch=True)  # 12.8 fetches: 12.6 waits for neither
    oldest.start()
    assert oldest.returned.wait(30) and oldest.error is None


def test_an_older_lines_fetch_goes_on_when_the_newer_line_answers_or_fails() -> None:
    gate = UvGate(threading.Event())
    newer = gate.turn(NEWER)
    older = Waiter(gate, LINE, fetch=True)
    older.start()
    assert not older.returned.wait(0.2)
    newer.done(ended(ok=False))
    assert older.returned.wait(30) and older.error is None
    turn = gate.turn(NEWER)
    turn.done(ended(ok=True))  # resolved: it reads until the search weighs it
    again = Waiter(gate, LINE, fetch=True)
    again.start()
    assert not again.returned.wait(0.2)
    gate.weighed(NEWER)  # passed over: the older line's fetch goes on
    assert again.returned.wait(30) and again.error is None


def test_an_older_lines_fetch_waits_for_no_line_that_resolved_afresh() -> None:
    """A cold plan's newer line reads back what uv resolved afresh, over the network too:
    the older line's reads go on beside it."""
    gate = UvGate(threading.Event())
    newer = gate.turn(NEWER)
    newer.before_uv()
    newer.resolved(refutes=False)  # reading back again
    older = Waiter(gate, LINE, fetch=True)
    older.start()
    assert older.returned.wait(30) and older.error is None
    gate.turn(NEWER)  # the plan's next search: it starts from what is kept again
    again = Waiter(gate, LINE, fetch=True)
    again.start()
    assert not again.returned.wait(0.2)
    gate.weighed(NEWER)
    assert again.returned.wait(30) and again.error is None
