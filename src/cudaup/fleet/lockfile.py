"""``cuda.lock.toml``: every byte of a toolkit decided, per platform, with hashes.

Schema (``lock-version = 1``), written in a fixed order (toolkits by platform,
components, files by component and URL, sources and wheels sorted) so that it reads
well in a diff and the same lock is the same bytes whatever order it was asked in::

    lock-version = 1
    created-by = "cudaup 0.1.0"
    request = "13.0.1"

    [[toolkits]]
    platform = "linux-x86_64"
    release = "13.0.1"
    channel = "redist"
    components = ["cuda_cudart", "cuda_nvcc"]
    driver = "580.82.07"              # the driver the release bundles, if any

    [[toolkits.files]]
    component = "cuda_nvcc"
    version = "13.0.88"
    url = "https://developer.download.nvidia.com/compute/cuda/redist/…"
    size = 26732376
    sha256 = "…"
    md5 = "…"

    [[toolkits.sources]]              # the documents resolution read: a mirror serves them too
    url = "https://developer.download.nvidia.com/compute/cuda/redist/redistrib_13.0.1.json"

    [[wheels]]                        # --with: the plan's pins, locked by a PEP 751 file beside this one
    platform = "linux-x86_64"
    pylock = "pylock.cuda-lock-linux-x86_64.toml"
    cuda-line = "13.0"

Reading validates every field; a hand-edited lock whose hash is not 64 hex
digits is refused before anything is downloaded, and one whose hash is wrong
fails the download's verification before anything is installed.  A lock is
input from outside like any document: a broken one (not TOML, not UTF-8,
nested too deeply, over 16 MB, a field of the wrong type) is
:class:`~cudaup.errors.SourceFormatError` (exit 8), and every value that would
choose a path (``release``, component names, file URLs and the names they end
in, source URLs, the ``pylock`` file name) or reach a terminal (``label``,
``driver``, versions) is checked by :mod:`cudaup.core.names` and refused as
:class:`~cudaup.errors.IntegrityError` (exit 7), naming the field and the value.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import tomli_w

from cudaup import __version__
from cudaup.core.documents import load_toml
from cudaup.core.model import Artifact, Channel, Resolution, SourceRef
from cudaup.core.names import (
    check_component,
    check_file_name,
    check_file_url,
    check_label,
    check_relative_path,
    check_release,
    check_size,
)
from cudaup.core.platforms import Platform, parse_platform
from cudaup.errors import IntegrityError, SourceFormatError, UsageError
from cudaup.util.atomic import atomic_write
from cudaup.util.reading import read_regular

LOCK_VERSION = 1
#: A lock of every platform with every component is a few hundred KB.
MAX_LOCK_BYTES = 16 * 1024 * 1024
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_MD5 = re.compile(r"^[0-9a-f]{32}$")
#: PEP 751's name of a lock file: ``pylock.toml`` or ``pylock.<name>.toml``.
_PYLOCK_NAME = re.compile(r"^pylock(?:\.[^.]+)?\.toml$")


@dataclass(frozen=True, slots=True)
class LockedFile:
    component: str
    version: str | None
    url: str
    size: int
    sha256: str | None
    md5: str | None

    @property
    def filename(self) -> str:
        return self.url.rsplit("/", 1)[-1]

    def artifact(self, platform: Platform, channel: Channel, driver: str | None) -> Artifact:
        source = SourceRef("cuda.lock.toml", None, ("url", "size", "sha256", "md5"))
        return Artifact(
            filename=self.filename,
            url=self.url,
            size=self.size,
            md5=self.md5,
            sha256=self.sha256,
            component=self.component,
            component_version=self.version,
            platform=platform,
            channel=channel,
            driver=driver,
            sources=(source,),
            verified=True,
        )


@dataclass(frozen=True, slots=True)
class LockedToolkit:
    platform: Platform
    release: str
    label: str
    channel: Channel
    components: tuple[str, ...]
    driver: str | None
    files: tuple[LockedFile, ...]
    sources: tuple[str, ...] = ()

    def artifacts(self) -> list[Artifact]:
        return [f.artifact(self.platform, self.channel, self.driver) for f in self.files]


@dataclass(frozen=True, slots=True)
class LockedWheels:
    platform: Platform
    pylock: str
    cuda_line: str | None


@dataclass
class LockFile:
    request: str
    toolkits: list[LockedToolkit] = field(default_factory=list)
    wheels: list[LockedWheels] = field(default_factory=list)
    #: where it was read from, for messages ("" for a lock just made)
    path: str = field(default="", compare=False)

    def check_hosts(self, origins: Sequence[str]) -> None:
        """Refuse a file or source URL on a host none of ``origins`` (URLs) is on.

        A lock pins hashes, not hosts: a file on any other host whose hash matched
        would be fetched and installed, so a lock edited to name one is refused with
        the field and the host, whatever ``--mirror`` says.  Hosts compare with their
        port (a scheme's default when none is given).
        """
        allowed = {_host(origin) for origin in origins}
        for index, toolkit in enumerate(self.toolkits):
            named = [(f"files[{i}]", f.url) for i, f in enumerate(toolkit.files)]
            named += [(f"sources[{i}]", url) for i, url in enumerate(toolkit.sources)]
            for entry, url in named:
                host, port = _host(url)
                if (host, port) not in allowed:
                    shown = host if port is None else f"{host}:{port}"
                    raise IntegrityError(
                        f"url {url!r} in {self.path} toolkits[{index}].{entry} is refused: "
                        f"its host {shown} is neither one of the origins nor the mirror"
                    )

    def for_platform(self, platform: Platform) -> LockedToolkit:
        for toolkit in self.toolkits:
            if toolkit.platform == platform:
                return toolkit
        have = ", ".join(t.platform for t in self.toolkits) or "none"
        raise UsageError(
            f"the lock has no toolkit for {platform} (it has {have}); lock it with --platform {platform}"
        )

    def write(self, path: Path) -> None:
        """Write the lock atomically: a reader sees the old lock or the new, never a part."""
        atomic_write(path, self.to_toml())

    def to_toml(self) -> str:
        """The lock's text.  Toolkits (by platform), components, files (by component and
        URL), sources and wheels are sorted, so the same lock made from arguments in
        another order is the same bytes."""
        document: dict[str, Any] = {
            "lock-version": LOCK_VERSION,
            "created-by": f"cudaup {__version__}",
            "request": self.request,
            "toolkits": [
                {
                    "platform": t.platform,
                    "release": t.release,
                    "label": t.label,
                    "channel": t.channel,
                    "components": sorted(t.components),
                    **({"driver": t.driver} if t.driver else {}),
                    "files": [
                        {
                            "component": f.component,
                            **({"version": f.version} if f.version else {}),
                            "url": f.url,
                            "size": f.size,
                            **({"sha256": f.sha256} if f.sha256 else {}),
                            **({"md5": f.md5} if f.md5 else {}),
                        }
                        for f in sorted(t.files, key=lambda f: (f.component, f.url))
                    ],
                    "sources": [{"url": url} for url in sorted(set(t.sources))],
                }
                for t in sorted(self.toolkits, key=lambda t: t.platform)
            ],
        }
        if self.wheels:
            document["wheels"] = [
                {
                    "platform": w.platform,
                    "pylock": w.pylock,
                    **({"cuda-line": w.cuda_line} if w.cuda_line else {}),
                }
                for w in sorted(self.wheels, key=lambda w: w.platform)
            ]
        return tomli_w.dumps(document)


def locked_toolkit(
    resolution: Resolution, canonical: Callable[[str], str] = lambda url: url
) -> LockedToolkit:
    """Freeze a resolution; every file must carry a size and a checksum.

    ``canonical`` maps URLs on a configured base back to NVIDIA's own hosts.
    """
    files = []
    for artifact in resolution.artifacts:
        if artifact.size is None or (artifact.sha256 is None and artifact.md5 is None):
            raise UsageError(
                f"{artifact.filename} has no known size or checksum; a lock needs both (do not use --no-probe)"
            )
        files.append(
            LockedFile(
                artifact.component,
                artifact.component_version,
                canonical(artifact.url),
                artifact.size,
                artifact.sha256,
                artifact.md5,
            )
        )
    sources = sorted(
        {
            canonical(s.url)
            for a in resolution.artifacts
            for s in a.sources
            if s.url and s.kind not in {"HEAD probe", "PyPI simple API"}
        }
    )
    return LockedToolkit(
        resolution.platform,
        resolution.release.version,
        resolution.release.label,
        resolution.channel,
        tuple(sorted({a.component for a in resolution.artifacts})),
        resolution.release.driver,
        tuple(files),
        tuple(sources),
    )


def _text(entry: dict[str, Any], key: str, where: str, *, optional: bool = False) -> str | None:
    value = entry.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value:
        raise SourceFormatError(f"{where}: {key!r} must be a non-empty string")
    return value


def _label(entry: dict[str, Any], key: str, where: str) -> str | None:
    """An optional one-line text field (never a path)."""
    value = _text(entry, key, where, optional=True)
    return (
        None if value is None else check_label(value, field=key, where=where, error=IntegrityError)
    )


def _list(entry: dict[str, Any], key: str, where: str) -> list[Any]:
    value = entry.get(key, [])
    if not isinstance(value, list):
        raise SourceFormatError(f"{where}: {key!r} must be an array")
    return value


def _platform(entry: dict[str, Any], where: str) -> Platform:
    text = _text(entry, "platform", where)
    assert text is not None
    try:
        return parse_platform(text)
    except UsageError as exc:
        raise SourceFormatError(f"{where}: {exc}") from None


def _file(entry: Any, where: str) -> LockedFile:
    if not isinstance(entry, dict):
        raise SourceFormatError(f"{where}: expected a table")
    url = check_file_url(_text(entry, "url", where), field="url", where=where, error=IntegrityError)
    size = check_size(entry.get("size"), field="size", where=where, text=False)
    sha256, md5 = entry.get("sha256"), entry.get("md5")
    if sha256 is not None and (not isinstance(sha256, str) or not _SHA256.match(sha256)):
        raise SourceFormatError(f"{where}: 'sha256' must be 64 lower-case hex digits")
    if md5 is not None and (not isinstance(md5, str) or not _MD5.match(md5)):
        raise SourceFormatError(f"{where}: 'md5' must be 32 lower-case hex digits")
    if sha256 is None and md5 is None:
        raise SourceFormatError(f"{where}: a locked file needs a sha256 or md5")
    component = check_component(
        _text(entry, "component", where), field="component", where=where, error=IntegrityError
    )
    return LockedFile(component, _label(entry, "version", where), url, size, sha256, md5)


def _toolkit(entry: Any, where: str) -> LockedToolkit:
    if not isinstance(entry, dict):
        raise SourceFormatError(f"{where}: expected a table")
    channel = _text(entry, "channel", where)
    if channel not in {"installer", "redist", "pypi"}:
        raise SourceFormatError(f"{where}: unknown channel {channel!r}")
    files = tuple(
        _file(f, f"{where}.files[{i}]") for i, f in enumerate(_list(entry, "files", where))
    )
    if not files:
        raise SourceFormatError(f"{where}: no files")
    # The release names the store's directory (toolkits/<release>): a release number only.
    release = check_release(
        _text(entry, "release", where), field="release", where=where, error=IntegrityError
    )
    components = tuple(
        check_component(c, field="component", where=where, error=IntegrityError)
        for c in _list(entry, "components", where)
    )
    sources: list[str] = []
    for i, source in enumerate(_list(entry, "sources", where)):
        if not isinstance(source, dict):
            raise SourceFormatError(f"{where}.sources[{i}]: expected a table")
        sources.append(
            check_file_url(
                _text(source, "url", f"{where}.sources[{i}]"),
                field="url",
                where=f"{where}.sources[{i}]",
                error=IntegrityError,
            )
        )
    return LockedToolkit(
        platform=_platform(entry, where),
        release=release,
        label=_label(entry, "label", where) or "",
        channel=channel,  # type: ignore[arg-type]
        components=components,
        driver=_label(entry, "driver", where),
        files=files,
        sources=tuple(sources),
    )


def _wheels(entry: Any, where: str) -> LockedWheels:
    if not isinstance(entry, dict):
        raise SourceFormatError(f"{where}: expected a table")
    # The PEP 751 file is read from beside the lock: a plain name, PEP 751's pattern.
    pylock = check_file_name(
        _text(entry, "pylock", where), field="pylock", where=where, error=IntegrityError
    )
    if not _PYLOCK_NAME.match(pylock):
        raise IntegrityError(
            f"pylock {pylock!r} in {where} is refused: a PEP 751 lock is named pylock.<name>.toml"
        )
    return LockedWheels(_platform(entry, where), pylock, _label(entry, "cuda-line", where))


def read_lock(path: Path) -> LockFile:
    """The lock at ``path``, every field checked (see the module docstring)."""
    try:
        data = read_regular(path, MAX_LOCK_BYTES)
    except OSError as exc:
        raise UsageError(f"cannot read the lock {path}: {exc.strerror}") from None
    document = load_toml(data, what=str(path), max_bytes=MAX_LOCK_BYTES)
    version = document.get("lock-version")
    if type(version) is not int or version != LOCK_VERSION:
        raise SourceFormatError(
            f"{path}: lock-version {version!r} is not one this cudaup reads ({LOCK_VERSION})"
        )
    request = document.get("request", "")
    if not isinstance(request, str):
        raise SourceFormatError(f"{path}: 'request' must be a string")
    lock = LockFile(request, path=str(path))
    for index, entry in enumerate(_list(document, "toolkits", str(path))):
        lock.toolkits.append(_toolkit(entry, f"{path} toolkits[{index}]"))
    for index, entry in enumerate(_list(document, "wheels", str(path))):
        lock.wheels.append(_wheels(entry, f"{path} wheels[{index}]"))
    return lock


_DEFAULT_PORTS = {"http": 80, "https": 443}


def _host(url: str) -> tuple[str, int | None]:
    """A URL's host and port (its scheme's default when none is given)."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:  # a port that is not a number: no origin has it
        port = -1
    return (parts.hostname or "").lower(), port or _DEFAULT_PORTS.get(parts.scheme)


