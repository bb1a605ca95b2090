"""A wheel's small files written by several workers (issue #27): each directory's files
between two big members on one worker, no run of them reaching past a big member, every
check kept, and a failure in any worker ending the whole extraction
(or install) with its own error and exit code, nothing left behind.

The wheels are real zips of many directories (as NVIDIA's CCCL wheel: 1,718 headers in
118 directories); the full disk is a real tmpfs; installs go through the CLI against a
loopback index.
"""

from __future__ import annotations

import hashlib
import io
import os
import threading
import zipfile
from pathlib import Path
from typing import Any

import pytest

from cudaup.errors import EXIT_CODES, IntegrityError
from cudaup.install.extract import extract_archive, policy, write
from cudaup.install.extract.archive import _reading
from tests.faultserver import FaultServer
from tests.helpers import run_cli
from tests.install.served import Files, make_wheel, serve_pypi
from tests.install.test_extract import REG, ZipEntry, make_zip
from tests.osfaults import ROOT_ONLY, tmpfs
from tests.sandbox import Sandbox, sandbox  # noqa: F401 - fixture

RELEASE = "13.0.1"
#: More files per directory than a batch holds, so each directory is a batch of its own.
PER_DIRECTORY = write.BATCH_MEMBERS + 6


def headers(directories: int, per_directory: int = PER_DIRECTORY) -> Files:
    return {
        f"nvidia/cu13/include/d{d}/h{i}.h": (f"#pragma once // {d}/{i}\n".encode(), 0o644)
        for d in range(directories)
        for i in range(per_directory)
    }


def planned_files(archive: Path) -> list[policy.Member]:
    with _reading(archive) as reader:
        planned = policy.plan_members(reader, archive, policy.DEFAULT_LIMITS, False)
    return [member for member in planned if member.kind == "file"]


def test_small_files_alone_get_a_worker_per_cpu_but_one_and_big_members_two(
    tmp_path: Path,
) -> None:
    def batches(*entries: ZipEntry) -> list[list[policy.Member]]:
        archive = make_zip(tmp_path / f"{len(entries)}.zip", list(entries))
        return write.work_batches(planned_files(archive))

    headers = [(f"include/d{i % 4}/h{i}.h", b"x" * 3000, REG) for i in range(300)]
    big = [(f"bin/tool{i}", os.urandom(write.PARALLEL_MEMBER + 1), REG) for i in range(2)]
    only_small = batches(*headers)
    assert len(only_small) > 1
    # on 2 CPUs a second worker would only take the core the rest of an install uses
    assert [write.worker_count(only_small, cpus) for cpus in (1, 2, 3, 8)] == [1, 1, 2, 4]
    assert write.worker_count(batches(big[0], *headers), 2) == 1
    # two big members: one may wait for its bytes while the other's are in
    assert write.worker_count(batches(*big, *headers), 2) == write.PARALLEL_WORKERS >= 2


def test_batches_keep_each_directory_whole_and_big_members_alone(tmp_path: Path) -> None:
    entries: list[ZipEntry] = [
        *[(f"a/h{i}.h", b"x" * 100, REG) for i in range(90)],
        ("a/big.so", b"\x7fELF" + bytes(write.PARALLEL_MEMBER), REG),
        *[(f"b/h{i}.h", b"y", REG) for i in range(10)],
        *[(f"c/h{i}.h", b"z", REG) for i in range(10)],
        *[(f"d/h{i}.h", b"w", REG) for i in range(70)],
    ]
    files = planned_files(make_zip(tmp_path / "a.zip", entries))
    batches = write.work_batches(files)
    assert [member for batch in batches for member in batch] == files  # each once, in order
    assert [[m.name for m in batch] for batch in batches if len(batch) == 1] == [["a/big.so"]]
    # a/'s small files (more than a batch: a directory is never split), its big member
    # alone, then b/, c/ and d/ together (b/ and c/ alone are under a batch's size).
    assert [sorted({m.parts[0] for m in batch}) for batch in batches] == [
        ["a"],
        ["a"],
        ["b", "c", "d"],
    ]


