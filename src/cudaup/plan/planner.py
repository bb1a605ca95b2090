"""``cudaup plan``: the newest CUDA line on which the whole stack resolves, and why.

For each candidate line, newest first (the lines of the live release list, or
the one ``--cuda`` names), that the driver and the GPUs accept, uv resolves
the requested packages for the target Python and platform, held to that line
by constraints (:mod:`cudaup.plan.lines`), with the per-line indexes' projects
taken from a local index that holds only them (:mod:`cudaup.plan.uv`).  The
resolved closure is then read back: every package's CUDA evidence must fit the
line.  A requested package whose wheel names no CUDA dependency but ships
shared objects is read deeper (:mod:`cudaup.plan.wheels`); a package that
contradicts the line (``sgl-kernel 0.3.21`` linking ``libcudart.so.12`` on
13.0) is excluded and the line resolved again, a few rounds at most.  Several
lines resolve at once (a window), the answer being the newest that succeeds.

When no line fits, each package is resolved alone on every line, so the error
names each one's lines and why they do not meet.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from cudaup.config import Settings
from cudaup.core.compat import CompatTable
from cudaup.core.platforms import FACTS, NEWEST_GLIBC_MINOR, marker_environment
from cudaup.errors import (
    CudaupError,
    OfflineError,
    ReleaseNotFoundError,
    UsageError,
)
from cudaup.net.http import TTL, HttpClient
from cudaup.plan.closure import Closure, Resolved
from cudaup.plan.indexes import Index, load_indexes
from cudaup.plan.lines import (
    TOOLKIT,
    Evidence,
    Line,
    contradictions,
    evidence_of,
    library_evidence,
    line_constraints,
    line_tag,
    line_text,
    release_line,
)
from cudaup.plan.result import (
    Alone,
    Exclusion,
    Origin,
    PackagePick,
    PlanResult,
    Target,
    explain,
)
from cudaup.plan.survey import (
    Page,
    best_wheel,
    check_requested,
    fetch_pages,
    is_pure,
    unreachable_error,
)
from cudaup.plan.uv import (
    CompileAnswer,
    CompileJob,
    UvRunner,
    find_uv,
    pages_identity,
    write_local_index,
)
from cudaup.plan.wheels import WheelFacts
from cudaup.resolve.pypi import DistFile
from cudaup.resolve.releases import LiveReleases, learn_releases, live_releases
from cudaup.util.parallel import map_concurrently

#: Versions of one project excluded for contradicting a line before the line is given up.
CONTRADICTION_ROUNDS = 3
#: Lines resolved at the same time (uv spends its time waiting on the network, not the CPU).
WINDOW = 4


def python_version(text: str | None) -> tuple[int, int]:
    """``--python 3.12`` or a path to an interpreter (default: ``python3`` on PATH)."""
    if text and re.fullmatch(r"\d+\.\d+", text):
        major, minor = text.split(".")
        return int(major), int(minor)
    interpreter = text or shutil.which("python3") or sys.executable
    try:
        output = subprocess.run(
            [interpreter, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout.strip()  # fmt: skip
        major, minor = output.split(".")
        return int(major), int(minor)
    except (OSError, subprocess.SubprocessError, ValueError):
        raise UsageError(
            f"cannot run {interpreter} to learn its version; pass --python X.Y"
        ) from None


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

    @property
    def ok(self) -> bool:
        return self.closure is not None and self.failure is None


class Planner:
    def __init__(self, settings: Settings, http: HttpClient | None = None) -> None:
        self.settings = settings
        # Fewer retries than downloads: an index that is down should be reported quickly.
        self.http = http or HttpClient(settings, retries=1)
        self.cache = settings.cache_root / "plan"
        self.facts = WheelFacts(self.http, self.cache / "wheels")

    def plan(
        self,
        requirements: Sequence[Requirement],
        indexes: dict[str, Index],
        target: Target,
        *,
        line: Line | None = None,
        compat: CompatTable | None = None,
    ) -> PlanResult:
        if self.settings.offline:
            raise OfflineError("plan reads the package indexes live; --offline cannot answer it")
        with tempfile.TemporaryDirectory(prefix="cudaup-plan-") as work:
            run = _Run(self, tuple(requirements), indexes, target, Path(work))
            return run.plan(line, compat)


class _Run:
    """The state of one plan: pages read, toolkit pins, uv processes."""

    def __init__(
        self,
        planner: Planner,
        requirements: tuple[Requirement, ...],
        indexes: dict[str, Index],
        target: Target,
        work: Path,
    ) -> None:
        self.planner, self.settings, self.http = planner, planner.settings, planner.http
        self.requirements, self.indexes, self.target, self.work = (
            requirements,
            indexes,
            target,
            work,
        )
        flat = [i for i in indexes.values() if i.flat]
        if not flat:
            raise UsageError(
                "--index names only per-line indexes; add pypi (or a mirror URL) for the "
                "packages they do not publish"
            )
        default = next((i for i in flat if i.name == "pypi"), flat[-1])
        self.default_url = default.urls[""]
        self.extra_flat = tuple(i.urls[""] for i in flat if i is not default)
        self.flat_names = {i.urls[""].rstrip("/"): i.name for i in flat}
        self.tagged = [i for i in indexes.values() if not i.flat]
        # Whether a project is a CUDA project at all is the whole table's word, --index or not.
        self.every_tagged = [
            i for i in load_indexes(self.settings.user_indexes).values() if not i.flat
        ]
        self.runner = UvRunner(
            planner.cache / "uv",
            work,
            self.settings.timeout,
            answers=planner.cache / "resolutions",
            answer_ttl=TTL["index"],
        )
        self.pages: dict[tuple[str, str, str], Page] = {}
        self.consulted: list[Page] = []
        self._lock = threading.Lock()
        self.majors: set[int] = set()
        self._cancel = threading.Event()
        self._serial = 0

    # -- the plan --------------------------------------------------------------
    def plan(self, wanted: Line | None, compat: CompatTable | None) -> PlanResult:
        for requirement in self.requirements:
            if requirement.url:
                raise UsageError(
                    f"{requirement} is a direct reference; plan resolves from package indexes"
                )
        find_uv()
        self._survey()
        # No retries for the release list: an unreachable NVIDIA host is a note, answered at once.
        live = live_releases(self.settings, HttpClient(self.settings, retries=0))
        table = learn_releases(compat or CompatTable.load(), live)
        lines = live.lines()
        self.majors = {line[0] for line in lines}
        if wanted is not None:
            if wanted not in lines:
                raise ReleaseNotFoundError(
                    f"no CUDA {line_text(wanted)} release is known ({live.described})"
                )
            lines = [wanted]
        exclusions: list[Exclusion] = []
        candidates: list[Line] = []
        for line in lines:
            excluded = self._precheck(line, live, table)
            if excluded is None:
                candidates.append(line)
            else:
                exclusions.append(excluded)
        chosen, attempts = self._search(candidates, exclusions, live, table)
        if chosen is None:
            raise explain(
                self.requirements,
                lines,
                exclusions,
                self._alone(lines, attempts) if lines else [],
                self.target,
                live,
                table,
            )
        return self._result(chosen, exclusions, live, table)

    def _survey(self) -> None:
        wanted = [
            (index, tag, canonicalize_name(r.name))
            for r in self.requirements
            for index in self.indexes.values()
            if index.serves(r.name)
            for tag in index.urls
        ]
        pages = fetch_pages(self.http, wanted, self.settings.workers)
        self._keep(pages)
        if error := unreachable_error(pages):
            raise error
        environment = marker_environment(self.target.platform, self.target.python)
        for requirement in self.requirements:
            if requirement.marker is None or requirement.marker.evaluate(environment):
                check_requested(requirement, pages, self.target.python, self.target.platform)

    def _keep(self, pages: Sequence[Page]) -> None:
        with self._lock:
            for page in pages:
                key = (page.index, page.tag, page.project)
                if key not in self.pages:
                    self.pages[key] = page
                    self.consulted.append(page)

    def _precheck(self, line: Line, live: LiveReleases, table: CompatTable) -> Exclusion | None:
        """Exclusions that need no resolution: the driver, the GPUs, an index's lines."""
        target = self.target
        releases = [r for r in live.versions if release_line(r) == line]
        if target.driver is not None:
            verdicts = [table.check(target.driver, r, reported=target.reported) for r in releases]
            if verdicts and all(v.verdict in {"no", "unknown"} for v in verdicts):
                newest = verdicts[0]
                if newest.verdict == "no":
                    message = (
                        f"driver {target.driver} cannot run CUDA {newest.release}: {newest.reason}"
                    )
                else:
                    message = f"cudaup cannot tell whether driver {target.driver} runs it: {newest.reason}"
                return Exclusion(line, "driver", message)
        for gpu in target.gpus:
            arch = table.architecture(gpu.compute_capability or "")
            if arch is not None and releases and not arch.supported_by(releases[0]):
                return Exclusion(
                    line,
                    "gpu",
                    f"cannot target GPU {gpu.name} (compute capability {gpu.compute_capability})",
                )
        tag = line_tag(line)
        for requirement in self.requirements:
            for index in self.tagged:
                if index.serves(requirement.name) and index.publishes_alone(requirement.name):
                    page = self.pages.get((index.name, tag, canonicalize_name(requirement.name)))
                    if tag not in index.urls or page is None or page.files is None:
                        return Exclusion(
                            line,
                            "index",
                            f"{requirement.name}: {index.name} publishes no {tag} build",
                            (canonicalize_name(requirement.name),),
                        )
        return None

    # -- searching lines ----------------------------------------------------------
    def _search(
        self,
        candidates: list[Line],
        exclusions: list[Exclusion],
        live: LiveReleases,
        table: CompatTable,
    ) -> tuple[Attempt | None, dict[Line, Attempt]]:
        attempts: dict[Line, Attempt] = {}
        futures: dict[Line, Future[Attempt]] = {}
        queue = list(candidates)
        with ThreadPoolExecutor(max_workers=WINDOW) as pool:
            try:
                for line in candidates:
                    while queue and sum(not f.done() for f in futures.values()) < WINDOW:
                        ahead = queue.pop(0)
                        futures[ahead] = pool.submit(self._attempt, self.requirements, ahead)
                    attempt = futures[line].result()
                    attempts[line] = attempt
                    if attempt.ok:
                        refused = self._named_release_check(attempt, live, table)
                        if refused is None:
                            return attempt, attempts
                        exclusions.append(refused)
                    elif attempt.failure is not None:
                        exclusions.append(attempt.failure)
                return None, attempts
            finally:
                self._cancel.set()
                self.runner.cancel()
                for future in futures.values():
                    future.cancel()
                pool.shutdown(wait=True)
                self._cancel.clear()
                self.runner.resume()

    def _named_release_check(
        self, attempt: Attempt, live: LiveReleases, table: CompatTable
    ) -> Exclusion | None:
        """The driver check on the release the plan names (pinned, or the line's newest)."""
        release = named_release(attempt, live)
        if self.target.driver is None:
            return None
        verdict = table.check(self.target.driver, release, reported=self.target.reported)
        if verdict.verdict == "no":
            return Exclusion(
                attempt.line,
                "driver",
                f"driver {self.target.driver} cannot run CUDA {release}: {verdict.reason}",
            )
        if verdict.verdict == "unknown":
            return Exclusion(
                attempt.line,
                "driver",
                f"cudaup cannot tell whether driver {self.target.driver} runs CUDA {release}: {verdict.reason}",
            )
        return None

    def _alone(self, lines: list[Line], attempts: dict[Line, Attempt]) -> list[Alone]:
        """Each requested package resolved alone on every line (for the no-line error);
        with one package, the search's own attempts are reused."""
        pairs = [
            (r, line)
            for r in self.requirements
            for line in lines
            if len(self.requirements) > 1 or line not in attempts
        ]
        results = map_concurrently(
            lambda pair: self._attempt((pair[0],), pair[1], offline_first=True), pairs, WINDOW
        )
        outcome: dict[tuple[str, Line], Attempt] = {
            (str(r), line): a for (r, line), a in zip(pairs, results, strict=True)
        }
        if len(self.requirements) == 1:
            outcome.update({(str(self.requirements[0]), ln): a for ln, a in attempts.items()})
        alone = []
        for requirement in self.requirements:
            mine = [(ln, outcome[(str(requirement), ln)]) for ln in lines]
            failures = [a.failure for _, a in mine if a.failure is not None]
            alone.append(
                Alone(
                    str(requirement),
                    [ln for ln, a in mine if a.ok],
                    failures[0] if failures else None,
                )
            )
        return alone

    # -- one line ---------------------------------------------------------------
    def _route(self, project: str, line: Line) -> Index | None:
        """The per-line index a project is taken from on ``line`` (table order), if any."""
        tag = line_tag(line)
        return next((i for i in self.tagged if i.serves(project) and tag in i.urls), None)

    def _line_pages(self, line: Line, projects: set[str]) -> dict[str, Page]:
        tag = line_tag(line)
        wanted = []
        for project in sorted(projects):
            index = self._route(project, line)
            if index is not None and (index.name, tag, project) not in self.pages:
                wanted.append((index, tag, project))
        fetched = fetch_pages(self.http, wanted, self.settings.workers)
        self._keep(fetched)
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

    def _attempt(
        self, requirements: tuple[Requirement, ...], line: Line, *, offline_first: bool = False
    ) -> Attempt:
        routed: set[str] = {
            canonicalize_name(r.name) for r in requirements if self._route(r.name, line)
        }
        learnt: list[Evidence] = []
        attempt = Attempt(line)
        # Each round either takes a newly met project from its per-line index or excludes
        # what contradicts the line; a project is tried in a few versions at most.
        for _round in range(len(self.tagged) * 8 + CONTRADICTION_ROUNDS + 1):
            if self._cancel.is_set():
                raise CudaupError("the search for a line was cancelled")
            pages = self._line_pages(line, routed)
            present = {p: page.files for p, page in pages.items() if page.files is not None}
            origins = {p: Origin(pages[p].index, pages[p].url, line) for p in present}
            local = None
            if present:
                with self._lock:
                    self._serial += 1
                    folder = self.work / f"{line_tag(line)}-{self._serial}"
                local = write_local_index(folder, present, f"the {line_tag(line)} indexes")
            exclusions = [*self._forbidden(line, pages), *(e.exclusion() for e in learnt)]
            job = CompileJob(
                tuple(str(r) for r in requirements),
                tuple(line_constraints(line, self.majors, exclusions)),
                self.target.python,
                uv_platform(self.target.platform),
                ((local,) if local else ()) + self.extra_flat,
                self.default_url,
                refresh=self.settings.refresh,
            )
            answer = self._compile(job, offline_first, pages_identity(present))
            attempt = Attempt(line, answer.closure, origins=origins, pages=present, job=job)
            if answer.closure is None:
                if learnt:
                    attempt.failure = Exclusion(
                        line,
                        "inconsistent",
                        f"{_learnt(learnt)}; without them there is no resolution",
                        tuple(sorted({e.project for e in learnt})),
                    )
                else:
                    reason = answer.reason or "uv found no resolution"
                    attempt.failure = Exclusion(line, "resolution", reason)
                return attempt
            newly = {
                p.name for p in answer.closure if p.name not in routed and self._route(p.name, line)
            }
            if newly:
                routed |= newly
                continue
            found = self._read_back(attempt, requirements, local)
            if not found:
                return attempt
            fresh = [e for e in found if e.exclusion() not in {k.exclusion() for k in learnt}]
            learnt += fresh
            tried = [sum(k.project == e.project for k in learnt) for e in fresh]
            if not fresh or max(tried) >= CONTRADICTION_ROUNDS:
                break
        attempt.failure = Exclusion(
            line, "inconsistent", _learnt(learnt), tuple(sorted({e.project for e in learnt}))
        )
        return attempt

    def _compile(self, job: CompileJob, offline_first: bool, identity: str) -> CompileAnswer:
        if offline_first:
            # The plan's own resolutions just refreshed these pages in uv's cache.
            answer = self.runner.compile(replace(job, offline=True), identity=identity)
            if answer.ok or not answer.offline_miss:
                return answer
        return self.runner.compile(job, identity=identity)

    def _read_back(
        self, attempt: Attempt, requirements: tuple[Requirement, ...], local: str | None
    ) -> list[Evidence]:
        """Every package's evidence; the ones that contradict the attempt's line."""
        closure, line = attempt.closure, attempt.line
        assert closure is not None
        for package in closure:
            origin = None
            # The one file index a job names is its local per-line index (a kept answer
            # names the path an earlier plan used: the pages, not the path, are its key).
            if local and package.index_url and package.index_url.startswith("file:"):
                origin = attempt.origins.get(package.name)
            found = evidence_of(
                package.name,
                package.version,
                origin.line if origin else None,
                origin.url if origin else None,
            )
            if found is not None:
                attempt.evidence[package.name] = found
        older: list[Evidence] = []
        for requirement in requirements:
            asked = closure.get(requirement.name)
            if asked is None or asked.name in attempt.evidence:
                continue
            if any(c.name in attempt.evidence for c in closure.children(asked.name)):
                continue
            deeper = self._read_deeper(asked, attempt)
            if deeper is not None:
                attempt.evidence[asked.name] = deeper
                if not deeper.fits(line):
                    older += self._older_builds(requirement, asked, attempt)
        return contradictions(attempt.evidence.values(), line) + older

    def _read_deeper(self, package: Resolved, attempt: Attempt) -> Evidence | None:
        """A silent requested wheel: the CUDA runtime its shared objects link, or, for a
        project a CUDA index publishes, the finding that it is a CPU-only build."""
        files = self._files_of(package, attempt)
        wheel = best_wheel(files, package.version, self.target.python, self.target.platform)
        if wheel is None or is_pure(wheel):
            return None
        linked = self.planner.facts.libraries(wheel)
        found = library_evidence(package.name, str(package.version), linked.libraries)
        if found is not None:
            return found
        signals = set(attempt.evidence)
        known_cuda = any(i.serves(package.name) for i in self.every_tagged)
        if known_cuda and attempt.closure and attempt.closure.chain(package.name, signals) is None:
            return Evidence.cpu_only(
                package.name,
                str(package.version),
                f"a CPU-only build: {wheel.filename} names no CUDA dependency and links no CUDA "
                f"runtime ({linked.describe()})",
            )
        return None

    def _older_builds(
        self, requirement: Requirement, package: Resolved, attempt: Attempt
    ) -> list[Evidence]:
        """The next older versions of a silent package that contradicts the line, read at
        once (a few at most), so that the next resolution skips them all."""
        files = self._files_of(package, attempt)
        versions = sorted(
            {
                f.version
                for f in files
                if f.version is not None
                and f.version < package.version
                and requirement.specifier.contains(f.version, prereleases=True)
            },
            reverse=True,
        )
        wheels = [
            w
            for v in versions
            if (w := best_wheel(files, v, self.target.python, self.target.platform)) is not None
            and not is_pure(w)
        ][: CONTRADICTION_ROUNDS - 1]
        linked = map_concurrently(self.planner.facts.libraries, wheels, self.settings.workers)
        found = []
        for wheel, libraries in zip(wheels, linked, strict=True):
            version = str(wheel.version)
            evidence = library_evidence(package.name, version, libraries.libraries)
            if evidence is None or evidence.fits(attempt.line):
                break  # the resolver may take this one: stop excluding here
            found.append(evidence)
        return found

    def _files_of(self, package: Resolved, attempt: Attempt) -> Sequence[DistFile]:
        if package.name in attempt.pages:
            return attempt.pages[package.name]
        url = (package.index_url or "").rstrip("/")
        for (_index, tag, project), page in self.pages.items():
            if project == package.name and tag == "" and page.url.rstrip("/") == url:
                return page.files or ()
        return ()

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
        fitting = {n for n, e in attempt.evidence.items() if e.fits(line)}
        exact = {n for n in fitting if attempt.evidence[n].line is not None}
        release = named_release(attempt, live)
        toolkit = closure.get(TOOLKIT)
        notes: list[str] = []
        picks: list[PackagePick] = []
        release_chain: list[Resolved] | None = None
        for requirement in self.requirements:
            package = closure.get(requirement.name)
            if package is None:
                picks.append(PackagePick.absent(requirement))
                continue
            pinning = {n for n in fitting if attempt.evidence[n].release}
            chain = (
                closure.chain(package.name, pinning)
                or closure.chain(package.name, exact)
                or closure.chain(package.name, fitting)
            )
            if toolkit is not None and release_chain is None:
                release_chain = closure.chain(package.name, {TOOLKIT})
            origin = attempt.origins.get(package.name)
            index, index_url = (
                (origin.index, origin.url)
                if origin and package.name in attempt.pages
                else (
                    self.flat_names.get((package.index_url or "").rstrip("/"), "?"),
                    package.index_url or "",
                )
            )
            picks.append(
                PackagePick.of(requirement, package, index, index_url, chain, attempt.evidence)
            )
        if toolkit is not None:
            path = " → ".join(str(p) for p in release_chain) if release_chain else str(toolkit)
            release_reason = f"{path} pins it"
        else:
            release_reason = f"the newest {line_text(line)} release in {live.described}"
        verdict = None
        if self.target.driver is None:
            notes.append("no NVIDIA driver found and no --driver: planned by the packages alone")
        else:
            verdict = table.check(self.target.driver, release, reported=self.target.reported)
            if verdict.verdict == "minor-version":
                notes.append(
                    f"driver {self.target.driver} runs CUDA {release} under {verdict.reason}"
                )
        if not attempt.evidence:
            notes.append(
                "nothing in the resolution names a CUDA line (no CUDA dependency, per-line build "
                "or linked runtime): the newest line the driver and GPUs accept"
            )
        notes += [f"release list: {n}" for n in live.notes]
        return PlanResult(
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
            consulted=list(self.consulted),
            target=self.target,
            job=attempt.job,
        )


def _learnt(found: Sequence[Evidence]) -> str:
    """What contradicting builds were met, grouped by project (newest first)."""
    by_project: dict[str, list[Evidence]] = {}
    for evidence in found:
        by_project.setdefault(evidence.project, []).append(evidence)
    parts = []
    for project, items in by_project.items():
        kinds = sorted({e.cuda() for e in items})
        versions = ", ".join(e.version for e in items)
        how = items[0].how
        more = "; older versions not read" if len(items) >= CONTRADICTION_ROUNDS else ""
        parts.append(f"{project} {versions}: {' / '.join(kinds)} ({how}{more})")
    return "builds of another line: " + "; ".join(parts)


def named_release(attempt: Attempt, live: LiveReleases) -> str:
    """The toolkit release a plan names: the one the closure pins, else the line's newest."""
    pinned = next((e.release for e in attempt.evidence.values() if e.release), None)
    return pinned or live.newest(attempt.line) or f"{line_text(attempt.line)}.0"
