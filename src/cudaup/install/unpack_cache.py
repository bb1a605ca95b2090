"""A cache of verified, safely unpacked archives, checked on every use, filled by a
download→extract pipeline.

Installing is download-bound for the first archives and CPU-bound (zlib, xz) for
the rest, so each archive is extracted while it downloads: a .tar.xz from the
front as its bytes land, a wheel member by member once its member list (at its
end, fetched first) is in.  Nothing extracted counts until the download has been
verified.  The unpacked tree is kept in the cache (the archive itself is then
dropped), one entry per archive, named by its sha256::

    <cache>/unpacked/<sha256>/tree/           the archive's files
    <cache>/unpacked/<sha256>/manifest.json   every entry of tree/ (install.tree.TreeManifest)
    <cache>/unpacked/<sha256>/verified.json   when tree/'s digests were last found right

An entry is built under a private name and published by one rename, manifest
and tree together, so a half-unpacked tree is never used.  An install makes its
own copy of the tree in its staging directory (:mod:`cudaup.install.linking`:
hard links, or copies) and then checks that copy against the manifest: types,
modes, sizes and every entry, always; the sha256 of every file when the tree's
stamp does not vouch for them (first use since boot, a file written or
replaced since: its inode or ctime moved, which no ``os.utime`` puts back) or
when asked (``verify``).  A tree that fails is discarded and
unpacked again from the verified archive (downloaded again if it is gone), and
the install says what was wrong.

Trust: the cache may be shared, or written by someone else.  A tree, its
manifest, or ``unpacked/`` itself that another user owns is never used and never
deleted (the archive is then unpacked into the install's staging directory, for
this install only); a tree of ours that group or others could write is
discarded like a damaged one; ``unpacked/`` writable by group or others is not
used at all.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import shutil
import stat
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from cudaup.core.model import Artifact
from cudaup.download import DownloadResult, Progress, ProgressEvent, download
from cudaup.download.api import MAX_CONNECTIONS_PER_HOST
from cudaup.download.arrival import Arrival
from cudaup.errors import InsufficientSpaceError, IntegrityError
from cudaup.install.extract import Extracted, extract_archive
from cudaup.install.linking import LinkMode, materialize
from cudaup.install.tree import (
    DamagedTreeError,
    ForeignTreeError,
    Seen,
    Stamp,
    TreeManifest,
    check_digests,
    compare,
    describe,
    fingerprint,
    foreign,
    read_owned,
    relinked,
    scan,
)
from cudaup.net.http import HttpClient
from cudaup.util.boot import boot_id
from cudaup.util.cachedir import STAGING_PREFIX, CacheLayout, downloads_for
from cudaup.util.faults import DENIED, DISK_FULL, Place, cache_place, explained
from cudaup.util.parallel import check as check_cancelled
from cudaup.util.parallel import map_concurrently
from cudaup.util.paths import inside, make_directory

#: A zip lists its members in its last bytes; fetched first so unpacking can begin early.
ZIP_TAIL = 256 * 1024
_ZIPS = (".whl", ".zip")
TREE, MANIFEST, STAMP = "tree", "manifest.json", "verified.json"
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
#: Tries at a usable tree: the first, and again after a damaged one was unpacked anew
#: (or another process replaced it under us).
ATTEMPTS = 4
#: Archives staged side by side (each downloads and unpacks in its own threads); the
#: connections to one host stay capped by the download's own slots.
STAGE_WORKERS = 4

# What an install's record says was checked for each archive.
CHECK_DOWNLOAD = "sha256 of the download"
CHECK_RECORD = "wheel RECORD"
CHECK_SIZES = "tree: sizes+modes"
CHECK_DIGESTS = "tree: digests"

#: Where an archive's tree came from: unpacked now into the cache, reused from the
#: cache, or unpacked into staging for this install only (the cache was not usable).
Source = Literal["unpacked", "cache", "private"]


@dataclass(frozen=True, slots=True)
class Staged:
    """One archive's tree in the install's staging directory, and how it got there."""

    artifact: Artifact
    path: Path
    source: Source
    checks: tuple[str, ...]
    #: every file is a hard link into the cache
    linked: bool


@dataclass
class StagedTrees:
    trees: list[Staged]
    #: what the install should tell: a tree discarded and why, a cache not used and why
    notes: list[str] = field(default_factory=list)
    #: the cache entries whose trees passed their checks, to stamp once published
    checked: list[_Entry] = field(default_factory=list)
    boot: str | None = None

    def stamp(self) -> None:
        """Record that the checked trees' digests hold, once the toolkit made from them
        is published (see :meth:`_Entry.stamp`); the next install of the same archives
        then checks sizes and modes only.  Never fails: without a stamp, it hashes."""
        uid = os.geteuid()
        for entry in self.checked:
            entry.stamp(self.boot, uid)


def stage_all(
    artifacts: Sequence[Artifact],
    cache_root: Path,
    parts: Path,
    *,
    http: HttpClient,
    strip_top: bool,
    link_mode: LinkMode = "hardlink",
    verify: bool = False,
    places: Sequence[Place] = (),
    connections: int | None = None,
    progress: Progress | None = None,
) -> StagedTrees:
    """Put each artifact's checked tree at ``parts/<index>``, unpacking what the cache lacks.

    ``parts`` is an empty directory of the install's staging; ``places`` say what to
    do where a write is refused (see :mod:`cudaup.util.faults`).
    """
    stager = _Stager(
        cache_root,
        parts,
        http=http,
        strip_top=strip_top,
        link_mode=link_mode,
        verify=verify,
        places=(cache_place(cache_root), *places),
        progress=progress,
        per_file=None
        if connections is None
        else max(2, connections // min(STAGE_WORKERS, max(1, len(artifacts)))),
    )
    # The largest first: they take longest (their inflating is most of an install's
    # work), so no slot frees late for one of them; each keeps its index, the result its order.
    items = sorted(enumerate(artifacts), key=lambda item: -(item[1].size or 0))
    staged = map_concurrently(stager.stage, items, STAGE_WORKERS, cancel=stager.cancel)
    by_index = {index: tree for (index, _artifact), tree in zip(items, staged, strict=True)}
    trees = [by_index[index] for index in range(len(artifacts))]
    return StagedTrees(trees, stager.notes, stager.checked, stager.boot)


@contextlib.contextmanager
def stamps_kept(cache_root: Path, keys: Iterable[str]) -> Iterator[None]:
    """Keep the stamps of the unpacked trees ``keys`` (archives' sha256) across the removal
    of a toolkit hard-linked from them.  Each removed link moves its file's ctime, which
    voids a stamp: the next install of those archives would hash every file again.  A
    tree whose stamp holds before is scanned again after, and stamped anew when ctimes
    and link counts are all that moved (see :meth:`_Entry.stamp`).  Never fails: a tree
    it cannot vouch for is hashed by the next install, as it would have been."""
    wanted = list(dict.fromkeys(k for k in keys if _SHA256.match(k)))
    if not wanted:  # an install that replaces nothing: no boot id to read, no tree to scan
        yield
        return
    uid, boot, root = os.geteuid(), boot_id(), CacheLayout(cache_root).unpacked
    held: list[_Entry] = []
    with contextlib.suppress(OSError):  # no cache (or not ours): nothing to keep
        if boot is not None and _refusal(root, uid) is None:
            for key in wanted:
                entry = _Entry(inside(root, key), key)
                with contextlib.suppress(OSError, DamagedTreeError, ForeignTreeError):
                    found = entry.load(uid)
                    if found is not None and found[1]:
                        held.append(entry)
    yield
    for entry in held:
        entry.stamp(boot, uid)


class _Stager:
    def __init__(
        self,
        cache_root: Path,
        parts: Path,
        *,
        http: HttpClient,
        strip_top: bool,
        link_mode: LinkMode,
        verify: bool,
        places: Sequence[Place],
        progress: Progress | None,
        per_file: int | None,
    ) -> None:
        layout = CacheLayout(cache_root)
        self.root, self.parts = layout.unpacked, parts
        self.downloads, refused = downloads_for(cache_root, parts.parent)
        self.http, self.strip_top, self.progress = http, strip_top, progress
        self.link_mode, self.verify, self.places = link_mode, verify, places
        # Files already download side by side (up to 4): a given count is shared among them
        # rather than opening (and TLS-handshaking) 8 per file; by default each adapts.
        self.per_file = per_file
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS_PER_HOST)
        self.cancel = threading.Event()  # the first failure (or Ctrl-C) stops the others
        self.uid = os.geteuid()
        self.boot = boot_id()
        self.notes: list[str] = []
        self.checked: list[_Entry] = []
        self._lock = threading.Lock()
        with explained("cannot prepare cudaup's cache", self.root, self.places):
            make_directory(cache_root, self.root.name)
        if refused is not None:
            self._tell(refused)
        self.refusal = _refusal(self.root, self.uid)
        if self.refusal is not None:
            self._tell(
                f"{self.refusal}: cudaup does not use the unpacked archives there; they were "
                "unpacked for this install only (make it yours and not writable by others, or "
                "set CUDAUP_CACHE_DIR)"
            )
        else:
            _sweep(self.root, self.uid)

    def _tell(self, note: str, artifact: Artifact | None = None) -> None:
        with self._lock:
            self.notes.append(note)
        if self.progress is not None and artifact is not None:
            self.progress(ProgressEvent(artifact.filename, "notice", 0, None, note))

    # -- one archive -------------------------------------------------------------------
    def stage(self, item: tuple[int, Artifact]) -> Staged:
        index, artifact = item
        part = self.parts / str(index)
        key = artifact.sha256
        if self.refusal is not None or key is None:
            return self._private(artifact, part)
        if not _SHA256.match(key):
            raise IntegrityError(f"{artifact.filename}: its sha256 {key!r} is not 64 hex digits")
        entry = _Entry(inside(self.root, key), key)
        unpacked_now = False
        problem = ""
        # The tree this process just unpacked and published: its manifest is in memory and
        # its files were scanned a moment ago, so it is not read back (see _unpack_into_cache).
        fresh: tuple[TreeManifest, bool] | None = None
        for _ in range(ATTEMPTS):
            check_cancelled(self.cancel)
            found, fresh = fresh, None
            if found is None:
                try:
                    found = entry.load(self.uid)
                except ForeignTreeError as exc:
                    self._tell(
                        f"{artifact.filename}: the cached tree {entry.path} is not used: {exc}; "
                        "it stays (cudaup never deletes another user's files), and the archive "
                        "was unpacked for this install only",
                        artifact,
                    )
                    return self._private(artifact, part)
                except DamagedTreeError as exc:
                    problem = str(exc)
                    self._discard(artifact, entry, problem)
                    continue
            if found is None:
                fresh = self._unpack_into_cache(artifact, entry)
                unpacked_now = True
                continue
            manifest, stamped = found
            digests = self.verify or not stamped
            with explained(
                f"cannot put {artifact.filename}'s files into {part.parent}",
                part,
                self.places,
                manifest.file_bytes,
            ):
                problem, linked = self._copy_checked(entry, manifest, part, digests)
            if not problem:
                checks = (*manifest.checked, CHECK_SIZES, *([CHECK_DIGESTS] if digests else []))
                source: Source = "unpacked" if unpacked_now else "cache"
                return Staged(artifact, part, source, checks, linked)
            shutil.rmtree(part, ignore_errors=True)
            self._discard(artifact, entry, problem)
        raise IntegrityError(
            f"{artifact.filename}: the unpacked tree in {entry.path} kept failing its checks "
            f"({problem}); another process may be changing it; try again"
        )

    def _copy_checked(
        self, entry: _Entry, manifest: TreeManifest, part: Path, digests: bool
    ) -> tuple[str, bool]:
        """Link (or copy) the tree into ``part``, then check that copy: what is checked
        is what will be published.  The problem found (or ""), and whether all are links."""
        try:
            linked = materialize(entry.tree, part, manifest, self.link_mode)
        except FileNotFoundError as exc:
            return f"it changed while it was being linked ({exc.strerror}: {exc.filename})", False
        try:
            seen = scan(part)
            problem = foreign(seen.values(), self.uid) or compare(seen, manifest)
            if problem is None and digests:
                problem = check_digests(part, manifest)
            if problem is None:  # its digests were found right now, or vouched for
                with self._lock:
                    self.checked.append(entry)
        except OSError as exc:
            if exc.errno in DENIED | DISK_FULL:
                raise  # the install's fault, not the tree's: explained by the caller
            problem = f"it cannot be read ({exc.strerror}: {exc.filename})"
        return problem or "", linked

    def _discard(self, artifact: Artifact, entry: _Entry, problem: str) -> None:
        self._tell(
            f"{artifact.filename}: the cached tree {entry.path} was discarded ({problem}); "
            "it is unpacked again from the verified archive",
            artifact,
        )
        with explained(f"cannot discard {entry.path}", self.root, self.places):
            entry.discard(self.root, self.uid)

    def _unpack_into_cache(
        self, artifact: Artifact, entry: _Entry
    ) -> tuple[TreeManifest, bool] | None:
        """Download and unpack into a private name, then publish it as ``entry`` in one rename.

        Returns what :meth:`_Entry.load` would find, without reading it back: the manifest
        just written, and whether its digests are vouched for (a stamp was written, as they
        were computed just now).  None when another process published this archive first:
        that tree is loaded and checked like any other; so also when the archive went away
        while this one was reading it: another process that downloaded it too unpacked and
        published it, then deleted it (it deletes the archive only once its tree stands).
        The entry keeps the scan the stamp was made from, which :meth:`_Entry.stamp`
        compares with the tree after the install, as it does for a loaded tree.
        """
        fresh: tuple[TreeManifest, bool] | None = None
        staging = self.root / f"{STAGING_PREFIX}{entry.key[:16]}-{secrets.token_hex(4)}"
        try:
            with explained(f"cannot unpack {artifact.filename}", self.root, self.places):
                staging.mkdir(0o755)
                (staging / TREE).mkdir(0o755)
            try:
                archive, extracted = self._fetch_extracting(artifact, staging / TREE)
            except FileNotFoundError:
                if (self.downloads / artifact.filename).exists():
                    raise
                shutil.rmtree(staging, ignore_errors=True)
                return None  # taken and deleted by the process that published its tree
            except InsufficientSpaceError as exc:
                raise InsufficientSpaceError(
                    f"{exc}; free space in cudaup's cache ({self.root.parent}), or set "
                    "CUDAUP_CACHE_DIR to a directory on a larger disk"
                ) from exc
            with explained(f"cannot unpack {artifact.filename}", staging, self.places):
                seen = scan(staging / TREE)
                try:
                    entries = describe(seen, extracted.digests)
                except DamagedTreeError as exc:  # something else wrote into our directory
                    raise IntegrityError(f"{artifact.filename}: {exc}") from None
                checked = (CHECK_DOWNLOAD, *([CHECK_RECORD] if extracted.record_checked else []))
                manifest = TreeManifest(artifact.filename, entry.key, entries, checked)
                _write_new(staging / MANIFEST, manifest.to_bytes())
                if self.boot is not None:  # its digests were computed just now
                    _write_new(staging / STAMP, Stamp(self.boot, fingerprint(seen)).to_bytes())
                inode = staging.lstat().st_ino  # a rename keeps it
                try:
                    staging.rename(entry.path)
                except OSError as exc:
                    if exc.errno not in {errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR}:
                        raise
                    # Another process published this archive first; its tree is checked
                    # like any other.
                    shutil.rmtree(staging, ignore_errors=True)
                else:
                    entry.inode, entry.seen = inode, seen
                    fresh = manifest, self.boot is not None
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        with contextlib.suppress(OSError):
            archive.unlink()  # the unpacked tree is what later installs use
        if self.progress is not None:
            size = artifact.size
            self.progress(ProgressEvent(artifact.filename, "unpacked", size or 0, size))
        return fresh

    def _private(self, artifact: Artifact, part: Path) -> Staged:
        """Unpack straight into the install's staging: nothing is cached, the archive kept."""
        with explained(f"cannot unpack {artifact.filename}", part.parent, self.places):
            part.mkdir(0o755)
        _archive, extracted = self._fetch_extracting(artifact, part)
        checks = (CHECK_DOWNLOAD, *([CHECK_RECORD] if extracted.record_checked else []))
        if self.progress is not None:
            size = artifact.size
            self.progress(ProgressEvent(artifact.filename, "unpacked", size or 0, size))
        return Staged(artifact, part, "private", checks, False)

    def _fetch_extracting(self, artifact: Artifact, destination: Path) -> tuple[Path, Extracted]:
        return _fetch_extracting(
            artifact,
            self.downloads,
            destination,
            http=self.http,
            strip_top=self.strip_top,
            connections=self.per_file,
            progress=self.progress,
            slots=self.slots,
            cancel=self.cancel,
            hash_wheel=self.verify,
        )


class _Entry:
    """``unpacked/<sha256>/``: its tree, manifest and stamp."""

    def __init__(self, path: Path, key: str) -> None:
        self.path, self.key = path, key
        self.tree = path / TREE
        self.inode: int | None = None  # of the directory last loaded: discard only that one
        self.seen: dict[str, Seen] = {}

    def load(self, uid: int) -> tuple[TreeManifest, bool] | None:
        """The manifest of a tree that matches it, and whether the stamp vouches for its
        digests; None when there is no entry.  :class:`ForeignTreeError`: another user's;
        :class:`DamagedTreeError`: ours, and not what its manifest says."""
        try:
            info = self.path.lstat()
        except FileNotFoundError:
            return None
        self.inode = info.st_ino
        if info.st_uid != uid:
            raise ForeignTreeError(f"it belongs to uid {info.st_uid}")
        if not stat.S_ISDIR(info.st_mode):
            raise DamagedTreeError("it is not a directory")
        if info.st_mode & 0o022:
            raise DamagedTreeError("it is writable by group or others")
        try:
            manifest = TreeManifest.from_bytes(read_owned(self.path / MANIFEST, uid))
        except FileNotFoundError:
            raise DamagedTreeError(
                "it has no manifest (an older cudaup made it, or it was cut short)"
            ) from None
        if manifest.sha256 != self.key:
            raise DamagedTreeError("its manifest is another archive's")
        try:
            top = self.tree.lstat()
        except FileNotFoundError:
            raise DamagedTreeError(f"it has no {TREE}/") from None
        if top.st_uid != uid:
            raise ForeignTreeError(f"{TREE}/ belongs to uid {top.st_uid}")
        if not stat.S_ISDIR(top.st_mode) or top.st_mode & 0o022:
            raise DamagedTreeError(f"{TREE}/ is not a directory only its owner may write")
        try:
            self.seen = scan(self.tree)
        except OSError as exc:
            raise DamagedTreeError(
                f"its tree cannot be read ({exc.strerror}: {exc.filename})"
            ) from None
        owner = foreign(self.seen.values(), uid)
        if owner is not None:
            raise ForeignTreeError(owner)
        problem = compare(self.seen, manifest)
        if problem is not None:
            raise DamagedTreeError(problem)
        return manifest, self._stamped(uid)

    def _stamped(self, uid: int) -> bool:
        """Whether the stamp vouches for the digests: this boot, these very files."""
        current = boot_id()
        try:
            stamp = Stamp.from_bytes(read_owned(self.path / STAMP, uid, 4096))
        except (OSError, DamagedTreeError, ForeignTreeError):
            return False
        return (
            stamp is not None
            and current is not None
            and stamp.boot == current
            and stamp.fingerprint == fingerprint(self.seen)
        )

    def stamp(self, boot: str | None, uid: int) -> None:
        """Record that the digests were found right, for the files as they are now.

        Called once the install that checked them is published (or a toolkit linked
        from them removed: :func:`stamps_kept`): linking, and then renaming those links
        into the toolkit (or removing them), moved each file's ctime, and the stamp
        must hold the ctimes the next use will find.  So the tree is scanned again and
        stamped only when those moves are all that changed since it was loaded.  A
        write meanwhile with its mtime put back goes unseen: only the cache's
        own user (or root) can write these files, and that user could as well rewrite
        the stamp; the stamp finds what tools and accidents do, not what that user means.
        """
        if boot is None or not self.seen:
            return
        with contextlib.suppress(OSError):  # without a stamp, the next use hashes again
            now = scan(self.tree)
            if relinked(self.seen, now) is not None:
                return
            path = self.path / STAMP
            temporary = self.path / f"{STAGING_PREFIX}{STAMP}-{secrets.token_hex(4)}"
            _write_new(temporary, Stamp(boot, fingerprint(now)).to_bytes())
            if self.path.lstat().st_uid == uid:
                temporary.replace(path)

    def discard(self, root: Path, uid: int) -> None:
        """Move the entry loaded last out of the way and delete it (ours only)."""
        try:
            info = self.path.lstat()
        except FileNotFoundError:
            return
        if info.st_ino != self.inode or info.st_uid != uid:
            return  # another process replaced it meanwhile: that one is checked anew
        trash = root / f"{STAGING_PREFIX}{self.key[:16]}-{secrets.token_hex(4)}"
        try:
            self.path.rename(trash)
        except FileNotFoundError:
            return
        if stat.S_ISDIR(info.st_mode):
            shutil.rmtree(trash, ignore_errors=True)
        else:
            trash.unlink()


def _refusal(root: Path, uid: int) -> str | None:
    """Why ``unpacked/`` itself may not be trusted, or None."""
    info = root.lstat()
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        return f"{root} is not a directory (a symbolic link?)"
    if info.st_uid != uid:
        return f"{root} belongs to uid {info.st_uid}, not to uid {uid} who installs"
    if info.st_mode & 0o022:
        return f"{root} is writable by group or others"
    return None


def _write_new(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        os.fchmod(handle.fileno(), 0o644)  # whatever the umask


#: No unpack takes a day: a staging directory created that long ago was left by a process
#: killed mid-unpack (SIGKILL, power loss), never one still at work.
STALE_STAGING = 24 * 3600.0


def _sweep(root: Path, uid: int) -> None:
    """Remove the staging directories our killed processes left (SIGKILL, power loss)."""
    now = time.time()
    for entry in root.glob(f"{STAGING_PREFIX}*"):
        with contextlib.suppress(OSError):
            info = entry.lstat()
            if info.st_uid == uid and now - info.st_mtime > STALE_STAGING:
                shutil.rmtree(entry)


def _fetch_extracting(
    artifact: Artifact,
    downloads: Path,
    staging: Path,
    *,
    http: HttpClient,
    strip_top: bool,
    connections: int | None,
    progress: Progress | None,
    slots: threading.Semaphore,
    cancel: threading.Event,
    hash_wheel: bool = False,
) -> tuple[Path, Extracted]:
    """Download ``artifact`` and extract it into ``staging`` while its bytes arrive
    (``hash_wheel``: :func:`cudaup.install.extract.extract_archive`'s).

    The download runs in a thread of its own; extraction reads the part file as it
    fills (a zip's member list is fetched first, from its end).  What is extracted
    stands only once the download has been verified; if extracting early failed for
    any reason (the download failed, restarted, or sent bytes the checksum then
    rejected), the verified archive is extracted again from the start, so the result
    is exactly what extracting the verified file gives.
    """
    arrival = Arrival(tail_first=ZIP_TAIL if artifact.filename.endswith(_ZIPS) else 0)
    results: list[DownloadResult] = []
    failures: list[BaseException] = []

    def transfer() -> None:
        try:
            result = download(
                artifact,
                downloads,
                http=http,
                connections=connections,
                progress=progress,
                slots=slots,
                arrival=arrival,
                cancel=cancel,
                durable=False,  # read once, here, then deleted
            )
        except BaseException as exc:  # re-raised below, in the caller's thread
            failures.append(exc)
        else:
            results.append(result)

    thread = threading.Thread(target=transfer, daemon=True, name="cudaup-fetch")
    thread.start()
    early: Exception | None = None
    extracted: Extracted | None = None
    try:
        extracted = extract_archive(
            downloads / artifact.filename,
            staging,
            strip_top=strip_top,
            opener=arrival.open,
            cancel=cancel,
            hash_wheel=hash_wheel,
        )
    except Exception as exc:  # judged once the download has been verified
        early = exc
    thread.join()
    if failures:
        raise failures[0]
    if extracted is None or early is not None or arrival.lost:
        # The early reader's bytes were not all the verified file's (a restart).
        shutil.rmtree(staging)
        staging.mkdir(0o755)
        extracted = extract_archive(
            results[0].path, staging, strip_top=strip_top, cancel=cancel, hash_wheel=hash_wheel
        )
    return results[0].path, extracted
