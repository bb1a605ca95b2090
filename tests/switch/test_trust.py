"""Who may choose what root runs (issue #20, item 1): git's ``safe.directory`` answer.

The attack, for real: root has a toolkit; a shared directory (mode 1777) holds a
project; the user nobody (uid 65534, through ``setpriv``) plants a toolkit of their
own and a ``.cuda-version`` naming it; root runs ``$CUDAUP_HOME/bin/nvcc`` in the
project.  Nobody's program must not run, the pin must be named in a warning with its
owner, and nothing anywhere changes.  Then the cases that must keep working: a pin of
one's own, the ``CUDAUP_SAFE_DIRECTORIES`` exceptions, and an unprivileged user's own
pin and toolkit.  Everything here runs as root (it needs ``setpriv`` and ``chown``).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from cudaup.errors import EXIT_CODES
from cudaup.install.store import Store
from cudaup.util import trust
from tests.helpers import require_tool, run_cli
from tests.osfaults import NOBODY, ROOT_ONLY, as_nobody, readable_python, shared_tmp
from tests.sandbox import Sandbox, make_sandbox
from tests.switch.test_switch import make_toolkit, make_tree

pytestmark = ROOT_ONLY

UNTRUSTED = EXIT_CODES["untrusted-path"]
#: Shims are written by a cudaup every user may run: the checkout and this venv may be
#: private (a home directory, ``mktemp -d``), and a shim names the cudaup that wrote it.
WRITE_SHIMS = (
    "from cudaup.install.store import Store; from cudaup.switch import shim_files; "
    "store = Store.from_env(); shim_files.write_shims(store, shim_files.available_tools(store))"
)


def plant_toolkit(directory: Path, marker: Path) -> str:
    """The shell lines that make ``directory`` a toolkit whose nvcc writes ``id -u`` to
    ``marker`` (run as the user who plants it)."""
    return (
        f"mkdir -p {directory}/bin\n"
        f"cat > {directory}/bin/nvcc <<'EOF'\n"
        f'#!/bin/sh\nid -u > {marker}\necho "nvcc from {directory.name}"\n'
        "EOF\n"
        f"chmod 755 {directory}/bin/nvcc\n"
        f'echo \'{{"cuda": {{"name": "CUDA SDK", "version": "13.0.1"}}}}\' > {directory}/version.json\n'
    )


@dataclass(frozen=True)
class Attack:
    box: Sandbox
    store: Store
    shared: Path  # mode 1777, root's
    project: Path  # root's, in the shared directory
    evil: Path  # nobody's toolkit
    pin: Path  # nobody's .cuda-version, naming it
    marker: Path  # what nobody's nvcc writes when it runs

    def nvcc(
        self, cwd: Path, extra: dict[str, str] | None = None, *, as_user: bool = False
    ) -> subprocess.CompletedProcess[str]:
        """``$CUDAUP_HOME/bin/nvcc --version`` in ``cwd``, as root or as nobody."""
        argv = [str(self.store.bin_dir / "nvcc"), "--version"]
        env = {"PATH": f"{self.store.bin_dir}:/usr/bin:/bin", "HOME": str(cwd), **(extra or {})}
        if as_user:
            return as_nobody(argv, env, cwd=cwd)
        return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)


@pytest.fixture
def attack(monkeypatch: pytest.MonkeyPatch) -> Iterator[Attack]:
    require_tool("/usr/bin/setpriv", "util-linux")
    with shared_tmp() as top:
        box = make_sandbox(top / "S", monkeypatch)
        store = Store.from_env()
        make_toolkit(store, "13.0.1")  # root's toolkit, and root's default
        make_toolkit(store, "12.8.1")
        store.set_default("13.0")
        subprocess.run([readable_python(), "-c", WRITE_SHIMS], check=True)
        shared = box.root / "srv" / "shared"
        shared.mkdir()
        shared.chmod(0o1777)
        project = shared / "project"
        project.mkdir()
        evil, pin, marker = shared / "evil-tk", shared / ".cuda-version", shared / "ran-as"
        script = f"set -e\n{plant_toolkit(evil, marker)}echo {evil} > {pin}\n"
        planted = as_nobody(["sh", "-c", script], {"PATH": "/usr/bin:/bin"})
        assert planted.returncode == 0, planted.stderr
        assert pin.stat().st_uid == NOBODY and (evil / "bin" / "nvcc").stat().st_uid == NOBODY
        yield Attack(box, store, shared, project, evil, pin, marker)


def ignored(pin: Path) -> str:
    return (
        f"cudaup: warning: ignoring {pin}: {pin} is owned by uid {NOBODY} (nobody), not by "
        f"you (uid 0 (root)) or root; a pin another user could write does not choose what "
        f"runs as you (CUDAUP_SAFE_DIRECTORIES={pin.parent} trusts it)\n"
    )


# -- the attack -------------------------------------------------------------------------------
def test_another_users_pin_does_not_choose_what_root_runs(
    attack: Attack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    before = attack.box.snapshot()
    done = attack.nvcc(attack.project)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("nvcc from 13.0.1\n")  # root's default, not nobody's
    assert not attack.marker.exists()
    assert done.stderr == ignored(attack.pin)
    # The CLI says the same, and names root's toolkit.
    monkeypatch.chdir(attack.project)
    which = run_cli(capsys, "which", "nvcc")
    assert which.code == 0, which.err
    assert which.out == f"{attack.store.toolkits_dir / '13.0.1' / 'bin' / 'nvcc'}\n"
    assert which.err.startswith(ignored(attack.pin))
    shown = run_cli(capsys, "show", "--json")
    active = shown.json()["active"]
    assert active["source"] == "default" and active["version"] == "13.0.1"
    assert active["warnings"] == [ignored(attack.pin).removeprefix("cudaup: warning: ").strip()]
    # `pin` shows no pin here, and `install` with no version has none to follow.
    pin = run_cli(capsys, "pin")
    assert pin.out.startswith("no .cuda-version in") and pin.err == ignored(attack.pin)
    install = run_cli(capsys, "install", "--json")
    assert install.code == UNTRUSTED
    assert (
        install.json()["error"]["message"]
        == ignored(attack.pin).removeprefix("cudaup: warning: ").strip()
    )
    assert not attack.marker.exists()
    assert attack.box.changed(before, attack.box.snapshot()) == set()


def test_a_toolkit_another_user_owns_is_refused_with_exit_22(
    attack: Attack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Root's own pin, CUDAUP_TOOLKIT, ``run PATH`` and ``default PATH`` naming nobody's
    toolkit: nothing runs, nothing changes, exit 22 naming the toolkit and its owner."""
    own_pin = attack.project / ".cuda-version"
    own_pin.write_text(f"{attack.evil}\n")
    why = (
        f"names the toolkit {attack.evil}, which another user could change: {attack.evil} "
        f"is owned by uid {NOBODY} (nobody), not by you (uid 0 (root)) or root "
        f"(CUDAUP_SAFE_DIRECTORIES={attack.evil} trusts it)"
    )
    before = attack.box.snapshot()
    pinned = attack.nvcc(attack.project)
    assert pinned.returncode == UNTRUSTED, pinned.stderr
    assert pinned.stdout == ""
    assert pinned.stderr.startswith(f"cudaup: cannot run nvcc: {own_pin} {why}; fix it, or ")
    by_env = attack.nvcc(attack.box.work, {"CUDAUP_TOOLKIT": str(attack.evil)})
    assert by_env.returncode == UNTRUSTED and f"CUDAUP_TOOLKIT {why}" in by_env.stderr
    monkeypatch.chdir(attack.project)
    which = run_cli(capsys, "which", "nvcc", "--json")
    assert which.code == UNTRUSTED
    assert which.json()["error"] == {
        "kind": "untrusted-path",
        "message": f"{own_pin} {why}",
        "exit_code": UNTRUSTED,
    }
    monkeypatch.chdir(attack.box.work)
    run = run_cli(capsys, "run", str(attack.evil), "--", "nvcc", "--version")
    assert run.code == UNTRUSTED and f"the command line {why}" in run.err
    default = run_cli(capsys, "default", str(attack.evil))
    assert default.code == UNTRUSTED and why in default.err
    assert attack.store.default() == "13.0"
    assert not attack.marker.exists()
    assert attack.box.changed(before, attack.box.snapshot()) == set()


