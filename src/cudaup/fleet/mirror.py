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

Every path the mirror writes comes from :func:`~cudaup.fleet.lockfile.mirror_path`
(a checked relative path) and is built by :func:`cudaup.util.paths.inside`, so a
lock cannot make it write outside ``DIR``, nor through a symbolic link planted
below it; the PEP 751 file is read from beside the lock only under its checked
name.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from cudaup.config import (
    DEFAULT_ARCHIVE_URL,
    DEFAULT_DOWNLOAD_URL,
    DEFAULT_PRERELEASE_URL,
    Settings,
)
from cudaup.core.documents import load_toml
from cudaup.core.names import check_size
from cudaup.download import DownloadRequest, Progress, download, is_verified
from cudaup.download.publish import hash_file
from cudaup.errors import IntegrityError, NetworkError, SourceFormatError
from cudaup.fleet.lockfile import MAX_LOCK_BYTES, LockFile, mirror_path
from cudaup.net.http import PUBLIC_HOSTS, HttpClient
from cudaup.util import paths
from cudaup.util.atomic import atomic_write
from cudaup.util.paths import inside
from cudaup.util.reading import read_regular

#: The directories the mirror writes indexes into (and reads ``packages/`` back).
_INDEXED = (("compute", "cuda", "redist"), ("packages",), ("simple",))
_MANIFEST = re.compile(r"redistrib_(\d+(?:\.\d+){1,3})\.json$")


def origins(settings: Settings) -> list[str]:
    """Roots a locked URL may start with: NVIDIA's hosts and the configured bases."""
    roots = [settings.download_url, settings.archive_url, settings.prerelease_url]
    roots += [DEFAULT_DOWNLOAD_URL, DEFAULT_ARCHIVE_URL, DEFAULT_PRERELEASE_URL]
    return list(dict.fromkeys(r.rstrip("/") for r in roots))


def lock_origins(settings: Settings, mirror: str | None = None) -> list[str]:
    """Where a lock's files may come from: NVIDIA's and PyPI's own hosts, the configured
    bases, and the mirror (see :meth:`LockFile.check_hosts`)."""
    public = [f"https://{host}" for host in sorted(h for h in PUBLIC_HOSTS if h)]
    return [*origins(settings), settings.pypi_url, *public, *([mirror] if mirror else [])]


@dataclass
class MirrorReport:
    fetched: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    documents: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        return {"fetched": self.fetched, "kept": self.kept, "documents": self.documents}


_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def _tables(value: object, what: str) -> list[dict[str, object]]:
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise SourceFormatError(f"{what} must be an array of tables")
    return value


def _pylock_wheels(path: Path) -> Iterable[tuple[str, int | None, str]]:
    """(url, size, sha256) of every wheel a PEP 751 lock names."""
    try:
        data = read_regular(path, MAX_LOCK_BYTES)
    except OSError as exc:
        raise SourceFormatError(f"cannot read the PEP 751 lock {path}: {exc.strerror}") from None
    document = load_toml(data, what=str(path), max_bytes=MAX_LOCK_BYTES)
    for package in _tables(document.get("packages", []), f"{path}: 'packages'"):
        for wheel in _tables(package.get("wheels", []), f"{path}: 'wheels'"):
            hashes = wheel.get("hashes", {})
            sha = hashes.get("sha256") if isinstance(hashes, dict) else None
            url, size = wheel.get("url"), wheel.get("size")
            if not url or not sha:
                continue
            if not isinstance(url, str) or not isinstance(sha, str) or not _SHA256.match(sha):
                raise SourceFormatError(f"{path}: a wheel's url or sha256 is malformed ({url!r})")
            yield (
                url,
                None if size is None else check_size(size, field="size", where=url, text=False),
                sha,
            )


