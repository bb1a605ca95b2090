"""``cudaup mirror LOCK DIR``: a directory any static web server can serve.

It holds exactly the files of a lock under the same paths as at their origin
(``compute/cuda/…``, ``compute/cuda/redist/…``, the archive pages at the
root), the documents resolution reads (manifests, ``md5sum.txt``, pages,
the ``cuda-toolkit`` meta wheels) verbatim, a redist listing in NVIDIA's
format, and a static PEP 503 index under ``simple/`` for every wheel (from the
pypi channel and the ``--with`` locks) kept under ``packages/``.  With
``--mirror URL`` pointing every host there, ``resolve``, ``install`` and
``pip install --index-url URL/simple`` answer as the origins did.  A second
run fetches only what is missing or changed, and re-verifies what it keeps.
"""

from __future__ import annotations

import hashlib
import html
import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from packaging.utils import canonicalize_name, parse_wheel_filename

from cudaup.config import (
    DEFAULT_ARCHIVE_URL,
    DEFAULT_DOWNLOAD_URL,
    DEFAULT_PRERELEASE_URL,
    Settings,
)
from cudaup.download import DownloadRequest, Progress, fetch, is_verified
from cudaup.errors import NetworkError
from cudaup.fleet.lockfile import LockFile, mirror_path
from cudaup.net.http import HttpClient
from cudaup.util.atomic import atomic_write

_MANIFEST = re.compile(r"redistrib_(\d+(?:\.\d+){1,3})\.json$")


def origins(settings: Settings) -> list[str]:
    """Roots a locked URL may start with: NVIDIA's hosts and the configured bases."""
    roots = [settings.download_url, settings.archive_url, settings.prerelease_url]
    roots += [DEFAULT_DOWNLOAD_URL, DEFAULT_ARCHIVE_URL, DEFAULT_PRERELEASE_URL]
    return list(dict.fromkeys(r.rstrip("/") for r in roots))


@dataclass
class MirrorReport:
    fetched: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    documents: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        return {"fetched": self.fetched, "kept": self.kept, "documents": self.documents}


def _pylock_wheels(path: Path) -> Iterable[tuple[str, int | None, str]]:
    """(url, size, sha256) of every wheel a PEP 751 lock names."""
    document = tomllib.loads(path.read_text())
    for package in document.get("packages", []):
        for wheel in package.get("wheels", []):
            sha = wheel.get("hashes", {}).get("sha256")
            if wheel.get("url") and sha:
                yield wheel["url"], wheel.get("size"), sha


def build_mirror(
    lock: LockFile,
    lock_dir: Path,
    directory: Path,
    *,
    settings: Settings,
    http: HttpClient,
    progress: Progress | None = None,
) -> MirrorReport:
    report = MirrorReport()
    roots = origins(settings)
    files: list[tuple[str, int | None, str | None, str | None]] = [
        (f.url, f.size, f.sha256, f.md5) for toolkit in lock.toolkits for f in toolkit.files
    ]
    for wheels in lock.wheels:
        files += [
            (url, size, sha, None) for url, size, sha in _pylock_wheels(lock_dir / wheels.pylock)
        ]
    for url, size, sha256, md5 in files:
        relative = mirror_path(url, roots)
        target = directory / relative
        request = DownloadRequest(settings.rewrite(url), target.name, size, sha256, md5)
        if is_verified(target, request):
            report.kept.append(relative)
            continue
        fetch(request, target.parent, http=http, progress=progress)
        report.fetched.append(relative)
    for toolkit in lock.toolkits:
        for url in toolkit.sources:
            relative = mirror_path(url, roots)
            response = http.get(settings.rewrite(url))
            if not response.ok:
                raise NetworkError(f"{url} answered HTTP {response.status} while mirroring")
            if not relative.endswith(".whl"):
                atomic_write(directory / relative, response.body)
            else:
                atomic_write(directory / "packages" / relative.rsplit("/", 1)[-1], response.body)
            report.documents.append(relative)
    _write_listing(directory)
    _write_simple_index(directory)
    return report


def _write_listing(directory: Path) -> None:
    """``compute/cuda/redist/`` in the shape of NVIDIA's auto-generated index."""
    redist = directory / "compute" / "cuda" / "redist"
    if not redist.is_dir():
        return
    items = [
        f"<li><span class='file'><a href='{p.name}'>{p.name}</a></span></li>"
        for p in sorted(redist.iterdir())
        if _MANIFEST.match(p.name)
    ]
    items += [
        f"<li><span class='dir'><a href='{p.name}/'>{p.name}/</a></span></li>"
        for p in sorted(redist.iterdir())
        if p.is_dir()
    ]
    body = (
        "<!-- Auto-generated directory index (cudaup mirror) -->\n<ul class='directorycontents'>\n"
        + "\n".join(items)
        + "\n</ul>\n"
    )
    atomic_write(redist / "index.html", body)


def _write_simple_index(directory: Path) -> None:
    """A static PEP 503 index of every wheel under ``packages/``."""
    packages = directory / "packages"
    if not packages.is_dir():
        return
    projects: dict[str, list[Path]] = {}
    for wheel in sorted(packages.glob("*.whl")):
        projects.setdefault(canonicalize_name(parse_wheel_filename(wheel.name)[0]), []).append(
            wheel
        )
    simple = directory / "simple"
    for project, wheels in projects.items():
        links = []
        for wheel in wheels:
            digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
            links.append(
                f'<a href="../../packages/{html.escape(wheel.name)}#sha256={digest}">{html.escape(wheel.name)}</a><br/>'
            )
        page = (
            f"<!DOCTYPE html>\n<html><body>\n<h1>Links for {project}</h1>\n"
            + "\n".join(links)
            + "\n</body></html>\n"
        )
        atomic_write(simple / project / "index.html", page)
    root = "\n".join(f'<a href="{p}/">{p}</a><br/>' for p in sorted(projects))
    atomic_write(simple / "index.html", f"<!DOCTYPE html>\n<html><body>\n{root}\n</body></html>\n")