# -- what keeps working -------------------------------------------------------------------------
def test_a_pin_of_ones_own_is_honoured(attack: Attack) -> None:
    (attack.project / ".cuda-version").write_text("12.8\n")
    done = attack.nvcc(attack.project)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("nvcc from 12.8.1\n")
    assert done.stderr == ""  # the nearest pin is root's: nobody's above it is never read
    # Root's toolkit by path, even below the shared directory: root's, sticky above it.
    mine = make_tree(attack.shared / "root-tk", "root-tk")
    (attack.project / ".cuda-version").write_text(f"{mine}\n")
    by_path = attack.nvcc(attack.project)
    assert by_path.stdout.startswith("nvcc from root-tk\n"), by_path.stderr


def test_the_safe_directories_exceptions_are_honoured(attack: Attack) -> None:
    # Trusting the pin's directory is not trusting the toolkit it names.
    pin_only = attack.nvcc(attack.project, {"CUDAUP_SAFE_DIRECTORIES": str(attack.shared)})
    assert pin_only.returncode == UNTRUSTED
    assert f"{attack.pin} names the toolkit {attack.evil}" in pin_only.stderr
    assert not attack.marker.exists()
    for listed in (
        f"{attack.shared}:{attack.evil}",
        f"/nonexistent:{attack.shared}/*",  # DIR/* is DIR and everything below
        "*",
    ):
        done = attack.nvcc(attack.project, {"CUDAUP_SAFE_DIRECTORIES": listed})
        assert done.returncode == 0, (listed, done.stderr)
        assert done.stdout == "nvcc from evil-tk\n"
        assert attack.marker.read_text() == "0\n"  # what the user chose to trust ran
        attack.marker.unlink()
    # A relative entry trusts nothing: relative to what?
    relative = attack.nvcc(attack.project, {"CUDAUP_SAFE_DIRECTORIES": "srv/shared"})
    assert relative.stderr == ignored(attack.pin)
    assert not attack.marker.exists()


