"""Resolution: a version request and a platform to exact, vouched-for artifacts.

The functions named ``choose_*`` are pure: they take parsed documents and
return candidates, naming every source that vouched for each fact.
:class:`Resolver` is the thin orchestrator that fetches those documents
(concurrently, through the cache), calls the pure core, and probes the result.

Sources, strongest first: the redist manifest (sha256, size, bundled driver),
``md5sum.txt`` (every installer's name and md5), the download-archive page
(the download URL per platform), the redist listing (which releases exist),
and a HEAD probe (existence and size).  A file name is only ever *read* from a
source; where no source lists one, resolution fails and says so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from functools import cached_property
from typing import TYPE_CHECKING, TypeVar

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from cudaup.config import Settings
from cudaup.core import components as comp
from cudaup.core.identify import shipped_table
from cudaup.core.libraries import (
    LIBRARIES,
    LibraryRequest,
    cuda_major,
    parse_library,
    split_libraries,
)
from cudaup.core.model import Artifact, Channel, Release, Resolution, SourceRef
from cudaup.core.platforms import Platform
from cudaup.core.versions import ReleaseRequest, nearest, nvidia_label, parse_request, release_key
from cudaup.errors import (
    ArtifactNotFoundError,
    IntegrityError,
    ReleaseNotFoundError,
    RemoteFileMissingError,
    UsageError,
)
from cudaup.net.http import HttpClient
from cudaup.resolve.choose import (
    InstallerChoice,
    ReleaseFacts,
    choose_installer,
    choose_redist,
    choose_wheel,
    jetson_has_no_runfile,
    requirements_for,
    wheel_artifact,
)
from cudaup.resolve.pypi import DistFile, PackageIndex
from cudaup.util.parallel import in_background_each, map_concurrently

if TYPE_CHECKING:
    from concurrent.futures import Future

    # resolve.libraries is imported where a library is asked for; NVIDIA's sources and
    # parsers where NVIDIA is asked (see Resolver.nvidia)
    from cudaup.nvidia.archive_page import ArchivePage
    from cudaup.nvidia.manifest import Manifest
    from cudaup.resolve.libraries import LibraryCompat, LibraryRelease
    from cudaup.resolve.sources import NvidiaSource, ProbeResult

T = TypeVar("T")
R = TypeVar("R")

#: Told, with the release's label, of each wheel the release table cudaup ships says the
#: release pins, once its page names it: an install's head start (``Resolver.head_start``).
#: It runs in the thread that read the page, and must neither block nor raise.
HeadStartOffer = Callable[[str, Artifact], None]


# ----------------------------------------------------------------------------
# The orchestrator (I/O)
# ----------------------------------------------------------------------------
class Resolver:
    def __init__(
        self,
        settings: Settings,
        http: HttpClient | None = None,
        *,
        downloads_next: int = 0,
        head_start: HeadStartOffer | None = None,
    ) -> None:
        """``downloads_next``: how many of the resolved files the caller starts downloading
        at once when the resolution returns (an install's staging).  As many connections to
        their host are then opened while the resolution still waits on its last answers
        (:func:`~cudaup.net.deadline.opening_ahead`): each new one costs round trips
        (TCP's, then TLS's) that would otherwise come before those downloads' first bytes.
        ``head_start``: told of the wheels a PyPI release is forecast to pin
        (:meth:`_offer_forecast`) while its metadata is still being read."""
        self.settings = settings
        self.http = http if http is not None else HttpClient(settings)
        self.downloads_next = downloads_next
        self.head_start = head_start
        self.pypi = PackageIndex(self.http, settings.pypi_url)
        self._listing_dates: dict[str, str | None] = {}

    @cached_property
    def nvidia(self) -> NvidiaSource:
        """NVIDIA's download server, loaded with its parsers when first asked: a release
        resolved from PyPI needs neither (~8 ms of imports before an install's first
        request)."""
        from cudaup.resolve.sources import NvidiaSource  # noqa: PLC0415 - see the docstring

        return NvidiaSource(self.http)

    def _map(self, function: Callable[[T], R], items: Sequence[T]) -> list[R]:
        return map_concurrently(function, items, self.settings.workers)

    def _connections_ahead(self, files: int) -> int:
        """The connections to open ahead of the downloads that follow (``downloads_next``),
        no more than the ``files`` the resolution forecasts (0: it forecasts none)."""
        return min(self.downloads_next, files or self.downloads_next)

    # -- release lists ---------------------------------------------------------
    def listed_versions(self) -> list[Version]:
        listing = self.nvidia.listing()
        self._listing_dates = {r.label: r.date for r in listing}
        return [r.version for r in listing]

    def _not_found(
        self, request: ReleaseRequest, versions: Iterable[Version], what: str
    ) -> ReleaseNotFoundError:
        close = nearest(request, versions)
        names = tuple(str(v) for v in close)
        hint = f"; nearest: {' and '.join(names)}" if names else ""
        return ReleaseNotFoundError(f"there is no CUDA {request.describe()}{what}{hint}", names)

    def facts(self, label: str, *, page: bool = True) -> ReleaseFacts:
        """Manifest, md5sum.txt and archive page of one release, fetched concurrently.

        With ``page=False`` the page is fetched only when the other two are missing
        (a preview), which keeps ``cudaup versions`` to two requests per release.
        """
        manifest: Manifest | None = None
        md5sums: dict[str, str] | None = None
        archive_page: ArchivePage | None = None

        def read_manifest() -> None:
            nonlocal manifest
            manifest = self.nvidia.manifest(label)

        def read_md5sums() -> None:
            nonlocal md5sums
            md5sums = self.nvidia.md5sums(label)

        def read_page() -> None:
            nonlocal archive_page
            archive_page = self.nvidia.archive_page(label)

        self._map(
            lambda read: read(), [read_manifest, read_md5sums, *([read_page] if page else [])]
        )
        if not page and manifest is None and md5sums is None:
            read_page()
        return ReleaseFacts(
            label=label,
            manifest=manifest,
            manifest_url=self.nvidia.manifest_url(label),
            md5sums=md5sums,
            md5sum_url=self.nvidia.md5sum_url(label),
            page=archive_page,
            page_url=self.nvidia.page_url(label),
            listed_date=self._listing_dates.get(label),
        )

    # -- entry point -------------------------------------------------------------
    def resolve(
        self,
        request_text: str,
        *,
        platform: Platform,
        channel: Channel = "installer",
        components: Sequence[str] | None = None,
        closure: bool = False,
        only_offered: bool = False,
    ) -> Resolution:
        """Resolve a request; with ``closure``, components bring what they need (install).
        With ``only_offered`` (an install profile), components the release does not offer
        for ``platform`` are left out instead of refused."""
        request = parse_request(request_text)
        if channel == "installer":
            if components:
                raise UsageError("--components applies to --channel redist and pypi, not installer")
            return self._resolve_installer(request, platform)
        names, libraries = split_libraries(tuple(components)) if components else (components, ())
        # A library's run-time needs from the toolkit (cuDNN loads cuBLAS) come along on
        # install, where the release has them.
        also = [n for r in libraries for n in r.library.needs] if closure else []
        if channel == "redist":
            resolution = self._resolve_redist(request, platform, names, closure, also, only_offered)
        else:
            resolution = self._resolve_pypi(request, platform, names, closure, also, only_offered)
        return self._with_libraries(resolution, libraries) if libraries else resolution

    def library_releases(self, name: str) -> list[LibraryRelease]:
        """Every release of the library ``name`` (``cudnn``), with the CUDA majors it builds."""
        from cudaup.resolve.libraries import library_releases  # noqa: PLC0415 - see the imports

        request = parse_library(name)
        if request is None:
            raise UsageError(
                f"{name!r} is not a library cudaup knows ({', '.join(sorted(LIBRARIES))})"
            )
        return library_releases(self.nvidia, request.library, self._map)

    def library_compat(self, request: LibraryRequest, majors: Sequence[int]) -> LibraryCompat:
        """The CUDA majors a library release is built for (``compat cudnn==9.27``), from its
        redist manifest and its PyPI project for each of ``majors``."""
        from cudaup.resolve.libraries import library_compat  # noqa: PLC0415 - see the imports

        return library_compat(self.nvidia, self.pypi, request, majors, self._map)

    def _with_libraries(
        self, resolution: Resolution, libraries: Sequence[LibraryRequest]
    ) -> Resolution:
        """``resolution`` plus each library's build for the release's CUDA major."""
        from cudaup.resolve.libraries import pypi_library, redist_library  # noqa: PLC0415

        major = cuda_major(resolution.release.version)
        platform = resolution.platform

        def one(request: LibraryRequest) -> list[Artifact]:
            if resolution.channel == "pypi":
                return self._probe_all([pypi_library(self.pypi, request, major, platform)])
            return redist_library(
                self.nvidia, request, major, platform, lambda a: self._probe(a, "manifest")
            )

        found = [
            artifact for artifacts in self._map(one, list(libraries)) for artifact in artifacts
        ]
        notes = [
            f"{r.library.title} {a.component_version} (the CUDA {major} build) from {a.sources[0].kind}"
            for r in libraries
            for a in found
            if a.component == r.library.name
        ]
        return replace(
            resolution,
            artifacts=(*resolution.artifacts, *found),
            notes=(*resolution.notes, *dict.fromkeys(notes)),
        )

    # -- installer channel ------------------------------------------------------
    def _resolve_installer(self, request: ReleaseRequest, platform: Platform) -> Resolution:
        if platform == "linux-aarch64":
            raise jetson_has_no_runfile()
        if request.exact_label:
            candidates = [request.exact_label]
        else:
            versions = self.listed_versions()
            picked = request.pick(versions)
            if not picked:
                raise self._not_found(request, versions, "")
            candidates = [str(v) for v in picked]
        skipped: list[str] = []
        for label in candidates:
            facts = self.facts(label)
            if facts.empty:
                raise self._not_found(request, self.listed_versions(), "")
            try:
                choice = choose_installer(facts, platform, self.nvidia.local_installers_url(label))
            except ArtifactNotFoundError:
                if request.exact_label:
                    raise
                skipped.append(label)
                continue
            return self._finish_installer(request, platform, facts, choice, skipped)
        raise ArtifactNotFoundError(
            f"no release matching {request.describe()} has a standalone installer for {platform}"
        )

    def _finish_installer(
        self,
        request: ReleaseRequest,
        platform: Platform,
        facts: ReleaseFacts,
        choice: InstallerChoice,
        skipped: list[str],
    ) -> Resolution:
        notes = list(choice.notes)
        if skipped:
            notes.append(f"skipped {', '.join(skipped)}: no installer for {platform}")
        sources = list(choice.sources)
        sha256: str | None = None
        if self.settings.is_prerelease_url(choice.url):
            # Previews publish SHA-256 sums beside the installers instead of md5sum.txt.
            sums_url = choice.url.rsplit("/", 1)[0] + "/sha256sum.txt"
            sha256 = (self.nvidia.checksums(sums_url, "sha256") or {}).get(choice.filename)
            if sha256:
                sources.append(SourceRef("sha256sum.txt", sums_url, ("filename", "sha256")))
        artifact = Artifact(
            filename=choice.filename,
            url=choice.url,
            size=choice.size,
            md5=choice.md5,
            sha256=sha256,
            component="cuda_installer",
            component_version=facts.label,
            platform=platform,
            channel="installer",
            driver=choice.driver,
            sources=tuple(sources),
        )
        if choice.md5 is None and sha256 is None:
            notes.append(
                f"CUDA {facts.label} publishes no checksum for {choice.filename}; not verified"
            )
        artifact = self._probe(artifact, expected_from="download-archive page")
        release = facts.release(choice.driver if platform.startswith("linux-") else None)
        return Resolution(request.text, platform, "installer", release, (artifact,), tuple(notes))

    def _probe(self, artifact: Artifact, expected_from: str) -> Artifact:
        """Confirm existence and size with a HEAD request; set ``verified``."""
        if not self.settings.probe:
            return artifact
        result: ProbeResult = self.nvidia.probe(artifact.url)
        if not result.exists:
            listed_by = ", ".join(s.kind for s in artifact.sources) or "no source"
            raise RemoteFileMissingError(
                f"{artifact.url} answered HTTP {result.status}, although {listed_by} lists it; "
                "the server or mirror may be out of sync, try again later",
                artifact.url,
                result.status,
            )
        if artifact.size is not None and result.size is not None and result.size != artifact.size:
            source = artifact.sources[0].kind if artifact.channel != "installer" else expected_from
            raise IntegrityError(
                f"{artifact.filename}: {source} says {artifact.size} bytes but the server "
                f"serves {result.size}; refusing a file whose sources disagree (try again later)"
            )
        size = artifact.size if artifact.size is not None else result.size
        sources = (*artifact.sources, SourceRef("HEAD probe", result.url, ("exists", "size")))
        verified = (artifact.md5 is not None or artifact.sha256 is not None) and size is not None
        return replace(artifact, size=size, sources=sources, probed=True, verified=verified)

    def _probe_all(self, artifacts: list[Artifact]) -> list[Artifact]:
        return self._map(lambda a: self._probe(a, expected_from="manifest"), artifacts)

    # -- redist channel ---------------------------------------------------------
    def _release_manifest(self, request: ReleaseRequest) -> tuple[str, Manifest]:
        """The release ``request`` names in NVIDIA's listing, and its redist manifest."""
        if request.exact_label:
            label = request.exact_label
            manifest = self.nvidia.manifest(label)
            if manifest is None:
                raise self._not_found(request, self.listed_versions(), " with a redist manifest")
            return label, manifest
        versions = self.listed_versions()
        picked = request.pick(versions)
        if not picked:
            raise self._not_found(request, versions, "")
        label = str(picked[0])
        manifest = self.nvidia.manifest(label)
        if manifest is None:
            raise ReleaseNotFoundError(f"the listing names {label} but its manifest answers 404")
        return label, manifest

    def _resolve_redist(
        self,
        request: ReleaseRequest,
        platform: Platform,
        components: Sequence[str] | None,
        closure: bool = False,
        also: Sequence[str] = (),
        only_offered: bool = False,
    ) -> Resolution:
        # The archives are on the manifest's host: their downloads' connections open while
        # the listing or the manifest is read.
        from cudaup.net.deadline import opening_ahead  # noqa: PLC0415 - urllib3 with it

        with opening_ahead(self._connections_ahead(len(_wanted(components or (), closure)))):
            label, manifest = self._release_manifest(request)
        if components is not None:
            here = {k for k, c in manifest.components.items() if c.archive_for(platform)}
            if only_offered:
                components = [n for n in components if comp.nvidia_name(n) in here]
            components = (*components, *(n for n in also if n in here and n not in components))
        artifacts = (
            []  # only libraries were asked for: the release's own components stay as they are
            if components == ()
            else choose_redist(
                manifest,
                platform,
                components,
                self.nvidia.redist_url,
                self.nvidia.manifest_url(label),
                closure=closure,
            )
        )
        facts = ReleaseFacts(
            label,
            manifest,
            self.nvidia.manifest_url(label),
            None,
            "",
            None,
            "",
            self._listing_dates.get(label),
        )
        probed = self._probe_all(artifacts)
        return Resolution(request.text, platform, "redist", facts.release(), tuple(probed))

    # -- pypi channel -------------------------------------------------------------
    def _forecast(
        self, request: ReleaseRequest, components: Sequence[str], closure: bool
    ) -> list[str]:
        """The PyPI projects of the wheels ``components`` (with what each needs, for
        ``closure``) will pin, as :func:`~cudaup.core.components.pypi_project` forecasts
        them for the request's CUDA major; none for ``latest``, which has no major, or for
        the whole toolkit (no components named).  Which project a release pins is only
        known from its metadata: a forecast only lets requests start sooner."""
        if request.kind == "latest":
            return []
        major = request.parts[0]
        wanted = _wanted(components, closure)
        forecast = (comp.pypi_project(name, major) for name in wanted)
        return list(dict.fromkeys(map(canonicalize_name, forecast)))

    def _pages_ahead(
        self, projects: Sequence[str]
    ) -> AbstractContextManager[dict[str, Future[list[DistFile]]]]:
        """The pages of the ``projects`` forecast (:meth:`_forecast`), being read while
        ``cuda-toolkit``'s page and metadata are: a round trip less before the downloads,
        two with the connections those pages open.

        A pick takes a page from here only when the metadata pins that very project: a
        page read for nothing (or failing) is dropped unasked, so a wrong forecast costs
        a request, never an answer.  Leaving the ``with`` waits for the pages still being
        read: nothing of a resolution outlives it (a page's answer is being written into
        the cache)."""
        return in_background_each(
            self.pypi.files, projects, self.settings.workers, "cudaup-page-ahead"
        )

    def _offer_forecast(
        self,
        offer: HeadStartOffer,
        label: str,
        ahead: dict[str, Future[list[DistFile]]],
        platform: Platform,
    ) -> None:
        """``offer`` each wheel the release table cudaup ships says release ``label`` pins
        (data/release_components.json), once its page, read ahead, names it.  A forecast
        only: the metadata, read meanwhile, says which wheels the release takes, and a
        page that fails or names no such wheel offers nothing (the pick says why)."""
        pins = shipped_table().get(label, {})
        for project, page in ahead.items():
            component = comp.component_of_project(project)
            if (shipped := pins.get(component)) is None:
                continue
            wanted = Requirement(f"{project}=={shipped}.*")

            def read(
                page: Future[list[DistFile]],
                wanted: Requirement = wanted,
                component: str = component,
            ) -> None:
                if page.cancelled() or page.exception() is not None:
                    return
                wheel = choose_wheel(page.result(), wanted, platform)
                if wheel is not None:
                    offer(label, wheel_artifact(wheel, component, platform, ()))

            page.add_done_callback(read)

    def _resolve_pypi(
        self,
        request: ReleaseRequest,
        platform: Platform,
        components: Sequence[str] | None,
        closure: bool = False,
        also: Sequence[str] = (),
        only_offered: bool = False,
    ) -> Resolution:
        forecast = self._forecast(request, [*(components or ()), *also], closure)
        with self._pages_ahead(forecast) as ahead:
            meta_files = [f for f in self.pypi.files("cuda-toolkit") if f.is_wheel and not f.yanked]
            by_version: dict[Version, DistFile] = {}
            for file in meta_files:
                if file.version is not None:
                    by_version.setdefault(file.version, file)
            finals = [v for v in by_version if not v.is_prerelease]
            picked = request.pick(finals) or (
                request.pick(v for v in by_version if v.is_prerelease)
                if request.exact_label
                else []
            )
            if not picked:
                raise self._not_found(request, by_version, " on PyPI (cuda-toolkit)")
            version = picked[0]
            meta_file = by_version[version]
            if self.head_start is not None:
                self._offer_forecast(self.head_start, release_key(version), ahead, platform)
            # The index that serves cuda-toolkit's wheel serves the others from the same
            # host (PyPI's files host, a mirror's own): their downloads' connections open
            # while its metadata is read.
            from cudaup.net.deadline import opening_ahead  # noqa: PLC0415 - urllib3 with it

            with opening_ahead(self._connections_ahead(len(forecast))):
                metadata = self.pypi.metadata(meta_file)
            provided = [str(e) for e in (metadata.provides_extra or [])]
            if components is not None:
                needed = [n for n in also if comp.pypi_extra(n) in provided and n not in components]
                components = (*components, *needed)
            if components is None:
                extras = ["all"] if "all" in provided else provided
            else:
                extras = []
                for name in components:
                    extra = comp.pypi_extra(name)
                    if extra not in provided:
                        if only_offered:
                            continue
                        raise comp.unknown_component(name, provided, f"cuda-toolkit {version}")
                    extras.append(extra)
                if closure:
                    offered = {comp.nvidia_name(e) for e in provided}
                    extras = [comp.pypi_extra(n) for n in comp.with_closure(extras, offered)]
            requirements = requirements_for(metadata.requires_dist or [], extras, platform)
            if not requirements and components != ():
                raise ArtifactNotFoundError(
                    f"cuda-toolkit {version} requires no wheels for {platform} with extras {', '.join(extras)}"
                )
            label = release_key(version)
            meta_source = SourceRef(
                f"cuda-toolkit {version} metadata", meta_file.url, ("components", "version pins")
            )

            def pick(requirement: Requirement) -> Artifact:
                read = ahead.get(canonicalize_name(requirement.name))
                files = read.result() if read is not None else self.pypi.files(requirement.name)
                wheel = choose_wheel(files, requirement, platform)
                if wheel is None:
                    raise ArtifactNotFoundError(
                        f"PyPI has no {requirement.name} wheel matching {requirement.specifier} for {platform}"
                    )
                index_source = SourceRef(
                    "PyPI simple API",
                    self.pypi.project_url(requirement.name),
                    ("url", "sha256", "size"),
                )
                component = comp.component_of_project(requirement.name)
                return wheel_artifact(wheel, component, platform, [meta_source, index_source])

            artifacts = self._probe_all(self._map(pick, requirements))
            release = Release(
                label, nvidia_label(Version(label)), None, None, version.is_prerelease
            )
            notes = [
                f"cuda-toolkit {version} on {self.settings.pypi_url}, extras: {', '.join(extras)}"
            ]
            return Resolution(
                request.text, platform, "pypi", release, tuple(artifacts), tuple(notes)
            )


def _wanted(components: Sequence[str], closure: bool) -> list[str]:
    """The components cudaup knows among ``components`` (with what each needs, for
    ``closure``), by NVIDIA's names."""
    known = set(comp.ALIASES.values())
    names = [comp.nvidia_name(name) for name in components]
    return [n for n in (comp.with_closure(names, known) if closure else names) if n in known]
