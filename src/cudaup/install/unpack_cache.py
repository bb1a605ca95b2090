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
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from cudaup.core.model import Artifact
from cudaup.download import DownloadResult, Progress, ProgressEvent, download
from cudaup.download.api import MAX_CONNECTIONS_PER_HOST
from cudaup.download.arrival import Arrival
from cudaup.errors import InsufficientSpaceError, IntegrityError
from cudaup.install.cache_entry import (
    MANIFEST,
    STAMP,
    TREE,
    CacheEntry,
    refusal,
    sweep,
    write_new,
)
from cudaup.install.extract import Extracted, extract_archive
from cudaup.install.linking import LinkMode, materialize
from cudaup.install.tree import (
    DamagedTreeError,
    ForeignTreeError,
    Stamp,
    TreeManifest,
    check_digests,
    compare,
    describe,
    fingerprint,
    foreign,
    scan,
)
from cudaup.net.http import HttpClient
from cudaup.util.boot import boot_id
from cudaup.util.cachedir import STAGING_PREFIX, CacheLayout, downloads_for, shared_downloads
from cudaup.util.faults import DENIED, DISK_FULL, Place, cache_place, explained
from cudaup.util.parallel import check as check_cancelled
from cudaup.util.parallel import map_concurrently
from cudaup.util.paths import inside, make_directory

if TYPE_CHECKING:  # a head start hands its stager its connections and cancel
    from cudaup.install.head_start import HeadStart

#: A zip lists its members in its last bytes; fetched first so unpacking can begin early.
ZIP_TAIL = 256 * 1024
_ZIPS = (".whl", ".zip")
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
    checked: list[CacheEntry] = field(default_factory=list)
    boot: str | None = None

    def stamp(self) -> None:
        """Record that the checked trees' digests hold, once the toolkit made from them
        is published (see :meth:`CacheEntry.stamp`); the next install of the same archives
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
    ahead: HeadStart | None = None,
) -> StagedTrees:
    """Put each artifact's checked tree at ``parts/<index>``, unpacking what the cache lacks.

    ``parts`` is an empty directory of the install's staging; ``places`` say what to
    do where a write is refused (see :mod:`cudaup.util.faults`); an archive a head start
    (``ahead``) began to unpack is taken from it, not fetched again.
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
        ahead=ahead,
    )
    # The largest first: they take longest (their inflating is most of an install's
    # work), so no slot frees late for one of them; each keeps its index, the result its order.
    items = sorted(enumerate(artifacts), key=lambda item: -(item[1].size or 0))
    staged = map_concurrently(stager.stage, items, STAGE_WORKERS, cancel=stager.cancel)
    by_index = {index: tree for (index, _artifact), tree in zip(items, staged, strict=True)}
    trees = [by_index[index] for index in range(len(artifacts))]
    return StagedTrees(trees, stager.notes, stager.checked, stager.boot)


def unpacker(
    cache_root: Path,
    *,
    http: HttpClient,
    verify: bool,
    places: Sequence[Place],
    progress: Progress | None,
    ahead: HeadStart,
) -> _Stager | None:
    """A head start's stager (:mod:`cudaup.install.head_start`), which unpacks archives into
    the cache and stages nothing; None where the cache's ``downloads/`` or ``unpacked/`` is
    not this user's alone (the install's staging then goes without, and says why)."""
    if shared_downloads(cache_root) is None:
        return None
    stager = _Stager(
        cache_root,
        None,
        http=http,
        strip_top=False,
        link_mode="hardlink",
        verify=verify,
        places=places,
        progress=progress,
        per_file=None,
        ahead=ahead,
    )
    return stager if stager.refusal is None else None


