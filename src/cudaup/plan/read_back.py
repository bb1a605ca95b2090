"""A line's resolution read back: what each package says of its CUDA line.

First by name (:func:`~cudaup.plan.lines.evidence_of`: a version pinning a CUDA
release, a per-line index it came from), then, for a request that says nothing so
(a silent one), by its wheel's shared objects (:class:`~cudaup.plan.wheels.WheelFacts`),
or its children's when it is a pure meta-package.  A request that contradicts the line
has its next older builds read too, so that the next round skips them all.  The wheels
are read at once, each request's beside the others' (:func:`_read_at_once`), and then
weighed one request after another, in the order the requests were given.

When another round follows, the wheel it most likely takes of each such project is read
beside that round's uv run (:func:`read_next_builds`), so that its read-back finds it read.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from cudaup.errors import CudaupError
from cudaup.plan.closure import Closure, Resolved
from cudaup.plan.line_failure import CONTRADICTION_ROUNDS
from cudaup.plan.lines import Evidence, contradictions, evidence_of
from cudaup.plan.read_ahead import backtracked
from cudaup.plan.survey import best_wheel, is_pure, yank_of
from cudaup.resolve.pypi import DistFile, files_of_version
from cudaup.util.parallel import in_background, map_concurrently

#: The most children of a meta-package read at a time (see :func:`_children_at_once`):
#: range reads through the HTTP client's pool, which keeps 48 connections per host.
CHILDREN_AT_ONCE = 32

if TYPE_CHECKING:  # the resolver calls these
    from concurrent.futures import Future

    from cudaup.plan.attempt import Attempt, LineResolver
    from cudaup.plan.wheels import LinkedLibraries


def read_back(
    resolver: LineResolver,
    attempt: Attempt,
    requirements: tuple[Requirement, ...],
    before_wheels: Callable[[list[Evidence]], None] | None = None,
    last_build: Callable[[str], bool] = lambda project: False,
) -> list[Evidence]:
    """Every package's evidence; the ones that contradict the attempt's line.
    ``before_wheels`` is handed what contradicts it by name alone before the first
    wheel is read (the next round may start then: :class:`NextRound`).  ``last_build``
    says of a project whether one more build of it that contradicts the line ends the
    line's rounds: its older builds, which only the next round would skip, are not read."""
    closure, line = attempt.closure, attempt.line
    assert closure is not None
    _read_names(attempt, closure)
    crossed = contradictions(attempt.evidence.values(), line)
    ahead, memo = None, resolver.runner.memo
    if crossed and memo is not None:  # the next round may backtrack: read it ahead
        files = partial(resolver.files_of, attempt=attempt)
        ahead = memo.read_ahead(partial(backtracked, closure, crossed, files, resolver.target))
    older: list[Evidence] = []
    asked_names: set[str] = {canonicalize_name(r.name) for r in requirements}
    pending = [r for r in requirements if _silent(r, closure, attempt)]
    if pending and before_wheels is not None:
        before_wheels(crossed)  # once: what the names say is all known now
    _read_at_once(resolver, pending, attempt, asked_names, last_build)
    for requirement in requirements:
        asked = closure.get(requirement.name)
        if asked is None or not _silent(requirement, closure, attempt):
            continue  # it, or a child of it, has spoken (a meta-package's child read)
        deeper = _read_deeper(resolver, asked, attempt, through=True)
        if deeper is not None:
            attempt.evidence[asked.name] = deeper
            if not deeper.fits(line) and not last_build(asked.name):
                older += _older_builds(resolver, requirement, asked, attempt)
            continue
        # A pure meta-package (cuda-python requires cuda-bindings~=12.8.0): what it
        # pulls in carries the signal.  Its children are read at once (flashinfer-python
        # pulls in 19: one after another, 5.4 s of a cold plan); what one finds does not
        # depend on the others', since only a finding in the wheel itself is kept.
        children = _children_to_read(closure, asked, attempt, asked_names)
        read = map_concurrently(
            lambda child: _read_deeper(resolver, child, attempt),
            children,
            _children_at_once(resolver, children),
        )
        for child, found in zip(children, read, strict=True):
            if found is not None and found.kind != "cpu-only":
                attempt.evidence[child.name] = found
    if ahead is not None:
        ahead.result()  # what the next round reads is being read ahead: started
    return contradictions(attempt.evidence.values(), line) + older


def _silent(requirement: Requirement, closure: Closure, attempt: Attempt) -> bool:
    """Whether the request was resolved and neither it nor a child of it has said its line."""
    asked = closure.get(requirement.name)
    return not (
        asked is None
        or asked.name in attempt.evidence
        or any(c.name in attempt.evidence for c in closure.children(asked.name))
    )


