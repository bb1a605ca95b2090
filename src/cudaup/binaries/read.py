"""Reading CUDA binaries from where they are: files, wheels (local or by URL), environments.

The parsing is :mod:`cudaup.core.fatbin`'s (pure); this edge only opens things.  A
file is mapped read-only (the parser touches the pages of headers and of the magic
scan, never copies the file); a wheel's members are read from the zip into memory,
never unpacked to disk; a remote wheel is read by HTTP range requests (its central
directory, then only the members that can hold device code) and says how many bytes
that took (:mod:`.remote`, apart so that reading local files loads no HTTP client).
An installed environment is read per distribution, from the files its
``RECORD`` lists.
"""

from __future__ import annotations

import csv
import io
import mmap
import os
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any

from cudaup.core.fatbin import Entry, FatbinTarget, may_hold_device_code, read_entries
from cudaup.errors import PermissionDeniedError, SourceFormatError, UsageError
from cudaup.net.ranged_file import RangedFile, wheel_archive
from cudaup.util.reading import read_small

#: Members no CUDA binary hides in: skipped without reading a byte of them.
TEXT_SUFFIXES = frozenset(
    [
        ".py",
        ".pyc",
        ".pyi",
        ".pyx",
        ".pxd",
        ".h",
        ".hh",
        ".hpp",
        ".hxx",
        ".cuh",
        ".inl",
        ".c",
        ".cc",
        ".cpp",
        ".cu",
        ".txt",
        ".md",
        ".rst",
        ".json",
        ".toml",
        ".cfg",
        ".ini",
        ".yaml",
        ".yml",
        ".typed",
        ".pth",
        ".html",
        ".js",
        ".css",
        ".cmake",
        ".pc",
        ".jinja",
        ".csv",
        ".png",
        ".svg",
        ".ipynb",
        ".sh",
        ".bat",
        ".in",
        ".proto",
        ".pyi",
        ".license",
        ".whl",
    ]
)
#: The largest member or file read; a bigger one is refused, not loaded.
MAX_MEMBER = 8 << 30


@dataclass(frozen=True, slots=True)
class BinaryFile:
    """One file (or wheel member) holding device code."""

    name: str
    entries: tuple[Entry, ...]

    @property
    def targets(self) -> list[FatbinTarget]:
        return sorted({e.target for e in self.entries})

    def to_json(self) -> dict[str, Any]:
        compressed: dict[str, int] = {}
        for entry in self.entries:
            if entry.compression:
                compressed[entry.compression] = compressed.get(entry.compression, 0) + 1
        return {
            "name": self.name,
            "entries": len(self.entries),
            "compressed": compressed,
            "targets": [t.to_json() for t in self.targets],
            "sass": sorted({t.name for t in self.targets if t.kind == "sass"}),
            "ptx": sorted({t.name for t in self.targets if t.kind == "ptx"}),
            "embedded": sum(1 for e in self.entries if e.origin == "embedded"),
        }


@dataclass(slots=True)
class Package:
    """A wheel, an installed distribution or one file named on the command line."""

    name: str
    files: list[BinaryFile] = field(default_factory=list)
    #: for a remote wheel: its size and the bytes read to answer
    size: int | None = None
    read: int | None = None

    @property
    def targets(self) -> list[FatbinTarget]:
        return sorted({t for f in self.files for t in f.targets})

    def to_json(self) -> dict[str, Any]:
        targets = self.targets
        return {
            "name": self.name,
            "sass": sorted({t.name for t in targets if t.kind == "sass"}),
            "ptx": sorted({t.name for t in targets if t.kind == "ptx"}),
            "targets": [t.to_json() for t in targets],
            "files": [f.to_json() for f in self.files],
            "size": self.size,
            "bytes_read": self.read,
        }


