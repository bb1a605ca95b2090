"""What the fake server can serve at one path: a small static body or a large virtual file.

Both kinds share one duck-typed interface, which is all the server uses:

* ``size`` (bytes), ``content_type``, ``last_modified`` (POSIX seconds, UTC), ``etag``
  (a strong, quoted validator that depends only on the content);
* ``read(start, end)`` -> the bytes ``[start, end)``;
* ``iter_chunks(start, end)`` -> the same bytes in pieces of at most 64 KiB.

A :class:`VirtualFile` never holds its content: its bytes are a 64 KiB block derived from
``sha256(seed)`` repeated to ``size``, so a 5 GB installer costs one block of memory and any
byte range is computed by slicing that block.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass

BLOCK_SIZE = 64 * 1024
"""Length of the repeating block of a :class:`VirtualFile`, and the server's write size."""

DEFAULT_LAST_MODIFIED = 1_735_689_600
"""2025-01-01T00:00:00Z, for resources that belong to no release."""


@functools.lru_cache(maxsize=512)
def _block(seed: str) -> bytes:
    key = hashlib.sha256(seed.encode("utf-8")).digest()
    return b"".join(
        hashlib.sha256(key + index.to_bytes(4, "big")).digest() for index in range(BLOCK_SIZE // 32)
    )


def _clamp(start: int, end: int | None, size: int) -> tuple[int, int]:
    stop = size if end is None else min(end, size)
    return max(0, start), max(0, stop)


@dataclass(frozen=True, slots=True)
class StaticResource:
    """A body held in memory (pages, manifests, checksum files, tiny archives)."""

    body: bytes
    content_type: str
    last_modified: int = DEFAULT_LAST_MODIFIED

    @property
    def size(self) -> int:
        return len(self.body)

    @property
    def etag(self) -> str:
        return '"' + hashlib.md5(self.body).hexdigest() + '"'

    def read(self, start: int = 0, end: int | None = None) -> bytes:
        lo, hi = _clamp(start, end, self.size)
        return self.body[lo:hi]

    def iter_chunks(self, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        lo, hi = _clamp(start, end, self.size)
        for offset in range(lo, hi, BLOCK_SIZE):
            yield self.body[offset : min(offset + BLOCK_SIZE, hi)]

    def sha256(self) -> str:
        return hashlib.sha256(self.body).hexdigest()

    def md5(self) -> str:
        return hashlib.md5(self.body).hexdigest()


@dataclass(frozen=True, slots=True)
class VirtualFile:
    """A file of ``size`` deterministic bytes generated from ``seed`` on demand.

    Its content is not a valid archive or installer; only its length, its byte ranges and
    its validators are meaningful.  ``sha256()``/``md5()`` hash the whole content and are
    meant for small virtual files only.
    """

    size: int
    seed: str
    content_type: str = "application/octet-stream"
    last_modified: int = DEFAULT_LAST_MODIFIED

    @property
    def etag(self) -> str:
        digest = hashlib.sha256(f"{self.seed}\0{self.size}".encode()).hexdigest()
        return '"' + digest[:32] + '"'

    def read(self, start: int = 0, end: int | None = None) -> bytes:
        return b"".join(self.iter_chunks(start, end))

    def iter_chunks(self, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        lo, hi = _clamp(start, end, self.size)
        block = _block(self.seed)
        position = lo
        while position < hi:
            offset = position % BLOCK_SIZE
            length = min(BLOCK_SIZE - offset, hi - position)
            yield block[offset : offset + length]
            position += length

    def _hash(self, name: str) -> str:
        hasher = hashlib.new(name)
        for chunk in self.iter_chunks():
            hasher.update(chunk)
        return hasher.hexdigest()

    def sha256(self) -> str:
        return self._hash("sha256")

    def md5(self) -> str:
        return self._hash("md5")


Resource = StaticResource | VirtualFile
"""Anything a :class:`~tests.fakenvidia.site.Site` maps a request path to."""
