"""Extraction that the archive lies to, a wheel whose RECORD disagrees, and a disk that
fills up or refuses writes: each refused with the right error, the destination empty,
memory bounded whatever the archive claims."""

from __future__ import annotations

import hashlib
import io
import json
import lzma
import os
import stat
import struct
import subprocess
import sys
import tarfile
import zipfile
import zlib
from pathlib import Path

import pytest

from cudaup.errors import InsufficientSpaceError, IntegrityError, PermissionDeniedError
from cudaup.install.extract import ExtractLimits, extract_archive
from cudaup.install.extract import zip as zip_reader
from tests.install.test_extract import RECORD, ZipEntry, make_zip, record_row
from tests.osfaults import ROOT_ONLY, tmpfs

REG = stat.S_IFREG | 0o644


def zeros_deflated(count: int) -> bytes:
    """A raw deflate stream of ``count`` MiB of zeros (~1 KiB per MiB), made in an instant:
    after a full flush every 1 MiB block compresses to the same bytes."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = compressor.compress(bytes(2**20)) + compressor.flush(zlib.Z_FULL_FLUSH)
    again = compressor.compress(bytes(2**20)) + compressor.flush(zlib.Z_FULL_FLUSH)
    assert again == block
    return block * count + compressor.flush()


def lying_zip(path: Path, name: str, data: bytes, method: int, declared: int, crc: int = 0) -> Path:
    """A zip of one member whose listing (local and central) says ``declared`` bytes."""
    encoded = name.encode()
    local = struct.pack(
        "<4s5H3L2H", b"PK\x03\x04", 20, 0, method, 0, 0, crc, len(data), declared,
        len(encoded), 0,
    ) + encoded  # fmt: skip
    central = struct.pack(
        "<4s6H3L5H2L", b"PK\x01\x02", 0x031E, 20, 0, method, 0, 0, crc, len(data), declared,
        len(encoded), 0, 0, 0, 0, REG << 16, 0,
    ) + encoded  # fmt: skip
    offset = len(local) + len(data)
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 1, 1, len(central), offset, 0)
    path.write_bytes(local + data + central + end)
    return path


def test_the_zip_builder_makes_what_zipfile_reads(tmp_path: Path) -> None:
    data = zeros_deflated(3)
    assert zlib.decompressobj(-15).decompress(data) == bytes(3 * 2**20)
    honest = lying_zip(
        tmp_path / "honest.zip", "z", data, zipfile.ZIP_DEFLATED, 3 * 2**20,
        zlib.crc32(bytes(3 * 2**20)),
    )  # fmt: skip
    assert zipfile.ZipFile(honest).read("z") == bytes(3 * 2**20)
    dest = tmp_path / "dest"
    dest.mkdir()
    extract_archive(honest, dest, limits=ExtractLimits(max_ratio=10_000))
    assert (dest / "z").stat().st_size == 3 * 2**20


MEASURE = r"""
import json, resource, sys
from pathlib import Path
from cudaup.errors import IntegrityError
from cudaup.install.extract import extract_archive
from cudaup.install.extract import zip as zip_reader
if sys.argv[3] == "zlib":
    zip_reader._isal = None  # the fallback where ISA-L has no wheel
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    extract_archive(Path(sys.argv[1]), Path(sys.argv[2]))
    outcome = "extracted"
except IntegrityError as exc:
    outcome = str(exc)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"outcome": outcome, "growth_kib": after - before}))
