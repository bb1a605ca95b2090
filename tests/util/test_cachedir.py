"""cudaup's cache directory: sizes, prune, clean, and the lock installs share."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from cudaup.errors import EXIT_CODES, LockedError, UntrustedPathError
from cudaup.install.store import Store
from cudaup.util import cachedir
from tests.fakenvidia.server import FakeNvidiaServer
from tests.helpers import point_env_at, run_cli
from tests.osfaults import NOBODY, ROOT_ONLY, as_nobody, cudaup_argv, shared_tmp

USED = "a" * 64
UNUSED = "b" * 64


def populate(root: Path, toolkit: Path) -> None:
    """A cache as installs leave it: one tree linked into a toolkit, one no longer used."""
    for key in (USED, UNUSED):
        lib = root / "unpacked" / key / "tree" / "lib"
        lib.mkdir(parents=True)
        (lib / f"lib{key[0]}.so").write_bytes(os.urandom(300_000))
    shutil.copytree(root / "unpacked" / USED / "tree", toolkit, copy_function=os.link)
    (root / "unpacked" / ".tmp-0123456789abcdef-dead").mkdir()  # a killed install's
    downloads = root / "downloads"
    downloads.mkdir()
    (downloads / "cuda_12.8.1_570.124.06_linux.run").write_bytes(os.urandom(200_000))
    (downloads / "big.tar.xz.part").write_bytes(bytes(100_000))  # resumes next time
    (downloads / "big.tar.xz.part.json").write_text("{}")
    (downloads / "gone.whl.part.json").write_text("{}")  # its part file was deleted
    (root / "http").mkdir()
    (root / "http" / "entry").write_bytes(b"x" * 1000)


def test_info_counts_shared_and_unused(tmp_path: Path) -> None:
    root, toolkit = tmp_path / "cache", tmp_path / "toolkits/12.8.1"
    populate(root, toolkit)
    info = cachedir.inspect(root)
    unpacked = next(area for area in info.areas if area.name == "unpacked")
    assert unpacked.files == 2
    assert 300_000 <= unpacked.shared_bytes < 400_000  # the tree the toolkit links
    assert unpacked.unused_entries == 1 and 300_000 <= unpacked.unused_bytes < 400_000
    assert 500_000 <= info.reclaimable < 700_000  # the unused tree and the runfile
    assert info.to_json()["reclaimable_bytes"] == info.reclaimable


def test_prune_keeps_what_is_in_use_and_what_resumes(tmp_path: Path) -> None:
    root, toolkit = tmp_path / "cache", tmp_path / "toolkits/12.8.1"
    populate(root, toolkit)
    report = cachedir.prune(root)
    assert sorted(report.removed) == [
        "downloads/cuda_12.8.1_570.124.06_linux.run",
        "downloads/gone.whl.part.json",
        "unpacked/.tmp-0123456789abcdef-dead",
        f"unpacked/{UNUSED}",
    ]
    assert report.freed >= 500_000
    assert (root / "unpacked" / USED / "tree/lib/liba.so").is_file()
    assert (root / "downloads/big.tar.xz.part").is_file()
    assert (root / "http/entry").is_file()
    assert (toolkit / "lib/liba.so").stat().st_nlink == 2
    assert cachedir.prune(root).removed == []  # nothing more to do


def test_clean_removes_everything_but_installs_keep_their_files(tmp_path: Path) -> None:
    root, toolkit = tmp_path / "cache", tmp_path / "toolkits/12.8.1"
    populate(root, toolkit)
    report = cachedir.clean(root)
    assert "http/entry" in report.removed and f"unpacked/{USED}" in report.removed
    for area in ("http", "downloads", "unpacked"):
        assert list((root / area).iterdir()) == []
    assert (toolkit / "lib/liba.so").stat().st_nlink == 1  # the toolkit's own link remains
    assert cachedir.inspect(root).reclaimable == 0


def test_prune_waits_for_installs_and_then_says_so(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    populate(root, tmp_path / "toolkit")
    with cachedir.using(root), pytest.raises(LockedError, match="an install is using"):
        cachedir.prune(root, wait=0.3)
    with cachedir.using(root), cachedir.using(root):  # installs share it
        pass
    assert cachedir.prune(root).removed  # free again


def test_cli_cache_and_uninstall_hint(
    fake_nvidia: FakeNvidiaServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    point_env_at(monkeypatch, fake_nvidia)
    monkeypatch.setenv("CUDAUP_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CUDAUP_SYSTEM_ROOT", str(tmp_path / "root"))
    (tmp_path / "root").mkdir()
    root = Path(os.environ["CUDAUP_CACHE_DIR"])
    assert run_cli(capsys, "cache", "dir").out.strip() == str(root)
    installed = run_cli(
        capsys, "install", "13.0.1", "--channel", "redist", "--components", "nvcc",
        "--platform", "linux-x86_64", "-q",
    )  # fmt: skip
    assert installed.code == 0, installed.err
    info = run_cli(capsys, "cache", "info", "--json").json()
    assert info["reclaimable_bytes"] == 0  # everything unpacked is linked by the toolkit
    removed = run_cli(capsys, "uninstall", "13.0.1")
    assert removed.code == 0 and "`cudaup cache prune` frees it" in removed.out
    assert (
        "shared with installed toolkits, 2 archives no toolkit uses"
        in run_cli(capsys, "cache", "info").out
    )
    pruned = run_cli(capsys, "cache", "prune", "--json").json()
    assert len(pruned["removed"]) == 2 and pruned["freed_bytes"] > 0
    assert not Store(tmp_path / "home").installed()
    monkeypatch.setattr(cachedir, "CLEAN_WAIT", 0.2)  # the real 10 s is for people
    with cachedir.using(root):
        busy = run_cli(capsys, "cache", "clean")
    assert busy.code == EXIT_CODES["locked"] and "try again" in busy.err


def test_cache_commands_on_a_cache_that_does_not_exist_yet_and_bad_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CUDAUP_CACHE_DIR", str(tmp_path / "never-made"))
    info = run_cli(capsys, "cache", "info", "--json").json()
    assert info["bytes"] == 0 and info["reclaimable_bytes"] == 0
    assert run_cli(capsys, "cache", "prune", "--json").json()["removed"] == []
    usage = run_cli(capsys, "cache", "frob")
    assert usage.code == EXIT_CODES["usage"]
    assert "invalid choice: 'frob'" in usage.err


@ROOT_ONLY
def test_prune_and_clean_keep_what_another_user_owns(tmp_path: Path) -> None:
    root, toolkit = tmp_path / "cache", tmp_path / "toolkits/12.8.1"
    populate(root, toolkit)
    theirs = root / "unpacked" / UNUSED
    subprocess.run(["chown", "-R", f"{NOBODY}:{NOBODY}", str(theirs)], check=True)
    assert cachedir.inspect(root).reclaimable < 300_000  # theirs is not ours to reclaim
    pruned = cachedir.prune(root)
    assert pruned.kept == [f"unpacked/{UNUSED} (uid {NOBODY})"]
    assert f"unpacked/{UNUSED}" not in pruned.removed and theirs.is_dir()
    cleaned = cachedir.clean(root)
    assert cleaned.to_json()["kept"] == [f"unpacked/{UNUSED} (uid {NOBODY})"]
    assert [p.name for p in (root / "unpacked").iterdir()] == [UNUSED]


@ROOT_ONLY
def test_a_clean_the_operating_system_refuses_is_exit_14(tmp_path: Path) -> None:
    """The cache is the user's, but root left a directory in it the user cannot empty."""
    with shared_tmp() as shared:
        root = shared / "cache"
        populate(root, shared / "toolkit")
        stuck = root / "http" / "theirs" / "made-by-root"
        stuck.mkdir(parents=True)
        (stuck / "entry").write_bytes(b"x")
        subprocess.run(["chown", "-R", f"{NOBODY}:{NOBODY}", str(root)], check=True)
        os.chown(stuck, 0, 0)
        os.chown(stuck / "entry", 0, 0)
        env = {**os.environ, "CUDAUP_CACHE_DIR": str(root), "HOME": str(shared)}
        done = as_nobody(cudaup_argv("cache", "clean"), env)
        assert done.returncode == EXIT_CODES["permission-denied"], done.stderr
        assert f"cannot remove http/theirs: permission denied: {stuck}/entry" in done.stderr
        assert "set CUDAUP_CACHE_DIR" in done.stderr


