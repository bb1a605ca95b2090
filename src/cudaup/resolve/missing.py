"""What a release publishes instead of a file that is not there: ``probe``'s explanation
of a 404, from the release's own sources (kept apart so that a probe that finds its
file loads none of this)."""

from __future__ import annotations

import re
from typing import Any

from cudaup.config import Settings
from cudaup.core.platforms import describe
from cudaup.core.versions import nearest, parse_request
from cudaup.errors import ArtifactNotFoundError, CudaupError
from cudaup.net.http import HttpClient
from cudaup.nvidia.installers import classify_installer
from cudaup.resolve.choose import choose_installer
from cudaup.resolve.probe import ProbeReport
from cudaup.resolve.resolver import Resolver
from cudaup.resolve.sources import ProbeResult


def explain_missing(
    settings: Settings,
    http: HttpClient,
    target: str,
    result: ProbeResult,
    match: re.Match[str] | None,
) -> ProbeReport:
    """What the release publishes instead of a file that is not there."""
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
