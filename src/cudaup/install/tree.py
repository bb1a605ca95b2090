"""What an unpacked tree holds, written down when it is made and checked whenever it is used.

The unpacked cache keeps one tree per archive, and installs hard-link its files:
a file changed there (truncated, replaced, made writable, or written through a
toolkit's link to the same inode) would be published by the next install.  So
each tree has a :class:`TreeManifest` beside it: every entry's relative path, type,
mode, size, and for a file its sha256 (computed as the archive was extracted,
never by reading the tree back; for a wheel, the one its RECORD lists), for a
symlink its target.

Checking a tree against its manifest (:func:`compare`) costs one ``lstat`` per
entry and catches every change of type, mode or size and every entry added or
removed; :func:`check_digests` reads every byte and catches the rest.  A
:class:`Stamp` beside the manifest records when the digests were last found
right: the boot (``/proc/sys/kernel/random/boot_id``) and a fingerprint of each
file's inode, ctime, mtime, size and mode.  A tree is hashed again when the machine
has restarted since, or when any file was replaced or written since (its inode or
ctime moved), or when asked (``--verify``).  The ctime is what makes the stamp
hold: ``os.utime`` (``touch -r``, ``cp -p``, ``rsync -t``) can put an mtime back,
but every write, chmod, link or utime sets the ctime to the clock, and only
setting the machine's clock back could undo that.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from cudaup.core.names import check_relative_path
from cudaup.errors import CudaupError

Kind = Literal["file", "dir", "symlink"]
SCHEMA = 1
#: Larger than the manifest of any real tree (NVIDIA's biggest: a few thousand entries).
MAX_DOCUMENT = 64 * 2**20
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")
_KINDS: Mapping[int, Kind] = {stat.S_IFREG: "file", stat.S_IFDIR: "dir", stat.S_IFLNK: "symlink"}


class DamagedTreeError(Exception):
    """A tree, its manifest or its stamp is not what it should be; the message says how."""


class ForeignTreeError(Exception):
    """Part of a cached tree belongs to another user; the message says which and whose."""


@dataclass(frozen=True, slots=True)
class TreeEntry:
    path: str  # relative, "/"-separated: "bin/nvcc"
    kind: Kind
    mode: int = 0  # permission bits; 0 for a symlink
    size: int = 0  # files only
    sha256: str = ""  # files only
    target: str = ""  # symlinks only

    @property
    def parts(self) -> tuple[str, ...]:
        return tuple(self.path.split("/"))


@dataclass(frozen=True, slots=True)
class TreeManifest:
    """Every entry of one unpacked tree, and the archive it came from."""

    archive: str
    sha256: str  # the archive's
    entries: tuple[TreeEntry, ...]
    #: what was checked when the tree was made ("sha256 of the download", "wheel RECORD")
    checked: tuple[str, ...] = ()

    @property
    def file_bytes(self) -> int:
        return sum(entry.size for entry in self.entries)

    def to_bytes(self) -> bytes:
        rows = []
        for entry in self.entries:
            row: dict[str, Any] = {"path": entry.path, "type": entry.kind}
            if entry.kind == "symlink":
                row["target"] = entry.target
            else:
                row["mode"] = entry.mode
            if entry.kind == "file":
                row["size"], row["sha256"] = entry.size, entry.sha256
            rows.append(row)
        document = {
            "schema": SCHEMA,
            "archive": self.archive,
            "sha256": self.sha256,
            "checked": list(self.checked),
            "entries": rows,
        }
        return json.dumps(document, separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> TreeManifest:
        """Parse and check a manifest; anything malformed raises :class:`DamagedTreeError`."""
        try:
            document = json.loads(data)
        except ValueError as exc:
            raise DamagedTreeError(f"its manifest is not JSON ({exc})") from None
        if not isinstance(document, dict) or document.get("schema") != SCHEMA:
            raise DamagedTreeError("its manifest is not a schema-1 manifest")
        archive, sha256, rows = (
            document.get("archive"),
            document.get("sha256"),
            document.get("entries"),
        )
        if (
            not isinstance(archive, str)
            or not isinstance(sha256, str)
            or not isinstance(rows, list)
        ):
            raise DamagedTreeError("its manifest lacks the archive, its sha256 or the entries")
        checked = document.get("checked", [])
        if not isinstance(checked, list) or not all(isinstance(c, str) for c in checked):
            raise DamagedTreeError("its manifest has a malformed list of checks")
        entries = tuple(_entry(row) for row in rows)
        if len({entry.path for entry in entries}) != len(entries):
            raise DamagedTreeError("its manifest lists a path twice")
        return cls(archive, sha256, entries, tuple(checked))


def _checked_path(path: object) -> str:
    """A manifest path: plain names joined by ``/``; it chooses where links are made."""
    try:
        return check_relative_path(path, field="path", error=CudaupError)
    except CudaupError as exc:
        raise DamagedTreeError(f"its manifest has a bad path: {exc}") from None


def _entry(row: object) -> TreeEntry:
    if not isinstance(row, dict):
        raise DamagedTreeError("its manifest has an entry that is not an object")
    path, kind = _checked_path(row.get("path")), row.get("type")
    mode, size, sha256, target = (
        row.get("mode", 0),
        row.get("size", 0),
        row.get("sha256", ""),
        row.get("target", ""),
    )
    ok = (
        isinstance(mode, int)
        and 0 <= mode <= 0o7777
        and isinstance(size, int)
        and size >= 0
        and isinstance(sha256, str)
        and isinstance(target, str)
    )
    if kind not in {"file", "dir", "symlink"} or not ok:
        raise DamagedTreeError(f"its manifest has a malformed entry for {path}")
    if kind == "file" and not _SHA256_HEX.fullmatch(sha256):
        raise DamagedTreeError(f"its manifest has no sha256 for {path}")
    if kind == "symlink" and not target:
        raise DamagedTreeError(f"its manifest has no target for {path}")
    return TreeEntry(path, kind, mode, size, sha256, target)


# ---------------------------------------------------------------------------
# What is on disk
# ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Seen:
    """One entry as ``lstat`` found it."""

    path: str
    kind: Kind | None  # None: a type no tree holds (device, FIFO, socket)
    mode: int
    size: int
    uid: int
    inode: int
    mtime_ns: int
    #: set by the kernel on every change to the inode (write, chmod, link, utime):
    #: unlike the mtime, no call puts it back
    ctime_ns: int
    target: str


def scan(root: Path) -> dict[str, Seen]:
    """Every entry below ``root`` (not ``root`` itself), by relative path; links not followed."""
    found: dict[str, Seen] = {}
    pending = [("", str(root))]
    while pending:
        prefix, directory = pending.pop()
        with os.scandir(directory) as entries:
            for entry in entries:
                info = entry.stat(follow_symlinks=False)
                relative = prefix + entry.name
                kind = _KINDS.get(stat.S_IFMT(info.st_mode))
                target = str(Path(entry.path).readlink()) if kind == "symlink" else ""
                found[relative] = Seen(
                    relative,
                    kind,
                    stat.S_IMODE(info.st_mode) if kind != "symlink" else 0,
                    info.st_size if kind == "file" else 0,
                    info.st_uid,
                    info.st_ino,
                    info.st_mtime_ns,
                    info.st_ctime_ns,
                    target,
                )
                if kind == "dir":
                    pending.append((relative + "/", entry.path))
    return found


def describe(found: Mapping[str, Seen], digests: Mapping[str, str]) -> tuple[TreeEntry, ...]:
    """The manifest entries of a tree just written (``found``: its :func:`scan`), with the
    digests computed as it was."""
    entries = []
    for path, seen in sorted(found.items(), key=lambda item: item[0].split("/")):
        _checked_path(path)  # what a manifest may not hold, a tree may not either
        if seen.kind is None:
            raise DamagedTreeError(f"{path} is neither a file, a directory nor a symlink")
        digest = digests.get(path, "") if seen.kind == "file" else ""
        if seen.kind == "file" and not digest:
            raise DamagedTreeError(f"{path} appeared in the tree without being extracted")
        entries.append(TreeEntry(path, seen.kind, seen.mode, seen.size, digest, seen.target))
    return tuple(entries)


def foreign(seen: Iterable[Seen], uid: int) -> str | None:
    """The first entry another user owns, in words; None when ``uid`` owns them all."""
    for entry in seen:
        if entry.uid != uid:
            return f"{entry.path} belongs to uid {entry.uid}"
    return None


def compare(seen: Mapping[str, Seen], manifest: TreeManifest) -> str | None:
    """The first way the tree differs from its manifest (types, modes, sizes, targets,
    entries missing or added), in words; None when it matches."""
    listed = {entry.path: entry for entry in manifest.entries}
    for path, entry in listed.items():
        found = seen.get(path)
        if found is None:
            return f"{path} is missing"
        if found.kind != entry.kind:
            return f"{path} is a {found.kind or 'special file'}, not a {entry.kind}"
        if found.mode != entry.mode:
            writable = " (writable by group or others)" if found.mode & 0o022 else ""
            return f"{path} has mode {found.mode:o}{writable}, not {entry.mode:o}"
        if found.size != entry.size:
            return f"{path} has {found.size} bytes, not {entry.size}"
        if found.target != entry.target:
            return f"{path} points to {found.target!r}, not {entry.target!r}"
    extra = sorted(set(seen) - set(listed))
    if extra:
        return f"{extra[0]} is not part of the archive"
    return None


def check_digests(root: Path, manifest: TreeManifest) -> str | None:
    """The first file whose content is not what the manifest says, in words; or None."""
    for entry in manifest.entries:
        if entry.kind != "file":
            continue
        fd = os.open(root.joinpath(*entry.parts), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as handle:
            digest = hashlib.file_digest(handle, "sha256").hexdigest()
        if digest != entry.sha256:
            return f"{entry.path} does not hold the bytes the archive gave it (sha256 differs)"
    return None


# ---------------------------------------------------------------------------
# When the digests were last found right
# ---------------------------------------------------------------------------
def fingerprint(seen: Mapping[str, Seen]) -> str:
    """A digest of each file's inode, ctime, mtime, size and mode: writing or replacing
    a file (through any hard link) moves its ctime or its inode, and so this, whatever
    is done to its mtime afterwards."""
    digest = hashlib.sha256()
    for path in sorted(seen):
        entry = seen[path]
        if entry.kind == "file":
            digest.update(
                f"{path}\0{entry.inode}\0{entry.ctime_ns}\0{entry.mtime_ns}\0{entry.size}"
                f"\0{entry.mode}\n".encode()
            )
    return digest.hexdigest()


def relinked(before: Mapping[str, Seen], after: Mapping[str, Seen]) -> str | None:
    """How a tree changed between two scans other than by hard links made to its files
    or removed (which move each file's ctime and link count, and nothing else), in
    words; None when it did not."""
    if before.keys() != after.keys():
        return "its entries changed while it was being linked"
    for path, was in before.items():
        now = after[path]
        if (now.kind, now.mode, now.size, now.uid, now.inode, now.mtime_ns, now.target) != (
            was.kind,
            was.mode,
            was.size,
            was.uid,
            was.inode,
            was.mtime_ns,
            was.target,
        ):
            return f"{path} changed while it was being linked"
    return None


@dataclass(frozen=True, slots=True)
class Stamp:
    boot: str
    fingerprint: str

    def to_bytes(self) -> bytes:
        return json.dumps(
            {"schema": SCHEMA, "boot": self.boot, "fingerprint": self.fingerprint}
        ).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> Stamp | None:
        with contextlib.suppress(ValueError):
            document = json.loads(data)
            if isinstance(document, dict) and document.get("schema") == SCHEMA:
                boot, print_ = document.get("boot"), document.get("fingerprint")
                if isinstance(boot, str) and isinstance(print_, str):
                    return cls(boot, print_)
        return None


def read_owned(path: Path, uid: int, limit: int = MAX_DOCUMENT) -> bytes:
    """The bytes of a regular file that ``uid`` owns and no one else may write.

    Opened without following a link and checked on the open descriptor, so what is
    read is what was checked.  Raises :class:`FileNotFoundError` when there is none,
    :class:`ForeignTreeError` when another user owns it, :class:`DamagedTreeError` otherwise.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        raise
    except OSError as exc:
        with contextlib.suppress(OSError):
            owner = path.lstat().st_uid
            if owner != uid:
                raise ForeignTreeError(f"{path.name} belongs to uid {owner}") from None
        raise DamagedTreeError(f"{path.name} cannot be opened ({exc.strerror})") from None
    try:
        info = os.fstat(fd)
        if info.st_uid != uid:
            raise ForeignTreeError(f"{path.name} belongs to uid {info.st_uid}")
        if not stat.S_ISREG(info.st_mode):
            raise DamagedTreeError(f"{path.name} is not a regular file")
        if info.st_mode & 0o022:
            raise DamagedTreeError(f"{path.name} is writable by group or others")
        if info.st_size > limit:
            raise DamagedTreeError(f"{path.name} is over {limit} bytes")
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as handle:
        return handle.read(limit + 1)
