"""A small on-disk HTTP cache for listings, manifests, pages and index answers.

Each entry is a body file plus a JSON metadata file (status, validators, time
stored), written atomically with ``os.replace`` so concurrent cudaup processes
never read half an entry.  Freshness is decided by the caller's TTL; stale
entries keep their ``ETag``/``Last-Modified`` for a conditional request.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path

from cudaup.util.atomic import atomic_write
from cudaup.util.cachedir import CacheLayout

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
        meta_path, body_path = self._paths(url)
        try:
            meta = json.loads(meta_path.read_text())
            body = body_path.read_bytes()
        except (OSError, ValueError):
            return None
        if meta.get("url") != url or meta.get("size") != len(body):
            return None  # a torn or foreign entry: treat as absent
        return CachedResponse(
            url=url,
            status=int(meta["status"]),
            etag=meta.get("etag"),
            last_modified=meta.get("last_modified"),
            stored_at=float(meta["stored_at"]),
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
            }
            atomic_write(meta_path, json.dumps(meta).encode())
        except OSError:
            pass  # a read-only or full cache must never fail the command

    def touch(self, entry: CachedResponse) -> None:
        """Mark a revalidated (304) entry fresh again."""
        self.store(entry.url, entry.status, entry.etag, entry.last_modified, entry.body)

    def _tag(self) -> None:
        tag = self.root / "CACHEDIR.TAG"
        if not tag.exists():
            atomic_write(tag, _TAG.encode())