def _in_mirror(directory: Path, relative: str) -> Path:
    """``directory/relative``, built by :func:`inside` (``relative`` is already checked)."""
    return inside(directory, *relative.split("/"), field="mirror path")


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
    lock.check_hosts(lock_origins(settings))  # before anything is fetched
    for where in _INDEXED:  # a link planted for one of them: refused before anything is fetched
        paths.directory(directory, *where, field="mirror path")
    roots = origins(settings)
    files: list[tuple[str, int | None, str | None, str | None]] = [
        (f.url, f.size, f.sha256, f.md5) for toolkit in lock.toolkits for f in toolkit.files
    ]
    for wheels in lock.wheels:
        pylock = inside(lock_dir, wheels.pylock, field="pylock")
        files += [(url, size, sha, None) for url, size, sha in _pylock_wheels(pylock)]
    checked: dict[str, str] = {}  # the files this run verified, by mirror path: not read again
    for url, size, sha256, md5 in files:
        relative = mirror_path(url, roots)
        if relative.endswith(".whl"):
            _check_wheel_name(relative.rsplit("/", 1)[-1], url)
        target = _in_mirror(directory, relative)
        request = DownloadRequest(settings.rewrite(url), target.name, size, sha256, md5)
        if is_verified(target, request):
            report.kept.append(relative)
        else:
            download(request, target.parent, http=http, progress=progress)
            report.fetched.append(relative)
        if sha256 is not None:
            checked[relative] = sha256
    for toolkit in lock.toolkits:
        for url in toolkit.sources:
            relative = mirror_path(url, roots)
            response = http.get(settings.rewrite(url))
            if not response.ok:
                raise NetworkError(f"{url} answered HTTP {response.status} while mirroring")
            if not relative.endswith(".whl"):
                atomic_write(_in_mirror(directory, relative), response.body)
            else:
                name = _check_wheel_name(relative.rsplit("/", 1)[-1], url)
                atomic_write(inside(directory, "packages", name), response.body)
            report.documents.append(relative)
    _write_listing(directory)
    _write_simple_index(directory, checked)
    return report


def _check_wheel_name(name: str, url: str) -> str:
    """A wheel's file name as PEP 427 writes it: the simple index is built from it."""
    try:
        parse_wheel_filename(name)
    except (InvalidWheelFilename, ValueError):
        raise IntegrityError(f"{url} is refused: {name!r} is not a wheel's file name") from None
    return name


def _write_listing(directory: Path) -> None:
    """``compute/cuda/redist/`` in the shape of NVIDIA's auto-generated index."""
    # directory(): a link planted for redist/ itself would carry the listing elsewhere.
    redist = paths.directory(directory, "compute", "cuda", "redist", field="mirror path")
    if not redist.is_dir():
        return
    items = [
        f"<li><span class='file'><a href='{p.name}'>{p.name}</a></span></li>"
        for p in sorted(redist.iterdir())
        if _MANIFEST.match(p.name)
    ]
    items += [
        f"<li><span class='dir'><a href='{html.escape(p.name)}/'>{html.escape(p.name)}/</a></span></li>"
        for p in sorted(redist.iterdir())
        if p.is_dir()
    ]
    body = (
        "<!-- Auto-generated directory index (cudaup mirror) -->\n<ul class='directorycontents'>\n"
        + "\n".join(items)
        + "\n</ul>\n"
    )
    atomic_write(inside(redist, "index.html"), body)


def _write_simple_index(directory: Path, checked: dict[str, str]) -> None:
    """A static PEP 503 index of every wheel under ``packages/``, with the sha256 ``checked``
    gives for those this run verified (each GPU library's wheel read once, not twice) and
    the others' hashed a block at a time (a cuBLAS wheel is 500 MB)."""
    packages = paths.directory(directory, "packages", field="mirror path")
    if not packages.is_dir():
        return
    projects: dict[str, list[Path]] = {}
    for wheel in sorted(packages.glob("*.whl")):
        try:
            name = canonicalize_name(parse_wheel_filename(wheel.name)[0])
        except (InvalidWheelFilename, ValueError):
            continue  # not put there by a mirror run: not listed
        projects.setdefault(name, []).append(wheel)
    simple = paths.directory(directory, "simple", field="mirror path")
    for project, wheels in projects.items():
        links = []
        for wheel in wheels:
            digest = checked.get(f"packages/{wheel.name}") or hash_file(wheel, "sha256")
            links.append(
                f'<a href="../../packages/{html.escape(wheel.name)}#sha256={digest}">{html.escape(wheel.name)}</a><br/>'
            )
        page = (
            f"<!DOCTYPE html>\n<html><body>\n<h1>Links for {project}</h1>\n"
            + "\n".join(links)
            + "\n</body></html>\n"
        )
        atomic_write(inside(simple, project, "index.html"), page)
    root = "\n".join(f'<a href="{p}/">{p}</a><br/>' for p in sorted(projects))
    atomic_write(
        inside(simple, "index.html"), f"<!DOCTYPE html>\n<html><body>\n{root}\n</body></html>\n"
    )
