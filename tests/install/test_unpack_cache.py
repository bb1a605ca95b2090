"""The unpacked-archive cache and its download→extract pipeline, against a real local server.

Archives are extracted while they download (a zip from its member list, fetched
first; a tar from the front); what is extracted stands only once the download is
verified.  No test here waits on the clock: each holds the server or the download
until the state it needs is reached.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import io
import json
import os
import secrets
import signal
import tarfile
import threading
import time
import zipfile
from pathlib import Path
from typing import Any, SupportsIndex

import pytest

from cudaup import download as download_module
from cudaup.config import Settings
from cudaup.core.model import Artifact
from cudaup.download import Progress, ProgressEvent
from cudaup.errors import IntegrityError
from cudaup.install import unpack_cache
from cudaup.install.cache_entry import CacheEntry
from cudaup.install.extract import Extracted, extract_archive, write
from cudaup.install.linking import LinkMode
from cudaup.install.tree import TreeManifest
from cudaup.install.unpack_cache import StagedTrees, stage_all
from cudaup.net import backoff
from cudaup.net.backoff import NO_WAIT, Backoff
from cudaup.net.http import HttpClient
from tests.faultserver import Fault, FaultServer, payload


@pytest.fixture(autouse=True)
def _quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retries in these tests wait 10 ms, not seconds (clients built with the default)."""
    monkeypatch.setattr(backoff, "DEFAULT", Backoff(base=0.01, cap=0.01))


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}\n"


def wheel(files: dict[str, bytes], dist_info: str = "w-1.0.dist-info") -> bytes:
    """A wheel of ``files`` (deflated, .txt stored, as wheels have them), with the RECORD
    every wheel has (PEP 427) in ``dist_info``, listing every file."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o100755 << 16
            stored = name.endswith(".txt")
            info.compress_type = zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
        lines = [record_line(name, data) for name, data in files.items()]
        # A ZipInfo, not a bare name: writestr stamps a bare name with the current time,
        # and two calls across a second boundary would build two different wheels.
        record = zipfile.ZipInfo(f"{dist_info}/RECORD")
        archive.writestr(record, "".join(lines) + f"{dist_info}/RECORD,,\n")
    return buffer.getvalue()


def redist(top: str, files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


#: Mostly incompressible members, so the archives are several MiB and take a while to serve.
FILES = {
    "nvidia/cu13/bin/ptxas": payload(3 * 2**20, seed=1),
    "nvidia/cu13/lib/libnvvm.so.4": payload(3 * 2**20, seed=2),
    "nvidia/cu13/include/nvvm.h": b"#pragma once\n" * 1000,
    "nvidia/cu13/LICENSE.txt": payload(2 * 2**20, seed=3),
}


def artifact(server: FaultServer, name: str, body: bytes, *, sized: bool = True) -> Artifact:
    return Artifact(
        filename=name,
        url=f"{server.url}/{name}",
        size=len(body) if sized else None,
        md5=None,
        sha256=hashlib.sha256(body).hexdigest(),
        component="test",
        component_version="1.0",
        platform="linux-x86_64",
        channel="pypi",
        driver=None,
        sources=(),
    )


def client(tmp_path: Path) -> HttpClient:
    return HttpClient(Settings.from_env(cache_dir=tmp_path / "cache"), backoff=NO_WAIT)


def tree(root: Path) -> dict[str, bytes]:
    """Every file below ``root`` but a wheel's own ``*.dist-info/``: what it was made of."""
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and not path.relative_to(root).parts[0].endswith(".dist-info")
    }


def stage(
    artifacts: list[Artifact],
    cache: Path,
    tmp_path: Path,
    *,
    strip_top: bool = False,
    connections: int = 2,
    progress: Progress | None = None,
    link_mode: LinkMode = "hardlink",
    verify: bool = False,
) -> StagedTrees:
    """Each artifact's checked tree in a fresh staging directory, as an install has it."""
    parts = tmp_path / f"staging-{secrets.token_hex(4)}"
    parts.mkdir()
    return stage_all(
        artifacts, cache, parts, http=client(tmp_path), strip_top=strip_top,
        connections=connections, progress=progress, link_mode=link_mode, verify=verify,
    )  # fmt: skip


