"""A cache of verified, safely unpacked archives, filled by a download→extract pipeline.

Installing is download-bound for the first archives and CPU-bound (zlib, xz) for
the rest, so each archive is extracted while it downloads: a .tar.xz from the
front as its bytes land, a wheel member by member once its member list (at its
end, fetched first) is in.  Nothing extracted counts until the download has been
verified.  The unpacked tree is kept under
``<cache>/unpacked/<sha256>/`` (the archive itself is then dropped), and an
install links it into its staging directory: hard links where the cache and
the destination share a filesystem (as uv does), else copies.  A reinstall, or
the same release into a second prefix, downloads and decompresses nothing.
Entries are published by rename, so a half-unpacked tree is never used.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from cudaup.core.model import Artifact
from cudaup.download import (
    DownloadResult,
    Progress,
    ProgressEvent,
    fetch,
)
from cudaup.download.api import MAX_CONNECTIONS_PER_HOST
from cudaup.download.arrival import Arrival
from cudaup.install.extract import extract_archive
from cudaup.net.http import HttpClient
from cudaup.util.cachedir import STAGING_PREFIX, CacheLayout
from cudaup.util.parallel import map_concurrently

#: A zip lists its members in its last bytes; fetched first so unpacking can begin early.
ZIP_TAIL = 256 * 1024
_ZIPS = (".whl", ".zip")


def _key(artifact: Artifact) -> str:
    # Every archive the redist and pypi channels install has a published sha256.
    assert artifact.sha256 is not None, artifact.filename
    return artifact.sha256


def unpack_all(
    artifacts: Sequence[Artifact],
    cache_root: Path,
    *,
    http: HttpClient,
    strip_top: bool,
    connections: int = 8,
    progress: Progress | None = None,
) -> list[Path]:
    """The unpacked tree of each artifact, downloading and extracting what the cache lacks."""
    layout = CacheLayout(cache_root)
    root, downloads = layout.unpacked, layout.downloads
    root.mkdir(parents=True, exist_ok=True)
    _sweep(root)
    slots = threading.BoundedSemaphore(MAX_CONNECTIONS_PER_HOST)
    # Files already download side by side (up to 4): share the connections among them
    # rather than opening (and TLS-handshaking) 8 per file.
    per_file = max(2, connections // min(4, max(1, len(artifacts))))
    cancel = threading.Event()  # the first failure (or Ctrl-C) stops the others

    def one(artifact: Artifact) -> Path:
        final = root / _key(artifact)
        if final.is_dir():
            return final
        staging = root / f"{STAGING_PREFIX}{_key(artifact)[:16]}-{secrets.token_hex(4)}"
        staging.mkdir()
        try:
            archive = _fetch_extracting(
                artifact, downloads, staging, http=http, strip_top=strip_top,
                connections=per_file, progress=progress, slots=slots, cancel=cancel,
            )  # fmt: skip
            try:
                staging.rename(final)
            except OSError as exc:
                if exc.errno not in {errno.ENOTEMPTY, errno.EEXIST} or not final.is_dir():
                    raise
                shutil.rmtree(staging, ignore_errors=True)  # another process unpacked it first
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        with contextlib.suppress(OSError):
            archive.unlink()  # the unpacked tree is what later installs use
        if progress is not None:
            size = artifact.size
            progress(ProgressEvent(artifact.filename, "unpacked", size or 0, size))
        return final

    return map_concurrently(one, artifacts, workers=4, cancel=cancel)


#: No unpack takes a day: a staging directory created that long ago was left by a process
#: killed mid-unpack (SIGKILL, power loss), never one still at work.
STALE_STAGING = 24 * 3600.0


def _sweep(root: Path) -> None:
    """Remove the staging directories killed processes left (SIGKILL, power loss)."""
    now = time.time()
    for entry in root.glob(f"{STAGING_PREFIX}*"):
        with contextlib.suppress(OSError):
            if now - entry.lstat().st_mtime > STALE_STAGING:
                shutil.rmtree(entry)


def _fetch_extracting(
    artifact: Artifact,
    downloads: Path,
    staging: Path,
    *,
    http: HttpClient,
    strip_top: bool,
    connections: int,
    progress: Progress | None,
    slots: threading.Semaphore,
    cancel: threading.Event,
) -> Path:
    """Download ``artifact`` and extract it into ``staging`` while its bytes arrive.

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

    def download() -> None:
        try:
            result = fetch(
                artifact, downloads, http=http, connections=connections,
                progress=progress, slots=slots, arrival=arrival, cancel=cancel,
            )  # fmt: skip
        except BaseException as exc:  # re-raised below, in the caller's thread
            failures.append(exc)
        else:
            results.append(result)

    thread = threading.Thread(target=download, daemon=True, name="cudaup-fetch")
    thread.start()
    early: Exception | None = None
    try:
        extract_archive(
            downloads / artifact.filename, staging, strip_top=strip_top, opener=arrival.open,
            cancel=cancel,
        )  # fmt: skip
    except Exception as exc:  # judged once the download has been verified
        early = exc
    thread.join()
    if failures:
        raise failures[0]
    if early is not None or arrival.lost:
        # The early reader's bytes were not all the verified file's (a restart).
        shutil.rmtree(staging)
        staging.mkdir()
        extract_archive(results[0].path, staging, strip_top=strip_top, cancel=cancel)
    return results[0].path


def link_tree(source: Path, destination: Path) -> bool:
    """Recreate ``source`` at ``destination`` with hard links; copies across filesystems.

    Returns whether hard links were used.
    """
    linked = True

    def link_or_copy(src: str, dst: str) -> None:
        nonlocal linked
        if linked:
            try:
                os.link(src, dst)
                return
            except OSError as exc:
                if exc.errno not in {errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP}:
                    raise
                linked = False
        shutil.copy2(src, dst)

    shutil.copytree(source, destination, symlinks=True, copy_function=link_or_copy)
    return linked
