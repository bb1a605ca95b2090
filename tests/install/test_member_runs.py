"""A worker's run of small zip members read at once (issue #27: NVIDIA's CCCL wheel, 1,718
headers): every member still checked as one read alone is (its local header, its size
against the listing, the end of its deflate stream, its CRC-32), a lie in any member of a
run refused with that member's name and the destination left empty, memory bounded, and
nothing asked for past the run's last member (while a wheel downloads, those bytes may not
be there yet).

The archives are real zips, some written byte by byte to carry the lies zipfile would not
write.
"""

from __future__ import annotations

import os
import struct
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cudaup.errors import IntegrityError
from cudaup.install.extract import extract_archive, write
from tests.install.test_extract import HookedReader
from tests.install.test_extract_faults import BOUND_KIB, REG, extract_measured, zeros_deflated
from tests.install.test_parallel_writes import planned_files


@dataclass
class Raw:
    """One member as its bytes lie in the archive, and what its headers say of it."""

    name: str
    stored: bytes  # the member's data as the archive holds it
    method: int
    declared: int  # the size both listings give
    crc: int
    local_name: str | None = None  # another name in the local header
    extra: bytes = b""  # a local header's extra field


def deflated(data: bytes) -> bytes:
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    return compressor.compress(data) + compressor.flush()


def honest(name: str, data: bytes, **changes: Any) -> Raw:
    fields: dict[str, Any] = {
        "stored": deflated(data),
        "method": zipfile.ZIP_DEFLATED,
        "declared": len(data),
        "crc": zlib.crc32(data),
    }
    return Raw(name, **{**fields, **changes})


def raw_zip(path: Path, members: list[Raw]) -> Path:
    """A zip of ``members`` back to back, then their central directory."""
    body, central = b"", b""
    for member in members:
        encoded = member.name.encode()
        local_name = (member.local_name or member.name).encode()
        sizes = (member.crc, len(member.stored), member.declared)
        offset = len(body)
        body += struct.pack(
            "<4s5H3L2H", b"PK\x03\x04", 20, 0, member.method, 0, 0, *sizes,
            len(local_name), len(member.extra),
        ) + local_name + member.extra + member.stored  # fmt: skip
        central += struct.pack(
            "<4s6H3L5H2L", b"PK\x01\x02", 0x031E, 20, 0, member.method, 0, 0, *sizes,
            len(encoded), 0, 0, 0, 0, REG << 16, offset,
        ) + encoded  # fmt: skip
    end = struct.pack(
        "<4s4H2LH", b"PK\x05\x06", 0, 0, len(members), len(members), len(central), len(body), 0
    )
    path.write_bytes(body + central + end)
    return path


def headers(count: int = 6) -> dict[str, bytes]:
    return {f"include/cub/h{i}.cuh": f"// header {i}\n".encode() * (i + 1) for i in range(count)}


def one_run(archive: Path) -> None:
    """The archive's files make one work batch: the path under test."""
    batches = write.work_batches(planned_files(archive))
    assert len(batches) == 1 and len(batches[0]) > 1


def test_a_run_with_local_extra_fields_extracts_as_zipfile_reads_it(tmp_path: Path) -> None:
    """Local extra fields (of every length, the last member's too, which lies past the end
    a run first reads) shift where each member's data starts."""
    files = headers()
    members = [
        honest(name, data, extra=b"\xfe\xca" + struct.pack("<H", 4 * i) + bytes(4 * i))
        for i, (name, data) in enumerate(files.items())
    ]
    archive = raw_zip(tmp_path / "extras.zip", members)
    one_run(archive)
    assert {name: zipfile.ZipFile(archive).read(name) for name in files} == files
    dest = tmp_path / "dest"
    dest.mkdir()
    extract_archive(archive, dest)
    assert {name: (dest / name).read_bytes() for name in files} == files