def test_a_run_of_small_files_never_reaches_past_a_big_member(tmp_path: Path) -> None:
    """As NVIDIA's nvcc wheel lays its files out: small ones before, between and after
    the big binaries.  A run that went on past a binary (the code before round 29 of
    issue #27: 11 members from the wheel's first byte to its last) held its worker, while
    the wheel downloads, until the wheel's last bytes came; the binaries' bytes came
    before and waited for the one other worker.  Each batch now lies in one stretch of
    the archive, so the workers take the members up in the order their bytes land."""
    big = os.urandom(write.PARALLEL_MEMBER + 1)
    entries: list[ZipEntry] = [
        ("bin/query", b"q", REG),
        ("bin/bin2c", b"b", REG),
        ("bin/cudafe++", big, REG),
        ("bin/nvcc", big, REG),
        ("bin/nvcc.profile", b"p", REG),
        ("bin/ptxas", big, REG),
        ("bin/crt/link.stub", b"s", REG),
        ("w.dist-info/RECORD", b"r", REG),
    ]
    files = planned_files(make_zip(tmp_path / "nvcc.zip", entries))
    batches = write.work_batches(files)
    assert [member for batch in batches for member in batch] == files  # each once, in order
    assert [[m.name for m in batch] for batch in batches] == [
        ["bin/query", "bin/bin2c"],
        ["bin/cudafe++"],
        ["bin/nvcc"],
        ["bin/nvcc.profile"],
        ["bin/ptxas"],
        ["bin/crt/link.stub", "w.dist-info/RECORD"],
    ]