def test_an_unprivileged_users_own_pin_and_toolkit_work(attack: Attack) -> None:
    mine, marker = attack.shared / "nobody-project", attack.shared / "nobody-ran-as"
    toolkit = attack.shared / "nobody-tk"
    script = (
        f"set -e\nmkdir {mine}\n{plant_toolkit(toolkit, marker)}"
        f"echo {toolkit} > {mine}/.cuda-version\n"
    )
    assert as_nobody(["sh", "-c", script], {"PATH": "/usr/bin:/bin"}).returncode == 0
    done = attack.nvcc(mine, as_user=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "nvcc from nobody-tk\n" and done.stderr == ""
    assert marker.read_text() == f"{NOBODY}\n"
    # For nobody, root's pin counts too (root may choose for anyone), and nobody's own
    # pin above it is then never read.
    root_pin = attack.project / ".cuda-version"
    root_pin.write_text("12.8\n")
    rooted = attack.nvcc(attack.project, as_user=True)
    assert rooted.stdout.startswith("nvcc from 12.8.1\n"), rooted.stderr
    # Nobody's pin in the shared directory is nobody's own, for nobody.
    root_pin.unlink()
    theirs = attack.nvcc(attack.project, as_user=True)
    assert theirs.stdout == "nvcc from evil-tk\n", theirs.stderr


# -- the rule, case by case ----------------------------------------------------------------------
def test_the_rule_checks_owners_write_bits_links_and_the_directories_above(
    tmp_path: Path,
) -> None:
    toolkit = make_tree(tmp_path / "tk", "tk")
    assert trust.toolkit_problem(str(toolkit), "nvcc", {}) is None
    # Group-writable bin: someone else could put another nvcc there.
    (toolkit / "bin").chmod(0o775)
    assert trust.toolkit_problem(str(toolkit), "nvcc", {}) == (
        f"{toolkit / 'bin'} is writable by its group (mode 775)"
    )
    (toolkit / "bin").chmod(0o755)
    # A tool another user owns, in a bin that is root's.
    os.chown(toolkit / "bin" / "nvcc", NOBODY, NOBODY)
    assert "nvcc is owned by uid 65534 (nobody)" in str(
        trust.toolkit_problem(str(toolkit), "nvcc", {})
    )
    os.chown(toolkit / "bin" / "nvcc", 0, 0)
    # A directory above that others may write, without the sticky bit: the toolkit could
    # be renamed away and another put in its place.
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    below = make_tree(open_dir / "tk", "below")
    open_dir.chmod(0o777)
    assert trust.path_problem(str(below)) == (
        f"{open_dir} is writable by its group and every user (mode 777)"
    )
    open_dir.chmod(0o1777)
    assert trust.path_problem(str(below)) is None  # root's entry in a sticky directory
    # A link another user owns, in that sticky directory, to root's toolkit.
    link = open_dir / "link"
    link.symlink_to(toolkit)
    os.lchown(link, NOBODY, NOBODY)
    assert (
        trust.path_problem(str(link))
        == f"{link} is owned by uid {NOBODY} (nobody), not by you (uid 0 (root)) or root"
    )
    os.lchown(link, 0, 0)
    assert trust.path_problem(str(link / "bin" / "nvcc")) is None
    # ... and a link of root's to a directory another user owns.
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    os.chown(theirs, NOBODY, NOBODY)
    (tmp_path / "to-theirs").symlink_to(theirs)
    assert "theirs is owned by uid 65534" in str(trust.path_problem(str(tmp_path / "to-theirs")))
    # Relative links and `..` are followed as the kernel does; a loop or a hole is refused.
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "up").symlink_to("../tk/bin/../bin")
    assert trust.path_problem(str(tmp_path / "sub" / "up" / "nvcc")) is None
    (tmp_path / "loop").symlink_to("loop")
    assert "goes through more than 40 symbolic links" in str(
        trust.path_problem(str(tmp_path / "loop"))
    )
    missing = trust.path_problem(str(tmp_path / "gone" / "bin"))
    assert missing == f"{tmp_path / 'gone'} cannot be examined (No such file or directory)"


