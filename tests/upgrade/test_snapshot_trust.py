"""The snapshots beside an environment are used only where no other user could have
written them: ``rollback`` swaps a snapshot's tree in for the environment, and
``snapshots``/``rollback`` delete entries of the store, so a store another user made,
a link standing for it, or a directory above it that others may rename entries of is
refused (exit 22) before anything in it is read, and what it holds stays.

Each environment is a real one (``python -m venv``), and the other user is uid 65534,
made the owner with ``chown`` (root only).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from cudaup.errors import EXIT_CODES, SourceFormatError, UntrustedPathError
from cudaup.upgrade.snapshots import STORE, SnapshotStore
from tests.helpers import run_cli
from tests.osfaults import NOBODY, ROOT_ONLY

SNAPSHOT_ID = "29991231T235959999999Z-abcdef"


def environment(parent: Path, mode: int = 0o755) -> Path:
    """A real virtual environment at ``parent/venv`` (no pip: it is not needed here)."""
    parent.mkdir(exist_ok=True)
    parent.chmod(mode)
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(parent / "venv")], check=True
    )
    return parent / "venv"


def plant(store: Path, environment: Path, **record: object) -> Path:
    """A snapshot in the shape cudaup writes (its tree a copy of a planted file)."""
    snapshot = store / SNAPSHOT_ID
    (snapshot / "tree").mkdir(parents=True)
    (snapshot / "tree" / "zz_planted.pth").write_text("import os\n")
    (snapshot / "manifest.json").write_text("[]\n")
    document = {
        "schema": 1, "id": SNAPSHOT_ID, "environment": str(environment), "status": "applied",
        "created": "2099-12-31T23:59:59+00:00", "changes": [], **record,
    }  # fmt: skip
    (snapshot / "snapshot.json").write_text(json.dumps(document))
    return snapshot


def rollback(capsys: pytest.CaptureFixture[str], venv: Path) -> tuple[int, str]:
    run = run_cli(capsys, "rollback", "--python", str(venv / "bin" / "python"))
    return run.code, run.err


@ROOT_ONLY
def test_a_store_another_user_made_in_a_sticky_directory_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The attack of round 19: another user made ``.cudaup-snapshots/venv/`` first, with a
    snapshot whose tree runs their code at the environment's next start."""
    venv = environment(tmp_path / "shared", 0o1777)
    store = tmp_path / "shared" / STORE
    snapshot = plant(store / "venv", venv)
    subprocess.run(["chown", "-R", f"{NOBODY}:{NOBODY}", str(store)], check=True)
    code, err = rollback(capsys, venv)
    assert code == EXIT_CODES["untrusted-path"] == 22, err
    assert f"cudaup does not use the snapshots of {venv}: {store} is owned by uid {NOBODY}" in err
    assert not (venv / "zz_planted.pth").exists() and venv.stat().st_uid == 0
    assert (snapshot / "tree" / "zz_planted.pth").is_file()  # theirs: left alone
    for use in (SnapshotStore(venv).snapshots, SnapshotStore(venv).ensure):
        with pytest.raises(UntrustedPathError):
            use()


@ROOT_ONLY
@pytest.mark.parametrize("mode", [0o777, 0o775])
def test_a_directory_others_may_rename_entries_of_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], mode: int
) -> None:
    """Without the sticky bit, whoever may write the environment's directory may put
    another store (or a link to one) in the place of ours at any time."""
    venv = environment(tmp_path / "open", mode)
    os.chown(tmp_path / "open", 0, NOBODY)  # a group of others
    snapshot = plant(tmp_path / "open" / STORE / "venv", venv)
    code, err = rollback(capsys, venv)
    assert code == 22 and f"{tmp_path / 'open'} is writable by its group" in err, err
    assert snapshot.is_dir() and not (venv / "zz_planted.pth").exists()


def test_a_link_standing_for_the_store_is_neither_read_nor_pruned_through(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A link to another environment's store: its snapshots were listed, pruned and one
    restored here; they stay where they are."""
    venv = environment(tmp_path / "here")
    other = environment(tmp_path / "there")
    theirs = plant(tmp_path / "there" / STORE / "venv", other)
    (tmp_path / "here" / STORE).symlink_to(tmp_path / "there" / STORE)
    pruned = run_cli(
        capsys, "snapshots", "--prune", "--keep", "0", "--python", str(venv / "bin/python")
    )
    assert pruned.code == 22 and "is not a directory (a symbolic link?)" in pruned.err
    assert rollback(capsys, venv)[0] == 22
    assert (theirs / "snapshot.json").is_file() and not (venv / "zz_planted.pth").exists()


def test_a_snapshot_of_another_environment_is_not_taken_for_this_ones(tmp_path: Path) -> None:
    venv = environment(tmp_path / "here")
    plant(tmp_path / "here" / STORE / "venv", tmp_path / "elsewhere" / "venv")
    with pytest.raises(SourceFormatError, match="is a snapshot of .*/elsewhere/venv, not of"):
        SnapshotStore(venv).snapshots()


@pytest.mark.parametrize(
    ("what", "says"),
    [("snapshot.json", "is a symbolic link"), ("manifest.json", "is not a regular file")],
)
def test_a_record_or_manifest_that_would_block_is_refused_not_waited_on(
    tmp_path: Path, what: str, says: str
) -> None:
    """A FIFO (the record: a link to one, as a record that is no file is not listed) would
    block the read for ever."""
    venv = environment(tmp_path / "here")
    snapshot = plant(tmp_path / "here" / STORE / "venv", venv)
    (snapshot / what).unlink()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    if what == "snapshot.json":
        (snapshot / what).symlink_to(fifo)
    else:
        fifo.rename(snapshot / what)
    outcome: list[BaseException] = []

    def use() -> None:
        try:
            for found in SnapshotStore(venv).snapshots():
                found.fingerprint()
        except SourceFormatError as exc:
            outcome.append(exc)

    reader = threading.Thread(target=use, daemon=True)
    reader.start()
    reader.join(timeout=30)
    assert not reader.is_alive() and says in str(outcome[0])


def test_a_leftover_that_is_a_link_is_removed_not_followed(tmp_path: Path) -> None:
    venv = environment(tmp_path / "here")
    store = SnapshotStore(venv)
    store.ensure()
    kept = tmp_path / "kept"
    (kept / "sub").mkdir(parents=True)
    for prefix in ("work", "aside"):
        (store.directory / f"{prefix}-{SNAPSHOT_ID}").symlink_to(kept)
    with store.locked(1.0):
        store.recover()
    assert sorted(p.name for p in store.directory.iterdir()) == ["lock"]
    assert (kept / "sub").is_dir()
