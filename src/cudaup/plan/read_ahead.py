"""Reading a wheel's metadata ahead of uv, for the index memo.

Where an index offers no PEP 658 metadata (the PyPI these machines see, through its
proxy), uv reads a wheel's METADATA in four requests, each waiting for the one before: a
HEAD (the size), the last 16 KiB (the zip's end record), the part of the central
directory the tail lacks, and the member.  At ~90 ms a round trip, a resolution that
meets packages one after another spends most of its time there.  When uv's HEAD of a
wheel reaches the memo, :class:`ReadAhead` reads the same through cudaup's checked range
reads (:class:`~cudaup.net.ranged_file.RangedFile`): the file's last :data:`AHEAD` bytes
at once, whose 206 answers the HEAD (:meth:`ReadAhead.size`), then the central directory
and the METADATA member as soon as the tail says where they lie
(:mod:`cudaup.plan.zip_tail`).  A range uv asks for that lies inside a block read ahead, or
being read, is answered from that block's bytes (the upstream's, as sent: a 206 carrying
exactly the range asked for); any other range goes upstream as before.  So a wheel's
metadata costs uv about two round trips instead of four, its HEAD none of its own; once
a wheel of the project showed how far from its end its METADATA lies, the next versions'
tails are read that long, and cost one (:meth:`ReadAhead.start`).  Nothing is guessed:
a block answers only a range it holds byte for byte, and one that failed, or was refused
(a 200 to a range, another range than asked), answers nothing.
"""

from __future__ import annotations

import re
import struct
import threading
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import unquote

from packaging.tags import Tag
from packaging.utils import (
    NormalizedName,
    canonicalize_name,
)
from packaging.version import Version

from cudaup.core.wheels import tag_rank, wheel_name
from cudaup.errors import CudaupError, SourceFormatError
from cudaup.net.http import HttpClient, log
from cudaup.net.ranged_file import RangedFile, RangeWatch
from cudaup.plan.closure import REQUESTED, Closure, Resolved
from cudaup.plan.lines import Evidence
from cudaup.plan.survey import best_wheel
from cudaup.plan.zip_tail import directory_of, metadata_entry, metadata_member
from cudaup.resolve.pypi import MAX_METADATA_BYTES, DistFile, parse_metadata

if TYPE_CHECKING:  # result imports uv, which imports the memo, which imports this
    from packaging.requirements import Requirement

    from cudaup.plan.index_memo import IndexMemo
    from cudaup.plan.result import PlanTarget

#: The tail read beside uv's HEAD: uv asks for the last 16 KiB, and a wheel's central
#: directory is most often within the last 64 KiB (so is a small wheel's METADATA).
AHEAD = 64 * 1024
#: The largest tail read of a project whose earlier wheel showed where its METADATA lies
#: (see :meth:`ReadAhead.start`): torch's (~5 MB) stays three reads.
TAIL_MOST = 4 * 1024 * 1024
#: Wheels read ahead at once (each a few requests, one after another): uv asks for ~50
#: things at once, and a wheel whose reading waits for a worker is read by uv itself.
WORKERS = 16
#: Older versions of a project read ahead when the next round will backtrack through them.
OLDER_VERSIONS = 10
#: Older versions of a project read ahead once uv is seen walking it down (see
#: :meth:`ReadAhead.asked`): each step uv takes then finds the next ones being read.
WALK_AHEAD = 8
#: A wheel larger than this is not walked (torch: ~900 MB, a 2.5 MB zip directory a
#: version): concurrent lines each ask for their own version of it, which looks like a
#: walk and is not one; the projects uv does walk are read ahead for little.  vllm's
#: 336 MB wheels are walked: uv went through 72 of its versions in a 13.0 resolution, and
#: each costs one 1.2 MB range once the first showed where its METADATA lies.
WALK_MOST_BYTES = 512 * 1024 * 1024
#: Read past a member's end: uv asks for its data in whole chunks (8 or 16 KiB).
SLACK = 64 * 1024
_RANGE = re.compile(r"bytes=(\d+)-(\d+)")


