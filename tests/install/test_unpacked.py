"""The unpacked-archive cache and its download→extract pipeline, against a real local server.

Archives are extracted while they download (a zip from its member list, fetched
first; a tar from the front); what is extracted stands only once the download is
verified.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import signal
import tarfile
import threading
import time
import zipfile
from pathlib import Path

import pytest

from cudaup.config import Settings
from cudaup.core.model import Artifact
from cudaup.download import ProgressEvent
from cudaup.errors import IntegrityError
from cudaup.install.extract import extract_archive
from cudaup.install.unpacked import unpack_all
from cudaup.net import backoff
from cudaup.net.backoff import NO_WAIT, Backoff
from cudaup.net.http import HttpClient
from tests.faultserver import Fault, FaultServer, payload


@pytest.fixture(autouse=True)
def _quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retries in these tests wait 10 ms, not seconds (clients built with the default)."""
    monkeypatch.setattr(backoff, "DEFAULT", Backoff(base=0.01, cap=0.01))


def wheel(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o100755 << 16
            # some members stored, as wheels have them: read through zipfile, not ISA-L
            stored = name.endswith(".txt")
            info.compress_type = zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
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
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def test_a_wheel_unpacks_while_it_downloads(fault_server: FaultServer, tmp_path: Path) -> None:
    body = wheel(FILES)
    fault_server.add("/w.whl", body, Fault(rate=6 * 2**20))
    events: list[ProgressEvent] = []
    [root] = unpack_all(
        [artifact(fault_server, "w.whl", body)], tmp_path / "cache", http=client(tmp_path),
        strip_top=False, connections=2, progress=events.append,
    )  # fmt: skip
    assert tree(root) == FILES
    kinds = [event.kind for event in events]
    assert kinds[0] == "start" and kinds[-2:] == ["done", "unpacked"]
    assert (root / "nvidia/cu13/bin/ptxas").stat().st_mode & 0o111
    ranges = [r.range or "" for r in fault_server.requests("/w.whl")]
    assert ranges[1].endswith(f"-{len(body) - 1}")  # after the probe: the member list, first
    assert not (tmp_path / "cache/downloads/w.whl").exists()  # the tree is what is kept


def test_a_redist_tar_xz_unpacks_while_it_downloads(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    top = "cuda_nvcc-linux-x86_64-13.0.88-archive"
    body = redist(top, FILES)
    fault_server.add("/r.tar.xz", body, Fault(rate=6 * 2**20))
    [root] = unpack_all(
        [artifact(fault_server, "r.tar.xz", body)], tmp_path / "cache", http=client(tmp_path),
        strip_top=True, connections=2,
    )  # fmt: skip
    assert tree(root) == FILES


def test_bytes_the_checksum_rejects_leave_nothing(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    body = wheel(FILES)
    tampered = body[:1000] + bytes([body[1000] ^ 1]) + body[1001:]
    fault_server.add("/w.whl", tampered)
    cache = tmp_path / "cache"
    with pytest.raises(IntegrityError, match="sha256 mismatch"):
        unpack_all(
            [artifact(fault_server, "w.whl", body)], cache, http=client(tmp_path),
            strip_top=False, connections=2,
        )  # fmt: skip
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

    def extract(archive: Path, destination: Path, **kwargs: object) -> list[Path]:
        extracted.append(archive)
        return extract_archive(archive, destination, **kwargs)  # type: ignore[arg-type]

    def progress(event: ProgressEvent) -> None:
        if event.kind == "advance" and fault_server.resources["/w.whl"] is resource:
            fault_server.add("/w.whl", v2, etag='"v2"')  # after some of v1 is on disk

    monkeypatch.setattr("cudaup.install.unpacked.extract_archive", extract)
    [root] = unpack_all(
        [artifact(fault_server, "w.whl", v2, sized=False)], tmp_path / "cache",
        http=client(tmp_path), strip_top=False, connections=2, progress=progress,
    )  # fmt: skip
    assert tree(root) == v2_files
    assert len(extracted) == 2  # the early try, then the verified file


def test_ctrl_c_stops_every_download_at_once_and_they_resume(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    """Ctrl-C reaches only the main thread; the downloads in the workers must stop too."""
    body = wheel(FILES)
    names = ["a.whl", "b.whl", "c.whl"]
    for name in names:
        fault_server.add(f"/{name}", body, Fault(rate=256 * 1024))  # ~12 s per file
    artifacts = [artifact(fault_server, name, body) for name in names]
    cache = tmp_path / "cache"
    timer = threading.Timer(0.8, os.kill, (os.getpid(), signal.SIGINT))  # a real Ctrl-C
    timer.start()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        unpack_all(artifacts, cache, http=client(tmp_path), strip_top=False, connections=4)
    stopped_after = time.monotonic() - started
    assert stopped_after < 6.0  # the transfers alone would have taken over 10 s
    downloads = cache / "downloads"
    saved: dict[str, list[tuple[int, int]]] = {}  # the byte ranges on disk, per file
    for name in names:
        assert (downloads / f"{name}.part").is_file()  # kept, with its state, to resume
        state = json.loads((downloads / f"{name}.part.json").read_text())
        saved[name] = [(start, pos) for start, pos, _end in state["segments"] if pos > start]
    assert any(saved.values())
    assert list((cache / "unpacked").iterdir()) == []  # no half-unpacked tree

    for name in names:
        fault_server.add(f"/{name}", body)  # full speed now
    resumed_at = time.monotonic()
    roots = unpack_all(artifacts, cache, http=client(tmp_path), strip_top=False, connections=4)
    assert [tree(root) for root in roots] == [FILES] * 3
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
    unpack_all(
        [artifact(fault_server, "w.whl", body)], tmp_path / "cache", http=client(tmp_path),
        strip_top=False,
    )  # fmt: skip
    assert not stale.exists()
    assert live.is_dir()
