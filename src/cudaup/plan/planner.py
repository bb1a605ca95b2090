"""``cudaup plan``: the newest CUDA line on which the whole stack resolves, and why.

The requested projects are first checked on every index that serves them (they,
their versions and a wheel for the target must exist; an index that is down stops
the plan).  Then, for each candidate line, newest first (the lines of the live
release list, or the one ``--cuda`` names), that the driver and the GPUs accept
and the requested index-only projects have, :class:`~cudaup.plan.attempt.LineResolver`
resolves the stack held to that line and reads the closure back.  Several lines
resolve at once (a window); the answer is the newest that succeeds and whose
named release the driver runs.  When no line fits, each package is resolved
alone on every line, so the error names each one's lines and why they do not meet.
"""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import replace
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from cudaup.config import Settings
from cudaup.core.compat import Compatibility, CompatTable
from cudaup.core.wheels import marker_environment
from cudaup.errors import OfflineError, ReleaseNotFoundError, UsageError
from cudaup.net.http import HttpClient
from cudaup.plan.attempt import Attempt, LineResolver, uv_platform
from cudaup.plan.conflict import ConflictProof, each_alone, pins_contradict
from cudaup.plan.held_back import HeldBack, held_in, passed_over_for, takes_newer
from cudaup.plan.index_memo import IndexMemo
from cudaup.plan.indexes import Index
from cudaup.plan.install import exact_pins, install_pins
from cudaup.plan.lines import (
    TOOLKIT,
    Line,
    line_text,
    line_tiers,
    release_line,
)
from cudaup.plan.listing import plan_releases
from cudaup.plan.prechecks import precheck
from cudaup.plan.read_ahead import pins_ahead
from cudaup.plan.result import (
    Exclusion,
    PackagePick,
    PlanResult,
    PlanTarget,
    conflict_error,
    explain,
    line_support,
    minor_compat_note,
    passed_over,
)
from cudaup.plan.survey import (
    check_requested,
    fetch_pages,
    pure_among_compiled,
    unreachable_error,
    yank_of,
)
from cudaup.plan.uv import CompileAnswer, CompileJob, find_uv, pages_identity
from cudaup.plan.wheels import WheelFacts
from cudaup.plan.window import Turn, UvGate, fill
from cudaup.resolve.releases import LiveReleases, learn_releases
from cudaup.util.cachedir import CacheLayout

#: The identity of a job with no local per-line index.
EMPTY = pages_identity({})
#: Lines resolved at the same time: a cold uv run is CPU work, and the lines after the first
#: two find the plan's uv cache warm (four: 2-3 s more, docs/performance.md round 22).
WINDOW = 2


class Planner:
    def __init__(self, settings: Settings, http: HttpClient | None = None) -> None:
        self.settings = settings
        # Fewer retries than downloads: an index that is down should be reported quickly.
        self.http = http or HttpClient(settings, retries=1)
        self.cache = CacheLayout(settings.cache_root)
        self.facts = WheelFacts(self.http, self.cache.plan_dir("wheels"))

    def plan(
        self,
        requirements: Sequence[Requirement],
        indexes: dict[str, Index],
        target: PlanTarget,
        *,
        line: Line | None = None,
        compat: CompatTable | None = None,
        lines: Collection[Line] | None = None,
        held: Sequence[str] = (),
        preferences: Sequence[str] = (),
        pre: bool = False,
        allow_minor_compat: bool = False,
    ) -> PlanResult:
        """The newest line (or ``line``; or the newest of ``lines``) the stack resolves on,
        lines the driver runs fully before those it runs under minor-version compatibility
        (:func:`~cudaup.plan.lines.line_tiers`; ``allow_minor_compat``: newest first, all
        alike), passing over one that holds a request back to an old version pinning no
        CUDA line when the next line that resolves takes it newer (:mod:`cudaup.plan.held_back`).

        ``held``: projects whose version is their CUDA release, held to each line like
        the runtime; ``preferences``: versions kept where the resolution allows; ``pre``:
        pre-releases may be taken (``--pre``; pass ``indexes_for(…, pre=True)`` for the
        nightly indexes)."""
        if self.settings.offline:
            raise OfflineError("plan reads the package indexes live; --offline cannot answer it")
        with (
            tempfile.TemporaryDirectory(prefix="cudaup-plan-") as work,
            IndexMemo(self.http) as memo,
        ):
            run = _Run(self, tuple(requirements), indexes, target, Path(work), memo)
            run.lines.held, run.lines.preferences = tuple(held), tuple(preferences)
            run.lines.pre = pre
            run.allow_minor_compat = allow_minor_compat
            return run.plan(line, compat, lines)


