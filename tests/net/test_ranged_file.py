"""A remote file read by range requests: the size from the tail, ranges that grow while a
read streams, every answer checked against what was asked."""

from __future__ import annotations

import io
import os
import threading
from pathlib import Path

import pytest

from cudaup.config import Settings
from cudaup.errors import SourceFormatError
from cudaup.net import ranged_file
from cudaup.net.http import HttpClient
from cudaup.net.ranged_file import CHUNK, STREAM_CHUNK, RangedFile
from tests.faultserver import Fault, FaultServer

BODY = os.urandom(40 * 1024 * 1024 + 12345)


def _http(tmp_path: Path) -> HttpClient:
    return HttpClient(Settings.from_env(cache_dir=tmp_path / "cache"), retries=0)


def test_the_size_comes_with_the_tail_and_a_stream_asks_for_ever_larger_ranges(
    tmp_path: Path,
) -> None:
    with FaultServer() as server:
        server.add("/f.bin", BODY)
        remote = RangedFile(_http(tmp_path), server.url + "/f.bin")
        assert remote.size == len(BODY) and len(server.requests("/f.bin")) == 1
        remote.seek(-100, io.SEEK_END)
        assert remote.read() == BODY[-100:] and len(server.requests("/f.bin")) == 1
        remote.seek(1000)
        read = b""
        while len(read) < 30 * 1024 * 1024:
            read += remote.read(64 * 1024)  # zipfile-sized reads
        assert read == BODY[1000 : 1000 + len(read)]
        served = server.requests("/f.bin")
        # 30 MiB in ranges that double from CHUNK to STREAM_CHUNK (0.25 + 0.5 + … + 8 + 8 +
        # 8 MiB): the tail and eight requests, not one per read.
        assert len(served) <= 1 + 8 and all(r.range for r in served)
        assert remote.fetched == sum(r.sent for r in served)
        assert remote.fetched < 30 * 1024 * 1024 + CHUNK + STREAM_CHUNK
        # Reads that jump about start again from one chunk.
        before = remote.fetched
        remote.seek(5)
        assert remote.read(10) == BODY[5:15] and remote.fetched - before == CHUNK
        assert remote.exactly(2_000_000, 7) == BODY[2_000_000:2_000_007]
        assert remote.fetched - before == CHUNK + 7


def test_what_a_server_gets_wrong_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FaultServer() as server:
        server.add("/whole.bin", BODY[:1000], Fault(ignore_range=True))
        with pytest.raises(SourceFormatError, match="does not honour Range requests"):
            RangedFile(_http(tmp_path), server.url + "/whole.bin")
        server.add("/shifted.bin", BODY, Fault(wrong_range=True, times=None))
        with pytest.raises(SourceFormatError, match="another range than asked"):
            RangedFile(_http(tmp_path), server.url + "/shifted.bin")
        with pytest.raises(SourceFormatError, match="HTTP 404"):
            RangedFile(_http(tmp_path), server.url + "/missing.bin")
        server.add("/f.bin", BODY)
        remote = RangedFile(_http(tmp_path), server.url + "/f.bin")
        # The file changes under the reader: another size is another file.
        server.add("/f.bin", BODY + b"more")
        with pytest.raises(SourceFormatError, match="changed size"):
            remote.exactly(0, 10)
        server.add("/f.bin", BODY)
        monkeypatch.setattr(ranged_file, "MAX_READ", 1024 * 1024)
        remote = RangedFile(_http(tmp_path), server.url + "/f.bin")
        with pytest.raises(SourceFormatError, match="asks for more than 1048576"):
            remote.read(2 * 1024 * 1024)  # a directory that claims more than any wheel has


def test_prefetched_spans_come_at_once_and_later_reads_ask_for_nothing(tmp_path: Path) -> None:
    with FaultServer() as server:
        server.add("/f.bin", BODY)
        remote = RangedFile(_http(tmp_path), server.url + "/f.bin")
        held = threading.Event()
        server.add("/f.bin", BODY, Fault(hang="headers", until=held))
        mib = 1024 * 1024
        spans = [(20 * mib, 20 * mib + 500), (1000, 2000), (5000, 9000), (30 * mib, 31 * mib)]
        prefetching = threading.Thread(target=remote.prefetch, args=(spans,))
        prefetching.start()
        # Three ranges (1000-9000 joined: 3000 bytes apart) are asked for before any is
        # answered: they are in flight together, not one after another.
        server.wait_for_requests(4, "/f.bin")
        assert len(server.requests("/f.bin")) == 4
        held.set()
        prefetching.join()
        asked = sorted(r.range or "" for r in server.requests("/f.bin")[1:])
        assert asked == sorted(
            [
                "bytes=1000-8999",
                f"bytes={20 * mib}-{20 * mib + 499}",
                f"bytes={30 * mib}-{31 * mib - 1}",
            ]
        )
        for start, end in spans:
            remote.seek(start)
            assert remote.read(end - start) == BODY[start:end]
        assert remote.exactly(6000, 100) == BODY[6000:6100]
        assert len(server.requests("/f.bin")) == 4  # every read was inside a kept span
        assert remote.fetched == sum(r.sent for r in server.requests("/f.bin"))
        remote.seek(10_000)  # outside them: a range of its own, as before
        assert remote.read(10) == BODY[10_000:10_010] and len(server.requests("/f.bin")) == 5
