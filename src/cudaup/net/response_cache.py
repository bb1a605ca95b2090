"""A small on-disk HTTP cache for listings, manifests, pages and index answers.

Each entry is a body file plus a JSON metadata file (status, validators, time
stored, the body's size and SHA-256), written atomically with ``os.replace`` so
concurrent cudaup processes never read half an entry.  Freshness is decided by
the caller's TTL; stale entries keep their ``ETag``/``Last-Modified`` for a
conditional request.

A cached manifest vouches for the checksums of everything installed from it, so
an entry is used only when it is exactly what this cache wrote: metadata that is
valid JSON of the right shape, a body of the recorded size and SHA-256, and both
files owned by this user (or root) and writable by no one else.  Anything else
(torn, corrupt, nested too deeply, planted by another local user) is a miss:
the document is fetched again, never trusted and never a crash.

Beside an answer, a caller may keep what it derived from it (a project page's parsed
files: :meth:`HttpCache.derived`), in one file written atomically: a JSON header line
(the URL, the kind, the SHA-256 of the body it was derived from, its own size and
SHA-256), then the payload.  It is used only for the very body the caller holds (the
caller hashes that body), only when whole and this user's, under the same checks as an
answer; anything else is a miss, and the caller derives it again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import stat
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

from cudaup.errors import CudaupError
from cudaup.util.atomic import atomic_write
from cudaup.util.cachedir import CacheLayout

#: Metadata files are a few hundred bytes; a larger one is not ours.
_MAX_META_BYTES = 64 * 1024
#: Bodies are capped by the HTTP client (20 MB by default); this bounds a planted one.
_MAX_BODY_BYTES = 256 * 1024 * 1024
_TAG = "Signature: 8a477f597d28d172789f06886806bc55\n# This directory is cudaup's cache.\n"


@dataclass(frozen=True, slots=True)
class CachedResponse:
    url: str
    status: int
    etag: str | None
    last_modified: str | None
    stored_at: float
    body: bytes

    def age(self, now: float | None = None) -> float:
        return (time.time() if now is None else now) - self.stored_at


class HttpCache:
    """Responses keyed by URL under ``<root>/http/``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._dir = CacheLayout(root).http

    def _paths(self, url: str) -> tuple[Path, Path]:
        digest = hashlib.sha256(url.encode()).hexdigest()
        base = self._dir / digest[:2] / digest
        return base.with_suffix(".json"), base.with_suffix(".body")

    def lookup(self, url: str) -> CachedResponse | None:
        """The entry for ``url``, or None when there is none usable (see the module doc)."""
        meta_path, body_path = self._paths(url)
        meta_bytes = _read_own(meta_path, _MAX_META_BYTES)
        body = _read_own(body_path, _MAX_BODY_BYTES)
        if meta_bytes is None or body is None:
            return None
        try:
            meta = json.loads(meta_bytes)
        except (ValueError, RecursionError):  # not JSON, not UTF-8, nested too deeply
            return None
        if not isinstance(meta, dict):
            return None
        status, stored_at = meta.get("status"), meta.get("stored_at")
        etag, last_modified = meta.get("etag"), meta.get("last_modified")
        if (
            meta.get("url") != url
            or meta.get("size") != len(body)
            or meta.get("sha256") != hashlib.sha256(body).hexdigest()
            or not _is_int(status, 100, 599)
            or not _is_time(stored_at)
            or not isinstance(etag, str | None)
            or not isinstance(last_modified, str | None)
        ):
            return None  # a torn, corrupt or foreign entry: treat as absent
        return CachedResponse(
            url=url,
            status=status,
            etag=etag,
            last_modified=last_modified,
            stored_at=float(stored_at),
            body=body,
        )

    def store(
        self, url: str, status: int, etag: str | None, last_modified: str | None, body: bytes
    ) -> None:
        meta_path, body_path = self._paths(url)
        try:
            meta_path.parent.mkdir(parents=True, exist_ok=True)
            self._tag()
            atomic_write(body_path, body)
            meta = {
                "url": url,
                "status": status,
                "etag": etag,
                "last_modified": last_modified,
                "stored_at": time.time(),
                "size": len(body),
                "sha256": hashlib.sha256(body).hexdigest(),
            }
            atomic_write(meta_path, json.dumps(meta).encode())
        except (OSError, CudaupError):  # atomic_write may name the path as a CudaupError
            pass  # a read-only or full cache must never fail the command

    def store_answer(self, url: str, status: int, headers: Mapping[str, str], body: bytes) -> None:
        """:meth:`store` an answer as it came, its validators taken from its ``headers``
        (their names in any case): what a GET through the cache keeps, and what a plan's
        index memo read for uv is kept as."""
        named = {name.lower(): value for name, value in headers.items()}
        self.store(url, status, named.get("etag"), named.get("last-modified"), body)

    def forget(self, url: str) -> None:
        """Drop ``url``'s answer (one its source vouches against: the next read asks)."""
        meta_path, _body = self._paths(url)
        with contextlib.suppress(OSError):
            meta_path.unlink()  # without its metadata a body is never read

    def derived(self, url: str, kind: str, source_sha256: str) -> bytes | None:
        """What was kept as ``kind`` beside ``url``'s answer, when it was derived from the
        body whose SHA-256 is ``source_sha256``; None when there is none usable (derived
        from other bytes, torn, corrupt, or not this user's: see the module doc)."""
        data = _read_own(self._derived_path(url, kind), _MAX_BODY_BYTES)
        if data is None:
            return None
        header, newline, payload = data.partition(b"\n")
        if not newline or len(header) > _MAX_META_BYTES:
            return None
        try:
            meta = json.loads(header)
        except (ValueError, RecursionError):
            return None
        if (
            not isinstance(meta, dict)
            or meta.get("url") != url
            or meta.get("kind") != kind
            or meta.get("source_sha256") != source_sha256
            or meta.get("size") != len(payload)
            or meta.get("sha256") != hashlib.sha256(payload).hexdigest()
        ):
            return None
        return payload

    def keep_derived(self, url: str, kind: str, source_sha256: str, payload: bytes) -> None:
        """Keep ``payload``, derived as ``kind`` from the body of ``url`` whose SHA-256 is
        ``source_sha256``, for :meth:`derived` (replacing what was kept before)."""
        path = self._derived_path(url, kind)
        header = {
            "url": url,
            "kind": kind,
            "source_sha256": source_sha256,
            "size": len(payload),
            "sha256": hashlib.sha256(payload).hexdigest(),
        }
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._tag()
            atomic_write(path, json.dumps(header).encode() + b"\n" + payload)
        except (OSError, CudaupError):
            pass  # as in store: a read-only or full cache never fails the command

    def _derived_path(self, url: str, kind: str) -> Path:
        if not kind.isascii() or not kind.isalpha():
            raise ValueError(f"a derived entry's kind is letters, not {kind!r}")
        return self._paths(url)[0].with_suffix(f".{kind}")

    def touch(self, entry: CachedResponse) -> None:
        """Mark a revalidated (304) entry fresh again."""
        self.store(entry.url, entry.status, entry.etag, entry.last_modified, entry.body)

    def _tag(self) -> None:
        tag = self.root / "CACHEDIR.TAG"
        if not tag.exists():
            atomic_write(tag, _TAG.encode())


def _read_own(path: Path, limit: int) -> bytes | None:
    """The bytes of ``path`` if it is a regular file this user (or root) owns, no one else
    may write, of at most ``limit`` bytes; otherwise None.  Checked on the open file
    (never through a link), so a swap between the check and the read cannot slip through."""
    try:
        # O_NONBLOCK: opening a FIFO planted here must not hang.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if (
            not stat.S_ISREG(info.st_mode)
            or info.st_uid not in {os.geteuid(), 0}
            or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        ):
            return None
        chunks: list[bytes] = []
        total = 0
        while chunk := os.read(fd, 1 << 20):  # the file may have grown since the fstat
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                return None
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def _is_int(value: Any, low: int, high: int) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def _is_time(value: Any) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
