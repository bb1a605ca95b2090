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
from cudaup.errors import CudaupError
from cudaup.net.http import HttpClient
from cudaup.resolve.sources import NvidiaSource

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
        # Only a missing file needs the resolver (packaging, every parser: ~50 ms of
        # imports): a probe that finds its file costs about one request.
        from cudaup.resolve.missing import explain_missing  # noqa: PLC0415

        return explain_missing(settings, nvidia.http, target, result, match)
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