def test_clean_counts_only_bytes_whose_last_link_it_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The tree a toolkit links stays on disk after `clean`: it is reported as still
    linked, never as freed."""
    root, toolkit = tmp_path / "cache", tmp_path / "toolkits/12.8.1"
    populate(root, toolkit)
    # a tree linked twice inside the cache itself: both links go, so its bytes are freed
    twice = root / "unpacked" / ("c" * 64) / "tree"
    twice.mkdir(parents=True)
    (twice / "libc.so").write_bytes(os.urandom(400_000))
    os.link(twice / "libc.so", twice / "libc.so.1")
    monkeypatch.setenv("CUDAUP_CACHE_DIR", str(root))
    result = run_cli(capsys, "cache", "clean", "--json")
    assert result.code == 0, result.err
    report = result.json()
    # freed: the unused tree (300 kB), the doubly linked one (400 kB), the runfile (200 kB),
    # the part file (100 kB), small files and directories; not the linked tree
    assert 1_000_000 <= report["freed_bytes"] < 1_250_000
    assert 300_000 <= report["still_linked_bytes"] < 320_000
    assert (toolkit / "lib/liba.so").stat().st_nlink == 1  # the toolkit keeps its bytes
    populate(tmp_path / "again", tmp_path / "toolkits/12.8.2")
    monkeypatch.setenv("CUDAUP_CACHE_DIR", str(tmp_path / "again"))
    human = run_cli(capsys, "cache", "clean")
    assert "KiB stay on disk, hard-linked by installed toolkits" in human.out


@pytest.mark.parametrize("planted", ["downloads", "unpacked", "http", "locks", "plan"])
def test_every_cache_directory_refuses_a_link_planted_for_it(tmp_path: Path, planted: str) -> None:
    """A link standing for a directory of the cache would carry its writes elsewhere:
    naming the directory refuses it (exit 22); the cache root itself may be a link."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    root = tmp_path / "cache"
    root.mkdir()
    (root / planted).symlink_to(elsewhere)
    layout = cachedir.CacheLayout(root)
    with pytest.raises(UntrustedPathError, match=f"{root / planted} is a symbolic link"):
        getattr(layout, planted)
    (root / planted).unlink()
    (root / "plan").mkdir(exist_ok=True)
    (root / "plan" / "uv").symlink_to(elsewhere)
    with pytest.raises(UntrustedPathError, match="plan/uv is a symbolic link"):
        layout.plan_dir("uv")
    (tmp_path / "linked").symlink_to(root)
    assert cachedir.CacheLayout(tmp_path / "linked").downloads == tmp_path / "linked" / "downloads"


