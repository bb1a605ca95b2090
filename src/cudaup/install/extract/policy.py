"""Which archive members may be written: the checks, pure.

A matching checksum only says the archive is the one the index published; it
says nothing about what the archive does when unpacked, so every member is
checked before it is written.  A zip's central
directory lists every member up front, so all are checked before the first
write; a tar is read once, front to back (decompressing it twice would double
the time), so each member is checked against all before it, and symlinks are
created only after the last member has been checked:

* names are relative, with no ``..``, no NUL and no drive letter; a backslash
  counts as a separator, because Windows reads it as one;
* only files, directories and symlinks: hard links, devices, FIFOs, sockets
  and sparse files are refused (NVIDIA archives and wheels have none);
* a symlink is relative and, followed from its own directory through any other
  symlink of the archive, stays inside the tree; no member lies below a symlink
  (the two-step attack: ``escape -> ..``, then ``escape/evil``);
* no setuid, setgid or sticky bit;
* member count, uncompressed total, expansion over the archive's own size
  (zip and xz bombs) and free disk space are all checked up front.

Writing then never follows or replaces anything: files are opened with
``O_CREAT | O_EXCL | O_NOFOLLOW`` inside directories made here, in a
destination that must start empty.  A failure while writing (corrupt data,
disk full, Ctrl-C) removes what was written, so the destination is left empty.
"""

from __future__ import annotations

import re
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, BinaryIO, Literal, Protocol

from cudaup.errors import IntegrityError

CHUNK = 1024 * 1024
#: Symlinks followed while resolving one target; Linux's own limit per lookup.
MAX_SYMLINK_HOPS = 40
MAX_TARGET_BYTES = 4095

Kind = Literal["file", "dir", "symlink"]

_DRIVE = re.compile(r"^[A-Za-z]:")
_SPECIAL_BITS = (
    (stat.S_ISUID, "setuid bit"),
    (stat.S_ISGID, "setgid bit"),
    (stat.S_ISVTX, "sticky bit"),
)
#: Opens the archive's bytes for reading: its file, or a download still arriving.
Opener = Callable[[], BinaryIO]


@dataclass(frozen=True, slots=True)
class ExtractLimits:
    """Caps on what one archive may expand to; over any of them it is refused whole."""

    max_members: int = 200_000
    #: Uncompressed bytes of all files together.
    max_total_bytes: int = 64 * 2**30
    #: Uncompressed bytes over the archive file's size (zip bombs, xz bombs).
    max_ratio: float = 200.0


DEFAULT_LIMITS = ExtractLimits()


@dataclass(frozen=True, slots=True)
class Member:
    name: str  # as stored in the archive, for messages
    kind: Kind
    mode: int  # permission bits as stored, special bits included
    size: int = 0  # uncompressed bytes, files only
    target: str = ""  # symlinks only
    ref: Any = None  # the TarInfo or ZipInfo to read the data back with
    parts: tuple[str, ...] = ()  # the path below the destination, set by plan_members


class UnsafeMemberError(Exception):
    """A member breaks a rule; the message is the reason, the caller adds the names."""


def refusal(archive: Path, member: str, reason: str) -> IntegrityError:
    shown = member if member.isprintable() else repr(member)
    return IntegrityError(f"{archive.name}: {shown}: {reason}")


class Reader(Protocol):
    size: int  # of the archive file, for the compression-ratio limit

    def members(self) -> Iterator[Member]: ...
    def open(self, member: Member) -> IO[bytes]: ...
    def close(self) -> None: ...