def read_file(path: Path) -> BinaryFile | None:
    """The device code of one file, or None when it is no CUDA binary."""
    try:
        with path.open("rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size == 0:
                return None
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
                entries = read_entries(data, str(path))
    except PermissionError:
        raise PermissionDeniedError(f"cannot read {path}: permission denied") from None
    except OSError as exc:
        raise SourceFormatError(f"cannot read {path}: {exc.strerror or exc}") from None
    return None if entries is None else BinaryFile(str(path), tuple(entries))


def _skipped(name: str) -> bool:
    path = PurePosixPath(name)
    top = path.parts[0] if path.parts else ""
    return name.endswith("/") or path.suffix.lower() in TEXT_SUFFIXES or top.endswith(".dist-info")


def _members(archive: zipfile.ZipFile, where: str) -> Iterator[BinaryFile]:
    for info in archive.infolist():
        if _skipped(info.filename) or info.file_size < 16:
            continue
        if info.file_size > MAX_MEMBER:
            raise SourceFormatError(
                f"{where}: {info.filename} is {info.file_size} bytes, more than cudaup reads"
            )
        with archive.open(info) as member:
            head = member.read(64)
            if not may_hold_device_code(head):
                continue  # neither ELF, fatbin nor PTX: the rest is not read
            data = head + member.read()
        entries = read_entries(data, f"{where}!{info.filename}")
        if entries:
            yield BinaryFile(info.filename, tuple(entries))


def read_zip(open_zip: Callable[[], IO[bytes] | RangedFile], where: str) -> list[BinaryFile]:
    with wheel_archive(open_zip(), where) as archive:
        return list(_members(archive, where))


def read_wheel(path: Path) -> Package:
    try:
        files = read_zip(lambda: path.open("rb"), str(path))
    except PermissionError:
        raise PermissionDeniedError(f"cannot read {path}: permission denied") from None
    return Package(path.name, files, size=path.stat().st_size)


def read_paths(paths: Iterable[Path]) -> Iterator[BinaryFile]:
    """Every CUDA binary among ``paths`` (files; others are skipped)."""
    for path in paths:
        if path.is_file() and not _skipped(path.name):
            found = read_file(path)
            if found is not None and found.entries:
                yield found


def _project_name(dist_info: Path) -> str:
    """The distribution's own name (METADATA's ``Name``), else the directory's."""
    fallback = dist_info.name.removesuffix(".dist-info").rsplit("-", 1)[0]
    try:
        with (dist_info / "METADATA").open("rb") as handle:
            head = handle.read(64 * 1024).decode("utf-8", errors="replace")
    except OSError:
        return fallback
    for line in head.splitlines():
        if not line.strip():
            break  # the headers end at the first blank line
        if line.lower().startswith("name:"):
            return line.split(":", 1)[1].strip() or fallback
    return fallback


def read_local(path: Path) -> Package:
    """``arch PATH``: a wheel (per member), a directory (every file below) or one file."""
    if not path.exists():
        raise UsageError(f"{path} does not exist")
    if path.is_dir():
        return Package(str(path), list(read_paths(sorted(path.rglob("*")))))
    if not path.is_file():  # a FIFO or a device would block or never end
        raise UsageError(f"{path} is neither a file nor a directory")
    if path.suffix == ".whl":
        return read_wheel(path)
    found = read_file(path)
    return Package(str(path), [found] if found is not None else [])


def installed_packages(site: Path) -> Iterator[Package]:
    """Each distribution installed in ``site`` with device code, from its ``RECORD``."""
    for dist_info in sorted(site.glob("*.dist-info")):
        record = dist_info / "RECORD"
        try:
            text = read_small(record).decode(errors="replace")
        except OSError:
            continue
        name = _project_name(dist_info)
        files: list[Path] = []
        for row in csv.reader(io.StringIO(text)):
            relative = PurePosixPath(row[0]) if row else None
            if relative is None or relative.is_absolute() or ".." in relative.parts:
                continue  # a RECORD names files inside the site; others are not read
            if not _skipped(str(relative)):
                files.append(site / relative)
        binaries = list(read_paths(files))
        if binaries:
            yield Package(name, binaries)