def compare(locked: LockedToolkit, live: LockedToolkit) -> list[str]:
    """What changed between a locked toolkit and what the origins serve now."""
    changes: list[str] = []
    if locked.release != live.release:
        changes.append(f"{locked.platform}: release {locked.release} → {live.release}")
    old = {f.component: f for f in locked.files}
    new = {f.component: f for f in live.files}
    for component in sorted(old.keys() | new.keys()):
        before, after = old.get(component), new.get(component)
        if before is None:
            changes.append(f"{locked.platform}: {component} is new ({after.url if after else ''})")
        elif after is None:
            changes.append(f"{locked.platform}: {component} is no longer served")
        else:
            for name in ("url", "size", "sha256", "md5"):
                if (
                    getattr(before, name) != getattr(after, name)
                    and getattr(after, name) is not None
                ):
                    changes.append(
                        f"{locked.platform}: {component} {name} {getattr(before, name)} → {getattr(after, name)}"
                    )
    return changes


def rewrite_urls(toolkit: LockedToolkit, move: Callable[[str], str]) -> LockedToolkit:
    """The same files at other URLs (a mirror, or the configured bases)."""

    return replace(toolkit, files=tuple(replace(f, url=move(f.url)) for f in toolkit.files))


def mirror_path(url: str, origins: Sequence[str]) -> str:
    """Where a file lives in a mirror: its path at the origin; PyPI files under packages/.

    ``url`` comes from a lock (or a PEP 751 file beside it): it must be a file URL
    of plain names, and the result is a relative path of plain names, so that
    ``inside(mirror, *path.split("/"))`` stays in the mirror."""
    check_file_url(url, field="url", error=IntegrityError)
    for origin in origins:
        if url.startswith(origin.rstrip("/") + "/"):
            relative = url[len(origin.rstrip("/")) + 1 :]
            return check_relative_path(
                relative, field="mirror path", where=url, error=IntegrityError
            )
    return "packages/" + url.rsplit("/", 1)[-1]


def mirror_url(url: str, mirror: str, origins: Sequence[str]) -> str:
    return mirror.rstrip("/") + "/" + mirror_path(url, origins)
