"""Where an environment's snapshots live, what each records, and the journal that makes
every swap of the environment recoverable.

The store is beside the environment, on its filesystem (hard links and renames never
cross one): for ``/proj/.venv`` it is ``/proj/.cudaup-snapshots/.venv/``::

    lock                 held by every upgrade and rollback of this environment (0644)
    <id>/snapshot.json   the record: environment, time, lines before and after, changes,
                         and the journal of the swap in progress
    <id>/manifest.json   the fingerprint of tree/ (type, mode, size, mtime, inode of each entry)
    <id>/tree/           the environment as it was (a hard-linked clone)
    work-<id>/           the environment being upgraded, until it replaces the real one

A swap is journaled before it happens: the record names the tree moving in (by its
root's inode) and, where the filesystem cannot exchange two directories in one step,
the name the old one is moved aside to.  :meth:`SnapshotStore.recover`, run under the
lock before anything else, reads the journal of a process that was killed and finishes
or undoes its swap, so the environment is always one whole tree.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import json
import os
import re
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cudaup.core.documents import load_json
from cudaup.errors import (
    ConflictError,
    LockedError,
    PermissionDeniedError,
    SourceFormatError,
    UntrustedPathError,
)
from cudaup.upgrade.clone import Entry, Fingerprint, exchange
from cudaup.util.atomic import atomic_write
from cudaup.util.faults import Place, remove_tree
from cudaup.util.locks import locked
from cudaup.util.paths import make_directory
from cudaup.util.reading import read_regular
from cudaup.util.trust import directories_problem

STORE = ".cudaup-snapshots"
RECORD = "snapshot.json"
MANIFEST = "manifest.json"
#: The time to the microsecond (ids sort as the snapshots were taken), and a random tail.
_ID = re.compile(r"^\d{8}T\d{12}Z-[0-9a-f]{6}$")
#: The environment's lock: written by those who may change the environment, lockable by all.
LOCK_MODE = 0o644
#: A record is a few kilobytes; a manifest about 100 bytes an entry.
MAX_RECORD = 16 << 20
MAX_MANIFEST = 1 << 30
#: taken: kept, nothing else done yet; applying: an upgrade's work tree is being built
#: and swapped in; applied: the upgrade replaced the environment; interrupted: the
#: process died before its swap (the environment is what the snapshot holds);
#: restoring: a rollback is swapping it back.
STATUSES = {"taken", "applying", "applied", "interrupted", "restoring"}
RESTORABLE = {"applied", "interrupted"}

Echo = Callable[[str], None]


def _quiet(_message: str) -> None:
    pass


@dataclass
class EnvironmentSnapshot:
    id: str
    path: Path
    record: dict[str, Any]

    @property
    def tree(self) -> Path:
        return self.path / "tree"

    @property
    def status(self) -> str:
        return str(self.record["status"])

    @property
    def journal(self) -> dict[str, Any]:
        journal = self.record.get("journal")
        return journal if isinstance(journal, dict) else {}

    def fingerprint(self) -> Fingerprint:
        what = str(self.path / MANIFEST)
        try:
            data = _read_file(self.path / MANIFEST, MAX_MANIFEST)
        except FileNotFoundError:
            raise SourceFormatError(f"{what} is missing: the snapshot cannot be checked") from None
        rows = load_json(data, what=what, max_bytes=MAX_MANIFEST)
        if not isinstance(rows, list) or not rows:
            raise SourceFormatError(f"{what} is not a list of entries")
        return Fingerprint(tuple(Entry.from_json(row, what) for row in rows))

    def to_json(self) -> dict[str, Any]:
        keys = (
            "id",
            "environment",
            "created",
            "status",
            "line_before",
            "line_after",
            "release",
            "changes",
            "files",
            "bytes",
        )
        return {key: self.record.get(key) for key in keys}


def place_of(environment: Path) -> Place:
    """What to do when a write beside the environment (its snapshots) is refused."""
    return Place(
        environment.parent,
        f"cudaup keeps the snapshots of {environment} beside it and swaps it by rename: run as "
        f"the user who can write {environment.parent}, or fix its permissions",
    )


class SnapshotStore:
    """The snapshots of one environment (see the module docstring)."""

    def __init__(self, environment: Path) -> None:
        self.environment = Path(os.path.realpath(environment))
        self.directory = self.environment.parent / STORE / self.environment.name

    # -- the store -------------------------------------------------------------------
    def check_trusted(self) -> None:
        """Refuse a store another user could have written (exit 22): what it holds is
        swapped into the environment by ``rollback``, and its entries are deleted.  The
        environment's directory must let no one else rename its entries (owned by you or
        root, and writable by no one else unless sticky), and the store and the
        environment's directory in it, where they exist, must be directories (not links)
        of yours or root's that no one else may write."""
        problem = directories_problem(
            (
                (str(self.environment.parent), True),
                (str(self.environment.parent / STORE), False),
                (str(self.directory), False),
            )
        )
        if problem is not None:
            raise UntrustedPathError(
                f"cudaup does not use the snapshots of {self.environment}: {problem}, so "
                "another user could have written them, or could change them before "
                "they are restored; run as the user who owns the environment, or fix "
                "the permissions"
            )

    def ensure(self) -> None:
        self.check_trusted()
        make_directory(self.environment.parent, STORE, self.environment.name)
        self.check_trusted()  # another user may have made one of them a moment ago
        if self.directory.stat().st_dev != self.environment.stat().st_dev:
            raise ConflictError(
                f"{self.environment} is a mount point of its own: cudaup swaps an environment "
                "by rename beside it, which cannot cross filesystems; upgrade it where its "
                "parent directory is on the same filesystem"
            )

    @contextlib.contextmanager
    def locked(self, wait: float, echo: Echo = _quiet) -> Iterator[None]:
        """Hold this environment's lock: two upgrades (or a rollback) never overlap.  The
        lock file is 0o644: only those who may change the environment write beside it, and
        anyone else's cudaup can still lock it read-only."""
        self.check_trusted()
        path = self.directory / "lock"
        busy = f"another cudaup held the lock on {self.environment} for {wait:.0f} s ({path})"

        def waiting() -> None:
            echo(f"waiting for another cudaup working on {self.environment} (lock {path})")

        place = Place(self.directory, "fix the permissions of the snapshot directory")
        with locked(path, busy=busy, wait=wait, place=place, on_wait=waiting, mode=LOCK_MODE):
            yield

    def recover_if_idle(self, echo: Echo = _quiet) -> tuple[list[str], bool]:
        """:meth:`recover` when no live cudaup holds the lock (the kernel drops a dead
        holder's ``flock``, so a free lock means whatever is half made was left by a dead
        run); (its notes, whether a live one is working on the environment now).  A lock
        this user may not take answers as busy, changing nothing."""
        if not self.directory.is_dir():
            return [], False
        try:
            with self.locked(0.0):
                return self.recover(echo), False
        except LockedError:
            return [], True
        except PermissionDeniedError:
            return [], False

    def usage(self, snapshot: EnvironmentSnapshot) -> Usage:
        """The disk a snapshot takes, with its work tree or the environment moved aside
        while a run is on: allocated blocks, each inode once however many links it has."""
        inodes: dict[tuple[int, int], list[int]] = {}  # (device, inode) -> [bytes, links, seen]
        for tree in (snapshot.path, self.work_path(snapshot.id), self.aside_path(snapshot.id)):
            if not tree.is_dir() or tree.is_symlink():
                continue
            for status in _statuses(tree):
                key = (status.st_dev, status.st_ino)
                if key in inodes:
                    inodes[key][2] += 1
                else:
                    inodes[key] = [status.st_blocks * 512, status.st_nlink, 1]
        disk = sum(size for size, _links, _seen in inodes.values())
        alone = sum(size for size, links, seen in inodes.values() if seen >= links)
        return Usage(disk, alone)

    def new_id(self) -> str:
        now = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S%fZ")
        return f"{now}-{secrets.token_hex(3)}"

    def path_of(self, snapshot_id: str) -> Path:
        if not _ID.match(snapshot_id):
            raise SourceFormatError(
                f"{snapshot_id!r} is not a snapshot id such as 20251130T120102123456Z-3fa2c1"
            )
        return self.directory / snapshot_id

    def work_path(self, snapshot_id: str) -> Path:
        return self.directory / f"work-{snapshot_id}"

    def aside_path(self, snapshot_id: str) -> Path:
        return self.directory / f"aside-{snapshot_id}"

    # -- records -----------------------------------------------------------------------
    def snapshots(self) -> list[EnvironmentSnapshot]:
        """Every snapshot, oldest first."""
        self.check_trusted()
        if not self.directory.is_dir():
            return []
        found = []
        for entry in sorted(self.directory.iterdir()):
            # A snapshot is listed once its record is written (after its tree and manifest).
            is_snapshot = _ID.match(entry.name) and entry.is_dir() and not entry.is_symlink()
            if is_snapshot and ((entry / RECORD).is_file() or (entry / RECORD).is_symlink()):
                found.append(self.read(entry.name))
        return found

    def read(self, snapshot_id: str) -> EnvironmentSnapshot:
        path = self.path_of(snapshot_id)
        what = str(path / RECORD)
        try:
            data = _read_file(path / RECORD, MAX_RECORD)
        except FileNotFoundError:
            raise SourceFormatError(
                f"{what} is missing: not a snapshot cudaup finished writing (remove {path})"
            ) from None
        record = load_json(data, what=what, max_bytes=MAX_RECORD)
        if (
            not isinstance(record, dict)
            or record.get("schema") != 1
            or record.get("id") != snapshot_id
            or record.get("status") not in STATUSES
            or not isinstance(record.get("created"), str)
            or not isinstance(record.get("changes"), list)
            or not isinstance(record.get("environment"), str)
        ):
            raise SourceFormatError(f"{what} is not a snapshot record cudaup wrote (remove {path})")
        if os.path.realpath(record["environment"]) != str(self.environment):
            raise SourceFormatError(
                f"{what} is a snapshot of {record['environment']}, not of {self.environment} "
                f"(remove {path})"
            )
        return EnvironmentSnapshot(snapshot_id, path, record)

    def write(self, snapshot: EnvironmentSnapshot) -> None:
        atomic_write(snapshot.path / RECORD, _dumps(snapshot.record), durable=True)

    def create(self, record: dict[str, Any], fingerprint: Fingerprint) -> EnvironmentSnapshot:
        """The record and manifest of a tree already cloned to ``<id>/tree``."""
        snapshot = EnvironmentSnapshot(record["id"], self.path_of(record["id"]), record)
        # One entry a line, each by json's C encoder: an indented dump of a torch
        # environment's 37,000 entries goes through its pure-Python one (seconds).
        rows = ",\n".join(json.dumps(entry.to_json()) for entry in fingerprint.entries)
        atomic_write(snapshot.path / MANIFEST, f"[\n{rows}\n]\n", durable=True)
        self.write(snapshot)
        return snapshot

    def remove(self, snapshot: EnvironmentSnapshot) -> None:
        remove_tree(snapshot.path)

    # -- swaps and their journal -----------------------------------------------------------
    def swap_in(self, snapshot: EnvironmentSnapshot, incoming: Path, phase: str) -> Path:
        """Put ``incoming`` where the environment is, journaled in ``snapshot`` as ``phase``;
        where the old environment went."""
        aside = self.aside_path(snapshot.id)
        snapshot.record["journal"] = {
            "phase": phase,
            "incoming": str(incoming),
            "incoming_inode": incoming.lstat().st_ino,
            "aside": str(aside),
        }
        snapshot.record["status"] = phase
        self.write(snapshot)
        if exchange(self.environment, incoming):
            return incoming
        # No atomic exchange here: two renames; recover() finishes or undoes them.
        self.environment.rename(aside)
        incoming.rename(self.environment)
        return aside

    def swapped(self, snapshot: EnvironmentSnapshot) -> bool:
        """Whether the swap a journal names happened (the environment is the incoming tree);
        a half-done two-rename swap is undone first."""
        journal = snapshot.journal
        inode = journal.get("incoming_inode")
        aside = Path(str(journal.get("aside", ""))) if journal.get("aside") else None
        try:
            current = self.environment.lstat().st_ino
        except FileNotFoundError:
            if aside is not None and aside.parent == self.directory and aside.is_dir():
                aside.rename(self.environment)  # the old environment goes back
            return False
        return current == inode

    def recover(self, echo: Echo = _quiet) -> list[str]:
        """Finish or undo what a killed upgrade or rollback left (under the lock)."""
        notes = []
        for snapshot in self.snapshots():
            status = snapshot.status
            work, aside = self.work_path(snapshot.id), self.aside_path(snapshot.id)
            if status in {"taken", "applying"}:
                done = status == "applying" and self.swapped(snapshot)
                snapshot.record["status"] = "applied" if done else "interrupted"
                snapshot.record.pop("journal", None)
                self.write(snapshot)
                notes.append(
                    f"snapshot {snapshot.id}: an upgrade was interrupted "
                    + (
                        "after it replaced the environment"
                        if done
                        else "before it changed the environment"
                    )
                )
            elif status == "restoring":
                if self.swapped(snapshot):
                    for old in (snapshot.tree, aside):
                        if old.exists():
                            remove_tree(old)
                    self.remove(snapshot)
                    notes.append(f"snapshot {snapshot.id}: an interrupted rollback was finished")
                    continue
                snapshot.record["status"] = snapshot.record.get("before_restore", "applied")
                snapshot.record.pop("journal", None)
                self.write(snapshot)
                notes.append(f"snapshot {snapshot.id}: an interrupted rollback changed nothing")
            for leftover in (work, aside):
                if leftover.exists() or leftover.is_symlink():
                    _remove(leftover)
        known = {s.id for s in self.snapshots()}
        for entry in sorted(self.directory.iterdir()) if self.directory.is_dir() else []:
            prefix, _, rest = entry.name.partition("-")
            half_made = _ID.match(entry.name) and entry.name not in known
            if half_made or (prefix in {"work", "aside"} and _ID.match(rest) and rest not in known):
                _remove(entry)  # what a process killed while cloning left
        for note in notes:
            echo(note)
        return notes

    def prune(self, keep: int) -> list[EnvironmentSnapshot]:
        """Remove all but the newest ``keep`` snapshots; the ones removed."""
        existing = self.snapshots()
        doomed = existing[: max(0, len(existing) - keep)]
        for snapshot in doomed:
            self.remove(snapshot)
        return doomed