@contextlib.contextmanager
def stamps_kept(cache_root: Path, keys: Iterable[str]) -> Iterator[None]:
    """Keep the stamps of the unpacked trees ``keys`` (archives' sha256) across the removal
    of a toolkit hard-linked from them.  Each removed link moves its file's ctime, which
    voids a stamp: the next install of those archives would hash every file again.  A
    tree whose stamp holds before is scanned again after, and stamped anew when ctimes
    and link counts are all that moved (see :meth:`CacheEntry.stamp`).  Never fails: a tree
    it cannot vouch for is hashed by the next install, as it would have been."""
    wanted = list(dict.fromkeys(k for k in keys if _SHA256.match(k)))
    if not wanted:  # an install that replaces nothing: no boot id to read, no tree to scan
        yield
        return
    uid, boot, root = os.geteuid(), boot_id(), CacheLayout(cache_root).unpacked
    held: list[CacheEntry] = []
    with contextlib.suppress(OSError):  # no cache (or not ours): nothing to keep
        if boot is not None and refusal(root, uid) is None:
            for key in wanted:
                entry = CacheEntry(inside(root, key), key)
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
        parts: Path | None,
        *,
        http: HttpClient,
        strip_top: bool,
        link_mode: LinkMode,
        verify: bool,
        places: Sequence[Place],
        progress: Progress | None,
        per_file: int | None,
        ahead: HeadStart | None = None,
    ) -> None:
        """``parts``: the install's, or None for a head start's stager (:func:`unpacker`);
        a stager shares a head start's (``ahead``) connections and ``cancel``."""
        layout = CacheLayout(cache_root)
        self.root, self.parts = layout.unpacked, parts
        if parts is not None:
            self.downloads, refused = downloads_for(cache_root, parts.parent)
        else:  # unpacker: the cache's downloads/, checked
            self.downloads, refused = layout.downloads, None
        self.http, self.strip_top, self.progress = http, strip_top, progress
        self.link_mode, self.verify, self.places = link_mode, verify, places
        # Files already download side by side (up to 4): a given count is shared among them
        # rather than opening (and TLS-handshaking) 8 per file; by default each adapts.
        self.per_file = per_file
        self.ahead = ahead
        self.slots = ahead.slots if ahead else threading.BoundedSemaphore(MAX_CONNECTIONS_PER_HOST)
        # the first failure (or Ctrl-C) stops the others, a head start's too
        self.cancel = ahead.cancel if ahead else threading.Event()
        self.uid = os.geteuid()
        self.boot = boot_id()
        self.notes: list[str] = []
        self.checked: list[CacheEntry] = []
        self._lock = threading.Lock()
        with explained("cannot prepare cudaup's cache", self.root, self.places):
            make_directory(cache_root, self.root.name)
        if refused is not None:
            self._tell(refused)
        self.refusal = refusal(self.root, self.uid)
        if self.refusal is not None:
            self._tell(
                f"{self.refusal}: cudaup does not use the unpacked archives there; they were "
                "unpacked for this install only (make it yours and not writable by others, or "
                "set CUDAUP_CACHE_DIR)"
            )
        else:
            sweep(self.root, self.uid)

    def _tell(self, note: str, artifact: Artifact | None = None) -> None:
        with self._lock:
            self.notes.append(note)
        if self.progress is not None and artifact is not None:
            self.progress(ProgressEvent(artifact.filename, "notice", 0, None, note))

    # -- one archive -------------------------------------------------------------------
    def stage(self, item: tuple[int, Artifact]) -> Staged:
        index, artifact = item
        assert self.parts is not None, "a head start's stager stages nothing"
        part = self.parts / str(index)
        key = artifact.sha256
        if self.refusal is not None or key is None:
            return self._private(artifact, part)
        entry = self._entry(artifact, key)
        unpacked_now = False
        problem = ""
        # The tree this process just unpacked and published: its manifest is in memory and
        # its files were scanned a moment ago, so it is not read back (see _unpack_into_cache).
        fresh: tuple[TreeManifest, bool] | None = None
        started = self.ahead.take(key) if self.ahead is not None else None
        if started is not None:  # its head start: the same archive (sha256), being unpacked
            ahead_entry, fresh = started.result()
            if fresh is not None:
                entry, unpacked_now = ahead_entry, True
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
        self, entry: CacheEntry, manifest: TreeManifest, part: Path, digests: bool
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

    def _discard(self, artifact: Artifact, entry: CacheEntry, problem: str) -> None:
        self._tell(
            f"{artifact.filename}: the cached tree {entry.path} was discarded ({problem}); "
            "it is unpacked again from the verified archive",
            artifact,
        )
        with explained(f"cannot discard {entry.path}", self.root, self.places):
            entry.discard(self.root, self.uid)

    def unpack_ahead(
        self, artifact: Artifact, key: str
    ) -> tuple[CacheEntry, tuple[TreeManifest, bool] | None]:
        """A head start's work (:class:`HeadStart`): unpack ``artifact`` into the cache
        unless its entry is there (the install's staging loads and checks that one, once)."""
        entry = self._entry(artifact, key)
        if os.path.lexists(entry.path):
            return entry, None
        return entry, self._unpack_into_cache(artifact, entry)

    def _entry(self, artifact: Artifact, key: str) -> CacheEntry:
        """The cache entry of the archive whose sha256 is ``key``, named by it alone."""
        if not _SHA256.match(key):
            raise IntegrityError(f"{artifact.filename}: its sha256 {key!r} is not 64 hex digits")
        return CacheEntry(inside(self.root, key), key)

    def _unpack_into_cache(
        self, artifact: Artifact, entry: CacheEntry
    ) -> tuple[TreeManifest, bool] | None:
        """Download and unpack into a private name, then publish it as ``entry`` in one rename.

        Returns what :meth:`CacheEntry.load` would find, without reading it back: the manifest
        just written, and whether its digests are vouched for (a stamp was written, as they
        were computed just now).  None when another process published this archive first:
        that tree is loaded and checked like any other; so also when the archive went away
        while this one was reading it: another process that downloaded it too unpacked and
        published it, then deleted it (it deletes the archive only once its tree stands).
        The entry keeps the scan the stamp was made from, which :meth:`CacheEntry.stamp`
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
                write_new(staging / MANIFEST, manifest.to_bytes())
                if self.boot is not None:  # its digests were computed just now
                    write_new(staging / STAMP, Stamp(self.boot, fingerprint(seen)).to_bytes())
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