"""


def extract_measured(archive: Path, dest: Path, inflate: str = "isal") -> tuple[str, int]:
    """Extract in a fresh interpreter; what happened, and how far its peak RSS grew (KiB)."""
    dest.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, str(archive), str(dest), inflate],
        capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    result = json.loads(done.stdout)
    return result["outcome"], result["growth_kib"]


#: What extracting may add to the peak memory, whatever the archive: a few 1-4 MiB blocks
#: and read-ahead.  Inflating the lying member at once would add its 1 GiB.
BOUND_KIB = 96 * 1024


@pytest.mark.parametrize("inflate", ["isal", "zlib"])
def test_a_zip_that_understates_a_member_is_refused_with_memory_bounded(
    tmp_path: Path, inflate: str
) -> None:
    archive = lying_zip(
        tmp_path / "bomb.whl", "lib/big.so", zeros_deflated(1024), zipfile.ZIP_DEFLATED, 1024
    )
    outcome, growth = extract_measured(archive, tmp_path / "dest", inflate)
    assert "lib/big.so holds more than the 1024 bytes the zip's listing says" in outcome
    assert growth < BOUND_KIB, f"peak RSS grew by {growth} KiB"
    assert list((tmp_path / "dest").iterdir()) == []


def test_a_small_member_that_understates_is_bounded_too(tmp_path: Path) -> None:
    """Small members are read whole through the archive's own handle: 200 MiB of zeros
    in under SMALL_MEMBER compressed bytes, listed as 1 KiB, still never inflate past it."""
    body = zeros_deflated(200)
    assert len(body) <= zip_reader.SMALL_MEMBER  # the path under test
    archive = lying_zip(tmp_path / "small.whl", "lib/x.so", body, zipfile.ZIP_DEFLATED, 1024)
    outcome, growth = extract_measured(archive, tmp_path / "dest")
    assert "lib/x.so holds more than the 1024 bytes the zip's listing says" in outcome
    assert growth < BOUND_KIB, f"peak RSS grew by {growth} KiB"
    assert list((tmp_path / "dest").iterdir()) == []


def test_a_zip_symlink_that_understates_its_target_is_bounded(tmp_path: Path) -> None:
    body = zeros_deflated(1024)
    archive = lying_zip(tmp_path / "link.whl", "lib/x.so", body, zipfile.ZIP_DEFLATED, 16)
    data = bytearray(archive.read_bytes())
    central = data.rindex(b"PK\x01\x02")
    attributes = central + 38  # the central entry's external attributes
    data[attributes : attributes + 4] = struct.pack("<L", (stat.S_IFLNK | 0o777) << 16)
    archive.write_bytes(bytes(data))
    outcome, growth = extract_measured(archive, tmp_path / "dest")
    assert "holds more than the 16 bytes" in outcome
    assert growth < BOUND_KIB, f"peak RSS grew by {growth} KiB"


def test_a_tar_xz_decompresses_in_bounded_blocks(tmp_path: Path) -> None:
    """A 1 KiB member followed by 1 GiB of zeros (xz streams of 64 MiB each): refused
    after the 64 MiB a tar may trail, its memory never near the data's size."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo("a")
        info.size = 1024
        tar.addfile(info, io.BytesIO(bytes(1024)))
    archive = tmp_path / "trailer.tar.xz"
    archive.write_bytes(lzma.compress(buffer.getvalue()) + lzma.compress(bytes(64 * 2**20)) * 16)
    outcome, growth = extract_measured(archive, tmp_path / "dest")
    assert "bytes after the end of the archive" in outcome
    assert growth < BOUND_KIB, f"peak RSS grew by {growth} KiB"


def test_a_member_shorter_than_its_listing_is_refused(tmp_path: Path) -> None:
    data = zlib.compressobj(9, zlib.DEFLATED, -15)
    stream = data.compress(b"x" * 1000) + data.flush()
    archive = lying_zip(tmp_path / "short.zip", "f", stream, zipfile.ZIP_DEFLATED, 2000)
    (tmp_path / "dest").mkdir()
    with pytest.raises(IntegrityError, match="1000 of the 2000 bytes"):
        extract_archive(archive, tmp_path / "dest")
    stored = lying_zip(tmp_path / "stored.zip", "f", b"y" * 10, zipfile.ZIP_STORED, 5)
    with pytest.raises(IntegrityError, match="stored with 10 bytes but listed as 5"):
        extract_archive(stored, tmp_path / "dest")
    assert list((tmp_path / "dest").iterdir()) == []


@pytest.mark.parametrize("method", [zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA])
def test_compression_methods_wheels_do_not_use_are_refused(tmp_path: Path, method: int) -> None:
    archive = make_zip(tmp_path / "a.zip", [("f", b"data" * 100, REG)], method)
    (tmp_path / "dest").mkdir()
    with pytest.raises(IntegrityError, match="compression method (bzip2|lzma)"):
        extract_archive(archive, tmp_path / "dest")


