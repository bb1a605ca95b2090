"""Making and checking a lock: resolve every platform, freeze the files, compare later.

``cudaup lock`` and ``cudaup lock --check`` are thin over these two functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cudaup.config import Settings
from cudaup.core.platforms import Platform
from cudaup.errors import (
    ArtifactNotFoundError,
    IntegrityError,
    ReleaseNotFoundError,
    RemoteFileMissingError,
    UsageError,
)
from cudaup.fleet.lockfile import LockedWheels, LockFile, compare, locked_toolkit
from cudaup.install.installer import InstallChannel, choose_channel
from cudaup.plan import Planner, PlanTarget, parse_requirements, python_version
from cudaup.plan.export import export_pylock
from cudaup.plan.indexes import indexes_for
from cudaup.plan.lines import Line, release_line
from cudaup.resolve.resolver import Resolver
from cudaup.util.paths import inside


@dataclass
class BuiltLock:
    """``cudaup lock``'s answer: the lock, where it goes, and the notes of its making."""

    lock: LockFile
    output: Path
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"lock": str(self.output), "toolkits": len(self.lock.toolkits), "notes": self.notes}


@dataclass(frozen=True, slots=True)
class LockCheck:
    """``cudaup lock --check``'s answer: the lock file as named, every change
    :func:`check_lock` found, and the error they amount to (exit 7), if any."""

    lock: str
    changes: list[str]

    @property
    def failure(self) -> IntegrityError | None:
        if not self.changes:
            return None
        return IntegrityError(
            f"{self.lock}: the origins no longer serve what the lock names "
            f"({len(self.changes)} change(s))"
        )

    def to_json(self) -> dict[str, Any]:
        """The changes, and the error object when there are any: one document."""
        document: dict[str, Any] = {
            "lock": self.lock,
            "unchanged": not self.changes,
            "changes": self.changes,
        }
        if (failure := self.failure) is not None:
            document["error"] = failure.to_json()
        return document


def build_lock(
    request: str,
    platforms: Sequence[Platform],
    *,
    settings: Settings,
    output: Path,
    components: Sequence[str] | None = None,
    everything: bool = False,
    channel: InstallChannel = "auto",
    with_packages: Sequence[str] = (),
    indexes: Sequence[str] = (),
    python: str | None = None,
) -> BuiltLock:
    """Resolve ``request`` for every platform and freeze it; with ``with_packages``, also
    lock the plan's wheels, planned for the locked release's CUDA line, as a PEP 751
    ``pylock.<name>-<platform>.toml`` beside ``output``.  Writes the pylock files, not
    the lock itself (:meth:`LockFile.write`)."""
    if everything == bool(components) and channel != "installer":
        raise UsageError(
            "name what to lock: --components nvcc,cudart (with what they need), or --all"
        )
    notes: list[str] = []
    chosen = choose_channel(settings, channel, notes)
    resolver = Resolver(settings)
    lock = LockFile(request)
    lines: dict[Platform, Line] = {}
    for platform in platforms:
        resolution = resolver.resolve(
            request, platform=platform, channel=chosen, components=components, closure=True
        )
        lock.toolkits.append(locked_toolkit(resolution, settings.canonical))
        lines[platform] = release_line(resolution.release.version)
    if with_packages:
        table = indexes_for(settings.pypi_url, list(indexes), settings.user_indexes)
        requirements = parse_requirements(list(with_packages))
        for platform in platforms:
            target = PlanTarget(python_version(python), platform, None, None)
            # The wheels must run on the toolkit beside them: the locked release's line.
            result = Planner(settings).plan(requirements, table, target, line=lines[platform])
            name = f"pylock.{output.stem.replace('.', '-')}-{platform}.toml"  # PEP 751 file name
            export_pylock(result, inside(output.parent, name, field="pylock"), settings)
            line = f"{result.line[0]}.{result.line[1]}"
            lock.wheels.append(LockedWheels(platform, name, line))
    return BuiltLock(lock, output, notes)


def check_lock(lock: LockFile, settings: Settings) -> list[str]:
    """Every way in which the origins no longer serve what ``lock`` names (empty: none).

    All of it, not the first problem: each toolkit is resolved again from its documents
    (no probes, so one missing file does not hide the others) and compared, then every
    locked file is asked for on its own.
    """
    resolver = Resolver(replace(settings, probe=False))
    changes: list[str] = []
    for toolkit in lock.toolkits:
        try:
            live = resolver.resolve(
                toolkit.release,
                platform=toolkit.platform,
                channel=toolkit.channel,
                components=None if toolkit.channel == "installer" else list(toolkit.components),
            )
        except (ReleaseNotFoundError, ArtifactNotFoundError, RemoteFileMissingError) as exc:
            changes.append(f"{toolkit.platform}: CUDA {toolkit.release} no longer resolves ({exc})")
        else:
            changes += compare(toolkit, locked_toolkit(live, settings.canonical))
        for file in toolkit.files:
            url = settings.rewrite(file.url)
            answer = resolver.nvidia.probe(url)
            if not answer.exists:
                changes.append(
                    f"{toolkit.platform}: {file.component} is no longer served "
                    f"(HTTP {answer.status} for {url})"
                )
            elif answer.size is not None and answer.size != file.size:
                changes.append(
                    f"{toolkit.platform}: {file.component} is {answer.size} bytes at {url}, "
                    f"the lock says {file.size}"
                )
    return list(dict.fromkeys(changes))