class _Run:
    """One plan: the requests, the target, and the line resolver they share."""

    def __init__(
        self,
        planner: Planner,
        requirements: tuple[Requirement, ...],
        indexes: dict[str, Index],
        target: PlanTarget,
        work: Path,
        memo: IndexMemo,
    ) -> None:
        self.planner, self.settings, self.http = planner, planner.settings, planner.http
        self.requirements, self.indexes = requirements, indexes
        self.target, self.work = target, work
        flat = [i for i in indexes.values() if i.flat]
        if not flat:
            raise UsageError(
                "--index names only per-line indexes; add pypi (or a mirror URL) for the "
                "packages they do not publish"
            )
        default = next((i for i in flat if i.name == "pypi"), flat[-1])
        self.flat_names = {i.urls[""].rstrip("/"): i.name for i in flat}
        self.tagged = [i for i in indexes.values() if not i.flat]
        self.allow_minor_compat = False
        self.lines = LineResolver(
            planner,
            target,
            self.tagged,
            (default.urls[""], tuple(i.urls[""] for i in flat if i is not default)),
            work,
        )
        runner = self.lines.runner
        # The plan's uv runs read the flat indexes through its memo, with a uv cache of its own.
        runner.memo, runner.cache_dir = memo, work / "uv-cache"
        self.ahead_runner = replace(runner, _running=set(), _lock=threading.Lock())
        self.conflict_runner = replace(runner, _running=set(), _lock=threading.Lock())
        # Beside the search: the install check's first resolution, the conflict check.
        self.ahead_pool = ThreadPoolExecutor(max_workers=3)
        self.ahead: Future[CompileAnswer] | None = None
        self.ahead_job: CompileJob | None = None
        self.told: Future[str | None] | None = None
        self.gate = UvGate(self.lines.cancel)  # each search's, one search at a time
        self.conflict = ConflictProof(
            self.ahead_pool, self._requests_conflict, self.conflict_runner.cancel, self.gate.quiet
        )
        self.gate.refute = self.conflict.refute
        if len(requirements) > 1:  # one is told by its own attempts
            self.gate.ended = self.conflict.after_line

    # -- the plan --------------------------------------------------------------
    def plan(
        self, wanted: Line | None, compat: CompatTable | None, allowed: Collection[Line] | None
    ) -> PlanResult:
        for requirement in self.requirements:
            if requirement.url:
                raise UsageError(
                    f"{requirement} is a direct reference; plan resolves from package indexes"
                )
        located = self.ahead_pool.submit(find_uv)  # `uv --version`, 10-40 ms: beside the survey
        self._check_ahead()  # it needs only the pins: beside the survey, as the release list
        try:
            releases = self.ahead_pool.submit(plan_releases, self.settings, self.planner.cache.plan)
            try:
                self._survey()
            finally:
                located.result()  # a uv that cannot run is said first, whatever the survey says
            return self._plan(wanted, compat, allowed, releases.result())
        finally:
            self.ahead_runner.cancel()  # a plan that ends early needs no install check
            self.conflict_runner.cancel()
            self.ahead_pool.shutdown(wait=True)

    def _check_ahead(self) -> None:
        """With exact pins only, the install check's first resolution (the printed lines,
        unconstrained) is known before any line is: start it now, beside the search, on its
        own runner (the search cancels its own), the memo reading its first requests ahead.
        Its answer is kept with uv's other answers, where :func:`install_pins` finds it when
        the closure has no package from a per-line index; otherwise only its time was spent."""
        pins = exact_pins(self.requirements)
        if pins is None or self.settings.refresh:
            return
        job = CompileJob(
            tuple(pins),
            (),
            self.target.python,
            uv_platform(self.target.platform),
            self.lines.extra_flat,
            self.lines.default_url,
            interpreter=self.target.interpreter,
            prerelease=self.lines.pre,
        )
        self.ahead_job = job
        self.ahead = self.ahead_pool.submit(self.ahead_runner.compile, job, identity=EMPTY)
        if not self.ahead_runner.has_answer(job, EMPTY):  # a warm plan starts no memo
            memo, requests = self.ahead_runner.memo, self.requirements
            reading = pins_ahead(memo, requests, job.default_index, self.target)
            # Told early only where the conflict proof is this job (its wheels, its index).
            routed = any(i.serves(r.name) for i in self.tagged for r in requests)
            if reading and not (job.indexes or routed or any(r.marker for r in requests)):
                self.told = self.ahead_pool.submit(self._told_early, reading)

    def _told_early(self, reading: list[Future[None]]) -> str | None:
        """Why the exact pins conflict, told by what a pinned wheel requires
        (:func:`~cudaup.plan.conflict.pins_contradict`), its METADATA as read ahead for uv,
        the pins in turn; uv, whose answer this then is, is stopped. None when none tells."""
        wait(reading)  # each pinned wheel is being read
        pins = {canonicalize_name(r.name): r for r in self.requirements}
        assert self.ahead_runner.memo is not None  # it read the pins ahead
        for name, pin in pins.items():
            version = Version(next(iter(pin.specifier)).version)
            found = self.ahead_runner.memo.ahead.requirements(name, version)
            if found and (told := pins_contradict(pins, {name: found})):
                self.ahead_runner.cancel()  # uv is not waited for: this is the answer
                return told
        return None

    def _plan(
        self,
        wanted: Line | None,
        compat: CompatTable | None,
        allowed: Collection[Line] | None,
        live: LiveReleases,
    ) -> PlanResult:
        table = learn_releases(compat or CompatTable.load(), live)
        lines = live.lines()
        self.lines.majors = {line[0] for line in lines}
        if allowed is not None:
            lines = [line for line in lines if line in allowed]
        if wanted is not None:
            if wanted not in lines:
                raise ReleaseNotFoundError(
                    f"no CUDA {line_text(wanted)} release is known ({live.described})"
                )
            lines = [wanted]
        exclusions: list[Exclusion] = []
        candidates: list[Line] = []
        for line in lines:
            releases = [r for r in live.versions if release_line(r) == line]
            excluded = precheck(
                line,
                releases,
                table,
                self.target,
                self.requirements,
                self.tagged,
                self.lines.pages,
            )
            if excluded is None:
                candidates.append(line)
            else:
                exclusions.append(excluded)
        support = line_support(candidates, live, table, self.target)
        self.conflict.lines = candidates
        if self.ahead is not None:
            self.conflict.start()  # its resolution is the install check's, when no line routes
            if self.conflict.future is not None:
                # The lines wait for the proof: four line resolutions beside it on two cores
                # made it 2-3x slower, and after it each takes what it read from the index
                # memo and the plan's uv cache (0.1 s each for bitsandbytes==0.45.5's lines;
                # a cold vllm==0.20.0 plan 17-18 s instead of 18-22 s).
                wait([self.conflict.future])
        chosen: Attempt | None = None
        attempts: dict[Line, Attempt] = {}
        held: list[HeldBack] = []  # what the chosen line holds back, no line tried doing better
        for tier in line_tiers(candidates, support, self.allow_minor_compat):
            chosen, tried, held = self._search(tier, exclusions, live, table)
            attempts.update(tried)
            if chosen is not None or self.conflict.reason(block=False):
                break
        self.conflict.close()
        if chosen is None and (reason := self.conflict.reason(block=True)):
            raise conflict_error(
                self.requirements, lines, candidates, exclusions, reason, self.target, live, table
            )
        if chosen is None:
            raise explain(
                self.requirements,
                lines,
                exclusions,
                each_alone(self.requirements, lines, attempts, self.lines, WINDOW) if lines else [],
                self.target,
                live,
                table,
            )
        self.conflict_runner.cancel()  # a line resolved: no proof that none does is needed
        exclusions += passed_over(chosen.line, support, self.target.driver)
        result = self._result(chosen, exclusions, live, table)
        result.notes += [h.words(chosen.line) + " (no line tried takes it newer)" for h in held]
        if support.get(chosen.line) == "minor-version":
            asked, allow = wanted is not None, self.allow_minor_compat
            note = minor_compat_note(chosen.line, self.target.driver, asked=asked, allowed=allow)
            result.notes.insert(0, note)
        return result

    def _survey(self) -> None:
        wanted = [
            (index, tag, canonicalize_name(r.name))
            for r in self.requirements
            for index in self.indexes.values()
            if index.serves(r.name)
            for tag in index.urls
        ]
        pages = fetch_pages(self.http, wanted, self.settings.workers)
        self.lines.keep(pages)
        if error := unreachable_error(pages):
            raise error
        environment = marker_environment(self.target.platform, self.target.python)
        for requirement in self.requirements:
            if requirement.marker is None or requirement.marker.evaluate(environment):
                check_requested(
                    requirement,
                    pages,
                    self.target.python,
                    self.target.platform,
                    pre=self.lines.pre,
                )

    # -- searching lines ----------------------------------------------------------
    def _search(
        self,
        candidates: list[Line],
        exclusions: list[Exclusion],
        live: LiveReleases,
        table: CompatTable,
    ) -> tuple[Attempt | None, dict[Line, Attempt], list[HeldBack]]:
        """The line chosen among ``candidates`` (or None), the attempts made, and what the
        chosen line holds back when no line tried takes it newer (module held_back)."""
        attempts: dict[Line, Attempt] = {}
        futures: dict[Line, Future[Attempt]] = {}
        queue, gate = list(candidates), self.gate
        kept: tuple[Attempt, list[HeldBack]] | None = None  # a line that holds requests back
        with ThreadPoolExecutor(max_workers=WINDOW) as pool:

            def start(turn: Turn) -> Future[Attempt]:
                ahead = pool.submit(self.lines.attempt, self.requirements, turn.line, turn=turn)
                ahead.add_done_callback(turn.done)
                return ahead

            try:
                for line in candidates:
                    # Refilled as any line of the window ends; not once this one has answered.
                    while line not in futures or not futures[line].done():
                        if self.conflict.reason(block=False):  # answered before the line ran
                            return None, attempts, []
                        running = fill(gate, queue, futures, WINDOW, start, attempts)
                        if self.conflict.proved_first(futures[line], beside=running):
                            return None, attempts, []  # no line resolves: window cancelled
                    if len(self.requirements) > 1:
                        self.conflict.after_line(futures[line])  # before the search may end
                    attempt = attempts[line] = futures[line].result()
                    if attempt.ok:
                        refused = self._named_release_check(attempt, live, table)
                        if refused is not None:
                            exclusions.append(refused)
                            gate.weighed(line)
                            continue
                        held = held_in(attempt, self.requirements, self.lines, self.target)
                        if kept is None and held:
                            kept = (attempt, held)  # an older line may take them newer
                            gate.weighed(line)
                        elif kept is None:
                            return attempt, attempts, []
                        elif not takes_newer(attempt, kept[1]):
                            break  # the older lines would hold them back further
                        else:
                            exclusions.append(passed_over_for(kept[0].line, kept[1]))
                            return attempt, attempts, []
                    elif attempt.failure is not None:
                        exclusions.append(attempt.failure)
                return (kept[0], attempts, kept[1]) if kept else (None, attempts, [])
            finally:
                self.lines.cancel.set()
                gate.wake()
                self.lines.runner.cancel()
                for future in futures.values():
                    future.cancel()
                pool.shutdown(wait=True)
                for started in futures:
                    gate.weighed(started)  # the gate serves the plan's next search
                self.lines.cancel.clear()
                self.lines.runner.resume()

    def _requests_conflict(self, candidates: list[Line]) -> str | None:
        """Why the requests resolve on no line, whatever the line: uv's reason from one
        resolution (:meth:`~cudaup.plan.attempt.LineResolver.conflict_job`; with no per-line
        page, the install check's first one when that started), or a pinned wheel's."""
        found = self.lines.conflict_job(self.requirements, candidates)
        if found is None:
            return None
        job, identity = found
        ahead = self.ahead_job
        if ahead and replace(job, requirements=ahead.requirements) == ahead and identity == EMPTY:
            # Each pin from the default index alone: its wheel may prove it before uv does.
            if not job.indexes and self.told and (told := self.told.result()) is not None:
                self.ahead_runner.remember(ahead, told, EMPTY)  # what a warm plan takes
                return told
            answer = self.ahead.result() if self.ahead else None
        else:
            answer = self.conflict_runner.compile(job, identity=identity)
        return None if answer is None or answer.ok else answer.reason or "uv found no resolution"

    def _named_release_check(
        self, attempt: Attempt, live: LiveReleases, table: CompatTable
    ) -> Exclusion | None:
        """The driver check on the release the plan names (:func:`named_release`)."""
        release, driver = named_release(attempt, live, self._runs_fully(table)), self.target.driver
        if driver is None:
            return None
        verdict = table.check(driver, release, reported=self.target.reported)
        if verdict.verdict == "no":
            message = f"driver {driver} cannot run CUDA {release}: {verdict.reason}"
        elif verdict.verdict == "unknown":
            message = (
                f"cudaup cannot tell whether driver {driver} runs CUDA {release}: {verdict.reason}"
            )
        else:
            return None
        return Exclusion(attempt.line, "driver", message)

    # -- the answer -------------------------------------------------------------------
    def _result(
        self,
        attempt: Attempt,
        exclusions: list[Exclusion],
        live: LiveReleases,
        table: CompatTable,
    ) -> PlanResult:
        closure, line = attempt.closure, attempt.line
        assert closure is not None and attempt.job is not None
        release = named_release(attempt, live, self._runs_fully(table))
        notes: list[str] = []
        picks = [self._pick(requirement, attempt, notes) for requirement in self.requirements]
        release_reason = self._release_reason(attempt, live, release)
        verdict = None
        if self.target.driver is not None:
            verdict = table.check(self.target.driver, release, reported=self.target.reported)
        notes += self._notes(attempt, release, verdict)
        notes += [f"release list: {n}" for n in live.notes]
        result = PlanResult(
            line=line,
            release=release,
            release_reason=release_reason,
            releases=live,
            driver=verdict,
            packages=picks,
            closure=closure,
            evidence=attempt.evidence,
            origins=attempt.origins,
            pages=attempt.pages,
            # The lines newer than the answer, each once, newest first: why they were passed over.
            excluded=sorted(
                {e.line: e for e in exclusions if e.line > line}.values(),
                key=lambda e: e.line,
                reverse=True,
            ),
            notes=notes,
            consulted=list(self.lines.consulted),
            target=self.target,
            job=attempt.job,
        )
        identity = pages_identity(attempt.pages)
        if self.ahead is not None:
            wait([self.ahead])  # the same job, maybe: its answer is then kept for this one
        extra, checked = install_pins(
            self.lines.runner, attempt.job, result.base_pins(), closure, identity
        )
        result.install_extra, result.install_checked = extra, checked
        if not checked:
            notes.append(
                "uv resolves the printed lines to other versions than the plan's even with "
                "every package pinned: install the lock --export writes"
            )
        return result

    def _runs_fully(self, table: CompatTable) -> Callable[[str], bool] | None:
        driver, reported = self.target.driver, self.target.reported
        if driver is None:
            return None
        return lambda release: table.check(driver, release, reported=reported).verdict == "full"

    def _release_reason(self, attempt: Attempt, live: LiveReleases, release: str) -> str:
        """Why the plan names its release: the chain that pins ``cuda-toolkit``, else the
        line's newest release (that the driver runs fully)."""
        closure = attempt.closure
        assert closure is not None
        toolkit = closure.get(TOOLKIT)
        if toolkit is None:
            newest = f"the newest {line_text(attempt.line)} release in {live.described}"
            if release == live.newest(attempt.line):
                return newest
            return f"{newest} that driver {self.target.driver} runs fully"
        chain = next(
            (
                found
                for r in self.requirements
                if (package := closure.get(r.name)) is not None
                and (found := closure.chain(package.name, {TOOLKIT})) is not None
            ),
            None,
        )
        path = " → ".join(str(p) for p in chain) if chain else str(toolkit)
        return f"{path} pins it"

    def _notes(self, attempt: Attempt, release: str, verdict: Compatibility | None) -> list[str]:
        """What the answer says beside its line: no driver to ask, minor-version
        compatibility, nothing naming a line, pre-releases taken."""
        closure, job = attempt.closure, attempt.job
        assert closure is not None and job is not None
        notes = []
        if self.target.driver is None:
            notes.append("no NVIDIA driver found and no --driver: planned by the packages alone")
        elif verdict is not None and verdict.verdict == "minor-version":
            notes.append(f"driver {self.target.driver} runs CUDA {release} under {verdict.reason}")
        if not any(e.names_a_line for e in attempt.evidence.values()):
            notes.append(
                "nothing in the resolution names a CUDA line (no CUDA dependency, per-line build "
                "or linked runtime): the newest line the driver and GPUs accept"
            )
        # Pre-releases a dependency pins exactly are taken without --pre too; with it,
        # every pre-release in the closure is named.  Without it, uv also takes a request's
        # pre-release when no final release resolves with the rest: that is named too.
        pre = sorted(f"{p.name} {p.version}" for p in closure if p.version.is_prerelease)
        if pre and job.prerelease:
            notes.append(f"takes pre-releases (--pre): {', '.join(pre)}")
        unasked = [
            f"{p.name} {p.version}"
            for r in self.requirements
            if not r.specifier.prereleases
            and (p := closure.get(canonicalize_name(r.name))) is not None
            and p.version.is_prerelease
        ]
        if unasked and not job.prerelease:
            notes.append(
                f"takes a pre-release without --pre: {', '.join(unasked)} (uv takes one when "
                "no final release resolves with the rest)"
            )
        return notes

    def _pick(self, requirement: Requirement, attempt: Attempt, notes: list[str]) -> PackagePick:
        """What the plan takes for one request: its version, index, and the chain of
        packages that ties it to the line (one that pins the release first, then an exact
        line, then any fitting one); a yanked exact pin adds a note, and so does a
        pure-Python wheel of a project whose other versions ship compiled ones."""
        closure, line = attempt.closure, attempt.line
        assert closure is not None
        package = closure.get(requirement.name)
        if package is None:
            return PackagePick.absent(requirement)
        fitting = {n for n, e in attempt.evidence.items() if e.fits(line)}
        exact = {n for n in fitting if attempt.evidence[n].line is not None}
        pinning = {n for n in fitting if attempt.evidence[n].release}
        chain = (
            closure.chain(package.name, pinning)
            or closure.chain(package.name, exact)
            or closure.chain(package.name, fitting)
        )
        origin = attempt.origins.get(package.name)
        index, index_url = (
            (origin.index, origin.url)
            if origin and package.name in attempt.pages
            else (
                self.flat_names.get((package.index_url or "").rstrip("/"), "?"),
                package.index_url or "",
            )
        )
        pick = PackagePick.of(requirement, package, index, index_url, chain, attempt.evidence)
        files = self.lines.files_of(package, attempt)
        if yanked := yank_of(files, package.version):
            pick = replace(pick, yanked=yanked)
            notes.append(
                f"{package.name} {package.version} is yanked on {index} ({yanked}); "
                "the exact pin takes it, as PEP 592 allows"
            )
        target = self.target
        if pure := pure_among_compiled(files, package.version, target.python, target.platform):
            pick = replace(pick, pure_wheel=pure.filename)
            notes.append(
                f"{package.name} {package.version} is a pure-Python wheel ({pure.filename}), "
                "unlike the project's other versions: it carries no compiled code of its own"
            )
        return pick


def named_release(
    attempt: Attempt, live: LiveReleases, runs_fully: Callable[[str], bool] | None = None
) -> str:
    """The toolkit release a plan names: the one the closure pins, else the line's newest
    that the driver runs fully (``runs_fully``: 12.8.1 for driver 570.124.06, not 12.8.2,
    whose PTX that driver cannot JIT), else the line's newest."""
    pinned = next((e.release for e in attempt.evidence.values() if e.release), None)
    if pinned:
        return pinned
    releases = [v for v in live.versions if release_line(v) == attempt.line]
    fully = next((v for v in releases if runs_fully is not None and runs_fully(v)), None)
    return fully or (releases[0] if releases else f"{line_text(attempt.line)}.0")
