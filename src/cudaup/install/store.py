"""The cudaup store: toolkits side by side, published atomically.

Layout of ``$CUDAUP_HOME`` (default: the user data dir)::

    toolkits/<version>/           a CUDA_HOME per release, with cudaup-record.json
    toolkits/.staging-<...>/      trees being built (never listed)
    toolkits/.trash-<...>/        trees being deleted (never listed)
    bin/                          shims (nvcc, ptxas, …) that run the active toolkit
    default                       the default toolkit: a version, or a path
    external.json                 toolkits cudaup installed outside the store (--prefix), by path
    system-link.json              what /usr/local/cuda pointed at, for ``cudaup undo``
    locks/                        one lock per release

A tree becomes visible only by ``rename`` from its staging directory on the
same filesystem, so ``list`` and ``which`` never see half a toolkit, and a
failure or Ctrl-C during a build leaves the earlier install untouched.

Every directory the store writes, renames or deletes is built by
:mod:`cudaup.util.paths` from a checked name, and no symbolic link below the home
is followed (``toolkits/``, ``bin/``, ``locks/``, ``logs/``: exit 22): a release (``13.0.1``,
:func:`cudaup.core.names.check_release`) for ``toolkits/<release>``, a plain
name for staging, trash and locks.  A release that came from a tampered lock or
manifest therefore cannot name a directory outside the store.  ``external.json``
is read the same way: an entry is an absolute path and a release, and a tree
there is removed only when it carries cudaup's record (cudaup made it).

``external.json`` is keyed by path, so two prefixes of one release are both known::

    {"schema": 2,
     "toolkits": {"/opt/cuda-13.0.1": "13.0.1", "/scratch/cuda": "13.0.1"},
     "foreign": {"/srv/sbsa/cuda-13.0.1": {"release": "13.0.1", "platform": "linux-sbsa"}}}

``foreign`` holds toolkits built for another platform than this machine's (for a
container image or another host's sysroot): listed and uninstallable, never
selected and never given shims, since their tools cannot run here.  The first
format (``{"13.0.1": "/opt/cuda-13.0.1"}``, keyed by release) is still read.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from cudaup.config import home_dir
from cudaup.core.names import check_file_name, check_release
from cudaup.core.platforms import PLATFORMS
from cudaup.core.versions import parse_request
from cudaup.errors import CudaupError, IntegrityError
from cudaup.util.atomic import atomic_write
from cudaup.util.faults import store_place
from cudaup.util.locks import locked
from cudaup.util.paths import directory, inside, make_directory
from cudaup.util.reading import read_regular, read_small

RECORD = "cudaup-record.json"


#: The tool a toolkit must have for a floating request (``13.0``) to prefer it when no
#: tool is named: ``show``, ``env`` and ``run`` want a toolkit that compiles.  Kept equal
#: to :data:`cudaup.switch.shim.COMPILER`.
COMPILER = "nvcc"


@dataclass(frozen=True, slots=True)
class InstalledToolkit:
    version: str
    path: Path
    record: dict[str, Any] | None
    external: bool = False
    #: the platform it was built for when that is not this machine's (``--platform``)
    foreign: str | None = None

    @property
    def components(self) -> list[str]:
        return list((self.record or {}).get("components", []))

    @property
    def libraries(self) -> dict[str, Any]:
        """Each library beside the toolkit as its record names it (``cudnn``: product,
        version, cuda_variant, channel, source); none when the record says nothing."""
        found = (self.record or {}).get("libraries")
        return dict(found) if isinstance(found, dict) else {}

    def has_tool(self, tool: str) -> bool:
        """Whether ``bin/<tool>`` is an executable file (the shims' own test)."""
        path = self.path / "bin" / tool
        return path.is_file() and os.access(path, os.X_OK)


@dataclass(frozen=True, slots=True)
class External:
    """One entry of ``external.json``: a toolkit cudaup installed with ``--prefix``."""

    path: str
    release: str
    foreign: str | None = None  # the platform, when not this machine's


class Store:
    def __init__(self, home: Path) -> None:
        self.home = home

    # The directories below the home, each checked to be no symbolic link whenever it is
    # named (util/paths.py): one planted there would carry the writes, or what the shims
    # run, elsewhere.  The home itself may be a link: the user made it.
    @property
    def toolkits_dir(self) -> Path:
        return directory(self.home, "toolkits")

    @property
    def bin_dir(self) -> Path:
        return directory(self.home, "bin")

    @property
    def locks_dir(self) -> Path:
        return directory(self.home, "locks")

    @property
    def logs_dir(self) -> Path:
        return directory(self.home, "logs")

    def check_links(self) -> None:
        """Refuse (exit 22) a symbolic link standing for any directory below the home."""
        for name in ("toolkits", "bin", "locks", "logs"):
            directory(self.home, name)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Store:
        return cls(home_dir(env))

    # -- reading ---------------------------------------------------------------------
    def _read_record(self, directory: Path) -> dict[str, Any] | None:
        try:
            document = json.loads(read_small(directory / RECORD))
        except (OSError, ValueError, RecursionError):  # a damaged record: not cudaup's
            return None
        return document if isinstance(document, dict) else None

    def toolkit_dir(self, release: str) -> Path:
        """``toolkits/<release>``; ``release`` must be a release number (it names the directory)."""
        check_release(release, field="release", where=str(self.toolkits_dir), error=IntegrityError)
        return inside(self.toolkits_dir, release, field="release")

    def external(self) -> list[External]:
        """Toolkits installed with ``--prefix``.  Entries that are not an absolute,
        normalised path and a release (and, for a foreign one, a known platform) are
        not cudaup's and are left out; so is a whole document that is not JSON."""
        try:
            document = json.loads(read_small(self.home / "external.json"))
        except (OSError, ValueError, RecursionError):
            return []
        if not isinstance(document, dict):
            return []
        if document.get("schema") != 2:  # the first format: {"13.0.1": "/opt/cuda-13.0.1"}
            return [
                External(path, release)
                for release, path in document.items()
                if _is_release(release) and _is_prefix(path)
            ]
        found: list[External] = []
        native = document.get("toolkits")
        if isinstance(native, dict):
            found += [
                External(path, release)
                for path, release in native.items()
                if _is_prefix(path) and _is_release(release)
            ]
        foreign = document.get("foreign")
        if isinstance(foreign, dict):
            for path, entry in foreign.items():
                if not (_is_prefix(path) and isinstance(entry, dict)):
                    continue
                release, platform = entry.get("release"), entry.get("platform")
                if _is_release(release) and platform in PLATFORMS:
                    found.append(External(path, str(release), str(platform)))
        return found

    def _write_external(self, entries: list[External]) -> None:
        document: dict[str, Any] = {
            "schema": 2,
            "toolkits": {e.path: e.release for e in entries if e.foreign is None},
            "foreign": {
                e.path: {"release": e.release, "platform": e.foreign}
                for e in entries
                if e.foreign is not None
            },
        }
        atomic_write(self.home / "external.json", json.dumps(document, indent=1) + "\n")

    def installed(self) -> list[InstalledToolkit]:
        """Every toolkit cudaup installed, newest first (staging and trash are invisible)."""
        found: list[InstalledToolkit] = []
        if self.toolkits_dir.is_dir():
            for entry in self.toolkits_dir.iterdir():
                if entry.name.startswith(".") or not entry.is_dir():
                    continue
                found.append(InstalledToolkit(entry.name, entry, self._read_record(entry)))
        for external in self.external():
            directory = Path(external.path)
            if directory.is_dir():
                record = self._read_record(directory)
                found.append(
                    InstalledToolkit(external.release, directory, record, True, external.foreign)
                )
        return sorted(found, key=lambda t: _sort_key(t.version), reverse=True)

    def runnable(self) -> list[InstalledToolkit]:
        """:meth:`installed` less the toolkits built for another platform."""
        return [t for t in self.installed() if t.foreign is None]

    def get(self, version: str) -> InstalledToolkit | None:
        """The toolkit of exactly this release that runs here (the store's before a prefix's)."""
        return next((t for t in self.runnable() if t.version == version), None)

    def at(self, path: Path) -> InstalledToolkit | None:
        """The installed toolkit (foreign ones included) whose directory is ``path``."""
        wanted = os.path.realpath(path)
        return next((t for t in self.installed() if os.path.realpath(t.path) == wanted), None)

    def find(self, request: str, tool: str = COMPILER) -> InstalledToolkit | None:
        """The installed toolkit a version request (``12.8``, ``cu130``) names: the release
        itself, else the newest match that has ``tool``, else the newest match.

        So a floating ``13.0`` keeps running nvcc from 13.0.1 when a newer 13.0.2 was
        installed with libraries only.  Toolkits for another platform never match."""
        exact = self.get(request)
        if exact is not None:
            return exact
        wanted = parse_request(request)
        matching = []
        for toolkit in self.runnable():
            try:
                version = Version(toolkit.version)
            except InvalidVersion:
                continue
            if wanted.matches(version):
                matching.append(toolkit)
        return next((t for t in matching if t.has_tool(tool)), matching[0] if matching else None)

    # -- the default -------------------------------------------------------------------
    def default(self) -> str | None:
        try:  # what cudaup wrote: a release or a path, in UTF-8 (the shims read it too)
            value = read_regular(self.home / "default", 4096).decode().strip()
        except (OSError, ValueError):
            return None
        return value if value and len(value) <= 4096 else None

    def is_empty(self) -> bool:
        """No toolkit that runs here and no default: the next install becomes the default."""
        return not self.runnable() and self.default() is None

    def adopt_first(self, installed: InstalledToolkit | None, was_empty: bool) -> str | None:
        """Make ``installed`` the default when the store was empty before it (as rustup's
        first toolchain): cudaup's own, never ``/usr/local/cuda``; the value set, if any."""
        if not was_empty or installed is None or installed.foreign is not None:
            return None
        value = str(installed.path) if installed.external else installed.version
        self.set_default(value)
        return value

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
        """Hold ``locks/<name>.lock`` (``name``: a release or another plain name)."""
        path = inside(self.locks_dir, f"{name}.lock", field="lock name")
        busy = f"another cudaup process has been installing {name} for too long"
        with locked(path, busy=busy, wait=timeout, place=store_place(self.home)):
            yield

    @contextlib.contextmanager
    def staging(self, parent: Path, name: str) -> Iterator[Path]:
        """A fresh directory beside ``parent/name``; removed unless it was published."""
        check_file_name(name, field="toolkit directory", where=str(parent), error=IntegrityError)
        staging = inside(parent, f".staging-{name}-{secrets.token_hex(4)}")
        if parent.is_relative_to(self.home):  # toolkits/: made below the home, never through a link
            make_directory(self.home, *parent.relative_to(self.home).parts)
        else:  # a prefix's parent: the user named it
            parent.mkdir(parents=True, exist_ok=True)
        staging.mkdir()
        try:
            yield staging
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)

    def publish(self, staging: Path, final: Path) -> None:
        """Make ``staging`` visible as ``final`` in one rename; an older tree is swapped out."""
        if final.exists():
            trash = _trash_for(final)
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
        """Delete an installed toolkit: renamed to a trash name first, then removed."""
        if toolkit.external and toolkit.record is None:
            raise IntegrityError(
                f"{toolkit.path} has no {RECORD}: cudaup did not install it there, so it "
                f"does not delete it; remove {toolkit.path} from "
                f"{self.home / 'external.json'} by hand"
            )
        trash = _trash_for(toolkit.path)
        toolkit.path.rename(trash)
        if toolkit.external:
            self.forget_external(toolkit.path)
        shutil.rmtree(trash, ignore_errors=True)

    def add_external(self, version: str, path: Path, foreign: str | None = None) -> None:
        """Remember a ``--prefix`` install at ``path`` (one entry per path)."""
        check_release(version, field="release", error=IntegrityError)
        entry = External(os.path.normpath(path.absolute()), version, foreign)
        entries = self.external()
        known = [e.path for e in entries]
        if entry.path in known:
            entries[known.index(entry.path)] = entry  # a reinstall keeps its place
        else:
            entries.append(entry)
        self._write_external(entries)

    def forget_external(self, path: Path) -> None:
        where = os.path.normpath(path.absolute())
        self._write_external([e for e in self.external() if e.path != where])

    def write_record(self, directory: Path, record: dict[str, Any]) -> None:
        atomic_write(inside(directory, RECORD), json.dumps(record, indent=1, sort_keys=True) + "\n")

    def sweep(self, parent: Path, name: str) -> None:
        """Remove the staging and trash of ``name`` that a killed process left behind.

        Call it only while holding ``name``'s lock: then no live process owns them.
        """
        check_file_name(name, field="toolkit directory", where=str(parent), error=IntegrityError)
        if not parent.is_dir():
            return
        for entry in parent.iterdir():
            if entry.name.startswith((f".staging-{name}-", f".trash-{name}-")):
                shutil.rmtree(entry, ignore_errors=True)


def _trash_for(path: Path) -> Path:
    """A fresh name beside ``path`` for the tree on its way out."""
    return inside(path.parent, f".trash-{path.name}-{secrets.token_hex(4)}")


def _is_prefix(value: object) -> bool:
    """An absolute, normalised, printable path (what :meth:`Store.add_external` writes)."""
    return (
        isinstance(value, str)
        and value.isprintable()
        and Path(value).is_absolute()
        and os.path.normpath(value) == value
    )


def _is_release(value: object) -> bool:
    try:
        check_release(value, field="release")
    except CudaupError:
        return False
    return True


def _sort_key(version: str) -> tuple[int, Version | str]:
    try:
        return (1, Version(version))
    except InvalidVersion:
        return (0, version)
