"""The hasher of a parallel download: bytes handed over in order are hashed from memory,
the rest read back from the part file, every byte once and in order."""

from __future__ import annotations

import hashlib
import os
import threading
import time
import types
from pathlib import Path

import pytest

from cudaup.download import digest as digest_module
from cudaup.download.digest import SPARES, PrefixHasher
from cudaup.download.range_plan import SegmentPlan
from cudaup.download.target import PartFile

MIB = 1024 * 1024


class Hashing:
    """A hasher over a real part file and plan, running in its own thread."""

    def __init__(self, path: Path, size: int) -> None:
        path.write_bytes(bytes(size))  # zeros: what the hash of read-back bytes would see
        self.part = PartFile(path)
        self.plan = SegmentPlan.split(size, 1)
        self.hasher = PrefixHasher("sha256", self.plan, self.part)
        self.result: list[str | None] = []
        self.thread = threading.Thread(target=lambda: self.result.append(self.hasher.run()))
        self.thread.start()

    def arrive(self, offset: int, data: bytes, *, write: bool = True, offer: bool = True) -> bool:
        """``data`` lands at ``offset`` (written to the file unless not ``write``); whether
        the hasher took its buffer."""
        segment = next(s for s in self.plan.segments if s.start <= offset < s.end)
        assert segment.pos == offset
        taken = False
        if not write:
            # Never on disk: handed over before the watermark passes it (a connection
            # hands over after; then the last bytes could be read back, of zeros here).
            taken = self.hasher.offer(offset, bytearray(data), len(data)) is not None
        else:
            os.pwrite(self.part.fd, data, offset)
        self.plan.reserve(segment, len(data))
        self.plan.advance(segment, len(data))
        if write and offer:
            taken = self.hasher.offer(offset, bytearray(data), len(data)) is not None
        return taken

    def digest(self) -> str | None:
        self.thread.join(10)
        assert not self.thread.is_alive()
        self.part.close()
        return self.result[0]


def test_bytes_handed_over_in_order_are_hashed_from_memory(tmp_path: Path) -> None:
    data = os.urandom(6 * MIB)
    hashing = Hashing(tmp_path / "f.part", len(data))
    # Not written to the file at all: a hash read back would be of zeros.
    taken = [
        hashing.arrive(at, data[at : at + MIB], write=False) for at in range(0, len(data), MIB)
    ]
    assert all(taken)
    assert hashing.digest() == hashlib.sha256(data).hexdigest()


def test_bytes_not_handed_over_are_read_back_from_the_part_file(tmp_path: Path) -> None:
    data = os.urandom(9 * MIB + 123)
    hashing = Hashing(tmp_path / "f.part", len(data))
    for at in range(0, len(data), MIB):
        hashing.arrive(at, data[at : at + MIB], offer=False)
    assert hashing.digest() == hashlib.sha256(data).hexdigest()
    assert hashing.hasher.hashed == len(data)


def test_a_read_back_prefix_then_buffers_hash_every_byte_once_in_order(tmp_path: Path) -> None:
    # A resumed download: its first 8 MiB are on disk (read back); the connection's
    # buffers are refused until the hash has caught up with it, taken after.
    data = os.urandom(12 * MIB)
    hashing = Hashing(tmp_path / "f.part", len(data))
    for at in range(0, 8 * MIB, MIB):
        hashing.arrive(at, data[at : at + MIB], offer=False)
    assert hashing.hasher.offer(9 * MIB, bytearray(MIB), MIB) is None  # not the next bytes
    deadline = time.monotonic() + 10
    while hashing.hasher.hashed < 8 * MIB and time.monotonic() < deadline:
        time.sleep(0.01)  # the state the rest needs: the prefix read back and hashed
    assert hashing.hasher.claimed == 8 * MIB
    taken = [hashing.arrive(at, data[at : at + MIB]) for at in range(8 * MIB, len(data), MIB)]
    assert hashing.digest() == hashlib.sha256(data).hexdigest()
    # (the last may be read back: the hasher can see the file complete before the offer)
    assert all(taken[:-1])


def test_a_hash_held_up_leaves_the_bytes_to_be_read_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The hash blocks on its first buffer: the connection waits a moment for a spare,
    # then goes on, its bytes left on disk; nothing is lost or hashed twice.
    release = threading.Event()
    real_new = hashlib.new

    class Held:
        def __init__(self, algorithm: str) -> None:
            self._digest = real_new(algorithm)

        def update(self, data: memoryview) -> None:
            assert release.wait(30)
            self._digest.update(data)

        def hexdigest(self) -> str:
            return self._digest.hexdigest()

    monkeypatch.setattr(digest_module, "hashlib", types.SimpleNamespace(new=Held))
    monkeypatch.setattr(digest_module, "PATIENCE", 0.05)
    piece = 64 * 1024
    data = os.urandom((SPARES + 8) * piece)
    hashing = Hashing(tmp_path / "f.part", len(data))
    taken = [hashing.arrive(at, data[at : at + piece]) for at in range(0, len(data), piece)]
    assert taken[:SPARES] == [True] * SPARES  # the one being hashed, and the rest queued
    assert not any(taken[SPARES:])
    release.set()
    assert hashing.digest() == hashlib.sha256(data).hexdigest()


def test_a_stopped_hasher_returns_no_digest(tmp_path: Path) -> None:
    hashing = Hashing(tmp_path / "f.part", 4 * MIB)
    hashing.arrive(0, os.urandom(MIB))
    hashing.hasher.stop()
    assert hashing.digest() is None