@pytest.mark.parametrize(
    ("owner", "mode", "why"),
    [
        (NOBODY, 0o755, f"is owned by uid {NOBODY} (nobody)"),
        (0, 0o775, "is writable by its group (mode 775)"),
        (0, 0o1777, "is writable by its group and every user (mode 1777)"),
    ],
)
@ROOT_ONLY
def test_a_plan_directory_another_user_owns_or_may_write_is_refused(
    tmp_path: Path, owner: int, mode: int, why: str
) -> None:
    """uv's cache and the facts read from wheels decide what an upgrade installs: ``plan/``
    is used only when it is ours or root's and no one else may write it, the sticky bit
    notwithstanding (another user could make ``plan/uv`` first)."""
    root = tmp_path / "cache"
    layout = cachedir.CacheLayout(root)
    assert layout.plan_dir("uv") == root / "plan/uv" and (root / "plan").is_dir()
    (root / "plan").chmod(mode)
    os.chown(root / "plan", owner, NOBODY)  # a group of others
    with pytest.raises(UntrustedPathError) as caught:
        layout.plan_dir("uv")
    assert str(caught.value).startswith(
        f"cudaup does not use {root / 'plan'}: {root / 'plan'} {why}"
    )
    assert caught.value.exit_code == 22


@pytest.mark.parametrize(("mode", "refused"), [(0o777, True), (0o1777, False), (0o755, False)])
def test_the_cache_above_plan_must_not_let_others_replace_it(
    tmp_path: Path, mode: int, refused: bool
) -> None:
    """Who may rename entries of the cache may put another ``plan/`` in its place; the
    sticky bit forbids that.  The cache's path may be a link: where it leads counts."""
    real = tmp_path / "real"
    real.mkdir()
    real.chmod(mode)
    (tmp_path / "cache").symlink_to(real)
    layout = cachedir.CacheLayout(tmp_path / "cache")
    if refused:
        with pytest.raises(UntrustedPathError, match=f"{real} is writable by its group and every"):
            layout.plan_dir("wheels")
    else:
        assert layout.plan_dir("wheels") == tmp_path / "cache/plan/wheels"


@ROOT_ONLY
def test_a_cache_below_a_directory_another_user_owns_is_refused(tmp_path: Path) -> None:
    """root with another user's home in its cache path (``sudo -E``): that user may rename
    the cache and put their own in its place, with uv's answers and the wheels' facts."""
    home = tmp_path / "home"
    home.mkdir()
    layout = cachedir.CacheLayout(home / ".cache/cudaup")
    assert layout.plan_dir("uv") == home / ".cache/cudaup/plan/uv"  # home is root's: fine
    os.chown(home, NOBODY, NOBODY)
    with pytest.raises(UntrustedPathError) as caught:
        layout.plan_dir("uv")
    assert str(caught.value).startswith(
        f"cudaup does not use {home / '.cache/cudaup/plan'}: {home} is owned by uid {NOBODY}"
    )
