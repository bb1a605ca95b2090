"""Requests that conflict among themselves, whatever the CUDA line, proved beside the search.

One resolution decides it (:meth:`~cudaup.plan.attempt.LineResolver.conflict_job` says
why it is a proof): it starts when a line's first resolution fails with nothing
excluded, the sign of such a conflict, and the search waits for its line or for the
proof, whichever comes first; or at once when the requests are exact pins (often the same
job as the install check's first resolution), and then the lines wait for it.  A line
whose first resolution succeeded refutes it at once (that resolution picked from a subset
of the proof's choices), so the proof is stopped and a plan that finds a line pays little
for it.  When uv finds no resolution there, no
line can resolve: the search stops and the error gives uv's reason once, instead of
each package resolved alone on every line.

Exact pins can be proved to conflict before uv answers, from the pinned wheels' own
metadata (:func:`pins_contradict`): ``vllm==0.20.0`` with ``torch==2.9.0`` conflict
because vllm 0.20.0's wheel requires ``torch==2.11.0``, whatever else is resolved.

Without a proof, the no-line error resolves each package alone on every line
(:func:`each_alone`), to say on which lines each would resolve.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, Future, wait
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import Version

from cudaup.errors import CudaupError
from cudaup.plan.attempt import Attempt, LineResolver
from cudaup.plan.lines import Line
from cudaup.plan.result import Alone, telling
from cudaup.util.parallel import map_concurrently


class ConflictProof:
    """The proof's one run in a plan: started once, answered as its reason or None."""

    def __init__(
        self,
        pool: Executor,
        prove: Callable[[list[Line]], str | None],
        stop: Callable[[], None],
        quiet: Callable[[], None] = lambda: None,
    ) -> None:
        #: ``quiet`` returns when no line may answer without a uv run (the search's gate:
        #: :meth:`cudaup.plan.window.UvGate.quiet`), so that a line its kept answers decide
        #: refutes the proof before the proof's uv run starts.
        self.pool, self.prove, self.stop, self.quiet = pool, prove, stop, quiet
        #: A line's first resolution succeeded: the requests do not conflict.
        self.refuted = False
        self.lines: list[Line] = []
        self.future: Future[str | None] | None = None
        self.started: Future[None] = Future()
        self._lock = threading.Lock()

    def start(self) -> None:
        """Start the proof over :attr:`lines` (once; not after :meth:`close`)."""
        with self._lock:
            if self.future is None and self.lines and not self.refuted:
                self.future = self.pool.submit(self._prove, list(self.lines))
                self.started.set_result(None)

    def _prove(self, lines: list[Line]) -> str | None:
        self.quiet()
        return None if self.refuted else self.prove(lines)

    def close(self) -> None:
        """The search is over: a line that fails from now on starts nothing."""
        with self._lock:
            self.lines = []

    def after_line(self, attempt: Future[Attempt]) -> None:
        """A line uv found no resolution for, with nothing excluded, starts the proof; one
        that resolved, or failed only after resolving (a build of another line, a missing
        extra), refutes it."""
        if attempt.cancelled() or attempt.exception() is not None:
            return
        failure = attempt.result().failure
        if failure is not None and failure.kind == "resolution":
            self.start()
            return
        self.refute()

    def refute(self) -> None:
        """A line's resolution from its first round's pages (told as uv answers it, before
        the line is read back or resolved again): the proof is not started, or stopped."""
        with self._lock:
            self.refuted = True
        self.stop()

    def proved_first(self, line: Future[Attempt], beside: Sequence[Future[Attempt]] = ()) -> bool:
        """Wait for ``line``'s attempt or one of the attempts ``beside`` it (False), or for
        the proof that no line resolves (True)."""
        watched = [line, *beside]
        while not any(future.done() for future in watched):
            proof: Future[Any] = self.future or self.started
            if self.future is not None and self.future.done():
                if self.reason(block=False) is not None:
                    return True
                proof = Future()  # refuted or answered None: only the lines are waited for
            wait([*watched, proof], return_when=FIRST_COMPLETED)
        return self.reason(block=False) is not None

    def reason(self, *, block: bool) -> str | None:
        """The reason the requests conflict (None: refuted, not started, or not yet
        answered and ``block`` is false)."""
        if self.future is None or not (block or self.future.done()):
            return None
        try:
            found = self.future.result()
        except CudaupError:
            if self.refuted:
                return None  # stopped by the refutation: it proves nothing
            raise
        return None if self.refuted else found


def pins_contradict(
    pins: Mapping[NormalizedName, Requirement],
    requires: Mapping[NormalizedName, tuple[str, Sequence[Requirement]]],
) -> str | None:
    """Why exact ``pins`` (each project's unconditional ``name==version`` request) cannot
    be installed together, from what each pinned wheel requires (``requires``: the
    wheel's file name and its Requires-Dist); None when no wheel's own requirements
    exclude another pin.

    A proof, not a guess: a requirement with no marker holds wherever the wheel is
    installed, whatever extras are asked for, so when one on another pinned project
    excludes that pin's version no resolution exists.  Only a final release's pin is
    judged (``2.9.0``, not ``2.12.0rc1``, ``2.9.0.post1`` or ``2.9.0+cu130``), where
    every specifier compares it plainly; a pre-, post- or development release or a local
    label meets PEP 440's special cases, and a requirement with a marker may not hold for
    the target: uv answers those."""
    for name, (wheel, required) in requires.items():
        for requirement in required:
            other = canonicalize_name(requirement.name)
            if requirement.marker is not None or other == name or other not in pins:
                continue
            (pinned,) = pins[other].specifier
            version = Version(pinned.version)
            if str(version) != version.base_version:
                continue
            if not requirement.specifier.contains(version, prereleases=True):
                return (
                    f"{pins[name]} depends on {requirement} (the Requires-Dist of {wheel}) "
                    f"and you require {pins[other]}: no version of {other} satisfies both"
                )
    return None


def each_alone(
    requirements: Sequence[Requirement],
    lines: list[Line],
    attempts: dict[Line, Attempt],
    resolver: LineResolver,
    workers: int,
) -> list[Alone]:
    """Each requested package resolved alone on every line (for the no-line error, when
    no proof was made); with one package, the search's own ``attempts`` are reused."""
    pairs = [
        (r, line)
        for r in requirements
        for line in lines
        if len(requirements) > 1 or line not in attempts
    ]
    results = map_concurrently(
        lambda pair: resolver.attempt((pair[0],), pair[1], offline_first=True), pairs, workers
    )
    outcome: dict[tuple[str, Line], Attempt] = {
        (str(r), line): a for (r, line), a in zip(pairs, results, strict=True)
    }
    if len(requirements) == 1:
        outcome.update({(str(requirements[0]), ln): a for ln, a in attempts.items()})
    resolves = {str(r): {ln for ln in lines if outcome[(str(r), ln)].ok} for r in requirements}
    alone = []
    for requirement in requirements:
        mine = [(ln, outcome[(str(requirement), ln)]) for ln in lines]
        failures = [a.failure for _, a in mine if a.failure is not None]
        others = [v for k, v in resolves.items() if k != str(requirement)]
        theirs = set.intersection(*others) if others else set()
        alone.append(
            Alone(str(requirement), [ln for ln, a in mine if a.ok], telling(failures, theirs))
        )
    return alone