class Stream(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...
    def tell(self) -> int: ...
    def seek(self, pos: int, whence: int = 0, /) -> int: ...
    def close(self) -> None: ...


class Checker:
    """The checks of every member, fed one member at a time in archive order."""

    def __init__(self, archive: Path, size: int, limits: ExtractLimits, strip_top: bool) -> None:
        self.archive = archive
        self.archive_size = max(size, 1)
        self.limits = limits
        self.strip_top = strip_top
        self.kinds: dict[tuple[str, ...], Kind] = {}
        self.parents: set[tuple[str, ...]] = set()
        self.links: dict[tuple[str, ...], str] = {}
        self.link_names: dict[tuple[str, ...], str] = {}
        self.count = 0
        self.total = 0
        self.top: str | None = None

    def add(self, member: Member) -> Member | None:
        """The member with its path set, or None for one that creates nothing (``./``)."""
        self.count += 1
        self.total += member.size
        try:
            _check_limits(self.count, self.total, self.archive_size, self.limits)
            _check_mode(member.mode)
            parts = _split(member.name)
            if self.strip_top and parts:
                self.top = self.top or parts[0]
                parts = _strip(parts, self.top, member.kind)
            if not parts:
                if member.kind == "dir":
                    return None  # "./" or the stripped top directory itself
                raise UnsafeMemberError("empty name")
            _check_place(parts, member.kind, self.kinds, self.parents)
        except UnsafeMemberError as exc:
            raise refusal(self.archive, member.name, str(exc)) from None
        if member.kind == "symlink":
            self.links[parts] = member.target
            self.link_names[parts] = member.name
        # Built directly: dataclasses.replace costs more than every check above together.
        return Member(
            member.name, member.kind, member.mode, member.size, member.target, member.ref, parts
        )

    def finish(self) -> None:
        """The checks that need every member: where each symlink leads."""
        if self.strip_top and self.top is None:
            raise IntegrityError(
                f"{self.archive.name}: empty archive, expected one top-level directory"
            )
        for parts, target in self.links.items():
            try:
                _resolve(parts[:-1], target, self.links)
            except UnsafeMemberError as exc:
                raise refusal(self.archive, self.link_names[parts], str(exc)) from None


def plan_members(
    reader: Reader, archive: Path, limits: ExtractLimits, strip_top: bool
) -> list[Member]:
    """Check every member and return those to write, with their paths set."""
    checker = Checker(archive, reader.size, limits, strip_top)
    planned = [
        checked for member in reader.members() if (checked := checker.add(member)) is not None
    ]
    checker.finish()
    return planned


def _check_limits(count: int, total: int, archive_size: int, limits: ExtractLimits) -> None:
    if count > limits.max_members:
        raise UnsafeMemberError(
            f"more than {limits.max_members} members, over the limit (a zip bomb?)"
        )
    if total > limits.max_total_bytes:
        raise UnsafeMemberError(
            f"more than {limits.max_total_bytes} bytes uncompressed, over the limit (a zip bomb?)"
        )
    if total > limits.max_ratio * archive_size:
        raise UnsafeMemberError(
            f"expands to more than {limits.max_ratio:g} times the archive's {archive_size} "
            "bytes, over the compression-ratio limit (a zip bomb?)"
        )


def _check_mode(mode: int) -> None:
    for bit, name in _SPECIAL_BITS:
        if mode & bit:
            raise UnsafeMemberError(name)


def _split(name: str) -> tuple[str, ...]:
    """The components of a member name; ``.`` and empty ones dropped."""
    if not name:
        raise UnsafeMemberError("empty name")
    if "\x00" in name:
        raise UnsafeMemberError("NUL in name")
    path = name.replace("\\", "/")
    if path.startswith("/"):
        raise UnsafeMemberError("absolute path")
    parts = tuple(part for part in path.split("/") if part not in {"", "."})
    if ".." in parts:
        raise UnsafeMemberError("'..' in path")
    if ":" in path and any(_DRIVE.match(part) for part in parts):
        # Windows joins "C:x" as a drive-relative path, anywhere in the name.
        raise UnsafeMemberError("drive letter in path")
    return parts


def _strip(parts: tuple[str, ...], top: str, kind: Kind) -> tuple[str, ...]:
    if parts[0] != top:
        raise UnsafeMemberError(f"outside the single top-level directory {top}/")
    if len(parts) == 1 and kind != "dir":
        raise UnsafeMemberError("the top-level entry is not a directory")
    return parts[1:]


def _check_place(
    parts: tuple[str, ...],
    kind: Kind,
    kinds: dict[tuple[str, ...], Kind],
    parents: set[tuple[str, ...]],
) -> None:
    """No duplicates, and every parent is a plain directory, in any member order."""
    if parts in kinds:
        raise UnsafeMemberError("duplicate member")
    if parts in parents and kind != "dir":
        raise UnsafeMemberError(f"is a {kind}, but other members lie inside it")
    # A parent already in ``parents`` was found a directory (or not yet a member), and so
    # were all above it; a member made later at one of them is refused by the test above.
    if parts[:-1] in parents:
        kinds[parts] = kind
        return
    for depth in range(1, len(parts)):
        prefix = parts[:depth]
        above = kinds.get(prefix, "dir")
        if above == "symlink":
            raise UnsafeMemberError(f"path goes through the symlink {'/'.join(prefix)}")
        if above != "dir":
            raise UnsafeMemberError(f"{'/'.join(prefix)} is not a directory")
        parents.add(prefix)
    kinds[parts] = kind


def _resolve(
    start: tuple[str, ...], target: str, links: dict[tuple[str, ...], str]
) -> tuple[str, ...]:
    """Follow ``target`` from directory ``start`` through the archive's own symlinks.

    Each link met on the way is expanded where it is met, as the kernel does,
    so ``up -> ..`` then ``x -> up/..`` is seen to leave the tree.  Purely
    lexical otherwise: a ``..`` that would climb above the root is refused even
    if the kernel would have stopped at a missing component first.
    """
    hops = 0

    def walk(at: list[str], target: str) -> list[str]:
        nonlocal hops
        if not target or "\x00" in target:
            raise UnsafeMemberError("empty symlink target")
        path = target.replace("\\", "/")
        if path.startswith("/") or _DRIVE.match(path):
            raise UnsafeMemberError(f"symlink to absolute path {target!r}")
        for part in path.split("/"):
            if part in {"", "."}:
                continue
            if part == "..":
                if not at:
                    raise UnsafeMemberError(f"symlink to {target!r} leads outside the tree")
                at.pop()
                continue
            at.append(part)
            linked = links.get(tuple(at))
            if linked is not None:
                hops += 1
                if hops > MAX_SYMLINK_HOPS:
                    raise UnsafeMemberError("too many levels of symbolic links")
                at = walk(at[:-1], linked)
        return at

    return tuple(walk(list(start), target))