@dataclass
class _Block:
    """One range read ahead: the file's last ``last`` bytes (``start`` None) or
    ``start..last``; its bytes once answered."""

    start: int | None
    last: int
    #: What it holds: "tail", "directory" or "member" (what the block before said where).
    role: str = "tail"
    #: Reserved by the block before it (see ``ReadAhead._reserve_next``), then asked for.
    reserved: bool = False
    requested: bool = False
    done: threading.Event = field(default_factory=threading.Event)
    first: int = 0
    body: bytes = b""
    total: int = 0

    def may_hold(self, start: int, last: int) -> bool:
        """Whether, still being read, it may hold ``start..last`` (a tail's place is
        known only once it is answered)."""
        return self.start is None or (self.start <= start and last <= self.last)

    def held(self, start: int, last: int) -> tuple[int, bytes, int] | None:
        """Bytes ``start..last`` (``last`` cut at the file's end) with their first offset
        and the file's size, when this answered block holds them all."""
        return self.holds(start, last) if self.done.is_set() else None

    def holds(self, start: int, last: int) -> tuple[int, bytes, int] | None:
        """:meth:`held`'s bytes whether or not the block is done: for the reader that has
        just landed them, deciding what to read next before its waiters go on."""
        if not self.body or start >= self.total:
            return None
        end = min(last, self.total - 1)
        if self.first <= start and end < self.first + len(self.body):
            return start, self.body[start - self.first : end - self.first + 1], self.total
        return None


