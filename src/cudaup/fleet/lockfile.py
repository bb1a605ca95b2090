"""``cuda.lock.toml``: every byte of a toolkit decided, per platform, with hashes.

Schema (``lock-version = 1``), written with sorted keys so that it reads well
in a diff::

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
fails the download's verification before anything is installed.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import tomli_w

from cudaup import __version__
from cudaup.core.model import Artifact, Channel, Resolution, SourceRef
from cudaup.core.platforms import Platform, parse_platform
from cudaup.errors import SourceFormatError, UsageError
from cudaup.util.atomic import atomic_write

LOCK_VERSION = 1
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_MD5 = re.compile(r"^[0-9a-f]{32}$")


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
            filename=self.filename, url=self.url, size=self.size, md5=self.md5, sha256=self.sha256,
            component=self.component, component_version=self.version, platform=platform,
            channel=channel, driver=driver, sources=(source,), verified=True,
        )  # fmt: skip


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
                    "components": list(t.components),
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
                        for f in t.files
                    ],
                    "sources": [{"url": url} for url in t.sources],
                }
                for t in self.toolkits
            ],
        }
        if self.wheels:
            document["wheels"] = [
                {
                    "platform": w.platform,
                    "pylock": w.pylock,
                    **({"cuda-line": w.cuda_line} if w.cuda_line else {}),
                }
                for w in self.wheels
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
        resolution.platform, resolution.release.version, resolution.release.label, resolution.channel,
        tuple(sorted({a.component for a in resolution.artifacts})), resolution.release.driver,
        tuple(files), tuple(sources),
    )  # fmt: skip


def _text(entry: dict[str, Any], key: str, where: str, *, optional: bool = False) -> str | None:
    value = entry.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value:
        raise SourceFormatError(f"{where}: {key!r} must be a non-empty string")
    return value


def _file(entry: Any, where: str) -> LockedFile:
    if not isinstance(entry, dict):
        raise SourceFormatError(f"{where}: expected a table")
    url = _text(entry, "url", where)
    assert url is not None
    size = entry.get("size")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise SourceFormatError(f"{where}: 'size' must be a non-negative integer")
    sha256, md5 = entry.get("sha256"), entry.get("md5")
    if sha256 is not None and (not isinstance(sha256, str) or not _SHA256.match(sha256)):
        raise SourceFormatError(f"{where}: 'sha256' must be 64 lower-case hex digits")
    if md5 is not None and (not isinstance(md5, str) or not _MD5.match(md5)):
        raise SourceFormatError(f"{where}: 'md5' must be 32 lower-case hex digits")
    if sha256 is None and md5 is None:
        raise SourceFormatError(f"{where}: a locked file needs a sha256 or md5")
    component = _text(entry, "component", where)
    assert component is not None
    return LockedFile(
        component, _text(entry, "version", where, optional=True), url, size, sha256, md5
    )


def read_lock(path: Path) -> LockFile:
    try:
        document = tomllib.loads(path.read_text())
    except OSError as exc:
        raise UsageError(f"cannot read the lock {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise SourceFormatError(f"{path} is not valid TOML ({exc})") from None
    if document.get("lock-version") != LOCK_VERSION:
        raise SourceFormatError(
            f"{path}: lock-version {document.get('lock-version')!r} is not one this cudaup reads ({LOCK_VERSION})"
        )
    lock = LockFile(str(document.get("request", "")))
    for index, entry in enumerate(document.get("toolkits", [])):
        where = f"{path.name}: toolkits[{index}]"
        if not isinstance(entry, dict):
            raise SourceFormatError(f"{where}: expected a table")
        channel = _text(entry, "channel", where)
        if channel not in {"installer", "redist", "pypi"}:
            raise SourceFormatError(f"{where}: unknown channel {channel!r}")
        files = tuple(_file(f, f"{where}.files[{i}]") for i, f in enumerate(entry.get("files", [])))
        if not files:
            raise SourceFormatError(f"{where}: no files")
        lock.toolkits.append(
            LockedToolkit(
                platform=parse_platform(_text(entry, "platform", where) or ""),
                release=_text(entry, "release", where) or "",
                label=_text(entry, "label", where, optional=True) or "",
                channel=channel,  # type: ignore[arg-type]
                components=tuple(entry.get("components", [])),
                driver=_text(entry, "driver", where, optional=True),
                files=files,
                sources=tuple(
                    s["url"] for s in entry.get("sources", []) if isinstance(s, dict) and "url" in s
                ),
            )
        )
    for entry in document.get("wheels", []):
        lock.wheels.append(
            LockedWheels(parse_platform(entry["platform"]), entry["pylock"], entry.get("cuda-line"))
        )
    return lock


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
    """Where a file lives in a mirror: its path at the origin; PyPI files under packages/."""
    for origin in origins:
        if url.startswith(origin.rstrip("/") + "/"):
            return url[len(origin.rstrip("/")) + 1 :]
    if "://" in url:
        return "packages/" + url.rsplit("/", 1)[-1]
    raise UsageError(f"cannot place {url} in a mirror")


def mirror_url(url: str, mirror: str, origins: Sequence[str]) -> str:
    return mirror.rstrip("/") + "/" + mirror_path(url, origins)