# -- a wheel's RECORD ---------------------------------------------------------------
DIST = "nvidia_cuda_nvcc-13.0.48.dist-info"
FILES: list[ZipEntry] = [
    ("nvidia/cuda_nvcc/bin/ptxas", b"ptxas", REG),
    ("nvidia/cuda_nvcc/include/x.h", b"x", REG),
    ("nvidia/cuda_nvcc/lib/libx.so.13.0.88", b"elf", REG),
]


def test_a_wheel_is_checked_against_its_record(tmp_path: Path) -> None:
    wheel = make_zip(tmp_path / "w-1.0-py3-none-any.whl", [*FILES, (f"{DIST}/RECORD", RECORD, REG)])
    dest = tmp_path / "dest"
    dest.mkdir()
    extracted = extract_archive(wheel, dest)
    assert extracted.record_checked
    for name, data, _mode in FILES:
        assert extracted.digests[name] == hashlib.sha256(data).hexdigest()
    # RECORD lists no sha256 for itself: it is hashed as written.
    assert extracted.digests[f"{DIST}/RECORD"] == hashlib.sha256(RECORD).hexdigest()


def test_a_wheel_s_digests_are_its_record_s(tmp_path: Path) -> None:
    """A file's digest is the sha256 its RECORD lists (the wheel's own sha256 vouched for
    every byte; see install/extract/wheel.py): a RECORD that lies about a file of the
    right size is not refused here but becomes the tree's manifest digest, which the
    tree's digest check then finds wrong (tests/install/test_parallel_writes.py).  A row
    without a sha256 (or with another algorithm) is hashed from the file written."""
    x_h = "nvidia/cuda_nvcc/include/x.h"
    lying = RECORD.replace(record_row(x_h, b"x"), record_row(x_h, b"y"))
    no_digest = lying.replace(
        record_row("nvidia/cuda_nvcc/bin/ptxas", b"ptxas"),
        b"nvidia/cuda_nvcc/bin/ptxas,sha512=AAAA,5\n",
    )
    wheel = make_zip(
        tmp_path / "w-1.0-py3-none-any.whl", [*FILES, (f"{DIST}/RECORD", no_digest, REG)]
    )
    dest = tmp_path / "dest"
    dest.mkdir()
    digests = extract_archive(wheel, dest).digests
    assert digests[x_h] == hashlib.sha256(b"y").hexdigest()
    assert digests["nvidia/cuda_nvcc/bin/ptxas"] == hashlib.sha256(b"ptxas").hexdigest()
    assert set(digests) == {name for name, _data, _mode in FILES} | {f"{DIST}/RECORD"}


def test_hashing_a_wheel_s_members_refuses_a_record_that_lies(tmp_path: Path) -> None:
    """``install --verify`` hashes every member and compares it with RECORD's sha256."""
    x_h = "nvidia/cuda_nvcc/include/x.h"
    lying = RECORD.replace(record_row(x_h, b"x"), record_row(x_h, b"y"))
    wheel = make_zip(tmp_path / "w-1.0-py3-none-any.whl", [*FILES, (f"{DIST}/RECORD", lying, REG)])
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(IntegrityError, match="x.h: its sha256 is not the one the wheel's RECORD"):
        extract_archive(wheel, dest, hash_wheel=True)
    assert list(dest.iterdir()) == []
    honest = make_zip(
        tmp_path / "h-1.0-py3-none-any.whl", [*FILES, (f"{DIST}/RECORD", RECORD, REG)]
    )
    digests = extract_archive(honest, dest, hash_wheel=True).digests
    assert digests[f"{DIST}/RECORD"] == hashlib.sha256(RECORD).hexdigest()
    assert digests[x_h] == hashlib.sha256(b"x").hexdigest()