def lie(case: str, data: bytes) -> dict[str, Any]:
    """What the third member of a run says or holds instead of the truth."""
    if case == "crc":
        return {"crc": zlib.crc32(data) ^ 1}
    if case == "understated":
        return {"declared": len(data) - 1}
    if case == "overstated":
        return {"declared": len(data) + 7}
    if case == "stored":
        return {"stored": data, "method": zipfile.ZIP_STORED, "declared": len(data) - 2}
    if case == "local name":
        return {"local_name": "include/cub/evil.cuh"}
    if case == "garbage":
        return {"stored": b"\xff" * 40}
    assert case == "cut"
    return {"stored": deflated(data)[:-3]}


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("crc", "h2.cuh: CRC-32 mismatch"),
        ("understated", "h2.cuh holds more than the 35 bytes the zip's listing says"),
        ("overstated", "h2.cuh: 36 of the 43 bytes the zip's listing says"),
        ("stored", "h2.cuh: stored with 36 bytes but listed as 34"),
        ("local name", "the name of include/cub/h2.cuh differs in its local header"),
        ("garbage", "h2.cuh: corrupt deflate data"),
        ("cut", "h2.cuh: the compressed data ends early"),
    ],
)
def test_a_lie_in_the_middle_of_a_run_is_refused_and_leaves_nothing(
    tmp_path: Path, case: str, message: str
) -> None:
    files = headers()
    members = [
        honest(name, data, **(lie(case, data) if i == 2 else {}))
        for i, (name, data) in enumerate(files.items())
    ]
    archive = raw_zip(tmp_path / "lying.zip", members)
    one_run(archive)
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(IntegrityError, match=r"lying\.zip: corrupt or truncated") as caught:
        extract_archive(archive, dest)
    assert message in str(caught.value)
    assert list(dest.iterdir()) == []


def test_a_run_member_that_understates_is_bounded(tmp_path: Path) -> None:
    """200 MiB of zeros in under a block of compressed bytes, listed as 1 KiB, in a run:
    its one inflate call is bounded by the listing."""
    files = headers(3)
    body = zeros_deflated(200)
    members = [honest(name, data) for name, data in files.items()]
    members.insert(1, Raw("include/cub/zeros.cuh", body, zipfile.ZIP_DEFLATED, 1024, 0))
    archive = raw_zip(tmp_path / "bomb.whl", members)
    one_run(archive)
    outcome, growth = extract_measured(archive, tmp_path / "dest")
    assert "zeros.cuh holds more than the 1024 bytes the zip's listing says" in outcome
    assert growth < BOUND_KIB, f"peak RSS grew by {growth} KiB"
    assert list((tmp_path / "dest").iterdir()) == []


def test_a_run_asks_for_no_byte_past_its_last_member(tmp_path: Path) -> None:
    """Every read of a run's handle ends within the run (the central directory after it is
    read once, by the listing's own handle); a directory of more than a block of headers
    is read a block at a time."""
    files = {f"include/cub/h{i}.cuh": os.urandom(50_000) for i in range(40)}  # ~2 MiB
    archive = raw_zip(tmp_path / "run.zip", [honest(name, data) for name, data in files.items()])
    one_run(archive)
    listing = zipfile.ZipFile(archive)
    last = listing.getinfo("include/cub/h39.cuh")
    run_end = last.header_offset + 30 + len(last.filename) + last.compress_size
    reads: list[list[tuple[int, int]]] = []  # (start, end) of each read, by handle

    def recorded() -> HookedReader:
        handle: list[tuple[int, int]] = []
        reads.append(handle)
        return HookedReader(archive, lambda start, length: handle.append((start, start + length)))

    dest = tmp_path / "dest"
    dest.mkdir()
    extract_archive(archive, dest, opener=recorded)  # type: ignore[arg-type]
    assert {name: (dest / name).read_bytes() for name in files} == files
    listing_handle, *run_handles = reads
    assert max(end for _start, end in listing_handle) >= archive.stat().st_size  # the listing
    assert len(run_handles) == 1
    assert max(end for _start, end in run_handles[0]) == run_end
    assert 1 < len(run_handles[0]) <= 4  # a block at a time, not a read per member
