"""cudaup's cache directory: what it holds, how much, and making room.

    <cache>/
      http/       small documents (listings, manifests, index pages), revalidated by age
      downloads/  archives and runfiles; ``NAME.part`` + ``NAME.part.json`` resume
      unpacked/   one verified, unpacked archive per sha256: ``tree/`` (installs hard-link
                  it), ``manifest.json`` (what tree/ holds), ``verified.json``
      locks/      per-file download locks, and ``unpacked.lock``
      plan/       what ``plan`` keeps: facts read from wheels (by URL and sha256), uv's
                  answers (as long as index pages), uv's own cache

An unpacked tree is hard-linked into every toolkit installed from it, so while a
toolkit is installed the tree costs no extra disk; once none is (after
``uninstall``), the tree alone keeps those bytes, for an instant reinstall.
:func:`prune` removes such trees, finished downloads and what killed processes
left; :func:`clean` removes everything but lock files.  Installs hold
``unpacked.lock`` shared and pruning holds it exclusively (``flock``), so a prune
never removes a tree an install is about to link.  Neither removes what another
user owns (a shared cache): such entries are kept, and the report says so.  Lock
files are made so that any user sharing the cache can take them, and die with their
holder (:func:`locked`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cudaup.errors import UntrustedPathError
from cudaup.util.faults import DENIED, cache_place, denied, explained, remove_tree, store_place
from cudaup.util.locks import locked
from cudaup.util.paths import directory, make_directory
from cudaup.util.trust import directories_problem

AREAS = ("http", "downloads", "unpacked", "locks", "plan")
LOCK_NAME = "unpacked.lock"
#: unpacked/<STAGING_PREFIX>...: a tree being unpacked, renamed to its sha256 when done
STAGING_PREFIX = ".tmp-"
#: How long ``prune``/``clean`` wait for running installs before giving up (exit 11).
CLEAN_WAIT = 10.0


@dataclass(frozen=True, slots=True)
class CacheLayout:
    """Every path under cudaup's cache directory, named in this one place.

    Each directory is checked to be no symbolic link whenever it is named
    (:func:`cudaup.util.paths.directory`, exit 22): one planted there would carry
    downloads and unpacked trees elsewhere.  The root itself may be a link.
    """

    root: Path

    def to_json(self) -> dict[str, Any]:
        """``cudaup cache dir``'s document: where the cache is."""
        return {"root": str(self.root)}

    @property
    def http(self) -> Path:
        return directory(self.root, "http")

    @property
    def downloads(self) -> Path:
        return directory(self.root, "downloads")

    @property
    def unpacked(self) -> Path:
        return directory(self.root, "unpacked")

    @property
    def locks(self) -> Path:
        return directory(self.root, "locks")

    @property
    def plan(self) -> Path:
        """``plan/``, made here when missing and then checked: what is kept there (uv's
        cache, facts read from wheels, uv's answers) decides what an upgrade installs,
        so it must be the user's or root's and writable by no one else, and so must the
        cache above it (the sticky bit aside), else :class:`UntrustedPathError`."""
        plan = directory(self.root, "plan")
        with contextlib.suppress(OSError):  # a cache we may not write: its writes say so
            make_directory(self.root, "plan")
        # The cache's own path may be a link (the user's choice): where it leads counts.
        problem = directories_problem(((str(self.root.resolve()), True), (str(plan), False)))
        if problem is not None:
            raise UntrustedPathError(
                f"cudaup does not use {plan}: {problem}, and what it keeps there (uv's "
                "cache, facts read from wheels) decides what is installed; "
                f"{cache_place(self.root).remedy}"
            )
        return plan

    def plan_dir(self, *parts: str) -> Path:
        """A directory below ``plan/`` (``uv``, ``wheels``, ``resolutions``): the same checks."""
        return directory(self.plan, *parts)

    @property
    def unpacked_lock(self) -> Path:
        return self.locks / LOCK_NAME

    def download_lock(self, target: Path) -> Path:
        """The lock of one download target: in the cache, not beside the user's file,
        keyed by the target's real path so that two spellings of it share one lock."""
        key = hashlib.sha256(str(target.resolve()).encode()).hexdigest()[:24]
        return self.locks / f"{key}.lock"