def _read_at_once(
    resolver: LineResolver,
    requirements: list[Requirement],
    attempt: Attempt,
    asked_names: set[str],
    last_build: Callable[[str], bool],
) -> None:
    """Read at once the wheels the read-back weighs one request after another (each
    request's wheel, then its older builds when it contradicts the line and another round
    may follow, or a meta-package's children's): the weighing then finds their facts
    read.  A read that fails here is read again there, and fails there with its own
    words."""
    closure = attempt.closure
    assert closure is not None

    def read(requirement: Requirement) -> None:
        asked = closure.get(requirement.name)
        assert asked is not None
        with contextlib.suppress(CudaupError):  # the weighing reads it again, and says
            found = _read_deeper(resolver, asked, attempt, through=True)
            if found is not None:
                if not found.fits(attempt.line) and not last_build(asked.name):
                    _older_builds(resolver, requirement, asked, attempt)
                return
            children = _children_to_read(closure, asked, attempt, asked_names)
            map_concurrently(
                lambda child: _read_deeper(resolver, child, attempt),
                children,
                _children_at_once(resolver, children),
            )

    map_concurrently(read, requirements, resolver.settings.workers)


def _children_at_once(resolver: LineResolver, children: Sequence[Resolved]) -> int:
    """How many of a meta-package's children are read at a time: all of them, up to
    :data:`CHILDREN_AT_ONCE`.  Each read is a chain of dependent round trips (the page,
    the tail, the zip directory, the objects' headers), and the chains are the longer
    the bigger the wheel: read eight at a time, flashinfer-python's 19 in the order they
    are named, torch's started when earlier children's had ended, 0.5 s into a 1.1 s
    read-back, and its chain ended it."""
    return min(CHILDREN_AT_ONCE, max(resolver.settings.workers, len(children)))


def _children_to_read(
    closure: Closure, asked: Resolved, attempt: Attempt, asked_names: set[str]
) -> list[Resolved]:
    """The children of a request that says nothing of its line whose own wheels are read:
    those not yet heard from, and not requested themselves (they are read as requests)."""
    return [
        c
        for c in closure.children(asked.name)
        if c.name not in attempt.evidence and c.name not in asked_names
    ]


def _binary_wheel(resolver: LineResolver, package: Resolved, attempt: Attempt) -> DistFile | None:
    """The wheel of ``package`` the target would install, unless it is pure Python (it
    then links nothing) or there is none."""
    files = resolver.files_of(package, attempt)
    wheel = best_wheel(files, package.version, resolver.target.python, resolver.target.platform)
    return None if wheel is None or is_pure(wheel) else wheel


def _read_deeper(
    resolver: LineResolver, package: Resolved, attempt: Attempt, *, through: bool = False
) -> Evidence | None:
    """A silent requested wheel: the CUDA signals its wheel carries, or, for a project
    a CUDA index publishes, the finding that it is a CPU-only build.  ``through``: a
    request's own wheel, whose larger objects are read through when its small ones name
    nothing (:meth:`~cudaup.plan.wheels.WheelFacts.libraries`); a meta-package's
    children have only their bundled libraries read so (flashinfer-python's 19 would
    cost tens of megabytes a plan)."""
    resolver.check_cancelled()
    wheel = _binary_wheel(resolver, package, attempt)
    if wheel is None:
        return None
    linked = _libraries(resolver, wheel, through, attempt)
    found = linked.evidence(package.name, str(package.version))
    if found is not None:
        return found
    signals = set(attempt.evidence)
    known_cuda = any(i.serves(package.name) for i in resolver.every_tagged)
    if known_cuda and attempt.closure and attempt.closure.chain(package.name, signals) is None:
        return Evidence.cpu_only(
            package.name,
            str(package.version),
            f"a CPU-only build: {wheel.filename} names no CUDA dependency, links or loads "
            f"no CUDA runtime and ships no CUDA tools ({linked.describe()})",
        )
    return None


def _older_builds(
    resolver: LineResolver, requirement: Requirement, package: Resolved, attempt: Attempt
) -> list[Evidence]:
    """The next older versions of a silent package that contradicts the line, read at
    once (a few at most), so that the next resolution skips them all."""
    files = resolver.files_of(package, attempt)
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
        if (w := best_wheel(files, v, resolver.target.python, resolver.target.platform)) is not None
        and not is_pure(w)
    ][: CONTRADICTION_ROUNDS - 1]
    linked = map_concurrently(
        lambda wheel: _libraries(resolver, wheel, attempt=attempt),
        wheels,
        resolver.settings.workers,
    )
    found = []
    for wheel, libraries in zip(wheels, linked, strict=True):
        version = str(wheel.version)
        evidence = libraries.evidence(package.name, version)
        if evidence is None or evidence.fits(attempt.line):
            break  # the resolver may take this one: stop excluding here
        found.append(evidence)
    return found


