"""Verified, resumable, parallel downloads of multi-GB files.

How one file is downloaded (:func:`download`):

1. A lock (in cudaup's cache, not beside the file) keeps two processes from
   writing the same target; the second waits, then finds the finished file.
2. One ranged probe learns the size, the validators (``ETag``/``Last-Modified``)
   and whether the server honours ranges: ``GET bytes=0-0``, or, for a file read while
   it arrives whose size the index gave, the bytes its reader needs first (a zip's
   tail: its member list), which the answer then also brings, one round trip sooner
   (:func:`~cudaup.download.range_plan.probe_range`).
3. The data goes to ``NAME.part``; ``NAME.part.json`` records which byte
   ranges are on disk, rewritten atomically after the part file is synced, about
   once a second; in between, what arrived is handed to the kernel's writeback
   without waiting (so the writeback overlaps a fast transfer).  A
   re-run with matching validators continues where the last one stopped; a changed
   remote (ETag, Last-Modified or size) restarts cleanly, with a message.
4. Connections take pieces from the front of what is left
   (:mod:`cudaup.download.range_plan`; how many adapts to what each adds,
   :mod:`cudaup.download.ramp`, unless a count is given), sized so that the round trip of each request
   does not show; near the end an idle worker steals half of the busiest piece.
   Every range request carries ``If-Range``, and a 206 must carry the
   ``Content-Range`` that was asked for.  A server that ignores ranges (200) gets
   one plain stream from byte 0 into a fresh file: a 200 body is never written at a
   range offset.
5. A hashing thread hashes the contiguous prefix in order: the connection at the
   front hands it the buffers it wrote, the rest is read back from the part file
   (:mod:`cudaup.download.digest`; hashlib and pread release the GIL).  The file
   fills from its front, so verification keeps up with the transfer and only the
   last pieces remain to hash when the last byte lands.
6. fsync, compare with the authoritative checksum, then ``os.replace`` to the
   final name.  A mismatch deletes the part file and names both digests.

Transfers end and adapt (:mod:`cudaup.download.watch`): a connection below the
speed floor is dropped and asked again; a download that receives nothing for the
stall limit fails; 503/429 lower the connection count for the rest of the download
(``Retry-After`` honoured).  Failures (resets, short bodies, stalls, 5xx) are
retried keeping the bytes already written, budgeted on progress; other 4xx fail at
once.  A full disk or a refused write names the path and what to do.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from cudaup.download.arrival import Arrival
from cudaup.download.job import DownloadJob
from cudaup.download.parallel import download_parallel
from cudaup.download.publish import is_verified
from cudaup.download.range_plan import probe_range
from cudaup.download.remote import NoRangesError, RemoteChangedError, probe_remote
from cudaup.download.request import (
    DownloadRequest,
    DownloadResult,
    Progress,
    ProgressEvent,
    emit,
    notice,
)
from cudaup.download.stream import download_stream
from cudaup.download.target import DownloadPaths, check_ceiling, check_space
from cudaup.download.watch import TransferLimits, Watchdog
from cudaup.errors import IntegrityError, NetworkError, PermissionDeniedError, UsageError
from cudaup.net.http import HttpClient
from cudaup.util import cachedir
from cudaup.util.faults import Place, cache_place, denied, explained, output_place
from cudaup.util.locks import locked
from cudaup.util.parallel import check as check_cancelled
from cudaup.util.parallel import map_concurrently

if TYPE_CHECKING:
    # Only named: the model loads the platform table and packaging (~20 ms at start-up).
    from cudaup.core.model import Artifact

MAX_CONNECTIONS_PER_HOST = 16
#: Files :func:`download_many` downloads side by side.
FILES_AT_ONCE = 4


def check_connections(connections: int | None) -> None:
    if connections is not None and not 1 <= connections <= MAX_CONNECTIONS_PER_HOST:
        raise UsageError(f"--connections must be between 1 and {MAX_CONNECTIONS_PER_HOST}")


def download(
    request: DownloadRequest | Artifact,
    directory: Path,
    *,
    http: HttpClient,
    connections: int | None = None,
    progress: Progress | None = None,
    allow_unverified: bool = False,
    slots: threading.Semaphore | None = None,
    arrival: Arrival | None = None,
    cancel: threading.Event | None = None,
    durable: bool = True,
) -> DownloadResult:
    """Download one file into ``directory``; see the module docstring for how.

    ``durable=False`` syncs nothing (the part file, its resume state, the final name) and
    hands nothing to the disk's writeback, for a file its caller reads at once and
    deletes: a crash can only leave a file that fails the check every reuse makes (see
    :func:`_existing`), and its resume state, which records the boot, is not resumed after
    a restart.

    With ``arrival``, another thread may read the bytes as they land (see :class:`Arrival`).
    Setting ``cancel`` stops the download within about a tenth of a second, its resumable
    state saved, with :class:`cudaup.util.parallel.CancelledError`.
    """
    try:
        result = _download(
            request
            if isinstance(request, DownloadRequest)
            else DownloadRequest.from_artifact(request),
            directory,
            http=http,
            connections=connections,
            progress=progress,
            allow_unverified=allow_unverified,
            slots=slots,
            arrival=arrival,
            cancel=cancel,
            durable=durable,
        )
    except BaseException:
        # Whatever stopped it, and however early (a name no file system takes, a
        # directory refused): a reader waiting for the bytes must hear of it.
        if arrival is not None:
            arrival._lose()
        raise
    if arrival is not None:
        arrival._finish(result.path)
    return result


def _download(
    request: DownloadRequest,
    directory: Path,
    *,
    http: HttpClient,
    connections: int | None,
    progress: Progress | None,
    allow_unverified: bool,
    slots: threading.Semaphore | None,
    arrival: Arrival | None,
    cancel: threading.Event | None,
    durable: bool,
) -> DownloadResult:
    if request.checksum is None and not allow_unverified:
        raise IntegrityError(
            f"no checksum is known for {request.filename}, so it cannot be verified",
            hint="--allow-unverified downloads it anyway",
        )
    check_connections(connections)
    place = _prepare_directory(directory, http)
    target = DownloadPaths(directory, request.filename, place)
    lock_path = cachedir.CacheLayout(http.settings.cache_root).download_lock(target.final)

    def waiting() -> None:
        message = "waiting for another cudaup process writing the same file"
        notice(progress, request, request.size, message)

    busy = f"another process has held the lock on {target.final} for a day"
    cache = cache_place(http.settings.cache_root)
    with locked(lock_path, busy=busy, wait=24 * 3600, place=cache, on_wait=waiting, cancel=cancel):
        with target.explained(directory, "examine"):
            target.check_trusted(*_cache_above(directory, http.settings.cache_root))
        watchdog = Watchdog(TransferLimits.of(http.settings))
        job = DownloadJob(
            request,
            target,
            http,
            watchdog,
            connections,
            progress,
            slots,
            arrival,
            cancel,
            durable=durable,
        )
        return _download_locked(job)


def _prepare_directory(directory: Path, http: HttpClient) -> Place:
    """Create the download directory; where it lies says what to do if it refuses a write
    (another ``-o``, or another ``CUDAUP_CACHE_DIR`` when the directory is in the cache)."""
    cache = http.settings.cache_root
    inside_cache = directory.absolute().is_relative_to(cache.absolute())
    place = cache_place(cache) if inside_cache else output_place(directory)
    try:
        with explained(f"cannot create the directory {directory}", directory, [place]):
            directory.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise UsageError(f"{directory} is not a directory: {place.remedy}") from None
    return place


def _cache_above(directory: Path, cache: Path) -> tuple[Path, ...]:
    """The directories of cudaup's cache above ``directory`` (the cache itself for
    ``downloads/``): who may write them may put another directory in its place.  The
    cache's own path may be a link (the user's choice): the directory it leads to counts."""
    try:
        below = directory.absolute().relative_to(cache.absolute())
    except ValueError:
        return ()
    real = cache.resolve()
    return tuple(real / Path(*below.parts[:depth]) for depth in range(len(below.parts)))


def _check_writable(directory: Path, place: Place) -> None:
    """Refuse before any byte moves when this user may not write the directory, or its
    file system holds no files at all (proc, sysfs: no blocks, so "0 bytes free" would
    blame the disk)."""
    found = os.statvfs(directory)
    if found.f_blocks == 0:
        raise PermissionDeniedError(
            f"cannot write in {directory}: its file system holds no files (a kernel "
            f"interface such as /proc or /sys); {place.remedy}"
        )
    if os.access(directory, os.W_OK | os.X_OK):
        return
    read_only = found.f_flag & os.ST_RDONLY
    refusal = OSError(errno.EROFS if read_only else errno.EACCES, "refused", str(directory))
    raise denied(f"cannot write in {directory}", refusal, [place], directory)


def _existing(target: DownloadPaths, request: DownloadRequest) -> DownloadResult | None:
    if not is_verified(target.final, request):
        return None
    algorithm, expected = request.checksum or ("", "")
    size = target.final.stat().st_size
    return DownloadResult(
        path=target.final,
        url=request.url,
        size=size,
        algorithm=algorithm,
        digest=expected,
        resumed_from=0,
        fetched=0,
        seconds=0.0,
        skipped=True,
        connections=0,
    )


def _download_locked(job: DownloadJob) -> DownloadResult:
    request, target, http, progress = job.request, job.paths, job.http, job.progress
    arrival, cancel, watchdog = job.arrival, job.cancel, job.watchdog
    with target.explained(target.final, "read"):
        done = _existing(target, request)
    if done is not None:
        emit(
            progress,
            ProgressEvent(
                request.filename, "done", done.size, done.size, "already here and verified"
            ),
        )
        return done
    _check_writable(target.directory, target.place)
    tail = arrival.tail_first if arrival is not None else 0
    # Bytes asked for before the size is proved: never more than the ceiling allows.
    fits = request.size is not None and request.size <= http.settings.max_size
    for attempt in range(3):
        check_cancelled(cancel)
        # A download that resumes may have those bytes already: one byte proves enough.
        wanted = probe_range(request.size, tail) if fits and not target.state.exists() else None
        remote = probe_remote(http, request.url, watchdog, cancel, wanted, request.size)
        if request.size is not None and remote.size is not None and remote.size != request.size:
            raise IntegrityError(
                f"{request.filename}: the source says {request.size} bytes but {remote.url} serves "
                f"{remote.size}; refusing a file whose sources disagree (a mirror out of sync?)"
            )
        check_ceiling(request, remote, http.settings.max_size)
        try:
            if remote.size is None or not remote.ranges:
                return download_stream(job, remote)
            return download_parallel(job, remote)
        except RemoteChangedError as exc:
            if arrival is not None:
                arrival._lose()  # an early reader saw bytes of the old file
            if attempt == 2:
                raise NetworkError(
                    f"{request.url} keeps changing while it downloads ({exc})"
                ) from None
            notice(progress, request, remote.size, f"the remote file changed ({exc}); restarting")
            target.discard()
        except NoRangesError as exc:
            if arrival is not None:
                arrival._lose()  # its part file is about to be replaced by a fresh one
            message = f"{exc}; starting over with one stream"
            notice(progress, request, remote.size, message)
            remote = dataclasses.replace(remote, ranges=False)
            return download_stream(job, remote)
    raise AssertionError("unreachable")  # pragma: no cover


def download_many(
    requests: Sequence[DownloadRequest | Artifact],
    directory: Path,
    *,
    http: HttpClient,
    connections: int | None = None,
    total_connections: int = MAX_CONNECTIONS_PER_HOST,
    progress: Progress | None = None,
    allow_unverified: bool = False,
) -> list[DownloadResult]:
    """Several files at once, within one global connection cap."""
    check_connections(connections)
    normalized = [
        r if isinstance(r, DownloadRequest) else DownloadRequest.from_artifact(r) for r in requests
    ]
    unverified = [r.filename for r in normalized if r.checksum is None]
    if unverified and not allow_unverified:
        raise IntegrityError(
            f"no checksum is known for {', '.join(unverified)}",
            hint="--allow-unverified downloads them anyway",
        )
    _check_writable(directory, _prepare_directory(directory, http))
    known = sum(r.size or 0 for r in normalized)
    several = len(normalized) != 1
    check_space(directory, known, f"{len(normalized)} file{'s' if several else ''}", plural=several)
    slots = threading.BoundedSemaphore(max(1, min(total_connections, MAX_CONNECTIONS_PER_HOST)))
    per_file = None if connections is None else max(1, min(connections, total_connections))

    cancel = threading.Event()  # the first failure (or Ctrl-C) stops the others

    def one(request: DownloadRequest) -> DownloadResult:
        return download(
            request,
            directory,
            http=http,
            connections=per_file,
            progress=progress,
            allow_unverified=allow_unverified,
            slots=slots,
            cancel=cancel,
        )

    return map_concurrently(one, normalized, workers=FILES_AT_ONCE, cancel=cancel)
