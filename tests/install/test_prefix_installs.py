"""``--prefix`` installs stay known and uninstallable, foreign-platform toolkits stay out
of the store, and ``install`` does what rustup and uv users expect after it: the
first toolkit becomes the default, one line says the next step, and no version
means the nearest ``.cuda-version``."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from cudaup.errors import EXIT_CODES
from cudaup.install.store import Store
from cudaup.switch import shim
from tests.fakenvidia.server import FakeNvidiaServer
from tests.helpers import CliResult, point_env_at, run_cli


@pytest.fixture
def store(fake_nvidia: FakeNvidiaServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Store:
    point_env_at(monkeypatch, fake_nvidia)
    monkeypatch.setenv("CUDAUP_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CUDAUP_SYSTEM_ROOT", str(tmp_path / "root"))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.delenv("CUDAUP_DRIVER_VERSION", raising=False)
    monkeypatch.delenv("CUDAUP_TOOLKIT", raising=False)
    (tmp_path / "root").mkdir()
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return Store(tmp_path / "home")


def install(capsys: pytest.CaptureFixture[str], *argv: str) -> CliResult:
    return run_cli(capsys, "install", *argv, "--channel", "redist", "--components", "nvcc", "-q")


# -- prefixes -----------------------------------------------------------------------------------
def test_two_prefixes_of_one_release_are_both_listed_and_removed_by_path(
    store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = tmp_path / "opt" / "a", tmp_path / "opt" / "b"
    for prefix in (first, second):
        done = install(capsys, "13.0.1", "--platform", "linux-x86_64", "--prefix", str(prefix))
        assert done.code == 0, done.err
    listed = run_cli(capsys, "list", "--json").json()["installed"]
    assert [(t["version"], t["path"], t["external"]) for t in listed] == [
        ("13.0.1", str(first), True),
        ("13.0.1", str(second), True),
    ]
    # A release at two places is named by its path: no guess which one goes.
    ambiguous = run_cli(capsys, "uninstall", "13.0.1")
    assert ambiguous.code == EXIT_CODES["usage"]
    assert str(first) in ambiguous.err and str(second) in ambiguous.err
    assert first.is_dir() and second.is_dir()
    removed = run_cli(capsys, "uninstall", str(second), "--json").json()
    assert removed["path"] == str(second) and not second.exists() and first.is_dir()
    assert [t["path"] for t in run_cli(capsys, "list", "--json").json()["installed"]] == [
        str(first)
    ]
    # The default was the first prefix (the first install): it still names it.
    assert store.default() == str(first)
    relative = os.path.relpath(first, Path.cwd())
    gone = run_cli(capsys, "uninstall", relative if relative.startswith(".") else f"./{relative}")
    assert gone.code == 0, gone.err
    assert not first.exists() and store.installed() == []
    assert store.default() is None  # it named what was removed
    assert "there is no default now" in gone.out
    nothing = run_cli(capsys, "uninstall", str(first))
    assert nothing.code == EXIT_CODES["artifact-not-found"]


def test_a_prefix_holding_another_release_is_replaced_only_with_force(
    store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prefix = tmp_path / "opt" / "cuda"
    x86 = ("--platform", "linux-x86_64", "--prefix", str(prefix))
    assert install(capsys, "12.8.1", *x86).code == 0
    before = sorted(str(p.relative_to(prefix)) for p in prefix.rglob("*"))
    refused = run_cli(
        capsys, "--json", "install", "13.0.1", "--channel", "redist", "--components", "nvcc", *x86
    )
    assert refused.code == EXIT_CODES["conflict"]
    says = f"{prefix} holds CUDA 12.8.1 (cuda_cudart, cuda_nvcc), not 13.0.1"
    hint = "--force replaces it with CUDA 13.0.1, or choose another --prefix"
    assert refused.err.strip() == f"cudaup: error: {says}\ncudaup: hint: {hint}"
    assert refused.json()["error"] == {
        "kind": "conflict", "message": says, "exit_code": 16, "hint": hint,
    }  # fmt: skip
    assert sorted(str(p.relative_to(prefix)) for p in prefix.rglob("*")) == before
    # --lock installs through the same check
    lock = tmp_path / "cuda.lock.toml"
    made = run_cli(
        capsys, "lock", "13.0.1", "--channel", "redist", "--components", "nvcc",
        "--platform", "linux-x86_64", "-o", str(lock),
    )  # fmt: skip
    assert made.code == 0, made.err
    locked = run_cli(capsys, "install", "--lock", str(lock), "--prefix", str(prefix))
    assert locked.code == EXIT_CODES["conflict"] and says in locked.err
    assert json.loads((prefix / "version.json").read_text())["cuda"]["version"] == "12.8.1"
    forced = run_cli(
        capsys, "--json", "install", "--lock", str(lock), "--prefix", str(prefix), "--force"
    )
    assert forced.code == 0, forced.err
    result = forced.json()
    assert result["skipped"] is False and result["version"] == "13.0.1"
    assert f"replaced CUDA 12.8.1 at {prefix} (--force)" in result["notes"]
    assert json.loads((prefix / "version.json").read_text())["cuda"]["version"] == "13.0.1"
    assert [(t["version"], t["path"]) for t in run_cli(capsys, "list", "--json").json()[
        "installed"]] == [("13.0.1", str(prefix))]  # fmt: skip
    # the same release again is still "already installed", with or without --force
    again = install(capsys, "13.0.1", *x86)
    assert again.code == 0 and run_cli(capsys, "list").code == 0
    # Deleting 12.8.1's hard links moved the ctime of its cached files; the replacement
    # stamped those trees anew, so 12.8.1 elsewhere is checked by sizes and modes only.
    elsewhere = tmp_path / "elsewhere"
    assert (
        install(capsys, "12.8.1", "--platform", "linux-x86_64", "--prefix", str(elsewhere)).code
        == 0
    )
    record = json.loads((elsewhere / "cudaup-record.json").read_text())
    assert [(a["tree"], "tree: digests" in a["checks"]) for a in record["artifacts"]] == [
        ("cache", False) for _ in record["artifacts"]
    ]


@pytest.mark.parametrize("force", [False, True])
def test_a_prefix_holding_what_cudaup_did_not_install_is_never_replaced(
    store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str], force: bool
) -> None:
    prefix = tmp_path / "project"
    prefix.mkdir()
    for name in ("notes.txt", "a", "b", "c", "d", "e"):
        (prefix / name).write_text("mine")
    done = install(
        capsys, "13.0.1", "--platform", "linux-x86_64", "--prefix", str(prefix),
        *(["--force"] if force else []),
    )  # fmt: skip
    assert done.code == EXIT_CODES["conflict"], done.err
    assert done.err.strip() == (
        f"cudaup: error: {prefix} holds a, b, c, d, e and 1 more, not a toolkit this cudaup "
        "installed, so cudaup will not replace it (not even with --force)\n"
        "cudaup: hint: choose another --prefix, or empty that directory"
    )
    assert sorted(p.name for p in prefix.iterdir()) == ["a", "b", "c", "d", "e", "notes.txt"]
    assert store.installed() == []
    empty = tmp_path / "empty"
    empty.mkdir()
    assert install(capsys, "13.0.1", "--platform", "linux-x86_64", "--prefix", str(empty)).code == 0
    assert (empty / "bin" / "nvcc").is_file()


def test_a_foreign_platform_needs_a_prefix_and_is_never_run_here(
    store: Store,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    refused = install(capsys, "13.0.1", "--platform", "linux-sbsa")
    assert refused.code == EXIT_CODES["usage"]
    assert "cannot run on this linux-x86_64 machine" in refused.err and "--prefix" in refused.err
    assert not store.toolkits_dir.exists()
    prefix = tmp_path / "sysroots" / "sbsa" / "cuda-13.0.1"
    done = run_cli(
        capsys, "install", "13.0.1", "--channel", "redist", "--components", "nvcc",
        "--platform", "linux-sbsa", "--prefix", str(prefix), "--json",
    )  # fmt: skip
    assert done.code == 0, done.err
    result = done.json()
    assert result["default_set"] is None  # never the default, even into an empty store
    assert "linux-sbsa toolkit cannot run here" in result["next"]
    [listed] = run_cli(capsys, "list", "--json").json()["installed"]
    assert listed["foreign_platform"] == "linux-sbsa" and listed["path"] == str(prefix)
    assert "for linux-sbsa, not run here" in run_cli(capsys, "list").out
    assert store.find("13.0") is None  # requests never name it
    assert sorted(p.name for p in store.bin_dir.iterdir()) == ["nvcc"]  # no shims for it
    chosen = run_cli(capsys, "default", "13.0.1")
    assert chosen.code != 0
    # Named by its path it is refused too, with the reason, wherever it would be selected.
    why = (
        f"{prefix} holds CUDA 13.0.1 for linux-sbsa (installed with --platform linux-sbsa), "
        "which cannot run on this linux-x86_64 machine; cudaup never selects it: name a "
        "toolkit for this machine"
    )
    for argv in (
        ["default", str(prefix)],
        ["pin", str(prefix)],
        ["run", str(prefix), "--", "nvcc", "--version"],
        ["env", str(prefix)],
    ):
        refused = run_cli(capsys, "--json", *argv)
        assert refused.code == EXIT_CODES["usage"], (argv, refused.err)
        assert refused.json()["error"]["message"] == why, argv
    assert store.default() is None and not (Path.cwd() / ".cuda-version").exists()
    monkeypatch.setenv("CUDAUP_TOOLKIT", str(prefix))
    shown = run_cli(capsys, "show", "--json").json()
    assert shown["active"]["path"] is None and shown["active"]["problem"] == why
    assert [t["active"] for t in shown["installed"]] == [False]
    assert f"active     none: {why}" in run_cli(capsys, "show").out
    which = run_cli(capsys, "which", "nvcc")
    assert which.code == EXIT_CODES["usage"] and why in which.err
    monkeypatch.delenv("CUDAUP_TOOLKIT")
    # A real shim refuses it too, with the reason, whoever names it: CUDAUP_TOOLKIT, a
    # .cuda-version written by hand (`pin` refuses to write one), a hand-edited default.
    assert (prefix / "bin" / "nvcc").is_file()  # its sbsa nvcc is there: never run
    project = tmp_path / "project"
    project.mkdir()
    (project / ".cuda-version").write_text(f"{prefix}\n")
    for chooser, extra, cwd in (
        ("CUDAUP_TOOLKIT", {"CUDAUP_TOOLKIT": str(prefix)}, tmp_path),
        (str(project / ".cuda-version"), {}, project),
    ):
        ran = subprocess.run(
            [str(store.bin_dir / "nvcc"), "--version"], cwd=cwd, capture_output=True,
            text=True, check=False, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), **extra},
        )  # fmt: skip
        assert ran.returncode == 127 and ran.stdout == "", ran.stderr
        assert ran.stderr == (
            f"cudaup: cannot run nvcc: {prefix} holds CUDA 13.0.1 for linux-sbsa (installed "
            f"with --platform linux-sbsa), chosen by {chooser}, which cannot run on this "
            f"machine; cudaup never selects it: {shim.HOW_TO_CHOOSE}\n"
        )
    (store.home / "default").write_text(f"{prefix}\n")
    ran = subprocess.run(
        [str(store.bin_dir / "nvcc")], cwd=tmp_path, capture_output=True, text=True,
        check=False, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )  # fmt: skip
    assert ran.returncode == 127 and "chosen by the default, which cannot run" in ran.stderr
    (store.home / "default").unlink()
    assert run_cli(capsys, "uninstall", str(prefix)).code == 0
    assert not prefix.exists() and store.installed() == []


# -- what follows an install ---------------------------------------------------------------------
def test_the_first_install_becomes_the_default_and_says_what_next(
    store: Store,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    system_link = Path("/usr/local/cuda")
    before = system_link.readlink() if system_link.is_symlink() else None
    first = install(capsys, "12.8.1", "--platform", "linux-x86_64")
    assert first.code == 0, first.err
    assert store.default() == "12.8.1"
    assert "default: 12.8.1 (the first toolkit cudaup installed" in first.out
    [step] = [line for line in first.out.splitlines() if line.startswith("next:")]
    assert f"put {store.bin_dir} on PATH" in step
    # cudaup's own default: /usr/local/cuda is never touched, here or under the test root.
    assert (system_link.readlink() if system_link.is_symlink() else None) == before
    assert not (tmp_path / "root" / "usr" / "local" / "cuda").exists()
    # With the shims on PATH, the next install is not made the default: say how to use it.
    monkeypatch.setenv("PATH", f"{store.bin_dir}:/usr/bin:/bin")
    second = install(capsys, "13.0.1", "--platform", "linux-x86_64", "--json")
    assert second.code == 0, second.err
    result = second.json()
    assert result["default_set"] is None and store.default() == "12.8.1"
    assert result["next"] == (
        "`cudaup default 13.0.1` to use it everywhere, or `cudaup pin 13.0.1` for this "
        f"directory (CUDA 12.8.1 ({store.toolkits_dir / '12.8.1'}) is active here)"
    )
    again = install(capsys, "12.8.1", "--platform", "linux-x86_64")
    assert "next: nothing: CUDA 12.8.1 is the active toolkit here (the default)" in again.out


def test_install_with_no_version_installs_what_the_nearest_pin_asks_for(
    store: Store,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    nothing = install(capsys, "--platform", "linux-x86_64")
    assert nothing.code == EXIT_CODES["usage"] and ".cuda-version" in nothing.err
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / ".cuda-version").write_text("# the CUDA this project builds with\n12.8\n")
    monkeypatch.chdir(project / "src")
    done = run_cli(
        capsys, "install", "--channel", "redist", "--components", "nvcc", "--platform",
        "linux-x86_64", "--json",
    )  # fmt: skip
    assert done.code == 0, done.err
    result = done.json()
    assert result["version"] == "12.8.2" and result["pin"] == str(project / ".cuda-version")
    text = install(capsys, "--platform", "linux-x86_64")
    assert text.out.startswith(f"{project / '.cuda-version'} asks for 12.8\n")
    for content, words in (("\n", "names no toolkit"), ("/opt/cuda\n", "names the directory")):
        (project / ".cuda-version").write_text(content)
        bad = install(capsys, "--platform", "linux-x86_64")
        assert bad.code == EXIT_CODES["usage"] and words in bad.err
    (project / ".cuda-version").write_text("twelve\n")
    assert install(capsys, "--platform", "linux-x86_64").code == EXIT_CODES["usage"]


def test_external_json_of_the_first_format_is_still_read(
    store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prefix = tmp_path / "old-prefix"
    done = install(capsys, "13.0.1", "--platform", "linux-x86_64", "--prefix", str(prefix))
    assert done.code == 0, done.err
    (store.home / "external.json").write_text(json.dumps({"13.0.1": str(prefix)}))
    assert [t.path for t in store.installed()] == [prefix]
    assert run_cli(capsys, "uninstall", str(prefix)).code == 0
    assert json.loads((store.home / "external.json").read_text())["toolkits"] == {}


# -- profiles -------------------------------------------------------------------------------------
def test_profiles_choose_what_an_install_brings(
    store: Store, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    base = ("install", "13.0.1", "--channel", "redist", "--platform", "linux-x86_64", "--json")
    minimal = run_cli(capsys, *base, "--profile", "minimal").json()
    assert minimal["components"] == ["cuda_cudart", "cuda_nvcc"]
    assert "profile minimal" in minimal["notes"]
    assert not any("offers no" in n for n in minimal["notes"])
    run_cli(capsys, "uninstall", "13.0.1")
    # complete is --all: every toolkit component the release has (not the driver)
    complete = run_cli(capsys, *base, "--profile", "complete").json()
    run_cli(capsys, "uninstall", "13.0.1")
    everything = run_cli(capsys, *base, "--all").json()
    assert complete["components"] == everything["components"] == ["cuda_cudart", "cuda_nvcc"]
    run_cli(capsys, "uninstall", "13.0.1")
    # the setting: CUDAUP_PROFILE, named as the origin
    monkeypatch.setenv("CUDAUP_PROFILE", "minimal")
    chosen = run_cli(capsys, *base[:-1])
    assert chosen.code == 0, chosen.err
    assert "note: profile minimal (from CUDAUP_PROFILE)" in chosen.out.splitlines()
    monkeypatch.setenv("CUDAUP_PROFILE", "everything")
    wrong = run_cli(capsys, *base)
    assert wrong.code == EXIT_CODES["usage"]
    assert wrong.json()["error"]["message"] == (
        "CUDAUP_PROFILE names no profile 'everything'; the profiles are minimal, default, complete"
    )
    both = run_cli(capsys, *base, "--profile", "minimal", "--components", "nvcc")
    assert both.code == EXIT_CODES["usage"] and "give one" in both.err
    bad = run_cli(capsys, "install", "13.0.1", "--profile", "huge")
    assert bad.code == EXIT_CODES["usage"] and "invalid choice: 'huge'" in bad.err


def test_every_profile_names_known_components() -> None:
    from cudaup.core.components import ALIASES, PROFILES

    assert PROFILES["minimal"] == ("nvcc", "cudart") and PROFILES["complete"] is None
    for names in PROFILES.values():
        assert all(name in ALIASES for name in names or ())
    assert set(PROFILES["minimal"]) < set(PROFILES["default"] or ())