def _read_names(attempt: Attempt, closure: Closure) -> None:
    """What each resolved package's name, version and per-line index say of its line."""
    for package in closure:
        origin = None
        # The one file index a job names is its local per-line index (a kept answer
        # names the path an earlier plan used: the pages, not the path, are its key).
        if attempt.pages and package.index_url and package.index_url.startswith("file:"):
            origin = attempt.origins.get(package.name)
        found = evidence_of(
            package.name,
            package.version,
            origin.line if origin else None,
            origin.url if origin else None,
        )
        if found is not None:
            attempt.evidence[package.name] = found


def read_next_builds(
    resolver: LineResolver,
    attempt: Attempt,
    requirements: tuple[Requirement, ...],
    learnt: Sequence[Evidence],
) -> list[Future[None]]:
    """Start reading, each in a thread of its own, the wheels :func:`next_builds` names,
    while the next round's uv runs: its read-back then finds them read (a cold ``torch
    flashinfer-python sgl-kernel`` plan waited 0.3-0.4 s for sgl-kernel 0.3.18.post3's and
    cuda-python 12.6.0's range reads after 13.0's third round).  Only the wheel facts'
    store is filled, as the read-back would fill it: what the plan answers does not
    change.  A read that fails is dropped (the read-back reads again, and says why)."""
    return [
        in_background(partial(_read_quietly, resolver, wheel, through), "cudaup-plan-next")[1]
        for wheel, through in next_builds(resolver, attempt, requirements, learnt)
    ]


def next_builds(
    resolver: LineResolver,
    attempt: Attempt,
    requirements: tuple[Requirement, ...],
    learnt: Sequence[Evidence],
) -> list[tuple[DistFile, bool]]:
    """The wheel the next round most likely resolves each project of ``learnt`` (its builds
    that contradict the line) to, when only that wheel can say its line: the newest version
    older than every build of it excluded that uv would take (not yanked, no pre-release
    unless allowed, within the request, with a wheel for the target), unless its name
    already says its line or that wheel is pure Python.  With each, whether it is read
    through, as a request's own wheel is.  A project left out by its name has no next
    version."""
    closure = attempt.closure
    assert closure is not None
    asked: dict[str, Requirement] = {canonicalize_name(r.name): r for r in requirements}
    oldest: dict[str, Version] = {}
    for evidence in learnt:
        if evidence.kind != "name":
            version = Version(evidence.version)
            oldest[evidence.project] = min(version, oldest.get(evidence.project, version))
    target = resolver.target
    wheels: list[tuple[DistFile, bool]] = []
    for project, below in oldest.items():
        package = closure.get(project)
        if package is None:
            continue
        files = resolver.files_of(package, attempt)
        requirement = asked.get(project)
        pre = resolver.pre or bool(requirement and requirement.specifier.prereleases)
        older = sorted({v for f in files if (v := f.version) is not None and v < below})
        for version in reversed(older):
            if version.is_prerelease and not pre:
                continue
            if requirement and not requirement.specifier.contains(version, prereleases=True):
                continue
            mine = files_of_version(files, version)  # the page scanned once per version
            if yank_of(mine, version) is not None:
                continue
            if evidence_of(project, version, None, None) is not None:
                break  # its name says its line: the read-back reads no wheel of it
            wheel = best_wheel(mine, version, target.python, target.platform)
            if wheel is None:
                continue  # nothing uv could install here: it goes on to an older version
            if not is_pure(wheel):
                wheels.append((wheel, requirement is not None))
            break
    return wheels


def _read_quietly(resolver: LineResolver, wheel: DistFile, through: bool) -> None:
    with contextlib.suppress(CudaupError):
        _libraries(resolver, wheel, through)


def _libraries(
    resolver: LineResolver, wheel: DistFile, through: bool = False, attempt: Attempt | None = None
) -> LinkedLibraries:
    """What ``wheel`` links and loads (:meth:`~cudaup.plan.wheels.WheelFacts.libraries`),
    its archive opened from the end the index memo read ahead for uv where it did: uv read
    most of the wheels a read-back reads (their METADATA), so their zip directories are in
    memory, two round trips less at the start of a chain of dependent reads (torch's 2.5 MB
    directory, vllm's 0.7 MB).  Its reads stop once the search is over: the search waits
    for every line it started, and an older line read back 0.3 s more after 13.0 had
    answered a cold ``vllm flashinfer-python`` plan.  A read-back's read over the network
    waits for its line's turn (``attempt``'s: :meth:`~cudaup.plan.window.Turn.before_fetch`);
    the next builds, read beside a round's uv run, do not."""
    memo = resolver.runner.memo
    read = memo.ahead.end_of if memo is not None else None
    turn = attempt.turn if attempt is not None else None
    return resolver.facts.libraries(
        wheel,
        through=through,
        read=read,
        stop=resolver.cancel,
        before_fetch=turn.before_fetch if turn is not None else None,
    )
