"""Safe extraction against good and hostile archives (every member checked before it is written).

Every archive is built here with tarfile/zipfile.  A hostile one must be
refused whole, with nothing left in the destination.
"""

from __future__ import annotations

import base64
import errno
import hashlib
import io
import lzma
import os
import shutil
import stat
import tarfile
import threading
import time
import warnings
import zipfile
from collections import namedtuple
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import pytest

from cudaup.errors import CudaupError, InsufficientSpaceError, IntegrityError, UsageError
from cudaup.install.extract import (
    ExtractLimits,
    archive_members,
    extract_archive,
    policy,
    tar,
    write,
)

TOP = "cuda_nvcc-linux-x86_64-13.0.48-archive"
Entry = tuple[tarfile.TarInfo, bytes | None]
TarMode = Literal["w:xz", "w:gz", "w"]


# ---------------------------------------------------------------------------
# Building archives
# ---------------------------------------------------------------------------
def file(name: str, data: bytes = b"data\n", mode: int = 0o644) -> Entry:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), mode
    return info, data


def directory(name: str, mode: int = 0o755) -> Entry:
    info = tarfile.TarInfo(name)
    info.type, info.mode = tarfile.DIRTYPE, mode
    return info, None


def link(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> Entry:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = kind, target, 0o777
    return info, None


def special(name: str, kind: bytes) -> Entry:
    info = tarfile.TarInfo(name)
    info.type, info.mode = kind, 0o644
    return info, None


def make_tar(path: Path, entries: list[Entry], mode: TarMode = "w:xz") -> Path:
    with tarfile.open(path, mode, format=tarfile.PAX_FORMAT) as tar:
        for info, data in entries:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


ZipEntry = tuple[str, bytes, int | None]  # name, data, unix st_mode (None: made on Windows)


def make_zip(path: Path, entries: list[ZipEntry], compression: int = zipfile.ZIP_DEFLATED) -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # duplicate names are on purpose in some tests
        with zipfile.ZipFile(path, "w", compression) as archive:
            for name, data, mode in entries:
                info = zipfile.ZipInfo(name)
                info.compress_type = compression
                if mode is None:
                    # What Windows tools write: MS-DOS attributes only, no unix mode.
                    info.create_system = 0
                    info.external_attr = 0x10 if name.endswith("/") else 0x20
                else:
                    info.create_system, info.external_attr = 3, mode << 16
                archive.writestr(info, data)
    return path


def nvidia_entries() -> list[Entry]:
    return [
        directory(f"{TOP}/"),
        directory(f"{TOP}/bin"),
        file(f"{TOP}/bin/nvcc", b"#!/bin/sh\necho nvcc\n", 0o755),
        directory(f"{TOP}/include"),
        file(f"{TOP}/include/x.h", b"#pragma once\n"),
        directory(f"{TOP}/lib"),
        file(f"{TOP}/lib/libx.so.13.0.88", b"\x7fELF" + bytes(64), 0o755),
        link(f"{TOP}/lib/libx.so.13", "libx.so.13.0.88"),
        file(f"{TOP}/LICENSE", b"license\n"),
    ]


@pytest.fixture
def dest(tmp_path: Path) -> Path:
    path = tmp_path / "dest"
    path.mkdir()
    return path


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


# ---------------------------------------------------------------------------
# Good archives
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("suffix", "mode"), [(".tar.xz", "w:xz"), (".tar.gz", "w:gz"), (".tar", "w")]
)
def test_nvidia_archive_strip_top(tmp_path: Path, dest: Path, suffix: str, mode: TarMode) -> None:
    archive = make_tar(tmp_path / f"{TOP}{suffix}", nvidia_entries(), mode)
    created = extract_archive(archive, dest, strip_top=True).tops
    assert created == [dest / "bin", dest / "include", dest / "lib", dest / "LICENSE"]
    assert (dest / "bin/nvcc").read_bytes() == b"#!/bin/sh\necho nvcc\n"
    assert mode_of(dest / "bin/nvcc") == 0o755
    assert os.access(dest / "bin/nvcc", os.X_OK)
    assert mode_of(dest / "include/x.h") == 0o644
    assert mode_of(dest / "bin") == 0o755
    soname = dest / "lib/libx.so.13"
    assert soname.is_symlink()
    assert soname.readlink() == Path("libx.so.13.0.88")
    assert soname.resolve() == (dest / "lib/libx.so.13.0.88").resolve()
    assert soname.read_bytes().startswith(b"\x7fELF")