def _read_file(path: Path, limit: int) -> bytes:
    """The bytes of the regular file ``path`` (never through a link, never a FIFO that
    would block), at most ``limit + 1`` of them; else :class:`SourceFormatError`."""
    try:
        return read_regular(path, limit, follow=False)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise SourceFormatError(f"{path} is a symbolic link, not a file cudaup wrote") from None
        if exc.errno == errno.EINVAL:
            raise SourceFormatError(f"{path} is not a regular file, not one cudaup wrote") from None
        raise


def _remove(path: Path) -> None:
    """Remove what a killed run left: a tree, or a file or link standing in its place."""
    if path.is_dir() and not path.is_symlink():
        remove_tree(path)
    else:
        path.unlink()


@dataclass(frozen=True, slots=True)
class Usage:
    #: The blocks its entries take, hard links counted once.
    disk: int
    #: What removing it frees: the blocks of inodes no tree outside it links.
    frees: int


def _statuses(root: Path) -> Iterator[os.stat_result]:
    """``lstat`` of ``root`` and of everything below it, never following a link; what
    vanishes meanwhile (a run removing its work tree) is skipped."""
    with contextlib.suppress(OSError):
        yield root.lstat()
    for directory, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            with contextlib.suppress(OSError):
                yield (Path(directory) / name).lstat()


def _dumps(value: Any) -> str:
    return json.dumps(value, indent=1, sort_keys=True) + "\n"
