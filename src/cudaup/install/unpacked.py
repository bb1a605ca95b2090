"""A cache of verified, safely unpacked archives, filled by a download→extract pipeline.

Installing is download-bound for the first archives and CPU-bound (zlib, xz) for
the rest, so each archive is extracted as soon as it has arrived, while the
others are still downloading.  The unpacked tree is kept under
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
from collections.abc import Sequence
from pathlib import Path

from cudaup.download import MAX_CONNECTIONS_PER_HOST, Progress, fetch
from cudaup.http import HttpClient
from cudaup.install.extract import extract_archive
from cudaup.model import Artifact
from cudaup.parallel import map_concurrently


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
    root = cache_root / "unpacked"
    downloads = cache_root / "downloads"
    root.mkdir(parents=True, exist_ok=True)
    slots = threading.BoundedSemaphore(MAX_CONNECTIONS_PER_HOST)
    # Files already download side by side (up to 4): share the connections among them
    # rather than opening (and TLS-handshaking) 8 per file.
    per_file = max(2, connections // min(4, max(1, len(artifacts))))

    def one(artifact: Artifact) -> Path:
        final = root / _key(artifact)
        if final.is_dir():
            return final
        archive = fetch(
            artifact, downloads, http=http, connections=per_file, progress=progress, slots=slots
        ).path
        staging = root / f".tmp-{_key(artifact)[:16]}-{secrets.token_hex(4)}"
        staging.mkdir()
        try:
            extract_archive(archive, staging, strip_top=strip_top)
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
        return final

    return map_concurrently(one, artifacts, workers=4)


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
