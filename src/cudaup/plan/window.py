"""The search's gate on fresh uv runs: an older line waits while a newer one reads back.

A line whose resolution succeeded is most likely the answer (a line fails after
resolving only for builds of another line, a contradiction or a missing extra), and
reading it back takes no uv run.  A fresh uv run started meanwhile by an older line is
then mostly killed when the newer line answers, its answer never kept: in a warm plan,
whose kept answers free the search's window at once, that run cost the index memo and a
uv process (0.8-1.0 s, then killed) beside the read-back on two cores, every time.  So an
older line takes kept answers freely, but starts no uv process while a newer line reads
back; it goes on when that line answers or starts another round, and stops when the
search is cancelled.  What it can cost a plan that needs the older line: its fresh uv
runs start once no newer line is reading back (runs already started are not held).
Holding back the older line's whole attempt instead was measured worse: when the newer
line then failed, the older one had not even read its kept answers.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from cudaup.errors import CudaupError
from cudaup.plan.lines import Line


class UvGate:
    """Which lines are reading back a resolution, for one search."""

    def __init__(self, cancel: threading.Event) -> None:
        self.cancel = cancel
        self._reading: set[Line] = set()
        self._changed = threading.Condition()

    def turn(self, line: Line) -> Turn:
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

    def held(self, line: Line) -> bool:
        """Whether a uv run of ``line`` would wait now (a newer line reads back)."""
        with self._changed:
            return any(newer > line for newer in self._reading)

    def wait(self, line: Line) -> None:
        """Return when no line newer than ``line`` reads back; raise once cancelled."""
        with self._changed:
            self._reading.discard(line)  # it resolves again: newer lines need not wait
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

    def resolved(self) -> None:
        self.gate.reading(self.line, True)

    def before_uv(self) -> None:
        self.gate.wait(self.line)

    def held(self) -> bool:
        return self.gate.held(self.line)

    def done(self, *_: object) -> None:
        self.gate.reading(self.line, False)