def downloads_for(cache_root: Path, staging: Path) -> tuple[Path, str | None]:
    """Where an install downloads its archives: the cache's ``downloads/``, unless another
    user owns or may write it, or the cache above it (see
    :meth:`cudaup.download.target.DownloadPaths.check_trusted`, which refuses such a
    directory): then ``staging/downloads``, for this install only, with a note that says
    why."""
    shared = CacheLayout(cache_root).downloads
    problem = _downloads_problem(cache_root, shared)
    if problem is None:
        return shared, None
    private = staging / "downloads"
    with explained(f"cannot create {private}", staging, [store_place(staging)]):
        private.mkdir(0o700, exist_ok=True)
    note = (
        f"{problem}: cudaup does not download into {shared}, where another user could "
        "change an archive between its check and its use; the archives were downloaded "
        "for this install only (make the cache yours and not writable by others, or set "
        "CUDAUP_CACHE_DIR)"
    )
    return private, note


def shared_downloads(cache_root: Path) -> Path | None:
    """The cache's ``downloads/``, or None where :func:`downloads_for` would not use it."""
    shared = CacheLayout(cache_root).downloads
    return shared if _downloads_problem(cache_root, shared) is None else None


def _downloads_problem(cache_root: Path, shared: Path) -> str | None:
    try:  # what is not there yet, the download makes and then checks
        return directories_problem(((str(cache_root.resolve()), True), (str(shared), True)))
    except OSError:  # unreadable: the download says so
        return None


@dataclass(frozen=True, slots=True)
class Area:
    name: str
    path: Path
    files: int
    bytes: int
    #: bytes whose files are also linked from an installed toolkit (unpacked/ only)
    shared_bytes: int = 0
    #: unpacked trees no installed toolkit links to (unpacked/ only)
    unused_entries: int = 0
    unused_bytes: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "path": str(self.path),
            "files": self.files,
            "bytes": self.bytes,
            "shared_bytes": self.shared_bytes,
            "unused_entries": self.unused_entries,
            "unused_bytes": self.unused_bytes,
        }


@dataclass(frozen=True, slots=True)
class CacheInfo:
    root: Path
    areas: tuple[Area, ...]
    #: what :func:`prune` would free: unused trees and finished downloads
    reclaimable: int

    @property
    def bytes(self) -> int:
        return sum(area.bytes for area in self.areas)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": 1,
            "root": str(self.root),
            "bytes": self.bytes,
            "reclaimable_bytes": self.reclaimable,
            "areas": [area.to_json() for area in self.areas],
        }


@dataclass
class Cleanup:
    root: Path
    removed: list[str] = field(default_factory=list)
    #: bytes the disk got back: files whose last link was removed
    freed: int = 0
    #: bytes of removed files that stay on disk, hard-linked from elsewhere (installed
    #: toolkits link the unpacked trees): removing the cache's link frees none of them
    still_linked: int = 0
    #: entries left in place because another user owns them: "unpacked/<sha256> (uid 1000)"
    kept: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": 1,
            "root": str(self.root),
            "removed": self.removed,
            "freed_bytes": self.freed,
            "still_linked_bytes": self.still_linked,
            "kept": self.kept,
        }


# ---------------------------------------------------------------------------
# Measuring
# ---------------------------------------------------------------------------
def _walk(path: Path) -> Iterator[os.stat_result]:
    """lstat of every entry below ``path`` (itself included), never following links."""
    try:
        top = path.lstat()
    except FileNotFoundError:
        return
    yield top
    if not stat.S_ISDIR(top.st_mode):
        return
    pending = [str(path)]
    while pending:
        with contextlib.suppress(FileNotFoundError), os.scandir(pending.pop()) as entries:
            for entry in entries:
                with contextlib.suppress(FileNotFoundError):
                    info = entry.stat(follow_symlinks=False)
                    yield info
                    if stat.S_ISDIR(info.st_mode):
                        pending.append(entry.path)


