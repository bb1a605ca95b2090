"""A whole filesystem in a temporary directory, snapshotted before and after a hostile run.

The layout is a small machine, so that the ``../`` of a hostile name lands on
something real if cudaup ever follows it::

    S/opt/cudaup/home        CUDAUP_HOME (the store): home/toolkits/../../../../srv/data is S/srv/data
    S/var/cache/cudaup       CUDAUP_CACHE_DIR
    S/opt/prefix             where --prefix installs go
    S/srv/data/…             a decoy: files, a directory, a link, a private mode
    S/tmp/x                  another decoy (the ``../../../../tmp/x`` of issue #11)
    S/system                 CUDAUP_SYSTEM_ROOT (an empty machine: no driver)
    S/work                   the current directory (locks are written here)

:meth:`Sandbox.snapshot` records every path below ``S`` with its type, mode,
owner, size and SHA-256 (or link target); :meth:`Sandbox.changed` compares two.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest

Entry = tuple[str, int, int, int, str]  # kind, mode, uid, size, digest or link target


def describe(path: Path) -> Entry | None:
    """What one path is, without following a link; None when it does not exist."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return None
    mode = stat.S_IMODE(info.st_mode)
    if stat.S_ISLNK(info.st_mode):
        return ("link", mode, info.st_uid, 0, str(path.readlink()))
    if stat.S_ISDIR(info.st_mode):
        return ("dir", mode, info.st_uid, 0, "")
    if stat.S_ISREG(info.st_mode):
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        return ("file", mode, info.st_uid, info.st_size, digest)
    return ("other", mode, info.st_uid, info.st_size, "")


@dataclass(frozen=True)
class Sandbox:
    root: Path

    @property
    def home(self) -> Path:
        return self.root / "opt" / "cudaup" / "home"

    @property
    def cache(self) -> Path:
        return self.root / "var" / "cache" / "cudaup"

    @property
    def prefix(self) -> Path:
        return self.root / "opt" / "prefix"

    @property
    def decoy(self) -> Path:
        return self.root / "srv" / "data"

    @property
    def work(self) -> Path:
        return self.root / "work"

    def snapshot(self) -> dict[str, Entry]:
        found: dict[str, Entry] = {}
        for directory, dirs, files in os.walk(self.root):
            for name in [*dirs, *files]:
                path = Path(directory) / name
                entry = describe(path)
                if entry is not None:
                    found[path.relative_to(self.root).as_posix()] = entry
        return found

    def changed(self, before: dict[str, Entry], after: dict[str, Entry]) -> set[str]:
        """Every path added, removed or different between two snapshots."""
        return {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}

    def changed_outside(
        self, before: dict[str, Entry], after: dict[str, Entry], allowed: Iterable[Path]
    ) -> set[str]:
        """Changes anywhere but below the ``allowed`` directories (the directories
        themselves may appear, empty or not)."""
        roots = [a.relative_to(self.root).as_posix() for a in allowed]
        return {
            p
            for p in self.changed(before, after)
            if not any(p == r or p.startswith(r + "/") or r.startswith(p + "/") for r in roots)
        }


def make_sandbox(root: Path, monkeypatch: pytest.MonkeyPatch) -> Sandbox:
    box = Sandbox(root)
    for directory in (box.home.parent, box.cache.parent, box.work, root / "system"):
        directory.mkdir(parents=True)
    (box.decoy / "sub").mkdir(parents=True)
    (box.decoy / "keep.txt").write_text("the decoy's data\n")
    (box.decoy / "sub" / "private.key").write_bytes(b"secret")
    (box.decoy / "sub" / "private.key").chmod(0o600)
    (box.decoy / "link").symlink_to("keep.txt")
    (root / "tmp" / "x").mkdir(parents=True)
    (root / "tmp" / "x" / "untouched").write_text("x\n")
    monkeypatch.setenv("CUDAUP_HOME", str(box.home))
    monkeypatch.setenv("CUDAUP_CACHE_DIR", str(box.cache))
    monkeypatch.setenv("CUDAUP_SYSTEM_ROOT", str(root / "system"))
    monkeypatch.chdir(box.work)
    return box


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Sandbox:
    return make_sandbox(tmp_path / "S", monkeypatch)
