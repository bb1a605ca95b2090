"""One line's resolution: the requests held to one CUDA line, read back, again if needed.

:meth:`LineResolver.attempt` takes a set of requirements and a line: it writes the
local index of the projects the table routes to that line's indexes, runs uv with
the line's constraints, reads every resolved package's evidence back, reads silent
requested wheels deeper, and excludes what contradicts the line and resolves again
(rounds bounded), answering an :class:`Attempt` that either holds a closure on the
line or says why there is none.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from cudaup.core.platforms import FACTS, NEWEST_GLIBC_MINOR
from cudaup.errors import CudaupError
from cudaup.net.http import TTL
from cudaup.plan.closure import Closure, Resolved
from cudaup.plan.indexes import Index, load_indexes
from cudaup.plan.line_failure import (
    CONTRADICTION_ROUNDS,
    EXTRA_ROUNDS,
    Lacking,
    contradictions_given_up,
    extras_given_up,
    learnt_words,
    no_resolution,
    one_more_gives_up,
)
from cudaup.plan.lines import (
    Evidence,
    Line,
    line_constraints,
    line_tag,
)
from cudaup.plan.next_round import NextRound
from cudaup.plan.read_back import read_back, read_next_builds
from cudaup.plan.result import Exclusion, Origin, PlanTarget
from cudaup.plan.survey import (
    Page,
    best_wheel,
    fetch_pages,
    pins_exactly,
    union_pages,
    unreachable_error,
)
from cudaup.plan.uv import (
    CompileAnswer,
    CompileJob,
    Stoppable,
    UvRunner,
    pages_identity,
    write_local_index,
)
from cudaup.plan.window import Turn
from cudaup.resolve.pypi import DistFile, PackageIndex
from cudaup.util.parallel import Stop, map_concurrently

if TYPE_CHECKING:
    from cudaup.plan.planner import Planner

#: How many versions lacking a requested extra are read at once per round.
EXTRA_BATCH = 16


def uv_platform(platform: str) -> str:
    """uv's ``--python-platform`` for a plan: the newest glibc whose wheels a plan accepts."""
    facts = FACTS[platform]  # type: ignore[index]
    if facts.system == "Linux" and facts.wheel_arch in {"x86_64", "aarch64"}:
        return f"{facts.wheel_arch}-manylinux_2_{NEWEST_GLIBC_MINOR}"
    return facts.uv_platform


@dataclass
class Attempt:
    """One resolution of a set of requirements on one line."""

    line: Line
    closure: Closure | None = None
    evidence: dict[str, Evidence] = field(default_factory=dict)
    origins: dict[str, Origin] = field(default_factory=dict)
    pages: dict[str, tuple[DistFile, ...]] = field(default_factory=dict)
    job: CompileJob | None = None
    failure: Exclusion | None = None
    #: the line's side of the search's gate: its read-back's fetches wait for their turn
    turn: Turn | None = field(default=None, compare=False, repr=False)

    @property
    def ok(self) -> bool:
        return self.closure is not None and self.failure is None