class HeldBody(bytes):
    """A body whose bytes in ``held`` reach the wire only once ``release`` is set.

    The server slices the body once per request and then sends the slice in 64 KiB
    pieces; a piece that reaches into ``held`` waits.  The bytes before it in the
    same response are sent meanwhile.  After a minute the hold gives up and says so
    (``expired``): the test then fails on that, not on a hang.
    """

    held: range
    release: threading.Event
    expired: threading.Event
    offset: int = 0  # where this slice starts in the whole body

    def __getitem__(self, key: SupportsIndex | slice) -> Any:
        if not isinstance(key, slice):
            return super().__getitem__(key)
        start, stop, _ = key.indices(len(self))
        begin, end = self.offset + start, self.offset + stop
        is_piece = end - begin <= 64 * 1024  # not the first slice: the whole range asked for
        overlaps = begin < self.held.stop and end > self.held.start
        if is_piece and overlaps and not self.release.wait(60):
            self.expired.set()
            self.release.set()
        piece = HeldBody(super().__getitem__(key))
        piece.held, piece.release, piece.expired = self.held, self.release, self.expired
        piece.offset = begin
        return piece


def test_a_wheel_unpacks_while_it_downloads(
    fault_server: FaultServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server holds back the last big member until a file has been extracted: an
    extraction that waited for the whole download would never get there."""
    files = {
        "nvidia/cu13/include/nvvm.h": b"#pragma once\n" * 1000,  # first in the zip
        "nvidia/cu13/bin/ptxas": payload(3 * 2**20, seed=1),
        "nvidia/cu13/lib/libnvvm.so.4": payload(3 * 2**20, seed=2),
        "nvidia/cu13/LICENSE.txt": payload(2 * 2**20, seed=3),  # keeps the held bytes off the tail
    }
    body = wheel(files)
    info = zipfile.ZipFile(io.BytesIO(body)).getinfo("nvidia/cu13/lib/libnvvm.so.4")
    held = HeldBody(body)
    held.held = range(info.header_offset, info.header_offset + 64 + info.compress_size)
    held.release, held.expired = threading.Event(), threading.Event()
    assert held.held.stop < len(body) - 320 * 1024  # the member list (the tail) is not held
    fault_server.add("/w.whl", held)
    real_write_file = write.write_file

    def write_file(source: io.BufferedIOBase, path: Path, member: Any, **options: bool) -> str:
        digest = real_write_file(source, path, member, **options)  # type: ignore[arg-type]
        held.release.set()  # a file is out: the rest of the download may come
        return digest

    monkeypatch.setattr(write, "write_file", write_file)
    events: list[ProgressEvent] = []
    cache = tmp_path / "cache"
    [staged] = stage(
        [artifact(fault_server, "w.whl", body)], cache, tmp_path, progress=events.append
    ).trees
    assert not held.expired.is_set()  # a member was written while the download was held
    assert tree(staged.path) == files
    assert staged.source == "unpacked"
    kinds = [event.kind for event in events]
    assert kinds[0] == "start" and kinds[-2:] == ["done", "unpacked"]
    assert (staged.path / "nvidia/cu13/bin/ptxas").stat().st_mode & 0o111
    starts = [
        int(served.range.split("=")[1].split("-")[0])
        for served in fault_server.requests("/w.whl")
        if served.range and served.range.endswith(f"-{len(body) - 1}")
    ]
    assert any(start >= held.held.stop for start in starts)  # the member list, on its own
    assert not (cache / "downloads/w.whl").exists()  # the tree is what is kept


def test_a_tree_just_unpacked_is_used_as_built_and_results_keep_their_order(
    fault_server: FaultServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cold stage uses the manifests it just wrote (none is read back); a warm one reads
    each from the cache.  The larger archive is staged first, each tree still at its index."""
    small = {"nvidia/cu13/include/a.h": b"a" * 100}
    large = {"nvidia/cu13/bin/tool": os.urandom(300_000), "nvidia/cu13/include/b.h": b"b"}
    for name, files in (("small.whl", small), ("large.whl", large)):
        fault_server.add(f"/{name}", wheel(files))
    artifacts = [artifact(fault_server, name, wheel(files)) for name, files in
                 (("small.whl", small), ("large.whl", large))]  # fmt: skip
    real, read = TreeManifest.from_bytes, []

    def counted(data: bytes) -> TreeManifest:
        read.append(data)
        return real(data)

    monkeypatch.setattr(TreeManifest, "from_bytes", staticmethod(counted))
    cache = tmp_path / "cache"
    cold = stage(artifacts, cache, tmp_path).trees
    assert [t.artifact.filename for t in cold] == ["small.whl", "large.whl"]
    assert [tree(t.path) for t in cold] == [small, large]
    assert [t.source for t in cold] == ["unpacked", "unpacked"] and read == []
    warm = stage(artifacts, cache, tmp_path).trees
    assert [tree(t.path) for t in warm] == [small, large]
    assert [t.source for t in warm] == ["cache", "cache"] and len(read) == 2


def test_an_archive_another_process_unpacked_and_deleted_under_us_is_taken_from_its_tree(
    fault_server: FaultServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two installs of one archive at once: the first downloads, unpacks, publishes its
    tree and deletes the archive, while the second, which looked before the tree stood,
    found the archive downloaded and verified and reads it.  The second takes the
    published tree (before: ``FileNotFoundError``, an internal error, as CI once saw).
    The first process is played here: its tree is made by a stage before, the archive put
    back; the second stage sees no tree at its first look, and the archive goes once its
    download has found it verified, before its extraction opens it."""
    files = {"nvidia/cu13/include/a.h": b"a" * 100, "nvidia/cu13/bin/tool": os.urandom(9000)}
    body = wheel(files)
    fault_server.add("/w.whl", body)
    the_artifact = artifact(fault_server, "w.whl", body)
    cache = tmp_path / "cache"
    stage([the_artifact], cache, tmp_path)  # the other process's tree, its archive deleted
    archive = cache / "downloads" / "w.whl"
    assert not archive.exists()
    archive.write_bytes(body)  # ... but still there, verified, when this one looked
    looks: list[object] = []
    real_load, real_download = CacheEntry.load, download_module.download
    deleted = threading.Event()

    def load(entry: Any, uid: int) -> Any:
        looks.append(entry)
        return None if len(looks) == 1 else real_load(entry, uid)

    def download(*args: Any, **options: Any) -> Any:
        result = real_download(*args, **options)
        assert result.skipped  # found verified: nothing fetched
        archive.unlink()  # the other process, done with it
        deleted.set()
        return result

    def extract(path: Path, destination: Path, **options: Any) -> Extracted:
        assert deleted.wait(30)
        return extract_archive(path, destination, **options)

    monkeypatch.setattr(CacheEntry, "load", load)
    monkeypatch.setattr(unpack_cache, "download", download)
    monkeypatch.setattr(unpack_cache, "extract_archive", extract)
    served = len(fault_server.log)
    [staged] = stage([the_artifact], cache, tmp_path).trees
    assert tree(staged.path) == files and staged.linked
    assert len(looks) == 2  # looked again, found the published tree
    assert len(fault_server.log) == served  # nothing downloaded again
    assert not [p for p in (cache / "unpacked").iterdir() if p.name.startswith(".tmp-")]


def test_a_redist_tar_xz_unpacks_while_it_downloads(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    top = "cuda_nvcc-linux-x86_64-13.0.88-archive"
    body = redist(top, FILES)
    fault_server.add("/r.tar.xz", body, Fault(rate=6 * 2**20))
    [staged] = stage(
        [artifact(fault_server, "r.tar.xz", body)], tmp_path / "cache", tmp_path, strip_top=True
    ).trees
    assert tree(staged.path) == FILES
    assert staged.checks == ("sha256 of the download", "tree: sizes+modes")


def test_bytes_the_checksum_rejects_leave_nothing(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    body = wheel(FILES)
    tampered = body[:1000] + bytes([body[1000] ^ 1]) + body[1001:]
    fault_server.add("/w.whl", tampered)
    cache = tmp_path / "cache"
    with pytest.raises(IntegrityError, match="sha256 mismatch"):
        stage([artifact(fault_server, "w.whl", body)], cache, tmp_path)
    assert list((cache / "unpacked").iterdir()) == []


def test_a_download_that_starts_over_is_unpacked_from_the_verified_file(
    fault_server: FaultServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The early reader may have seen v1's bytes; the tree must be v2's, exactly."""
    v1 = wheel(FILES)
    v2_files = {**FILES, "nvidia/cu13/include/nvvm.h": b"// version 2\n" * 1000}
    v2 = wheel(v2_files)
    # Connections drop early, so ranges are asked for again after the file changes;
    # If-Range then gets a whole-file 200 and the download starts over on v2.
    resource = fault_server.add("/w.whl", v1, Fault(drop_after=300_000, times=6, rate=8 * 2**20))
    extracted: list[Path] = []

    def extract(archive: Path, destination: Path, **kwargs: Any) -> Extracted:
        extracted.append(archive)
        return extract_archive(archive, destination, **kwargs)

    def progress(event: ProgressEvent) -> None:
        if event.kind == "advance" and fault_server.resources["/w.whl"] is resource:
            fault_server.add("/w.whl", v2, etag='"v2"')  # after some of v1 is on disk

    monkeypatch.setattr("cudaup.install.unpack_cache.extract_archive", extract)
    [staged] = stage(
        [artifact(fault_server, "w.whl", v2, sized=False)], tmp_path / "cache", tmp_path,
        progress=progress,
    ).trees  # fmt: skip
    assert tree(staged.path) == v2_files
    assert len(extracted) == 2  # the early try, then the verified file


def test_ctrl_c_stops_every_download_at_once_and_they_resume(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    """Ctrl-C reaches only the main thread; the downloads in the workers must stop too.

    The Ctrl-C comes once every file has bytes on disk (not after a guessed delay).
    The pool waits for its workers before the interrupt leaves it, so a download that
    did not stop would run to its end (~16 s per file at this rate) and leave no part
    file: every part file still there proves every download stopped.
    """
    body = wheel(FILES)
    names = ["a.whl", "b.whl", "c.whl"]
    for name in names:
        fault_server.add(f"/{name}", body, Fault(rate=256 * 1024))
    artifacts = [artifact(fault_server, name, body) for name in names]
    cache = tmp_path / "cache"
    arrived: set[str] = set()
    lock = threading.Lock()

    def interrupt_once_all_arrive(event: ProgressEvent) -> None:
        with lock:
            if event.kind == "advance" and event.done > 0 and len(arrived) < len(names):
                arrived.add(event.filename)
                if len(arrived) == len(names):
                    os.kill(os.getpid(), signal.SIGINT)  # a real Ctrl-C, to the main thread

    with pytest.raises(KeyboardInterrupt):
        stage(artifacts, cache, tmp_path, connections=4, progress=interrupt_once_all_arrive)
    downloads = cache / "downloads"
    saved: dict[str, list[tuple[int, int]]] = {}  # the byte ranges on disk, per file
    for name in names:
        assert (downloads / f"{name}.part").is_file()  # kept, with its state, to resume
        state = json.loads((downloads / f"{name}.part.json").read_text())
        saved[name] = [(start, pos) for start, pos, _end in state["segments"] if pos > start]
    assert all(saved.values())
    assert list((cache / "unpacked").iterdir()) == []  # no half-unpacked tree

    for name in names:
        fault_server.add(f"/{name}", body)  # full speed now
    resumed_at = time.monotonic()
    staged = stage(artifacts, cache, tmp_path, connections=4).trees
    assert [tree(part.path) for part in staged] == [FILES] * 3
    for name in names:
        # Only what was missing is asked for again (bytes=0-0 is the probe).
        starts = [
            int((served.range or "bytes=0-").split("=")[1].split("-")[0])
            for served in fault_server.requests(f"/{name}")
            if served.started >= resumed_at and served.range != "bytes=0-0"
        ]
        assert starts
        assert not [s for s in starts for a, p in saved[name] if a <= s < p], (saved, starts)


def test_staging_left_by_a_killed_process_is_swept(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    body = wheel(FILES)
    fault_server.add("/w.whl", body)
    unpacked_root = tmp_path / "cache/unpacked"
    stale = unpacked_root / ".tmp-0123456789abcdef-dead"
    (stale / "nvidia").mkdir(parents=True)
    two_days_ago = time.time() - 2 * 24 * 3600
    os.utime(stale, (two_days_ago, two_days_ago))
    live = unpacked_root / ".tmp-fedcba9876543210-beef"  # another process, unpacking now
    live.mkdir()
    stage([artifact(fault_server, "w.whl", body)], tmp_path / "cache", tmp_path)
    assert not stale.exists()
    assert live.is_dir()


def test_a_sha256_that_is_not_one_never_names_a_directory(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    body = wheel(FILES)
    fault_server.add("/w.whl", body)
    bad = dataclasses.replace(artifact(fault_server, "w.whl", body), sha256="../../" + "a" * 58)
    with pytest.raises(IntegrityError, match="is not 64 hex digits"):
        stage([bad], tmp_path / "cache", tmp_path)
    assert list((tmp_path / "cache/unpacked").iterdir()) == []
    assert not (tmp_path / ("a" * 58)).exists()
