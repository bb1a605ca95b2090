"""A line's next round, started while the read-back that decides it still reads wheels.

:meth:`cudaup.plan.attempt.LineResolver.attempt` reads each resolution back: first what
the packages' names and per-line indexes say (at once), then the wheels of silent
requested packages (range reads: vllm's took 0.5-1.5 s of a cold plan).  When the names
alone already exclude something (``nvidia-cutlass-dsl-libs-cu12`` on 13.0), the round
they lead to is known unless the wheels find more, and its uv run is the next thing on
the line's path: it starts beside the wheels' reading, and is used only when the
read-back ends with exactly its exclusions (then it is the round the line would have
run, started earlier); otherwise its uv run is killed and the round runs as before.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cudaup.plan.uv import CompileAnswer, Stoppable
from cudaup.util.parallel import in_background

if TYPE_CHECKING:  # attempt runs the rounds and imports this
    from cudaup.plan.attempt import Attempt


@dataclass
class NextRound:
    """One round started ahead with ``exclusions``, in a thread of its own that is
    joined whether its answer is used (:meth:`result`) or not (:meth:`discard`)."""

    exclusions: list[str]
    stop: Stoppable
    thread: threading.Thread
    outcome: Future[tuple[Attempt, CompileAnswer]]

    @classmethod
    def start(
        cls, exclusions: list[str], resolve: Callable[..., tuple[Attempt, CompileAnswer]]
    ) -> NextRound:
        stop = Stoppable()
        thread, outcome = in_background(
            lambda: resolve(exclusions, stoppable=stop), "cudaup-plan-next-round"
        )
        return cls(exclusions, stop, thread, outcome)

    def result(self) -> tuple[Attempt, CompileAnswer]:
        self.thread.join()
        return self.outcome.result()

    def discard(self) -> None:
        self.stop.stop()
        self.thread.join()
