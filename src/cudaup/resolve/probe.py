"""``cudaup probe URL``: check a URL cheaply and, when it fails, say why in words.

``wget --spider`` answers a wrong guess with "exit 8".  cudaup answers with the
status, what the URL was supposed to be (release, platform), and what the
release really publishes for that platform according to its sources.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from typing import Any

from cudaup.config import Settings
from cudaup.errors import ArtifactNotFoundError, CudaupError
from cudaup.net.http import HttpClient
from cudaup.resolve.sources import NvidiaSource, ProbeResult

_INSTALLER_PATH = re.compile(
    r"/compute/cuda/(\d+\.\d+\.\d+)/(?:local_installers|network_installers)/([^/?#]+)$"
)


@dataclass(frozen=True, slots=True)
class ProbeReport:
    url: str
    status: int
    exists: bool
    size: int | None
    md5: str | None
    explanation: str
    suggestion: dict[str, Any] | None

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": 1,
            "url": self.url,
            "status": self.status,
            "exists": self.exists,
            "size": self.size,
            "md5": self.md5,
            "explanation": self.explanation,
            "suggestion": self.suggestion,
        }


def probe_url(settings: Settings, url: str, http: HttpClient | None = None) -> ProbeReport:
    """HEAD ``url`` (moved onto the configured mirror) and explain the answer."""
    target = settings.rewrite(url)
    nvidia = NvidiaSource(http if http is not None else HttpClient(settings))
    result = nvidia.probe(target)
    match = _INSTALLER_PATH.search(target)
    if not result.exists:
        return _explain_missing(settings, nvidia.http, target, result, match)
    md5 = None
    if match:
        # The md5 is a bonus for an existing file: an unreachable md5sum.txt must
        # not turn a good answer into an error.
        with contextlib.suppress(CudaupError):
            md5 = (nvidia.md5sums(match.group(1)) or {}).get(match.group(2))
    size = f"{result.size} bytes" if result.size is not None else "size unknown"
    known = f"; md5sum.txt gives md5 {md5}" if md5 else ""
    return ProbeReport(
        target,
        result.status,
        True,
        result.size,
        md5,
        f"{result.status}: the file exists ({size}){known}",
        None,
    )


def _explain_missing(
    settings: Settings,
    http: HttpClient,
    target: str,
    result: ProbeResult,
    match: re.Match[str] | None,
) -> ProbeReport:
    """What the release publishes instead of a file that is not there."""
    # Imported here: only a missing file needs the resolver (packaging, every parser:
    # ~50 ms of imports), and a probe that finds its file should cost about a request.
    from cudaup.core.platforms import describe  # noqa: PLC0415
    from cudaup.core.versions import nearest, parse_request  # noqa: PLC0415
    from cudaup.nvidia.installers import classify_installer  # noqa: PLC0415
    from cudaup.resolve.choose import choose_installer  # noqa: PLC0415
    from cudaup.resolve.resolver import Resolver  # noqa: PLC0415

    resolver = Resolver(settings, http)
    reason = f"{result.status}: no such file"

    def missing(explanation: str, suggestion: dict[str, Any] | None = None) -> ProbeReport:
        return ProbeReport(target, result.status, False, None, None, explanation, suggestion)

    if not match:
        return missing(reason)
    label, filename = match.groups()
    info = classify_installer(filename)
    try:
        facts = resolver.facts(label)
    except CudaupError as exc:
        return missing(f"{reason} (and the release's sources could not be read: {exc})")
    if facts.empty:
        try:
            versions = resolver.listed_versions()
            close = " and ".join(str(v) for v in nearest(parse_request(label), versions))
        except CudaupError:
            close = ""
        hint = f"; nearest releases: {close}" if close else ""
        return missing(f"{reason}: there is no CUDA release {label}{hint}")
    if info is None:
        return missing(f"{reason} in release {label}")
    try:
        choice = choose_installer(facts, info.platform, resolver.nvidia.local_installers_url(label))
    except ArtifactNotFoundError as exc:
        return missing(f"{reason} in release {label}; {exc}")
    kind = "runfile" if choice.filename.endswith(".run") else "installer"
    bundles = f" (it bundles driver {choice.driver})" if choice.driver else ""
    explanation = (
        f"{reason} in release {label}; that release's {describe(info.platform)} {kind} is "
        f"{choice.filename}{bundles}"
    )
    suggestion = {
        "filename": choice.filename,
        "url": choice.url,
        "md5": choice.md5,
        "driver": choice.driver,
        "platform": info.platform,
        "sources": [s.to_json() for s in choice.sources],
    }
    return missing(explanation, suggestion)