def test_without_strip_top_keeps_the_top_directory(tmp_path: Path, dest: Path) -> None:
    archive = make_tar(tmp_path / "a.tar.xz", nvidia_entries())
    assert extract_archive(archive, dest).tops == [dest / TOP]
    assert (dest / TOP / "bin/nvcc").is_file()


def test_archive_members_lists_normalized_names(tmp_path: Path) -> None:
    archive = make_tar(tmp_path / "a.tar.xz", [directory("./"), *nvidia_entries()])
    assert archive_members(archive, strip_top=True) == [
        "bin",
        "bin/nvcc",
        "include",
        "include/x.h",
        "lib",
        "lib/libx.so.13.0.88",
        "lib/libx.so.13",
        "LICENSE",
    ]
    assert archive_members(archive)[0] == TOP


def test_members_may_come_before_their_directories(tmp_path: Path, dest: Path) -> None:
    archive = make_tar(tmp_path / "a.tar", [file("d/sub/f"), directory("d/sub", 0o750)], "w")
    extract_archive(archive, dest)
    assert (dest / "d/sub/f").read_bytes() == b"data\n"
    assert mode_of(dest / "d/sub") == 0o755  # as every directory: others may enter it


@pytest.mark.parametrize(
    ("stored", "expected"),
    [
        (0o777, 0o755),  # group/other write dropped
        (0o744, 0o755),  # NVIDIA's wheels store nvcc like this: others must run it too
        (0o700, 0o755),
        (0o100, 0o755),
        (0o664, 0o644),  # the wheels' crt/*.stub
        (0o600, 0o644),
        (0o444, 0o644),  # the owner can always write and remove
    ],
)
def test_modes_are_normalised_as_pip_does(
    tmp_path: Path, dest: Path, stored: int, expected: int
) -> None:
    archive = make_tar(tmp_path / "a.tar.xz", [file("f", mode=stored)])
    extract_archive(archive, dest)
    assert mode_of(dest / "f") == expected


def record_row(name: str, data: bytes) -> bytes:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return f"{name},sha256={digest.decode()},{len(data)}\n".encode()


RECORD = (
    record_row("nvidia/cuda_nvcc/bin/ptxas", b"ptxas")
    + record_row("nvidia/cuda_nvcc/include/x.h", b"x")
    + record_row("nvidia/cuda_nvcc/lib/libx.so.13.0.88", b"elf")
    + b"nvidia_cuda_nvcc-13.0.48.dist-info/RECORD,,\n"
)


def test_wheel_with_unix_modes(tmp_path: Path, dest: Path) -> None:
    wheel = make_zip(
        tmp_path / "nvidia_cuda_nvcc-13.0.48-py3-none-manylinux_2_27_x86_64.whl",
        [
            ("nvidia/", b"", stat.S_IFDIR | 0o755),
            ("nvidia/cuda_nvcc/bin/ptxas", b"ptxas", stat.S_IFREG | 0o755),
            ("nvidia/cuda_nvcc/include/x.h", b"x", stat.S_IFREG | 0o644),
            ("nvidia/cuda_nvcc/lib/libx.so.13.0.88", b"elf", stat.S_IFREG | 0o755),
            ("nvidia/cuda_nvcc/lib/libx.so.13", b"libx.so.13.0.88", stat.S_IFLNK | 0o777),
            ("nvidia_cuda_nvcc-13.0.48.dist-info/RECORD", RECORD, stat.S_IFREG | 0o644),
        ],
    )
    created = extract_archive(wheel, dest).tops
    assert created == [dest / "nvidia", dest / "nvidia_cuda_nvcc-13.0.48.dist-info"]
    assert mode_of(dest / "nvidia/cuda_nvcc/bin/ptxas") == 0o755
    assert mode_of(dest / "nvidia/cuda_nvcc/include/x.h") == 0o644
    soname = dest / "nvidia/cuda_nvcc/lib/libx.so.13"
    assert soname.is_symlink()
    assert soname.read_bytes() == b"elf"