def _disk_bytes(info: os.stat_result) -> int:
    blocks = getattr(info, "st_blocks", None)
    return blocks * 512 if blocks is not None else info.st_size


def _measure(path: Path, seen: set[tuple[int, int]]) -> tuple[int, int, int]:
    """Files, bytes on disk and bytes also linked elsewhere, each inode counted once."""
    files = total = shared = 0
    for info in _walk(path):
        key = (info.st_dev, info.st_ino)
        if key in seen:
            continue
        seen.add(key)
        size = _disk_bytes(info)
        total += size
        if stat.S_ISREG(info.st_mode):
            files += 1
            if info.st_nlink > 1:
                shared += size
    return files, total, shared


def _freeable(path: Path) -> tuple[int, int]:
    """What removing ``path`` gives back: (bytes freed, bytes that stay linked elsewhere).

    A file's blocks are freed only with its last link: a file linked from outside
    ``path`` (an installed toolkit) keeps its bytes, counted in the second number."""
    links: dict[tuple[int, int], int] = {}
    infos: dict[tuple[int, int], os.stat_result] = {}
    for info in _walk(path):
        key = (info.st_dev, info.st_ino)
        links[key] = links.get(key, 0) + 1
        infos[key] = info
    freed = linked = 0
    for key, info in infos.items():
        size = _disk_bytes(info)
        if stat.S_ISDIR(info.st_mode) or links[key] >= info.st_nlink:
            freed += size
        else:
            linked += size
    return freed, linked


def _in_use(tree: Path) -> bool:
    """Whether an installed toolkit links any of this unpacked tree's files."""
    return any(stat.S_ISREG(info.st_mode) and info.st_nlink > 1 for info in _walk(tree))


def _finished(downloads: Path) -> list[Path]:
    """Downloads that completed (verified, under their final name): kept by nothing."""
    try:
        return sorted(
            p
            for p in downloads.iterdir()
            if p.is_file() and not p.name.endswith((".part", ".part.json"))
        )
    except FileNotFoundError:
        return []


def _owner(path: Path) -> int | None:
    """Who owns ``path`` when it is not the user running cudaup; None when it is (or gone)."""
    try:
        uid = path.lstat().st_uid
    except FileNotFoundError:
        return None
    return uid if uid != os.geteuid() else None


def _prunable(root: Path) -> list[Path]:
    """What :func:`prune` removes: unpacked trees no toolkit links to, staging, finished
    downloads, and resume state whose part file is gone (what another user owns is kept)."""
    found: list[Path] = []
    with contextlib.suppress(FileNotFoundError):
        for entry in sorted(CacheLayout(root).unpacked.iterdir()):
            if entry.name.startswith(STAGING_PREFIX) or not _in_use(entry):
                found.append(entry)
    downloads = CacheLayout(root).downloads
    found += _finished(downloads)
    with contextlib.suppress(FileNotFoundError):
        for state in sorted(downloads.glob("*.part.json")):
            if not state.with_name(state.name[: -len(".json")]).exists():
                found.append(state)
    return found


def inspect(root: Path) -> CacheInfo:
    """What the cache holds, area by area (hard-linked files counted once)."""
    with explained("cannot measure the cache", root, [cache_place(root)]):
        return _inspect(root)


