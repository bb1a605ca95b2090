"""The cudaup store: toolkits side by side, published atomically.

Layout of ``$CUDAUP_HOME`` (default: the user data dir)::

    toolkits/<version>/           a CUDA_HOME per release, with cudaup-record.json
    toolkits/.staging-<...>/      trees being built (never listed)
    toolkits/.trash-<...>/        trees being deleted (never listed)
    bin/                          shims (nvcc, ptxas, …) that run the active toolkit
    default                       the default toolkit: a version, or a path
    external.json                 toolkits cudaup installed outside the store (--prefix)
    system-link.json              what /usr/local/cuda pointed at, for ``cudaup undo``
    locks/                        one lock per release

A tree becomes visible only by ``rename`` from its staging directory on the
same filesystem, so ``list`` and ``which`` never see half a toolkit, and a
failure or Ctrl-C during a build leaves the earlier install untouched.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import shutil
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout
from packaging.version import InvalidVersion, Version

from cudaup.config import home_dir
from cudaup.core.versions import parse_request
from cudaup.errors import LockedError
from cudaup.util.atomic import atomic_write

RECORD = "cudaup-record.json"


@dataclass(frozen=True, slots=True)
class InstalledToolkit:
    version: str
    path: Path
    record: dict[str, Any] | None
    external: bool = False

    @property
    def components(self) -> list[str]:
        return list((self.record or {}).get("components", []))


class Store:
    def __init__(self, home: Path) -> None:
        self.home = home
        self.toolkits_dir = home / "toolkits"
        self.bin_dir = home / "bin"
        self.locks_dir = home / "locks"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Store:
        return cls(home_dir(env))

    # -- reading ---------------------------------------------------------------------
    def _read_record(self, directory: Path) -> dict[str, Any] | None:
        try:
            document = json.loads((directory / RECORD).read_text())
        except (OSError, ValueError):
            return None
        return document if isinstance(document, dict) else None

    def external(self) -> dict[str, str]:
        try:
            document = json.loads((self.home / "external.json").read_text())
        except (OSError, ValueError):
            return {}
        return {str(k): str(v) for k, v in document.items()} if isinstance(document, dict) else {}

    def installed(self) -> list[InstalledToolkit]:
        """Every toolkit cudaup installed, newest first (staging and trash are invisible)."""
        found: list[InstalledToolkit] = []
        if self.toolkits_dir.is_dir():
            for entry in self.toolkits_dir.iterdir():
                if entry.name.startswith(".") or not entry.is_dir():
                    continue
                found.append(InstalledToolkit(entry.name, entry, self._read_record(entry)))
        for version, path in self.external().items():
            directory = Path(path)
            if directory.is_dir():
                found.append(
                    InstalledToolkit(version, directory, self._read_record(directory), True)
                )
        return sorted(found, key=lambda t: _sort_key(t.version), reverse=True)

    def get(self, version: str) -> InstalledToolkit | None:
        return next((t for t in self.installed() if t.version == version), None)

    def find(self, request: str) -> InstalledToolkit | None:
        """The newest installed toolkit matching a version request (``12.8``, ``cu130``)."""
        exact = self.get(request)
        if exact is not None:
            return exact
        wanted = parse_request(request)
        for toolkit in self.installed():
            try:
                version = Version(toolkit.version)
            except InvalidVersion:
                continue
            if wanted.matches(version):
                return toolkit
        return None

    # -- the default -------------------------------------------------------------------
    def default(self) -> str | None:
        try:
            value = (self.home / "default").read_text().strip()
        except OSError:
            return None
        return value or None

    def set_default(self, value: str | None) -> None:
        path = self.home / "default"
        if value is None:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            return
        atomic_write(path, value + "\n")

    # -- writing -------------------------------------------------------------------------
    @contextlib.contextmanager
    def lock(self, name: str, timeout: float = 3600) -> Iterator[None]:

        self.locks_dir.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(self.locks_dir / f"{name}.lock"))
        try:
            lock.acquire(timeout=timeout)
        except Timeout:
            raise LockedError(
                f"another cudaup process has been installing {name} for too long"
            ) from None
        try:
            yield
        finally:
            lock.release()

    @contextlib.contextmanager
    def staging(self, parent: Path, name: str) -> Iterator[Path]:
        """A fresh directory beside ``parent/name``; removed unless it was published."""
        parent.mkdir(parents=True, exist_ok=True)
        staging = parent / f".staging-{name}-{secrets.token_hex(4)}"
        staging.mkdir()
        try:
            yield staging
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)

    def publish(self, staging: Path, final: Path) -> None:
        """Make ``staging`` visible as ``final`` in one rename; an older tree is swapped out."""
        if final.exists():
            trash = final.parent / f".trash-{final.name}-{secrets.token_hex(4)}"
            final.rename(trash)
            try:
                staging.rename(final)
            except BaseException:
                trash.rename(final)  # put the earlier install back
                raise
            shutil.rmtree(trash, ignore_errors=True)
        else:
            staging.rename(final)

    def remove(self, toolkit: InstalledToolkit) -> None:
        trash = toolkit.path.parent / f".trash-{toolkit.path.name}-{secrets.token_hex(4)}"
        toolkit.path.rename(trash)
        if toolkit.external:
            external = self.external()
            external.pop(toolkit.version, None)
            atomic_write(self.home / "external.json", json.dumps(external, indent=1))
        shutil.rmtree(trash, ignore_errors=True)

    def add_external(self, version: str, path: Path) -> None:
        external = self.external()
        external[version] = str(path)
        atomic_write(self.home / "external.json", json.dumps(external, indent=1))

    def write_record(self, directory: Path, record: dict[str, Any]) -> None:
        atomic_write(directory / RECORD, json.dumps(record, indent=1, sort_keys=True) + "\n")

    def sweep(self, parent: Path, name: str) -> None:
        """Remove the staging and trash of ``name`` that a killed process left behind.

        Call it only while holding ``name``'s lock: then no live process owns them.
        """
        if not parent.is_dir():
            return
        for entry in parent.iterdir():
            if entry.name.startswith((f".staging-{name}-", f".trash-{name}-")):
                shutil.rmtree(entry, ignore_errors=True)


def _sort_key(version: str) -> tuple[int, Version | str]:
    try:
        return (1, Version(version))
    except InvalidVersion:
        return (0, version)
