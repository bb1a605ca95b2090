"""The search's gate on fresh uv runs: an older line waits while a newer one may answer
without one.

A line whose resolution succeeded is most likely the answer (a line fails after
resolving only for builds of another line, a contradiction or a missing extra), and
reading it back takes no uv run; nor does a line that its kept answers decide (a warm
plan).  A fresh uv run started meanwhile by an older line, or by the conflict proof
(:mod:`cudaup.plan.conflict`), is then mostly killed when the newer line answers, its
answer never kept: in a warm plan, whose kept answers free the search's window at once,
each such run cost the index memo and a uv process (0.2-1.0 s, then killed) beside the
answering line on two cores, every time.  So a line is *reading* from the moment it is
started until it starts a fresh uv run (or ends without a resolution), and again from
the moment uv resolves it until the search has weighed that resolution; an older line
takes kept answers freely, but starts no uv process while a newer line is reading, and
the proof starts none while any line is.  They go on when that line fails, is passed
over or starts a uv run of its own, and stop when the search is cancelled.
What it can cost a plan that needs the older line: its fresh uv runs start once no newer
line is reading (runs already started are not held).  Holding back the older line's
whole attempt instead was measured worse: when the newer line then failed, the older one
had not even read its kept answers.  Nor does an older line read a wheel over the network
while a newer line reads from what is kept alone (kept answers and wheel facts: a warm
plan's): it waits until that line answers, or starts a uv run or reads a wheel over the
network itself, and so may take long (:meth:`UvGate.before_fetch`).

:func:`fill` starts the search's lines, a window of them at a time, as lines end.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from cudaup.errors import CudaupError
from cudaup.plan.lines import Line


class _Ended(Protocol):
    @property
    def ok(self) -> bool: ...


T = TypeVar("T", bound=_Ended)


class UvGate:
    """Which lines are reading (may answer without a fresh uv run), for the plan's searches."""

    def __init__(self, cancel: threading.Event) -> None:
        self.cancel = cancel
        #: told of a line's resolution that refutes the conflict proof the moment uv answers
        #: it (:meth:`cudaup.plan.conflict.ConflictProof.refute`)
        self.refute: Callable[[], None] = lambda: None
        #: told of each line's ended attempt while the line still reads, so that one that
        #: failed after resolving refutes the proof before the proof, waiting for no line
        #: to be reading, may start (:meth:`cudaup.plan.conflict.ConflictProof.after_line`)
        self.ended: Callable[[Future[Any]], None] = lambda _: None
        self._reading: set[Line] = set()
        #: lines that read a wheel over the network (:meth:`before_fetch`) or started a
        #: fresh uv run (:meth:`wait`) since they started: their read-backs may take long
        #: (a cold plan's), and an older line's own wheel reads go on beside them
        self._slow: set[Line] = set()
        self._changed = threading.Condition()

    def turn(self, line: Line) -> Turn:
        """``line``'s side of the gate, reading from now on (its kept answers may decide it)."""
        with self._changed:
            self._slow.discard(line)
        self.reading(line, True)
        return Turn(self, line)

    def reading(self, line: Line, now: bool) -> None:
        with self._changed:
            if now:
                self._reading.add(line)
            else:
                self._reading.discard(line)
            self._changed.notify_all()

    def wake(self) -> None:
        """The search was cancelled (:attr:`cancel` is set): the waiting lines stop."""
        with self._changed:
            self._changed.notify_all()

    def weighed(self, line: Line) -> None:
        """The search passed ``line``'s resolution over, or ended: older lines' uv runs go on."""
        self.reading(line, False)

    def held(self, line: Line) -> bool:
        """Whether a uv run of ``line`` would wait now (a newer line is reading)."""
        with self._changed:
            return any(newer > line for newer in self._reading)

    def quiet(self) -> None:
        """Return when no line is reading, or once the search was cancelled."""
        with self._changed:
            while self._reading and not self.cancel.is_set():
                self._changed.wait()

    def before_fetch(self, line: Line) -> None:
        """``line`` is about to read a wheel over the network: return when no newer line is
        reading from what is kept alone (no fresh uv run, no wheel read over the network),
        or raise once the search is cancelled.  Such a line answers in milliseconds, and is
        most likely the answer: in a warm ``vllm flashinfer-python`` plan 12.8, started
        beside 13.0, read a wheel its cold plan had left unread, and the answer waited for
        it, every run.  From now on ``line`` counts as slow: older lines read on."""
        with self._changed:
            self._slow.add(line)
            self._changed.notify_all()
            while (
                any(newer > line and newer not in self._slow for newer in self._reading)
                and not self.cancel.is_set()
            ):
                self._changed.wait()
        if self.cancel.is_set():
            raise CudaupError("the search for a line was cancelled")

    def wait(self, line: Line) -> None:
        """Return when no line newer than ``line`` is reading; raise once cancelled."""
        with self._changed:
            self._reading.discard(line)  # it resolves again: newer lines need not wait
            self._slow.add(line)
            self._changed.notify_all()
            while any(newer > line for newer in self._reading) and not self.cancel.is_set():
                self._changed.wait()
        if self.cancel.is_set():
            raise CudaupError("the search for a line was cancelled")


@dataclass(frozen=True)
class Turn:
    """One line's side of the gate, handed to its attempt."""

    gate: UvGate
    line: Line

    def resolved(self, *, refutes: bool) -> None:
        """uv resolved the line (``refutes``: from the pages of its first round), which now
        reads it back."""
        if refutes:
            self.gate.refute()
        self.gate.reading(self.line, True)

    def before_uv(self) -> None:
        self.gate.wait(self.line)

    def before_fetch(self) -> None:
        self.gate.before_fetch(self.line)

    def held(self) -> bool:
        return self.gate.held(self.line)

    def done(self, attempt: Future[T]) -> None:
        """The line's attempt ended.  One that resolved stays reading until the search has
        weighed it (:meth:`UvGate.weighed`): it is most likely the answer, and an older line let
        go the moment it ended started its uv run before the search could stop it."""
        self.gate.ended(attempt)
        if attempt.cancelled() or attempt.exception() is not None or not attempt.result().ok:
            self.gate.reading(self.line, False)


def fill(
    gate: UvGate,
    queue: list[Line],
    futures: dict[Line, Future[T]],
    size: int,
    start: Callable[[Turn], Future[T]],
    weighed: Collection[Line],
) -> list[Future[T]]:
    """Start lines from the head of ``queue`` until ``size`` of ``futures`` run, and return
    the attempts still running.  Every line started is marked reading before any starts,
    so that the first to fail cannot start the conflict proof before the next is marked.

    A search refills its window as any line ends, not only the line it waits for: an older
    line's uv run then goes beside the newer line's later round or read-back (in a cold
    ``torch flashinfer-python sgl-kernel`` plan 12.8 waited 0.6 s for 13.0 to end while 12.9
    had ended and the window had room).  But none starts while a line that resolved (its
    attempt ended ``ok``) waits to be weighed (``weighed``: the lines the search has): it
    is most likely the answer, and an older line would only take the cores from a newer
    one still resolving (in a cold ``vllm flashinfer-python`` plan, 12.9 beside 13.1 once
    13.0 had resolved)."""
    if not any(
        line not in weighed and future.done() and not future.cancelled()
        and future.exception() is None and future.result().ok
        for line, future in futures.items()
    ):  # fmt: skip
        running = sum(not future.done() for future in futures.values())
        for turn in [gate.turn(queue.pop(0)) for _ in queue[: size - running]]:
            futures[turn.line] = start(turn)
    return [future for future in futures.values() if not future.done()]