def _inspect(root: Path) -> CacheInfo:
    prunable = {path: _measure(path, set())[1] for path in _prunable(root) if _owner(path) is None}
    unused = {
        path: size
        for path, size in prunable.items()
        if path.parent.name == "unpacked" and not path.name.startswith(STAGING_PREFIX)
    }
    seen: set[tuple[int, int]] = set()
    areas = []
    for name in AREAS:
        path = root / name
        files, total, shared = _measure(path, seen)
        if name == "unpacked":
            areas.append(Area(name, path, files, total, shared, len(unused), sum(unused.values())))
        else:
            areas.append(Area(name, path, files, total, shared))
    return CacheInfo(root, tuple(areas), sum(prunable.values()))


# ---------------------------------------------------------------------------
# Locking: lock files any user of the cache can take, held with flock
# ---------------------------------------------------------------------------
#: Lock files are readable and writable by everyone, whatever the umask: a user who
#: shares the cache must be able to open (and so take) a lock file another user created,
#: and ``flock`` on NFS needs a descriptor open for writing to take an exclusive lock.
@contextlib.contextmanager
def _flock(root: Path, exclusive: bool, wait: float) -> Iterator[None]:
    what = "an install is using" if exclusive else "a cache prune is emptying"
    busy = f"{what} cudaup's cache ({root}); try again when it has finished"
    layout = CacheLayout(root)
    with locked(
        layout.unpacked_lock, busy=busy, wait=wait, place=cache_place(root), exclusive=exclusive
    ):
        yield


@contextlib.contextmanager
def using(root: Path, wait: float = 600.0) -> Iterator[None]:
    """Held (shared) by an install while it unpacks archives and links their trees (a
    prune holding it is waited for ``wait`` seconds, then :class:`LockedError`)."""
    if not hasattr(os, "fork"):  # pragma: no cover - no flock on Windows; installs are Linux-only
        yield
        return
    with _flock(root, exclusive=False, wait=wait):
        yield


# ---------------------------------------------------------------------------
# Making room
# ---------------------------------------------------------------------------
def _remove(path: Path, report: Cleanup, root: Path) -> None:
    relative = path.relative_to(root).as_posix()
    owner = _owner(path)
    if owner is not None:  # a shared cache: never delete another user's files
        report.kept.append(f"{relative} (uid {owner})")
        return
    freed, linked = _freeable(path)
    try:
        if path.is_dir() and not path.is_symlink():
            remove_tree(path)
        else:
            path.unlink()
    except FileNotFoundError:
        return
    except OSError as exc:
        if exc.errno in DENIED:
            raise denied(f"cannot remove {relative}", exc, [cache_place(root)], path) from None
        raise
    report.removed.append(relative)
    report.freed += freed
    report.still_linked += linked


def prune(root: Path, *, wait: float | None = None) -> Cleanup:
    """Remove what no installed toolkit needs; keep what is in use and what resumes.

    Removed: unpacked trees no toolkit links to, finished downloads (installs unpack
    them and keep the tree), staging and orphaned resume files that killed
    processes left.  Kept: trees in use, ``.part`` downloads with their state (a
    re-run resumes them), the HTTP cache (small, and it saves round trips).
    """
    report = Cleanup(root)
    with (
        explained("cannot prune the cache", root, [cache_place(root)]),
        _flock(root, exclusive=True, wait=CLEAN_WAIT if wait is None else wait),
    ):
        # Under the exclusive lock no install is at work: any staging is dead.
        for path in _prunable(root):
            _remove(path, report, root)
    return report


def clean(root: Path, *, wait: float | None = None) -> Cleanup:
    """Remove everything in the cache (installed toolkits keep their own links).

    Lock files stay: they are empty, and a running ``cudaup download`` (which does not
    take the cache lock) may hold one; removing it would let a second process in.
    """
    report = Cleanup(root)
    with (
        explained("cannot clean the cache", root, [cache_place(root)]),
        _flock(root, exclusive=True, wait=CLEAN_WAIT if wait is None else wait),
    ):
        for name in AREAS:
            if name == "locks":
                continue
            with contextlib.suppress(FileNotFoundError):
                for entry in sorted((root / name).iterdir()):
                    _remove(entry, report, root)
    return report