def test_zip_without_unix_modes(tmp_path: Path, dest: Path) -> None:
    archive = make_zip(
        tmp_path / f"{TOP}.zip",
        [
            (f"{TOP}/", b"", None),
            (f"{TOP}/bin/", b"", None),
            (f"{TOP}/bin/nvcc.exe", b"MZ", None),
            (f"{TOP}\\include\\x.h", b"x", None),
        ],
    )
    assert extract_archive(archive, dest, strip_top=True).tops == [dest / "bin", dest / "include"]
    assert mode_of(dest / "bin") == 0o755
    assert mode_of(dest / "bin/nvcc.exe") == 0o644
    assert (dest / "include/x.h").read_bytes() == b"x"


# ---------------------------------------------------------------------------
# Hostile tar archives: refused whole, nothing written
# ---------------------------------------------------------------------------
def refused(archive: Path, dest: Path, match: str, **kwargs: object) -> None:
    with pytest.raises(IntegrityError, match=match) as caught:
        extract_archive(archive, dest, **kwargs)  # type: ignore[arg-type]
    assert str(caught.value).startswith(f"{archive.name}: ")
    assert list(dest.iterdir()) == []


HOSTILE_TARS: dict[str, tuple[list[Entry], str]] = {
    "dotdot": ([file("ok"), file("../evil")], r"\.\./evil: '\.\.' in path"),
    "absolute": ([file("ok"), file("/abs")], "/abs: absolute path"),
    "inner-dotdot": ([file("a/../../evil")], r"'\.\.' in path"),
    "backslash-dotdot": ([file("..\\evil")], r"'\.\.' in path"),
    "drive": ([file("C:\\x")], "drive letter"),
    "unc": ([file("\\\\server\\share\\x")], "absolute path"),
    "symlink-absolute": ([link("passwd", "/etc/passwd")], "absolute path '/etc/passwd'"),
    "symlink-outside": ([directory("d"), link("d/x", "../../outside")], "leads outside"),
    "symlink-dot-dot": ([link("x", "..")], "leads outside"),
    "two-step": ([link("escape", ".."), file("escape/evil")], "escape"),
    "two-step-inside-link": (
        [directory("sub"), link("escape", "sub"), file("escape/evil")],
        "escape/evil: path goes through the symlink escape",
    ),
    "two-step-reversed": (
        [directory("sub"), file("escape/evil"), link("escape", "sub")],
        "escape: is a symlink, but other members lie inside it",
    ),
    "chain": (
        [directory("sub"), link("sub/up", ".."), link("sub/x", "up/..")],
        r"sub/x: symlink to 'up/\.\.' leads outside",
    ),
    "chain-dot": ([link("a", "."), link("b", "a/a/a/..")], "leads outside"),
    "loop": ([link("a", "b"), link("b", "a")], "too many levels"),
    "hardlink": ([file("target"), link("hard", "target", tarfile.LNKTYPE)], "hard: hard link"),
    "chardev": ([special("null", tarfile.CHRTYPE)], "null: character device"),
    "blockdev": ([special("sda", tarfile.BLKTYPE)], "block device"),
    "fifo": ([special("pipe", tarfile.FIFOTYPE)], "pipe: FIFO"),
    "setuid": ([file("ok"), file("su", mode=0o4755)], "su: setuid bit"),
    "setgid": ([file("sg", mode=0o2755)], "setgid bit"),
    "sticky-dir": ([directory("tmp", 0o1777)], "sticky bit"),
    "duplicate": ([file("a/b"), file("a/b")], "a/b: duplicate member"),
    "duplicate-normalized": ([file("a/b"), file("./a//b")], "duplicate member"),
    "file-as-parent": ([file("a"), file("a/b")], "a/b: a is not a directory"),
    "parent-as-file": ([file("a/b"), file("a")], "is a file, but other members lie inside it"),
    "empty-name": ([file("./")], "empty name"),
}


@pytest.mark.parametrize("case", HOSTILE_TARS)
def test_hostile_tar_is_refused(tmp_path: Path, dest: Path, case: str) -> None:
    entries, match = HOSTILE_TARS[case]
    refused(make_tar(tmp_path / "evil.tar.xz", entries), dest, match)