def test_a_pin_writable_by_others_or_in_their_directory_is_skipped(tmp_path: Path) -> None:
    pin = tmp_path / ".cuda-version"
    pin.write_text("# a comment\n\n 12.8 \n")
    assert trust.read_pin_file(str(pin), {}) == ("# a comment\n\n 12.8 \n", None)
    pin.chmod(0o666)
    assert trust.read_pin_file(str(pin), {}) == (
        "",
        f"{pin} is writable by its group and every user (mode 666)",
    )
    assert trust.read_pin_file(str(pin), {"CUDAUP_SAFE_DIRECTORIES": str(tmp_path)})[1] is None
    pin.chmod(0o644)
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    os.link(pin, theirs / ".cuda-version")  # root's file, in a directory nobody owns
    os.chown(theirs, NOBODY, NOBODY)
    text, problem = trust.read_pin_file(str(theirs / ".cuda-version"), {})
    assert text == "" and problem == (
        f"{theirs} is owned by uid {NOBODY} (nobody), not by you (uid 0 (root)) or root"
    )


@ROOT_ONLY
def test_the_directories_above_are_those_the_kernel_resolves(tmp_path: Path) -> None:
    """``link/../out`` where ``link`` leads into another user's directory is ``out`` in that
    directory, not beside ``link``: the walk above a download's directory follows the
    kernel (the link, then its target's parent), not the spelling."""
    theirs = tmp_path / "theirs"
    (theirs / "inner").mkdir(parents=True)
    (theirs / "out").mkdir()
    os.chown(theirs, NOBODY, NOBODY)
    (tmp_path / "link").symlink_to(theirs / "inner")
    assert trust.ancestors_problem(str(tmp_path / "mine")) is None
    problem = trust.ancestors_problem(f"{tmp_path}/link/../out")
    assert problem is not None and problem.startswith(f"{theirs} is owned by uid {NOBODY}")
