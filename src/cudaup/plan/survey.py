"""What the indexes say before anything is resolved: do the requested projects,
versions and wheels exist, and which index is down.

One request per (index URL, project), concurrently, through the cached HTTP
client (PEP 691 JSON when offered, else PEP 503 HTML).  A 404 means "this index
does not have the project", an answer; any other failure leaves the index
*unreachable*, and a plan that an unreachable index could change is not made.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from packaging.requirements import Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from cudaup.core.platforms import Platform, describe
from cudaup.core.wheels import tag_rank, wheel_fits, wheel_name
from cudaup.errors import NetworkError, PackageNotFoundError, RemoteFileMissingError
from cudaup.net.http import HttpClient, Response
from cudaup.plan.indexes import Index
from cudaup.resolve.pypi import DistFile, PackageIndex, files_of_version
from cudaup.util.parallel import map_concurrently


@dataclass(frozen=True, slots=True)
class Page:
    """One (index, tag, project) page: its files, or why there are none."""

    index: str
    tag: str
    url: str
    project: str
    files: tuple[DistFile, ...] | None  # None: the index has no such project (404)
    error: str | None = None  # set when the index could not be reached

    def to_json(self) -> dict[str, str | None]:
        status = "unreachable" if self.error else ("missing" if self.files is None else "ok")
        return {
            "index": self.index,
            "tag": self.tag or None,
            "url": self.url,
            "project": self.project,
            "status": status,
            "error": self.error,
        }


def fetch_pages(
    http: HttpClient,
    wanted: Sequence[tuple[Index, str, str]],
    workers: int,
    read: Callable[[str], Response | None] | None = None,
) -> list[Page]:
    """Pages for (index, tag, project) triples; unreachable ones are returned, not raised.
    ``read``: a page read a moment ago by its URL (the plan's index memo), if it was."""

    def fetch(item: tuple[Index, str, str]) -> Page:
        index, tag, project = item
        url = index.urls[tag]
        try:
            source = PackageIndex(http, url)
            found = read(source.project_url(project)) if read is not None else None
            files = source.files(project, found)
        except RemoteFileMissingError:
            return Page(index.name, tag, url, project, None)
        except NetworkError as exc:
            return Page(index.name, tag, url, project, None, str(exc))
        return Page(index.name, tag, url, project, tuple(files))

    return map_concurrently(fetch, list(wanted), workers)


def unreachable_error(pages: Sequence[Page]) -> NetworkError | None:
    down = [p for p in pages if p.error]
    if not down:
        return None
    names = sorted({p.index for p in down})
    first = down[0]
    return NetworkError(
        f"could not reach {', '.join(names)} ({first.url}: {first.error}); it could change the "
        f"plan, so none is made: retry, or leave it out with --index"
    )


_NO_VERSION = Version("0.dev0")


def _python_fits(file: DistFile, python: tuple[int, int]) -> bool:
    if not file.requires_python:
        return True
    try:
        return SpecifierSet(file.requires_python).contains(f"{python[0]}.{python[1]}.0")
    except InvalidSpecifier:
        return True  # uv decides; an unreadable field is not a reason to refuse here


def check_requested(
    requirement: Requirement,
    pages: Sequence[Page],
    python: tuple[int, int],
    platform: Platform,
    *,
    pre: bool = False,
) -> None:
    """Raise :class:`PackageNotFoundError` when no consulted index has the project, no
    version matches the specifier, or no matching version has a wheel for the target."""
    name = canonicalize_name(requirement.name)
    mine = [p for p in pages if p.project == name and not p.error]
    consulted = ", ".join(sorted({f"{p.index} ({p.url})" for p in mine}))
    present = [p for p in mine if p.files is not None]
    if not present:
        raise PackageNotFoundError(f"no index consulted has a project named {name!r}: {consulted}")
    matching = _matching_versions(requirement, present, consulted, pre=pre)
    if newest_installable(matching, requirement, python, platform, pre=pre) is None:
        newest_matching = max(f.version for f in matching if f.version is not None)
        raise PackageNotFoundError(
            f"{requirement} has no wheel for CPython {python[0]}.{python[1]} on "
            f"{describe(platform)} ({platform}) on {consulted} "
            f"(newest matching version: {newest_matching})"
        )


def newest_installable(
    files: Sequence[DistFile],
    requirement: Requirement,
    python: tuple[int, int],
    platform: Platform,
    *,
    pre: bool,
) -> Version | None:
    """The newest version of ``files`` the target could install for ``requirement``: a
    wheel for its Python and platform, a yanked one only by an exact pin (PEP 592), a
    pre-release only with ``pre`` or a specifier that names one.  Newest first, and no
    further than the first that fits: an unpinned torch has ~1,000 files, and each test
    parses a wheel's tags."""
    prereleases = pre or bool(requirement.specifier.prereleases)
    for f in sorted(files, key=_newest_first, reverse=True):
        if (
            f.version is not None
            and (not f.yanked or pins_exactly(requirement, f))
            and requirement.specifier.contains(f.version, prereleases=prereleases)
            and f.is_wheel
            and wheel_fits(f.filename, platform, python)
            and _python_fits(f, python)
        ):
            return f.version
    return None


def _newest_first(file: DistFile) -> Version:
    """A sort key (``reverse=True``: newest first); only the order of the search depends on
    it, so a name without a version (none reaches here) would just come late."""
    return file.version or _NO_VERSION


def _matching_versions(
    requirement: Requirement, present: Sequence[Page], consulted: str, *, pre: bool
) -> list[DistFile]:
    """The files of the versions ``requirement`` allows (a yanked one only by an exact pin,
    as PEP 592 says), or :class:`PackageNotFoundError` naming the newest and ``--pre``."""
    every = [f for p in present for f in p.files or () if f.version is not None]
    files = [f for f in every if not f.yanked or pins_exactly(requirement, f)]
    prereleases = pre or bool(requirement.specifier.prereleases)
    matching = [
        f
        for f in files
        if f.version is not None
        and requirement.specifier.contains(f.version, prereleases=prereleases)
    ]
    if matching:
        return matching
    versions = sorted({f.version for f in files if f.version is not None and not f.yanked})
    newest = f" (newest: {versions[-1]})" if versions else ""
    hint = ""
    if not prereleases and any(
        requirement.specifier.contains(v, prereleases=True) for v in versions
    ):
        hint = "; pre-releases match it: --pre takes them"
    raise PackageNotFoundError(f"{requirement} matches no version on {consulted}{newest}{hint}")


def pins_exactly(requirement: Requirement, file: DistFile) -> bool:
    """Whether ``requirement`` is an exact pin (``==1.0``, ``===1.0``) that ``file`` matches:
    the one way PEP 592 lets a yanked file be chosen."""
    specifiers = list(requirement.specifier)
    if len(specifiers) != 1 or file.version is None:
        return False
    (only,) = specifiers
    if only.operator == "===":
        return only.version == str(file.version)
    return (
        only.operator == "=="
        and not only.version.endswith(".*")
        and only.contains(file.version, prereleases=True)
    )


def yank_of(files: Sequence[DistFile], version: Version) -> str | None:
    """Why ``version`` was yanked (``"no reason given"`` when none is); None when a file of
    it is not yanked, or there is none."""
    mine = files_of_version(files, version)
    if not mine or not all(f.yanked for f in mine):
        return None
    return next((f.yank_reason for f in mine if f.yank_reason), None) or "no reason given"


def best_wheel(
    files: Sequence[DistFile], version: Version, python: tuple[int, int], platform: Platform
) -> DistFile | None:
    """The wheel of ``version`` an installer would pick for the target: the most specific
    tag, a yanked one only when every file of the version is (an exact pin took it)."""
    files = files_of_version(files, version)
    if yank_of(files, version) is None:
        files = [f for f in files if not f.yanked]
    rank = tag_rank(python, platform)
    best: tuple[int, DistFile] | None = None
    for file in files:
        if not file.is_wheel:
            continue
        parts = wheel_name(file.filename)
        if parts is None:
            continue
        score = min((rank[t] for t in parts[3] if t in rank), default=None)
        if score is not None and (best is None or score < best[0]):
            best = (score, file)
    return best[1] if best else None


def is_pure(file: DistFile) -> bool:
    """A wheel for every platform (``-none-any``) ships no extension module."""
    return file.filename.endswith("-none-any.whl")


def pure_among_compiled(
    files: Sequence[DistFile], version: Version, python: tuple[int, int], platform: Platform
) -> DistFile | None:
    """The wheel of ``version`` the target would install, when every wheel of ``version``
    is pure Python while another version of the project ships compiled ones (xformers
    0.0.35.dev1147 has only ``py3-none-any``; its earlier builds carry their CUDA kernels);
    None otherwise."""
    wheel = best_wheel(files, version, python, platform)
    if wheel is None or not is_pure(wheel):
        return None
    compiled = {f.version for f in files if f.is_wheel and not is_pure(f)}
    return wheel if compiled and version not in compiled else None


def union_pages(
    sources: Sequence[Mapping[str, Sequence[DistFile]]],
) -> dict[str, tuple[DistFile, ...]] | None:
    """Every source's files of each project, once; None when two sources serve a version
    of a project differently (other files, or files without a sha256 to compare): uv
    would read one source's metadata for it, and the union would not hold what the
    other source offers."""
    served: dict[tuple[str, str], set[frozenset[tuple[object, ...]]]] = {}
    shared: set[tuple[str, str]] = set()
    union: dict[str, dict[str, DistFile]] = {}
    for source in sources:
        for project, files in source.items():
            by_version: dict[str, set[tuple[object, ...]]] = {}
            for file in files:
                key = (file.filename, file.sha256, file.requires_python, file.yanked)
                by_version.setdefault(str(file.version), set()).add(key)
                union.setdefault(project, {}).setdefault(file.filename, file)
            for version, keys in by_version.items():
                if (project, version) in served:
                    shared.add((project, version))
                served.setdefault((project, version), set()).add(frozenset(keys))
    for twice in shared:
        variants = served[twice]
        if len(variants) > 1 or any(key[1] is None for key in next(iter(variants))):
            return None
    return {project: tuple(files.values()) for project, files in union.items()}