@pytest.mark.parametrize(
    ("entries", "match"),
    [
        ([file(f"{TOP}/a"), file("other/b")], "other/b: outside the single top-level directory"),
        ([file(TOP)], "top-level entry is not a directory"),
        (
            [directory(f"{TOP}/"), directory(f"{TOP}/lib"), link(f"{TOP}/lib/x", "../../y")],
            "outside",
        ),
        ([], "empty archive"),
    ],
)
def test_strip_top_needs_one_top_directory(
    tmp_path: Path, dest: Path, entries: list[Entry], match: str
) -> None:
    refused(make_tar(tmp_path / "a.tar.xz", entries), dest, match, strip_top=True)


def test_symlink_inside_is_fine_before_strip_but_not_after(tmp_path: Path, dest: Path) -> None:
    archive = make_tar(tmp_path / "a.tar.xz", [directory(f"{TOP}/"), link(f"{TOP}/x", f"../{TOP}")])
    extract_archive(archive, dest)
    assert (dest / TOP / "x").is_symlink()
    empty = dest.parent / "empty"
    empty.mkdir()
    refused(archive, empty, "leads outside", strip_top=True)


def test_a_refused_last_member_leaves_nothing(tmp_path: Path, dest: Path) -> None:
    """The bad member is the last: a tar is written as it streams, then cleared whole."""
    entries = [*nvidia_entries(), file(f"{TOP}/../../evil")]
    refused(make_tar(tmp_path / "a.tar.xz", entries), dest, "in path", strip_top=True)