def test_small_files_of_several_directories_are_written_side_by_side(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first directory's first file waits until another worker has written a file of
    another directory: one worker alone (the code before issue #27) never got there.  With
    CPUs to spare (four here): on two, small files alone get one worker (see
    ``test_small_files_alone_get_a_worker_per_cpu_but_one_and_big_members_two``)."""
    monkeypatch.setattr(write, "usable_cpus", lambda: 4)
    files = headers(4)
    wheel = tmp_path / "w-1.0-py3-none-any.whl"
    wheel.write_bytes(make_wheel("w", "1.0", files))
    writers: dict[str, set[int]] = {}
    other_directory_written = threading.Event()
    real = write.write_file

    def spy(source: io.BufferedIOBase, path: str, member: policy.Member, **options: bool) -> str:
        directory = "/".join(member.parts[:-1])
        if member.name.endswith("/d0/h0.h") and not other_directory_written.wait(timeout=20):
            raise AssertionError("no other worker wrote a file while the first one waited")
        digest = real(source, path, member, **options)  # type: ignore[arg-type]
        writers.setdefault(directory, set()).add(threading.get_ident())
        if not directory.endswith("/d0") and "/include/d" in directory:
            other_directory_written.set()
        return digest

    monkeypatch.setattr(write, "write_file", spy)
    dest = tmp_path / "dest"
    dest.mkdir()
    extracted = extract_archive(wheel, dest)
    assert extracted.record_checked
    for name, (data, _mode) in files.items():
        assert (dest / name).read_bytes() == data
        assert extracted.digests[name] == hashlib.sha256(data).hexdigest()
        assert (dest / name).stat().st_mode & 0o777 == 0o644
    header_writers = {d: t for d, t in writers.items() if "/include/d" in d}
    assert all(len(threads) == 1 for threads in header_writers.values())  # one per directory
    assert len(set().union(*header_writers.values())) > 1


def corrupt(archive: Path, member: str) -> None:
    """Flip one byte of ``member``'s stored data: its CRC-32 no longer matches."""
    info = zipfile.ZipFile(archive).getinfo(member)
    data = bytearray(archive.read_bytes())
    name_length = int.from_bytes(data[info.header_offset + 26 : info.header_offset + 28], "little")
    extra_length = int.from_bytes(data[info.header_offset + 28 : info.header_offset + 30], "little")
    start = info.header_offset + 30 + name_length + extra_length
    data[start + info.compress_size // 2] ^= 0xFF
    archive.write_bytes(bytes(data))


def test_a_corrupt_member_in_one_worker_ends_the_extraction_and_leaves_nothing(
    tmp_path: Path,
) -> None:
    files = headers(6)
    archive = make_zip(
        tmp_path / "a.zip",
        [(name, data * 40, REG) for name, (data, _mode) in files.items()],
        compression=zipfile.ZIP_STORED,
    )
    corrupt(archive, "nvidia/cu13/include/d3/h5.h")
    assert len(write.work_batches(planned_files(archive))) == 6
    before = set(threading.enumerate())
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(IntegrityError, match=r"a\.zip: corrupt .*d3/h5\.h: CRC-32 mismatch"):
        extract_archive(archive, dest)
    assert list(dest.iterdir()) == []
    assert set(threading.enumerate()) <= before  # every worker stopped before the raise


def install(capsys: pytest.CaptureFixture[str], box: Sandbox) -> tuple[int, str, Any]:
    result = run_cli(
        capsys, "install", RELEASE, "--channel", "pypi", "--components", "cudart",
        "--platform", "linux-x86_64", "--prefix", str(box.prefix), "--json",
    )  # fmt: skip
    return result.code, result.err, result.json()


def rewritten(wheel: bytes, name: str, data: bytes) -> bytes:
    """``wheel`` with ``name`` holding ``data``: its RECORD still lists the old sha256 and size."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(wheel)) as source, zipfile.ZipFile(buffer, "w") as copy:
        for info in source.infolist():
            copy.writestr(info, data if info.filename == name else source.read(info))
    return buffer.getvalue()


def test_cli_a_member_of_another_size_than_the_record_is_exit_7_nothing_published(
    fault_server: FaultServer,
    sandbox: Sandbox,  # noqa: F811 - fixture
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A wheel of five directories (five work batches) whose RECORD lists another size
    for one header of the fourth: the install fails whole, through the CLI."""
    files = headers(5)
    target = "nvidia/cu13/include/d3/h7.h"
    planted = rewritten(make_wheel("nvidia-cuda-runtime", "13.0.88", files), target, b"#error\n")
    monkeypatch.setenv("CUDAUP_PYPI_URL", serve_pypi(fault_server, RELEASE, planted))
    before = sandbox.snapshot()
    code, err, answer = install(capsys, sandbox)
    assert code == EXIT_CODES["integrity"], err
    assert f"{target}: its size is not the one the wheel's RECORD lists" in err
    assert answer["error"]["kind"] == "integrity"
    after = sandbox.snapshot()
    assert not sandbox.prefix.exists()
    home = sandbox.home.relative_to(sandbox.root).as_posix()
    # Outside the cache, only the store's skeleton and the release's lock file are new.
    assert sandbox.changed_outside(before, after, [sandbox.cache]) == {
        home,
        f"{home}/locks",
        f"{home}/locks/{RELEASE}.lock",
    }
    unpacked = sandbox.cache / "unpacked"
    assert [p.name for p in unpacked.iterdir()] == []  # no tree published, none half-made


def test_cli_a_record_whose_sha256_its_member_does_not_match_is_found_by_the_digest_check(
    fault_server: FaultServer,
    sandbox: Sandbox,  # noqa: F811 - fixture
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A wheel its publisher built with a RECORD that lies about one header's bytes (same
    size): its members are what its verified bytes inflate to, so it installs, as pip and
    uv install it; RECORD's sha256 is the tree's manifest digest, and the tree's first
    digest check (here ``--verify``) finds the header wrong and discards the tree;
    unpacked again with ``--verify``, every member is hashed and compared with RECORD,
    and the install ends in exit 7 naming the file.  (Without ``--verify``, on the first
    use after a reboot, the tree unpacked again is used as built, the note saying why.)"""
    files = headers(5)
    target = "nvidia/cu13/include/d3/h7.h"
    size = len(files[target][0])
    planted = rewritten(make_wheel("nvidia-cuda-runtime", "13.0.88", files), target, b"#" * size)
    monkeypatch.setenv("CUDAUP_PYPI_URL", serve_pypi(fault_server, RELEASE, planted))
    code, err, _answer = install(capsys, sandbox)
    assert code == 0, err
    assert (sandbox.prefix / "include/d3/h7.h").read_bytes() == b"#" * size
    [entry] = (sandbox.cache / "unpacked").iterdir()
    manifest = (entry / "manifest.json").read_text()
    assert hashlib.sha256(files[target][0]).hexdigest() in manifest  # RECORD's, not the file's
    again = run_cli(
        capsys, "install", RELEASE, "--channel", "pypi", "--components", "cudart", "--verify",
        "--platform", "linux-x86_64", "--prefix", str(sandbox.prefix.parent / "second"), "--json",
    )  # fmt: skip
    assert again.code == EXIT_CODES["integrity"], again.err
    assert f"{target}: its sha256 is not the one the wheel's RECORD lists" in again.err
    assert again.json()["error"]["kind"] == "integrity"
    assert not (sandbox.prefix.parent / "second").exists()
    assert list((sandbox.cache / "unpacked").iterdir()) == []  # the lying tree discarded


@ROOT_ONLY
def test_cli_a_cache_out_of_inodes_under_the_workers_is_exit_10_nothing_published(
    fault_server: FaultServer,
    sandbox: Sandbox,  # noqa: F811 - fixture
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(
        "CUDAUP_PYPI_URL",
        serve_pypi(fault_server, RELEASE, make_wheel("nvidia-cuda-runtime", "13.0.88", headers(4))),
    )
    with tmpfs(tmp_path / "cache", size="16m", inodes=150) as cache:
        monkeypatch.setenv("CUDAUP_CACHE_DIR", str(cache))
        code, err, answer = install(capsys, sandbox)
        assert code == EXIT_CODES["insufficient-space"], err
        assert "no free inodes" in err and f"in {cache}/unpacked/" in err
        assert "set CUDAUP_CACHE_DIR" in err and "internal error" not in err
        assert answer["error"]["kind"] == "insufficient-space"
        assert [p.name for p in (cache / "unpacked").iterdir()] == []
    assert not sandbox.prefix.exists()