class ReadAhead:
    """One memo's reads ahead: started by :meth:`start`, consulted by :meth:`answer`,
    ended (each thread joined) by :meth:`close`."""

    def __init__(
        self,
        http: HttpClient,
        limit: int,
        slot: Callable[[str], AbstractContextManager[None]],
    ) -> None:
        self.http, self.limit, self._slot = http, limit, slot
        self._pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="cudaup-index-memo-ahead")
        self._blocks: dict[str, list[_Block]] = {}
        #: Per wheel read ahead: set once its tail is being read (or its reading ended);
        #: a round that will backtrack starts once they are (:meth:`later`).
        self._started: dict[str, threading.Event] = {}
        self._lock = threading.Lock()
        self._closed = False
        #: Range requests sent upstream ahead of uv, and uv's ranges answered from them.
        self.requests = 0
        self.answered = 0
        #: Each project's wheel URLs as its pages listed them (parsed when uv walks it),
        #: and the versions of it uv asked for (its HEADs).
        self._listed: dict[str, list[str]] = {}
        self._wheels: dict[str, list[tuple[Version, frozenset[Tag], str]]] = {}
        self._asked: dict[str, set[Version]] = {}
        #: Wheels read ahead because uv walked their project down.
        self.walked = 0
        #: Per project, the most bytes seen from a wheel's METADATA member to its end.
        self._metadata_within: dict[NormalizedName, int] = {}

    @property
    def held(self) -> int:
        """The bytes the blocks read ahead hold in memory."""
        with self._lock:
            return sum(len(b.body) for blocks in self._blocks.values() for b in blocks)

    def listed(self, project: str, urls: Iterable[str]) -> None:
        """The wheel URLs a page of ``project`` lists (upstream URLs, as the memo allows them)."""
        wheels = [url for url in urls if url.endswith(".whl")]
        if wheels:
            with self._lock:
                self._listed.setdefault(canonicalize_name(project), []).extend(wheels)
                self._wheels.pop(canonicalize_name(project), None)

    def asked(self, url: str) -> None:
        """uv asked for ``url``'s HEAD (a wheel): when it already asked for a newer version
        of the same project, it is walking the project down, one version after another
        (each step a chain of requests: mistral-common's 19 versions took 0.9 s of a cold
        vllm resolution), so the next :data:`WALK_AHEAD` older versions' wheels are read
        ahead, each the one whose tags are most like ``url``'s, unless ``url`` is larger
        than :data:`WALK_MOST_BYTES` (its size from its tail read ahead).  Only bytes
        are read: a wheel uv never asks for costs its reading, never an answer."""
        parsed = _wheel_named(url)
        if parsed is None:
            return
        name, version, tags = parsed
        with self._lock:
            asked = self._asked.setdefault(name, set())
            walking = any(v > version for v in asked)
            asked.add(version)
            if walking and not self._closed:  # under the lock: close() shuts the pool after
                self._pool.submit(self._walk, url, name, version, tags)

    def _walk(self, url: str, name: str, version: Version, tags: frozenset[Tag]) -> None:
        self.start(url)  # the memo reads it beside uv's HEAD: once
        with self._lock:
            begun = self._started.get(url)
        if begun is not None:
            begun.wait()  # bounded: set by the tail's request or the reading's end
        size = self.size(url)
        if size is None or size > WALK_MOST_BYTES:
            return
        with self._lock:
            wheels = self._wheels.get(name)
            urls = None if wheels is not None else list(self._listed.get(name, ()))
        if wheels is None:  # parsed once, outside the lock (numpy's page: 4,000 names)
            wheels = _parsed(urls or ())
            with self._lock:
                self._wheels[name] = wheels
        for older in older_wheels(wheels, version, tags, WALK_AHEAD):
            with self._lock:
                self.walked += older not in self._started
            self.start(older)

    def start(self, url: str) -> None:
        """Read ``url``'s (a wheel's) tail, directory and METADATA ahead, once.

        The tail is :data:`AHEAD` bytes, or, once a wheel of the same project showed how
        far from its end the METADATA member begins, that far and a quarter more (up to
        :data:`TAIL_MOST`): the versions of a project are laid out alike, and the one
        range then holds the directory and the member too, one round trip where three
        followed each other (vllm's directory is 0.7 MB, its METADATA 0.3 MB before it,
        and uv walks dozens of its versions)."""
        parsed = _wheel_named(url)
        with self._lock:
            if self._closed or url in self._started:
                return
            self._started[url] = threading.Event()
            within = self._metadata_within.get(parsed[0]) if parsed is not None else None
            tail = AHEAD
            if within is not None:
                tail = min(TAIL_MOST, max(AHEAD, -(-(within + within // 4) // AHEAD) * AHEAD))
            # The tail is reserved now, not once a worker asks for it: uv, sending its
            # first range right after this HEAD's answer, finds it being read.  On a busy
            # machine uv's range came first and went upstream beside the tail's (1 run in
            # 8-20 of tests/plan/test_read_ahead.py's backtracking test, under load).
            self._blocks.setdefault(url, []).append(_Block(None, tail, reserved=True))
            # Under the lock: close() shuts the pool after.  A read close() cancels before
            # it ran ends too: a walk or a round waiting for its start goes on (it waited
            # forever, and close() with it, when a plan ended with reads still queued).
            self._pool.submit(self._read, url, tail).add_done_callback(
                lambda _read: self._end_left(url)  # run or cancelled, what it left ends
            )

    def later(self, find: Callable[[], list[str]]) -> Future[None] | None:
        """Read ahead the wheels ``find`` names, found in a thread of the memo's own (it may
        read a page), so that finding them delays nothing; done once each one's tail is
        being read, so that uv's requests of them, the next round's, wait for it."""
        with self._lock:
            if self._closed:
                return None
            return self._pool.submit(self._found, find)

    def _found(self, find: Callable[[], list[str]]) -> None:
        try:
            urls = find()
        except CudaupError as exc:
            log.info("index memo: nothing read ahead for the next round (%s)", exc)
            return
        for url in urls:
            self.start(url)
        for url in urls:  # done once each tail is being read: uv, next, waits for it
            with self._lock:
                begun = self._started.get(url)
            if begun is not None:
                begun.wait()  # bounded: set by the tail's request or the reading's end

    def size(self, url: str) -> int | None:
        """``url``'s size from its tail (waiting for one being read), which answers uv's
        HEAD of the wheel; None when there is none (not started, failed or refused)."""
        with self._lock:
            tails = [b for b in self._blocks.get(url, ()) if b.role == "tail"]
        for tail in tails:
            tail.done.wait()  # bounded: the request's own timeouts end it
            if tail.body:
                return tail.total
        return None

    def answer(self, url: str, spec: str) -> tuple[int, bytes, int] | None:
        """uv's ``Range: bytes=A-B`` of ``url`` from a block read ahead (waiting for one
        being read that may hold it): its first offset, bytes and the file's size."""
        match = _RANGE.fullmatch(spec.strip())
        if match is None:
            return None
        start, last = int(match.group(1)), int(match.group(2))
        if last < start:
            return None
        with self._lock:
            blocks = list(self._blocks.get(url, ()))
        for block in blocks:
            if not block.done.is_set() and block.may_hold(start, last):
                block.done.wait()  # bounded: the request's own timeouts end it
        held = self._held(url, start, last)
        if held is not None:
            with self._lock:
                self.answered += 1
        return held

    def requirements(
        self, name: NormalizedName, version: Version
    ) -> tuple[str, list[Requirement]] | None:
        """The Requires-Dist of the first wheel of ``name`` ``version`` read ahead (an exact
        pin's), from its METADATA (:meth:`metadata`), with the wheel's file name; None when
        none was read ahead or what was read does not say."""
        with self._lock:
            urls = list(self._started)
        url = next((u for u in urls if (w := _wheel_named(u)) and w[:2] == (name, version)), None)
        data = self.metadata(url) if url is not None else None
        if url is None or data is None:
            return None
        try:
            return unquote(url.rsplit("/", 1)[-1]), parse_metadata(data, url).requires_dist or []
        except SourceFormatError as exc:  # uv answers
            log.info("index memo: %s's requirements not read (%s)", url, exc)
            return None

    def metadata(self, url: str) -> bytes | None:
        """``url``'s (a wheel's) METADATA from what was read ahead of it, once its reading
        ends (waiting for it), inflated and checked against its CRC-32 as :mod:`zipfile`
        would; None when it was not read ahead, or what was read does not hold it."""
        while True:  # each block reserves the next before it is done: none is missed
            with self._lock:
                pending = [b for b in self._blocks.get(url, ()) if not b.done.is_set()]
            if not pending:
                break
            pending[0].done.wait()  # bounded: the request's own timeouts end it
        found = self._directory_at(url)
        directory = found and self._bytes(url, found[1][0], sum(found[1]) - 1)
        fields = metadata_entry(directory) if directory else None
        if fields is None or fields[9] > MAX_METADATA_BYTES or fields[4] not in (0, 8):
            return None
        crc, compressed, size, offset = fields[7], fields[8], fields[9], fields[16]
        header = self._bytes(url, offset, offset + 29)
        if header is None or header[:4] != b"PK\x03\x04":
            return None
        start = offset + 30 + sum(struct.unpack_from("<2H", header, 26))  # name, extra
        data = self._bytes(url, start, start + compressed - 1) if compressed else b""
        if data is None:
            return None
        if fields[4] == 8:  # deflated; bounded by the size it says, checked next
            try:
                data = zlib.decompressobj(-15).decompress(data, size + 1)
            except zlib.error:
                return None
        return data if len(data) == size and zlib.crc32(data) == crc else None

    def end_of(self, url: str) -> tuple[int, bytes, int] | None:
        """``url``'s (a wheel's) end as read ahead, from its central directory on (or from
        where the tail read begins, when it holds the directory): its first offset, its
        bytes, the file's size, for a reader that opens the archive (a plan's read-back)
        without asking for its tail again; None when what was read ahead does not hold it
        all.  No waiting: a read-back comes after uv's answer."""
        found = self._directory_at(url)
        if found is None:
            return None
        tail, (start, _length) = found
        if start >= tail.first:  # all of the tail: what else it holds may be read too
            return tail.first, tail.body, tail.total
        before = self._bytes(url, start, tail.first - 1)  # the directory's block
        return None if before is None else (start, before + tail.body, tail.total)

    def _directory_at(self, url: str) -> tuple[_Block, tuple[int, int]] | None:
        """``url``'s answered tail and where the zip directory lies, as its end record
        says (offset, length); None when there is no such tail, or it does not say."""
        with self._lock:
            tail = next(
                (
                    b
                    for b in self._blocks.get(url, ())
                    if b.role == "tail" and b.done.is_set() and b.body
                ),
                None,
            )
        where = directory_of(tail.body, tail.total) if tail is not None else None
        return None if tail is None or where is None else (tail, where)

    def _bytes(self, url: str, start: int, last: int) -> bytes | None:
        """Exactly bytes ``start..last`` of ``url`` from a block read ahead, when one holds
        them (:meth:`_held` cuts a range at the file's end)."""
        held = self._held(url, start, last)
        return held[1] if held is not None and len(held[1]) == last - start + 1 else None

    def _held(self, url: str, start: int, last: int) -> tuple[int, bytes, int] | None:
        """Bytes ``start..last`` of ``url`` (cut at the file's end) from an answered block
        that holds them, with their first offset and the file's size; no waiting."""
        with self._lock:
            blocks = list(self._blocks.get(url, ()))
        return next((h for b in blocks if (h := b.held(start, last)) is not None), None)

    def close(self, *, wait: bool = True) -> None:
        """Start no more reads, nor the next range of one under way; with ``wait``, wait
        for those under way (each ends within its timeouts)."""
        with self._lock:
            self._closed = True
        self._pool.shutdown(wait=wait, cancel_futures=True)

    # -- reading ------------------------------------------------------------------
    def _read(self, url: str, tail: int) -> None:
        try:
            with self._slot(url):
                ranged = RangedFile(self.http, url, chunk=tail, watch=self._watcher(url))
                # Each block, once answered, reserved the next one it says where: in turn.
                while (block := self._next_reserved(url)) is not None and not self._closed:
                    assert block.start is not None
                    ranged.exactly(block.start, block.last - block.start + 1)
                    if not block.requested:  # held by a block read before: nothing to ask
                        self._end(block)
        except CudaupError as exc:
            log.info("index memo: %s not read ahead (%s): uv reads it itself", url, exc)
        # What is left of it is ended by the future's callback (see :meth:`start`).

    def _end_left(self, url: str) -> None:
        """``url``'s reading is over: it has started, as far as anyone waits for that, and
        a block reserved but never asked for holds nothing, so none waits for it."""
        with self._lock:
            left = [b for b in self._blocks.get(url, ()) if not b.done.is_set()]
            self._started[url].set()
        for block in left:
            self._end(block)

    def _end(self, block: _Block) -> None:
        with self._lock:
            block.requested = True
        block.done.set()

    def _next_reserved(self, url: str) -> _Block | None:
        with self._lock:
            blocks = self._blocks.get(url, ())
            return next((b for b in blocks if b.reserved and not b.requested), None)

    def _watcher(self, url: str) -> RangeWatch:
        def watch(start: int | None, last: int) -> Callable[[tuple[int, bytes, int] | None], None]:
            with self._lock:
                blocks = self._blocks.setdefault(url, [])
                block = next(
                    (
                        b
                        for b in blocks
                        if b.reserved and not b.requested and (b.start, b.last) == (start, last)
                    ),
                    None,
                )
                if block is None:
                    block = _Block(start, last)
                    blocks.append(block)
                block.requested = True
                self.requests += 1
                self._started[url].set()  # the tail (the first range) is now a block

            def landed(answer: tuple[int, bytes, int] | None) -> None:
                if answer is not None:
                    block.first, block.body, block.total = answer
                    # Before its waiters go on: uv, given these bytes, asks for the next
                    # range at once, and must find it reserved, not race its reading.
                    self._reserve_next(url, block)
                block.done.set()

            return landed

        return watch

    def _reserve_next(self, url: str, block: _Block) -> None:
        """What an answered block says of the next range to read: the central directory
        after the tail (unless the tail holds it), the METADATA member after the directory."""
        directory, offset = block.body, block.first  # a directory block: where it begins
        if block.role == "tail":
            found = directory_of(block.body, block.total)
            if found is None:
                return
            offset, length = found
            inside = block.holds(offset, offset + length - 1)
            if inside is None:
                self._reserve(url, "directory", offset, offset + length - 1, block.total)
                return
            directory = inside[1]
        elif block.role != "directory":
            return
        member = metadata_member(directory)
        if member is not None:
            start, length = member
            self._learn(url, block.total - start)
            self._reserve(url, "member", start, start + length + SLACK - 1, block.total)
            if block.role == "tail":
                self._trim(url, block, offset, member)

    def _trim(self, url: str, block: _Block, directory_at: int, member: tuple[int, int]) -> None:
        """Keep of a tail read long (see :meth:`start`) that holds the directory (from
        ``directory_at``) only what uv asks of it: the last :data:`AHEAD` bytes and the
        directory, and the METADATA ``member`` as a block of its own; what lies between
        (RECORD, mostly: 1.2 MB of flashinfer's 3.2 MB tail, for each of the ~30 versions
        a resolution walks) is dropped before anyone reads it."""
        if len(block.body) <= AHEAD:
            return
        start, length = member
        keep = min(directory_at, block.total - AHEAD)
        held = block.holds(start, start + length + SLACK - 1)
        if held is None or held[0] + len(held[1]) >= keep:
            return  # the member reaches into what is kept: nothing to drop
        kept = _Block(start, held[0] + len(held[1]) - 1, "member", reserved=True, requested=True)
        kept.first, kept.body, kept.total = held[0], held[1], block.total
        kept.done.set()
        with self._lock:
            self._blocks[url].append(kept)
            block.body = block.body[keep - block.first :]
            block.first = keep

    def _learn(self, url: str, within: int) -> None:
        """A wheel of ``url``'s project has its METADATA member ``within`` bytes of its end."""
        parsed = _wheel_named(url)
        if parsed is None or not 0 < within <= TAIL_MOST:
            return
        with self._lock:
            seen = self._metadata_within.get(parsed[0], 0)
            self._metadata_within[parsed[0]] = max(seen, within)

    def _reserve(self, url: str, role: str, start: int, last: int, total: int) -> None:
        """A block to read next, unless a block already holds it or it is above the
        memo's limit (uv then asks for it itself)."""
        last = min(last, total - 1)
        if not 0 <= start <= last or last - start + 1 > self.limit:
            return
        with self._lock:
            blocks = self._blocks.setdefault(url, [])
            if not any(b.holds(start, last) is not None for b in blocks):
                blocks.append(_Block(start, last, role, reserved=True))


def _wheel_named(url: str) -> tuple[NormalizedName, Version, frozenset[Tag]] | None:
    """The project, version and tags ``url``'s file name says; None when it is no wheel's."""
    parts = wheel_name(unquote(url.rsplit("/", 1)[-1]))
    return None if parts is None else (parts[0], parts[1], parts[3])


def _parsed(urls: Iterable[str]) -> list[tuple[Version, frozenset[Tag], str]]:
    found = []
    for url in dict.fromkeys(urls):
        if (parsed := _wheel_named(url)) is not None:
            _name, version, tags = parsed
            found.append((version, tags, url))
    return found


def _likeness(tag: Tag) -> tuple[str, str, str, str]:
    """What makes two wheels' tags alike across versions: the interpreter, the ABI, the
    platform's family and its architecture (``manylinux_2_28_x86_64`` and
    ``manylinux2014_x86_64`` are alike)."""
    family = re.match(r"[a-z]*", tag.platform)
    arch = re.sub(r"^[a-z]+(?:_?\d+)*_", "", tag.platform)
    return tag.interpreter, tag.abi, family.group(0) if family else "", arch


def older_wheels(
    wheels: Sequence[tuple[Version, frozenset[Tag], str]],
    below: Version,
    tags: frozenset[Tag],
    count: int,
) -> list[str]:
    """The URLs of the wheels uv most likely reads next when it walks a project down from
    ``below`` (a wheel tagged ``tags``): for each of the ``count`` next older versions (no
    pre-release unless ``below`` is one), the wheel with the same tags, else the one whose
    tags are most alike; a version with no alike wheel has none."""
    like = {_likeness(tag) for tag in tags}
    pre = below.is_prerelease
    by_version: dict[Version, list[tuple[frozenset[Tag], str]]] = {}
    for version, wheel_tags, url in wheels:
        if version < below and (pre or not version.is_prerelease):
            by_version.setdefault(version, []).append((wheel_tags, url))
    urls = []
    for version in sorted(by_version, reverse=True)[:count]:
        same = [url for wheel_tags, url in by_version[version] if wheel_tags == tags]
        if same:
            urls.append(same[0])
            continue
        alike = sorted(
            (
                (-len(like & {_likeness(t) for t in wheel_tags}), position, url)
                for position, (wheel_tags, url) in enumerate(by_version[version])
            ),
        )
        if alike and alike[0][0] < 0:
            urls.append(alike[0][2])
    return urls


def backtracked(
    closure: Closure,
    contradicting: Iterable[Evidence],
    files_of: Callable[[Resolved], Sequence[DistFile]],
    target: PlanTarget,
) -> list[str]:
    """The wheels (URLs) the next round's uv will read one after another: a project
    excluded by its name (``nvidia-cutlass-dsl-libs-cu12<0``: one of ``contradicting``)
    drops the resolved version of each project that required it, and uv then reads the
    next older versions' metadata in turn (eight of nvidia-cutlass-dsl's, from 4.8.1 to
    4.5.3), each after the one before; read ahead all at once, they cost that round one
    round trip.  Only what uv reads by ranges: a wheel whose index offers its PEP 658
    metadata is left to uv, and so is a version uv could not take (a pre-release)."""
    parents = {
        parent
        for evidence in contradicting
        if evidence.kind == "name" and (package := closure.get(evidence.project)) is not None
        for parent in package.parents
        if parent != REQUESTED
    }
    urls: list[str] = []
    for name in sorted(parents):
        resolved = closure.get(name)
        if resolved is None:
            continue
        files = files_of(resolved)
        older = sorted(
            {
                version
                for f in files
                if (version := f.version) is not None
                and version < resolved.version
                and not (version.is_prerelease or version.is_devrelease)
            },
            reverse=True,
        )[:OLDER_VERSIONS]
        for version in older:
            wheel = best_wheel(files, version, target.python, target.platform)
            if wheel is not None and not wheel.core_metadata:
                urls.append(wheel.url)
    return urls


def pins_ahead(
    memo: IndexMemo | None, pins: Sequence[Requirement], index_url: str, target: PlanTarget
) -> list[Future[None]]:
    """Exact pins (``vllm==0.20.0``, checked by the caller): their pages of the plan's
    default index and the pinned wheels' metadata read by the memo while the first uv
    run starts (:meth:`~cudaup.plan.index_memo.IndexMemo.read_pinned`): uv's first
    requests, each after the one before, then find them read.  No memo: nothing."""
    if memo is None:
        return []
    versions = {canonicalize_name(p.name): Version(next(iter(p.specifier)).version) for p in pins}
    rank = tag_rank(target.python, target.platform)
    return memo.read_pinned(index_url, versions, lambda urls, v: pinned_wheel(urls, v, rank))


def pinned_wheel(urls: Iterable[str], version: Version, rank: Mapping[Tag, int]) -> str | None:
    """The wheel of ``version`` among ``urls`` an installer would pick by ``rank`` (the
    target's tags, most specific first); None when none fits."""
    best: tuple[int, str] | None = None
    spelled = str(version)
    for url in urls:
        if not url.endswith(".whl") or spelled not in url.rsplit("/", 1)[-1]:
            continue  # most of a page's files, left unparsed (torch's: thousands)
        parsed = _wheel_named(url)
        if parsed is None or parsed[1] != version:
            continue
        score = min((rank[tag] for tag in parsed[2] if tag in rank), default=None)
        if score is not None and (best is None or score < best[0]):
            best = (score, url)
    return best[1] if best else None