@pytest.mark.parametrize(
    ("record", "message"),
    [
        (RECORD.replace(b"ptxas,sha256=", b"ptxas,sha256=A"), "malformed sha256"),
        (RECORD.replace(record_row("nvidia/cuda_nvcc/bin/ptxas", b"ptxas"), b""), "ptxas is not listed"),
        (RECORD + record_row("nvidia/cuda_nvcc/bin/cicc", b"c"), "lists nvidia/cuda_nvcc/bin/cicc, which the wheel"),
        (RECORD.replace(b",5\n", b",6\n", 1), "its size is not the one"),
        (RECORD + b"a,b\n", "malformed row"),
        (RECORD.replace(b",5\n", b",5" + b"0" * 5000 + b"\n", 1), "size '50000"),
        (RECORD.replace(b",5\n", ",\u00b2\n".encode(), 1), "not a size"),
        # The RECORD is kept in the toolkit, where an uninstaller would act on its paths.
        (RECORD + b"../../x,,\n", "RECORD path '../../x'"),
        (RECORD + b"/etc/passwd,,\n", "RECORD path '/etc/passwd'"),
        (RECORD + b"a\\..\\..\\x,,\n", "RECORD path"),
        (b"\xff", "its RECORD cannot be read"),
    ],
    ids=["malformed", "unlisted", "missing", "size", "row", "size-5000-digits",
         "size-superscript", "dotdot", "absolute", "backslash", "not-utf8"],
)  # fmt: skip
def test_a_wheel_whose_record_disagrees_is_refused(
    tmp_path: Path, record: bytes, message: str
) -> None:
    wheel = make_zip(tmp_path / "w-1.0-py3-none-any.whl", [*FILES, (f"{DIST}/RECORD", record, REG)])
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(IntegrityError, match=message):
        extract_archive(wheel, dest)
    assert list(dest.iterdir()) == []


def test_a_wheel_without_a_record_is_refused(tmp_path: Path) -> None:
    """RECORD is mandatory (PEP 427): without it nothing says what the wheel holds."""
    wheel = make_zip(tmp_path / "w-1.0-py3-none-any.whl", FILES)
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(IntegrityError, match=r"w-1.0-py3-none-any.whl: it has no <name>"):
        extract_archive(wheel, dest)
    assert list(dest.iterdir()) == []
    # A zip that is not a wheel (NVIDIA's Windows archives) has no RECORD to check.
    plain = make_zip(tmp_path / "cuda_nvcc-windows-x86_64-13.0.48-archive.zip", FILES)
    assert not extract_archive(plain, dest).record_checked


# -- the disk ---------------------------------------------------------------------------
@ROOT_ONLY
@pytest.mark.parametrize("directories", [1, 4], ids=["one-directory", "four-workers-batches"])
def test_no_room_for_files_mid_extraction_is_exit_10_and_leaves_nothing(
    tmp_path: Path, directories: int
) -> None:
    """The bytes fit (the check before writing passes), the files do not: tmpfs runs out of
    inodes and the kernel answers ENOSPC partway; with four directories of 50, the files
    go out in two work batches on two workers, and one worker's failure ends it all."""
    entries: list[ZipEntry] = [
        (f"include/d{i % directories}/h{i}.h", b"#pragma once\n", REG) for i in range(200)
    ]
    entries.sort(key=lambda entry: entry[0].split("/")[1])  # each directory's files together
    archive = make_zip(tmp_path / "many.zip", entries)
    with tmpfs(tmp_path / "small", size="8m", inodes=64) as small:
        dest = small / "dest"
        dest.mkdir()
        with pytest.raises(InsufficientSpaceError) as caught:
            extract_archive(archive, dest)
        message = str(caught.value)
        assert "cannot extract many.zip" in message and f"in {dest}" in message
        assert "no free inodes" in message and "it needs 2600 bytes" in message
        assert list(dest.iterdir()) == []


@ROOT_ONLY
def test_a_read_only_destination_is_exit_14_naming_it(tmp_path: Path) -> None:
    archive = make_zip(tmp_path / "a.zip", FILES)
    with (
        tmpfs(tmp_path / "ro", ro=True) as read_only,
        pytest.raises(PermissionDeniedError, match=f"read-only file system: {read_only}/nvidia"),
    ):
        extract_archive(archive, read_only)
    assert os.path.ismount(tmp_path / "ro") is False