class LineResolver:
    """What every line's resolution of one plan shares: pages read, uv, wheel facts."""

    def __init__(
        self,
        planner: Planner,
        target: PlanTarget,
        tagged: list[Index],
        flat: tuple[str, tuple[str, ...]],
        work: Path,
    ) -> None:
        self.settings, self.http, self.facts = planner.settings, planner.http, planner.facts
        self.target, self.tagged, self.work = target, tagged, work
        self.default_url, self.extra_flat = flat
        # Whether a project is a CUDA project at all is the whole table's word, --index or not.
        self.every_tagged = [
            i for i in load_indexes(self.settings.user_indexes).values() if not i.flat
        ]
        self.runner = UvRunner(
            planner.cache.plan_dir("uv"),
            work,
            self.settings.timeout,
            answers=planner.cache.plan_dir("resolutions"),
            answer_ttl=TTL["index"],
        )
        self.pages: dict[tuple[str, str, str], Page] = {}
        self.consulted: list[Page] = []
        self.majors: set[int] = set()
        #: Projects held to the line by their version (``cuda-bindings==13.0.*``).
        self.held: tuple[str, ...] = ()
        #: Installed versions kept where the resolution allows (``upgrade``).
        self.preferences: tuple[str, ...] = ()
        #: ``--pre``: the resolver may take pre-releases.
        self.pre = False
        self.cancel = Stop()  # a stopped line's range reads are cut off at once
        self._lock = threading.Lock()
        self._serial = 0
        self._unasked: dict[tuple[str, str], Future[Page]] = {}

    def keep(self, pages: Sequence[Page]) -> None:
        with self._lock:
            for page in pages:
                key = (page.index, page.tag, page.project)
                if key not in self.pages:
                    self.pages[key] = page
                    self.consulted.append(page)

    def _route(self, project: str, line: Line) -> Index | None:
        """The per-line index a project is taken from on ``line`` (table order), if any."""
        tag = line_tag(line)
        return next((i for i in self.tagged if i.serves(project) and tag in i.urls), None)

    def _with_companions(self, routed: set[str], line: Line) -> set[str]:
        """``routed`` and what the indexes they come from alone publish: a dependency on
        it (nightly torch on pytorch-triton) resolves from nowhere else."""
        used = {id(index) for p in routed if (index := self._route(p, line)) is not None}
        return routed | {
            canonicalize_name(project)
            for index in self.tagged
            if id(index) in used
            for project in index.only
            if self._route(project, line) is index
        }

    def _line_pages(self, line: Line, projects: set[str]) -> dict[str, Page]:
        tag = line_tag(line)
        wanted = []
        for project in sorted(projects):
            index = self._route(project, line)
            if index is not None and (index.name, tag, project) not in self.pages:
                wanted.append((index, tag, project))
        fetched = fetch_pages(self.http, wanted, self.settings.workers)
        self.keep(fetched)
        if error := unreachable_error(fetched):
            raise error
        found = {}
        for project in projects:
            index = self._route(project, line)
            if index is not None:
                found[project] = self.pages[(index.name, tag, project)]
        return found

    def _forbidden(self, line: Line, pages: dict[str, Page]) -> list[str]:
        """Projects an index alone publishes, on a line it has no build of them for."""
        tag = line_tag(line)
        forbidden = []
        for index in self.tagged:
            for project in map(canonicalize_name, index.only):
                page = pages.get(project)
                if tag not in index.urls or (page is not None and page.files is None):
                    forbidden.append(f"{project}<0")
        return forbidden

    def attempt(
        self,
        requirements: tuple[Requirement, ...],
        line: Line,
        *,
        offline_first: bool = False,
        turn: Turn | None = None,
    ) -> Attempt:
        """The stack resolved on ``line`` and read back; with ``turn``, a fresh uv run
        waits while a newer line may answer without one (:mod:`cudaup.plan.window`)."""
        routed: set[str] = {
            canonicalize_name(r.name) for r in requirements if self._route(r.name, line)
        }
        routed = self._with_companions(routed, line)
        first_pages = routed  # a resolution from these alone refutes the conflict proof
        learnt: list[Evidence] = []
        lacking: list[Lacking] = []
        attempt = Attempt(line)
        # Each round either takes a newly met project from its per-line index, excludes
        # versions that lack a requested extra, or excludes what contradicts the line; a
        # project is tried in a few versions at most.
        rounds = len(self.tagged) * 8 + CONTRADICTION_ROUNDS + EXTRA_ROUNDS + 2
        ahead: NextRound | None = None
        # A build of another line is answered by asking for versions on the line's side of
        # it (Evidence.exclusion): uv, settling one package first, backtracks another, even
        # a request, to old builds; if nothing resolves so, each build is left out alone.
        toward: Line | None = line
        rounds_of: dict[str, int] = {}  # the rounds that excluded each project, toward the line
        reading: list[Future[None]] = []  # the wheels the next rounds most likely take

        def given_up(fresh: Sequence[Evidence], learnt: Sequence[Evidence]) -> bool:
            counted = {p: rounds_of.get(p, 0) + 1 for p in {e.project for e in fresh}}
            return contradictions_given_up(fresh, learnt, counted if toward is not None else None)

        def last_build(project: str) -> bool:
            return one_more_gives_up(project, learnt, rounds_of if toward is not None else None)

        def exclusions_after(fresh: Sequence[Evidence]) -> list[str]:
            return [
                *(e.exclusion(toward) for e in [*learnt, *fresh]),
                *(f"{x.project}!={x.version}" for x in lacking),
            ]

        def start_next(crossed: list[Evidence]) -> None:
            # The read-back found ``crossed`` by name and reads wheels on: the round they
            # lead to if the wheels find nothing more starts now, beside the reading.
            nonlocal ahead
            fresh = _unlearnt(crossed, learnt)
            if not fresh or given_up(fresh, [*learnt, *fresh]):
                return  # the rounds would stop here: nothing to start
            if turn is not None and turn.held():
                return  # its uv run would wait for a newer line, as the round's would
            round_ = partial(self._round, requirements, line, routed, offline_first=offline_first)
            ahead = NextRound.start(exclusions_after(fresh), round_)

        try:
            for _round in range(rounds):
                self.check_cancelled()
                exclusions = exclusions_after(())
                if ahead is not None and ahead.exclusions == exclusions:
                    attempt, answer = ahead.result()  # this very round, started earlier
                else:
                    attempt, answer = self._round(
                        requirements, line, routed, exclusions, offline_first, turn=turn
                    )
                attempt.turn = turn
                if ahead is not None:
                    ahead.discard()  # used, or the read-back found more: not this round
                    ahead = None
                if answer.closure is None:
                    if toward is not None:
                        toward = None
                        if exclusions_after(()) != exclusions:
                            continue  # the same round, each build excluded alone
                    attempt.failure = no_resolution(line, answer, learnt, lacking)
                    return attempt
                if turn is not None:
                    turn.resolved(refutes=routed == first_pages)
                newly = {
                    p.name
                    for p in answer.closure
                    if p.name not in routed and self._route(p.name, line)
                }
                if newly:
                    routed = self._with_companions(routed | newly, line)
                    continue
                missing = self._lacking_extras(requirements, attempt)
                if missing:
                    attempt.failure = extras_given_up(line, lacking, missing)
                    if attempt.failure is not None:
                        return attempt
                    lacking += missing
                    continue
                found = read_back(self, attempt, requirements, start_next, last_build)
                if not found:
                    return attempt
                fresh = _unlearnt(found, learnt)
                learnt += fresh
                if given_up(fresh, learnt):
                    break
                for project in {e.project for e in fresh}:
                    rounds_of[project] = rounds_of.get(project, 0) + 1
                reading += read_next_builds(self, attempt, requirements, learnt)
        finally:
            if ahead is not None:
                ahead.discard()  # the rounds ended without it
            for future in reading:
                future.result()  # no read outlives its line's attempt
        attempt.failure = Exclusion(
            line, "inconsistent", learnt_words(learnt), tuple(sorted({e.project for e in learnt}))
        )
        return attempt

    def check_cancelled(self) -> None:
        """Raise once the search the attempts serve is over: their answers are not wanted
        (a round not started, a wheel not read: the search waits for its lines to end)."""
        if self.cancel.is_set():
            raise CudaupError("the search for a line was cancelled")

    def conflict_job(
        self, requirements: tuple[Requirement, ...], lines: Sequence[Line]
    ) -> tuple[CompileJob, str] | None:
        """The one resolution (and its pages' identity) whose failure proves that
        ``requirements`` resolve on none of ``lines``; None when the proof cannot be made.

        Why one resolution proves it: a line's first round takes each routed project
        (the requested ones and their companions) from its per-line pages alone, every
        other project from the flat indexes, under constraints and exclusions that only
        narrow what it may take; a first round that fails ends the line's attempt.  This
        resolution takes the routed projects from the union of every line's pages and
        their flat pages, the rest from the same flat indexes, with no constraint: each
        line's first round picks from a subset of what it may pick, file by file the same
        bytes (:func:`union_pages`), so when uv finds nothing here it finds nothing on any
        line.  The converse does not hold: success here says nothing of the lines."""
        sources: list[dict[str, tuple[DistFile, ...]]] = []
        routed: set[str] = set()
        for line in lines:
            projects: set[str] = {
                canonicalize_name(r.name) for r in requirements if self._route(r.name, line)
            }
            pages = self._line_pages(line, self._with_companions(projects, line))
            sources.append({p: page.files for p, page in pages.items() if page.files is not None})
            routed |= set(pages)
        # A line that does not route a project (or whose index lacks it) takes it from the
        # flat indexes: the survey read their pages of the requested projects, the
        # companions' are read here.
        flat = [page for (_, tag, project), page in list(self.pages.items()) if tag == ""]
        unread = sorted(routed - {page.project for page in flat})
        urls = (self.default_url, *self.extra_flat)
        wanted = [(Index(url, {"": url}, ("*",)), "", p) for url in urls for p in unread]
        flat += fetch_pages(self.http, wanted, self.settings.workers)
        if unreachable_error(flat):
            return None
        sources += [
            {page.project: page.files}
            for page in flat
            if page.project in routed and page.files is not None
        ]
        union = union_pages(sources)
        if union is None:
            return None
        local: tuple[str, ...] = ()
        if union:
            local = (write_local_index(self.work / "every-line", union, "the per-line indexes"),)
        job = CompileJob(
            tuple(str(r) for r in requirements),
            (),
            self.target.python,
            uv_platform(self.target.platform),
            local + self.extra_flat,
            self.default_url,
            refresh=self.settings.refresh,
            interpreter=self.target.interpreter,
            prerelease=self.pre,
        )
        return job, pages_identity(union)

    def _round(
        self,
        requirements: tuple[Requirement, ...],
        line: Line,
        routed: set[str],
        exclusions: list[str],
        offline_first: bool,
        turn: Turn | None = None,
        stoppable: Stoppable | None = None,
    ) -> tuple[Attempt, CompileAnswer]:
        """One resolution on ``line``: the ``routed`` projects' per-line pages, the line's
        constraints and ``exclusions``, uv's answer."""
        pages = self._line_pages(line, routed)
        present = {p: page.files for p, page in pages.items() if page.files is not None}
        job = self._job(requirements, line, present, [*self._forbidden(line, pages), *exclusions])
        answer = self._compile(job, offline_first, pages_identity(present), turn, stoppable)
        origins = {p: Origin(pages[p].index, pages[p].url, line) for p in present}
        return Attempt(line, answer.closure, origins=origins, pages=present, job=job), answer

    def _job(
        self,
        requirements: tuple[Requirement, ...],
        line: Line,
        present: dict[str, tuple[DistFile, ...]],
        exclusions: list[str],
    ) -> CompileJob:
        """One round's resolution: the requests held to ``line``, the projects ``present``
        on its per-line indexes taken from a local index of them alone."""
        local = None
        if present:
            with self._lock:
                self._serial += 1
                folder = self.work / f"{line_tag(line)}-{self._serial}"
            local = write_local_index(folder, present, f"the {line_tag(line)} indexes")
        return CompileJob(
            tuple(str(r) for r in requirements),
            tuple(line_constraints(line, self.majors, exclusions, self.held)),
            self.target.python,
            uv_platform(self.target.platform),
            ((local,) if local else ()) + self.extra_flat,
            self.default_url,
            refresh=self.settings.refresh,
            interpreter=self.target.interpreter,
            preferences=self.preferences,
            prerelease=self.pre,
        )

    def _lacking_extras(
        self, requirements: tuple[Requirement, ...], attempt: Attempt
    ) -> list[Lacking]:
        """Requested projects resolved in a version without an extra they were asked with
        (uv only warns: ``jax[cuda13]`` took jax 0.6.2, which has no ``cuda13``), and the
        next older versions the specifier allows that lack it too, read at once."""
        closure = attempt.closure
        assert closure is not None
        found: list[Lacking] = []
        for requirement in requirements:
            asked = closure.get(requirement.name) if requirement.extras else None
            if asked is not None:
                found += self._without_extras(requirement, asked, attempt)
        return found

    def _without_extras(
        self, requirement: Requirement, asked: Resolved, attempt: Attempt
    ) -> list[Lacking]:
        """The resolved version of ``requirement`` and the older ones it allows, newest
        first, that lack one of its extras (up to the first that has them all)."""
        wheels = self._wheels_at_and_below(requirement, asked, attempt)
        index = PackageIndex(self.http, asked.index_url or "")
        metadata = map_concurrently(index.metadata, wheels, self.settings.workers)
        wanted = sorted({canonicalize_name(e) for e in requirement.extras})
        found: list[Lacking] = []
        for position, (wheel, meta) in enumerate(zip(wheels, metadata, strict=True)):
            provided = {canonicalize_name(e) for e in meta.provides_extra or ()}
            absent = [e for e in wanted if e not in provided]
            if not absent:
                break  # the resolver may take this one
            found.append(
                Lacking(asked.name, str(wheel.version), tuple(absent), first=position == 0)
            )
        return found

    def _wheels_at_and_below(
        self, requirement: Requirement, asked: Resolved, attempt: Attempt
    ) -> list[DistFile]:
        """The target's wheel of ``asked``'s version and of the next older versions the
        specifier allows (:data:`EXTRA_BATCH` at most), up to one with no such wheel."""
        files = self.files_of(asked, attempt)
        versions = sorted(
            {
                f.version
                for f in files
                if f.version is not None
                and f.version <= asked.version
                and requirement.specifier.contains(f.version, prereleases=True)
                and (not f.yanked or pins_exactly(requirement, f))
            },
            reverse=True,
        )[:EXTRA_BATCH]
        wheels = []
        for version in versions:
            wheel = best_wheel(files, version, self.target.python, self.target.platform)
            if wheel is None:
                break  # no wheel to read: what it provides is not known, so it stays
            wheels.append(wheel)
        return wheels

    def _compile(
        self,
        job: CompileJob,
        offline_first: bool,
        identity: str,
        turn: Turn | None = None,
        stoppable: Stoppable | None = None,
    ) -> CompileAnswer:
        if offline_first:
            # The plan's own resolutions just refreshed these pages in uv's cache.  Offline,
            # uv takes what its cache holds without saying a newer version exists: a
            # resolution found is a true witness (every file is a published one), a
            # failure proves nothing, so only the network may say "does not resolve".
            offline = replace(job, offline=True)
            answer = self.runner.compile(offline, identity=identity, stoppable=stoppable)
            if answer.ok:
                return answer
        if turn is not None and not self.runner.has_answer(job, identity):
            turn.before_uv()
        return self.runner.compile(job, identity=identity, stoppable=stoppable)

    def files_of(self, package: Resolved, attempt: Attempt) -> Sequence[DistFile]:
        """The files of ``package``'s project on the index it was resolved from."""
        if package.name in attempt.pages:
            return attempt.pages[package.name]
        url = (package.index_url or "").rstrip("/")
        with self._lock:
            known = list(self.pages.items())  # other lines' threads add pages meanwhile
        for (_index, tag, project), page in known:
            if project == package.name and tag == "" and page.url.rstrip("/") == url:
                return page.files or ()
        if not url.startswith(("https://", "http://")):
            return ()
        # A package nobody asked for (what a meta-package pulls in): its page, once for
        # every line of the plan; the lines that ask while it is read wait for it (a
        # page such as numpy's takes half a second to parse, even from the cache).
        with self._lock:
            reading = self._unasked.get((url, package.name))
            first = reading is None
            if reading is None:
                reading = self._unasked[(url, package.name)] = Future()
        if first:
            try:
                index = Index(url, {"": url}, ("*",))
                # uv read it through the memo for this very resolution: not asked again
                memo = self.runner.memo
                read = memo.page_read if memo is not None else None
                wanted = [(index, "", package.name)]
                fetched = fetch_pages(self.http, wanted, self.settings.workers, read)
                self.keep(fetched)
                reading.set_result(fetched[0])
            except BaseException as exc:
                reading.set_exception(exc)
                raise
        page = reading.result()
        if error := unreachable_error([page]):
            raise error
        return page.files or ()


def _unlearnt(found: Sequence[Evidence], learnt: Sequence[Evidence]) -> list[Evidence]:
    """What ``found`` excludes that ``learnt`` does not yet."""
    known = {e.exclusion() for e in learnt}
    return [e for e in found if e.exclusion() not in known]