def test_a_tar_is_decompressed_once(
    tmp_path: Path, dest: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    payload = os.urandom(2**20)
    entries = [directory(f"{TOP}/"), file(f"{TOP}/lib/big.a", payload), *nvidia_entries()]
    archive = make_tar(tmp_path / "a.tar.xz", entries)
    inflated = 0
    real = lzma.LZMADecompressor

    class Counting:
        """LZMAFile's decompressor, counting what it produces (a rewind makes a new one)."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self._inner = real(*args, **kwargs)

        def decompress(self, data: bytes, max_length: int = -1) -> bytes:
            nonlocal inflated
            out = self._inner.decompress(data, max_length)
            inflated += len(out)
            return out

        def __getattr__(self, name: str) -> Any:
            return getattr(self._inner, name)

    monkeypatch.setattr(lzma, "LZMADecompressor", Counting)
    extract_archive(archive, dest, strip_top=True)
    assert (dest / "lib/big.a").read_bytes() == payload
    assert len(payload) < inflated < 1.5 * len(payload)


def test_a_tar_creates_its_symlinks_last(
    tmp_path: Path, dest: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A link could redirect a later member; none exists until every member is checked."""
    entries = [
        link("lib64", "lib"),
        directory("lib"),
        link("lib/libx.so", "libx.so.1"),
        file("lib/libx.so.1"),
        file("bin/tool"),
    ]
    archive = make_tar(tmp_path / "a.tar.xz", entries)
    order: list[str] = []
    original = write.write_member

    def spy(
        reader: object,
        member: policy.Member,
        destination: Path,
        made: set[tuple[str, ...]],
        digests: dict[str, str],
    ) -> None:
        order.append(member.kind)
        original(reader, member, destination, made, digests)  # type: ignore[arg-type]

    monkeypatch.setattr(write, "write_member", spy)
    extract_archive(archive, dest)
    assert order == ["dir", "file", "file", "symlink", "symlink"]
    assert (dest / "lib64/libx.so").read_bytes() == b"data\n"


# ---------------------------------------------------------------------------
# Hostile zips
# ---------------------------------------------------------------------------
REG, LNK = stat.S_IFREG | 0o644, stat.S_IFLNK | 0o777
HOSTILE_ZIPS: dict[str, tuple[list[ZipEntry], str]] = {
    "backslash-dotdot": ([("ok", b"", REG), ("..\\evil", b"x", REG)], r"'\.\.' in path"),
    "dotdot": ([("a/../../evil", b"x", None)], r"'\.\.' in path"),
    "absolute": ([("/abs", b"x", None)], "absolute path"),
    "drive": ([("C:\\Windows\\x", b"x", None)], "drive letter"),
    "unc": ([("\\\\server\\share\\x", b"x", None)], "absolute path"),
    "symlink-absolute": ([("passwd", b"/etc/passwd", LNK)], "absolute path '/etc/passwd'"),
    "symlink-outside": ([("x", b"../../outside", LNK)], "leads outside"),
    "two-step": ([("escape", b"..", LNK), ("escape/evil", b"x", REG)], "escape"),
    "two-step-inside": (
        [("sub/", b"", None), ("escape", b"sub", LNK), ("escape/evil", b"x", REG)],
        "goes through the symlink escape",
    ),
    "chardev": ([("null", b"", stat.S_IFCHR | 0o644)], "character device"),
    "fifo": ([("pipe", b"", stat.S_IFIFO | 0o644)], "FIFO"),
    "socket": ([("sock", b"", stat.S_IFSOCK | 0o644)], "socket"),
    "setuid": ([("su", b"x", stat.S_IFREG | 0o4755)], "su: setuid bit"),
    "duplicate": ([("a", b"1", REG), ("a", b"2", REG)], "a: duplicate member"),
    "duplicate-backslash": ([("a/b", b"1", REG), ("a\\b", b"2", REG)], "duplicate member"),
}


@pytest.mark.parametrize("case", HOSTILE_ZIPS)
def test_hostile_zip_is_refused(tmp_path: Path, dest: Path, case: str) -> None:
    entries, match = HOSTILE_ZIPS[case]
    refused(make_zip(tmp_path / "evil.whl", entries), dest, match)


# ---------------------------------------------------------------------------
# Limits and disk space
# ---------------------------------------------------------------------------
def test_too_many_members(tmp_path: Path, dest: Path) -> None:
    archive = make_tar(tmp_path / "a.tar.xz", [file(f"f{i}") for i in range(5)])
    refused(
        archive,
        dest,
        "f3: more than 3 members, over the limit",
        limits=ExtractLimits(max_members=3),
    )


def test_total_too_large(tmp_path: Path, dest: Path) -> None:
    archive = make_zip(
        tmp_path / "a.zip", [("a", os.urandom(600), REG), ("b", os.urandom(600), REG)]
    )
    refused(
        archive,
        dest,
        "b: more than 1000 bytes uncompressed",
        limits=ExtractLimits(max_total_bytes=1000),
    )


def test_zip_bomb_ratio(tmp_path: Path, dest: Path) -> None:
    archive = make_zip(tmp_path / "bomb.zip", [("zeros", bytes(2**20), REG)])
    refused(archive, dest, "compression-ratio limit.*zip bomb", limits=ExtractLimits(max_ratio=10))


def test_xz_bomb_hits_the_default_ratio(tmp_path: Path, dest: Path) -> None:
    archive = make_tar(tmp_path / "bomb.tar.xz", [file("zeros", bytes(8 * 2**20))])
    refused(archive, dest, "times the archive's .* bytes")


def test_not_enough_disk_space(tmp_path: Path, dest: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda _path: usage(100, 90, 10))
    archive = make_tar(tmp_path / "a.tar.xz", nvidia_entries())
    with pytest.raises(InsufficientSpaceError, match=r"needs \d+ bytes .* only 10 bytes"):
        extract_archive(archive, dest, strip_top=True)
    assert list(dest.iterdir()) == []


def test_disk_full_while_writing_leaves_nothing(
    tmp_path: Path, dest: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = write.write_file
    calls = []

    def fill_up(source: io.BufferedReader, path: str, member: policy.Member) -> str:
        calls.append(path)
        if len(calls) == 2:
            Path(path).write_bytes(b"partial")
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(source, path, member)

    monkeypatch.setattr(write, "write_file", fill_up)
    archive = make_tar(tmp_path / "a.tar.xz", nvidia_entries())
    with pytest.raises(InsufficientSpaceError, match=f"disk is full in {dest}: it needs"):
        extract_archive(archive, dest, strip_top=True)
    assert list(dest.iterdir()) == []


def test_interrupt_while_writing_leaves_nothing(
    tmp_path: Path, dest: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupt(*_args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(write, "write_file", interrupt)
    archive = make_tar(tmp_path / "a.tar.xz", nvidia_entries())
    with pytest.raises(KeyboardInterrupt):
        extract_archive(archive, dest, strip_top=True)
    assert list(dest.iterdir()) == []


# ---------------------------------------------------------------------------
# Corrupt archives
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("keep", [0.5, -4, -40])
def test_truncated_tar_xz(tmp_path: Path, dest: Path, keep: float) -> None:
    good = make_tar(tmp_path / "good.tar.xz", [file("a", os.urandom(4000)), file("b")]).read_bytes()
    cut = int(len(good) * keep) if isinstance(keep, float) else len(good) + int(keep)
    archive = tmp_path / "bad.tar.xz"
    archive.write_bytes(good[:cut])
    refused(archive, dest, "corrupt or truncated")


def test_tar_xz_in_several_streams_with_padding(tmp_path: Path, dest: Path) -> None:
    """xz allows concatenated streams and null padding between and after them."""
    tar = make_tar(tmp_path / "plain.tar", [file("a", os.urandom(300_000)), file("b")], "w")
    raw = tar.read_bytes()
    archive = tmp_path / "multi.tar.xz"
    archive.write_bytes(lzma.compress(raw[:100_000]) + lzma.compress(raw[100_000:]) + bytes(8))
    extract_archive(archive, dest)
    assert (dest / "a").read_bytes() == raw[1024 : 1024 + 300_000] or (
        dest / "a"
    ).stat().st_size == 300_000
    assert (dest / "b").read_bytes() == b"data\n"


def test_tar_xz_with_a_flipped_byte(tmp_path: Path, dest: Path) -> None:
    payload = os.urandom(2**20)
    good = make_tar(tmp_path / "good.tar.xz", [file("a", b"first"), file("big", payload)])
    raw = bytearray(good.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    archive = tmp_path / "bad.tar.xz"
    archive.write_bytes(bytes(raw))
    refused(archive, dest, "corrupt or truncated")


def test_unpacking_thread_stops_when_the_reader_closes(tmp_path: Path) -> None:
    archive = tmp_path / "zeros.xz"
    archive.write_bytes(lzma.compress(bytes(40 * 2**20), preset=0))
    stream = tar._ReadAhead(tar._xz_chunks(lambda: archive.open("rb")))
    assert stream.read(1000) == bytes(1000)
    time.sleep(0.2)  # the thread fills its queue and waits to put more
    with pytest.raises(io.UnsupportedOperation):
        stream.seek(10)
    stream.close()
    assert not stream._thread.is_alive()


def test_truncated_tar_gz_trailer(tmp_path: Path, dest: Path) -> None:
    good = make_tar(tmp_path / "good.tar.gz", [file("a", os.urandom(4000))], "w:gz").read_bytes()
    archive = tmp_path / "bad.tar.gz"
    archive.write_bytes(good[:-6])  # the CRC and length trailer
    refused(archive, dest, "corrupt or truncated")


def test_plain_tar_cut_at_a_header_boundary(tmp_path: Path, dest: Path) -> None:
    """tarfile itself would just stop at the missing header and report no error."""
    good = make_tar(tmp_path / "good.tar", [file("a", b"x" * 512), file("b")], "w")
    first_member_end = 512 * 4  # PAX header and its data, the header of a, a's data
    archive = tmp_path / "bad.tar"
    archive.write_bytes(good.read_bytes()[:first_member_end])
    refused(archive, dest, "without the end-of-archive marker")


def test_truncated_zip(tmp_path: Path, dest: Path) -> None:
    good = make_zip(tmp_path / "good.zip", [("a", os.urandom(4000), REG)]).read_bytes()
    archive = tmp_path / "bad.zip"
    archive.write_bytes(good[: len(good) // 2])
    refused(archive, dest, "corrupt or truncated")


def test_zip_with_bad_data_is_cleaned_up(tmp_path: Path, dest: Path) -> None:
    """A bad CRC shows only while writing: what was written before it is removed."""
    payload = b"MARKER" + bytes(100)
    archive = make_zip(
        tmp_path / "a.zip", [("first", b"fine", REG), ("second", payload, REG)], zipfile.ZIP_STORED
    )
    raw = archive.read_bytes()
    archive.write_bytes(raw.replace(b"MARKER", b"MALWAR"))
    refused(archive, dest, "corrupt or truncated.*CRC")


def test_garbage_named_tar_xz(tmp_path: Path, dest: Path) -> None:
    archive = tmp_path / "html.tar.xz"
    archive.write_bytes(b"<html>error</html>")
    refused(archive, dest, "corrupt or truncated")


# ---------------------------------------------------------------------------
# The destination
# ---------------------------------------------------------------------------
def test_destination_must_be_empty(tmp_path: Path, dest: Path) -> None:
    """So a second archive can never write through a symlink the first one made."""
    first = make_tar(tmp_path / "first.tar.xz", [directory("sub"), link("lib", "sub")])
    second = make_tar(tmp_path / "second.tar.xz", [file("lib/evil")])
    extract_archive(first, dest)
    with pytest.raises(CudaupError, match="not empty"):
        extract_archive(second, dest)
    assert not (dest / "sub/evil").exists()


def test_destination_must_exist(tmp_path: Path) -> None:
    archive = make_tar(tmp_path / "a.tar.xz", [file("a")])
    with pytest.raises(CudaupError, match="not an existing directory"):
        extract_archive(archive, tmp_path / "missing")


def test_unknown_archive_type(tmp_path: Path, dest: Path) -> None:
    archive = tmp_path / "a.rar"
    archive.write_bytes(b"Rar!")
    with pytest.raises(UsageError, match="unsupported archive type"):
        extract_archive(archive, dest)


def test_writing_never_goes_through_an_existing_symlink(tmp_path: Path, dest: Path) -> None:
    """The last line of defence, for names the checks saw as distinct (case folding)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (dest / "lib").symlink_to(outside)
    with pytest.raises(FileExistsError):
        write.make_dirs(dest, ("lib", "x"), set())
    member = policy.Member("lib", "file", 0o644, 0)
    (dest / "f").symlink_to(outside / "f")
    with pytest.raises(FileExistsError):
        write.write_file(io.BytesIO(b""), dest / "f", member)
    assert list(outside.iterdir()) == []


def test_big_zip_members_inflate_side_by_side(
    tmp_path: Path, dest: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    members = {f"lib/big{i}.so": os.urandom(2 * 2**20) for i in range(4)}
    archive = make_zip(tmp_path / "a.zip", [(name, data, REG) for name, data in members.items()])
    monkeypatch.setattr(write, "PARALLEL_WORKERS", 4)
    threads: set[int] = set()
    real = write.write_file

    def spy(source: io.BufferedIOBase, path: Path, member: policy.Member, **options: bool) -> str:
        threads.add(threading.get_ident())
        time.sleep(0.05)  # long enough that the pool hands the others to other threads
        return real(source, path, member, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(write, "write_file", spy)
    extract_archive(archive, dest)
    assert {name: (dest / name).read_bytes() for name in members} == members
    assert len(threads) > 1


class HookedReader(io.RawIOBase):
    """An archive read as a part file while it downloads: ``before_read(position,
    length)`` runs before each read (to hold bytes back, or to record what is asked)."""

    def __init__(self, archive: Path, before_read: Callable[[int, int], None]) -> None:
        self._file = archive.open("rb")
        self._before_read = before_read

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self._file.seek(offset, whence)

    def tell(self) -> int:
        return self._file.tell()

    def readinto(self, buffer: Any) -> int:
        self._before_read(self._file.tell(), len(memoryview(buffer)))
        return self._file.readinto(buffer)

    def close(self) -> None:
        self._file.close()
        super().close()


def test_a_big_member_whose_bytes_are_in_does_not_wait_for_the_one_before_it(
    tmp_path: Path, dest: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As while a wheel downloads: the first big member's bytes are held back until the
    second is written.  With the default workers (one on 2 CPUs before issue #27) the
    second waited behind the first and this timed out; now it is written meanwhile."""
    members = {f"lib/big{i}.so": os.urandom(2 * 2**20) for i in range(2)}
    archive = make_zip(tmp_path / "a.zip", [(name, data, REG) for name, data in members.items()])
    first = zipfile.ZipFile(archive).getinfo("lib/big0.so")
    held = range(first.header_offset, first.header_offset + 30 + first.compress_size)
    second_written = threading.Event()

    def held_back(position: int, _length: int) -> None:  # the first member has not arrived
        if position in held and not second_written.wait(timeout=10):
            raise AssertionError("the second member was not written while the first waited")

    real = write.write_file

    def spy(source: io.BufferedIOBase, path: Path, member: policy.Member, **options: bool) -> str:
        digest = real(source, path, member, **options)  # type: ignore[arg-type]
        if member.name == "lib/big1.so":
            second_written.set()
        return digest

    monkeypatch.setattr(write, "write_file", spy)
    extract_archive(
        archive, dest, opener=lambda: io.BufferedReader(HookedReader(archive, held_back))
    )
    assert {name: (dest / name).read_bytes() for name in members} == members
