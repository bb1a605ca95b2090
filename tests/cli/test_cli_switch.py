"""The switching commands end to end, through a parser built like ``cudaup.cli``'s.

``main`` below mirrors :func:`cudaup.cli.main` (error → one line and its exit
code; ``--json`` → an error object); subprocess tests run it with
``python -c`` so that ``cudaup run`` can exec.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cudaup.cli import main
from cudaup.cli.parser import build_parser
from cudaup.errors import EXIT_CODES
from cudaup.install.store import Store
from cudaup.machine.sysroot import SystemRoot
from cudaup.switch import pins, shim_files
from tests import fakemachine as fm
from tests.helpers import require_tool
from tests.switch.test_switch import make_toolkit, make_tree, readlink

REPO = Path(__file__).resolve().parents[2]
UPDATE_ALTERNATIVES = "/usr/bin/update-alternatives"


def cudaup(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def cudaup_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code, out, _ = cudaup(capsys, *argv, "--json")
    document: dict[str, Any] = json.loads(out)
    assert document["schema"] == 1
    assert (code == 0) == ("error" not in document)
    return document


def cudaup_process(
    *argv: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    code = "import sys; from cudaup.cli import main; sys.exit(main(sys.argv[1:]))"
    environ = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run(
        [sys.executable, "-c", code, *argv],
        cwd=cwd,
        env=environ,
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Store:
    home = tmp_path / "home"
    root = tmp_path / "root"
    root.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("CUDAUP_HOME", str(home))
    monkeypatch.setenv("CUDAUP_SYSTEM_ROOT", str(root))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.delenv("CUDAUP_TOOLKIT", raising=False)
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)
    monkeypatch.chdir(work)
    store = Store.from_env()
    for version in ("12.8.1", "13.0.1"):
        make_toolkit(store, version, ("nvcc", "ptxas") if version == "13.0.1" else ("nvcc",))
    return store


@pytest.fixture
def real_link_untouched() -> Iterator[None]:
    link = Path("/usr/local/cuda")
    before = readlink(link) if link.is_symlink() else None
    yield
    assert (readlink(link) if link.is_symlink() else None) == before


def test_every_switching_command_parses() -> None:
    for argv in (
        ["default"],
        ["default", "13.0"],
        ["default", "--system", "/usr/local/cuda-12.8"],
        ["default", "--unset"],
        ["pin", "12.8"],
        ["pin", "--unset"],
        ["env", "--shell", "fish"],
        ["env", "12.8"],
        ["which", "nvcc"],
        ["show"],
        ["undo"],
    ):
        assert callable(build_parser(argv[0]).parse_args(argv).handler)
    args = build_parser("run").parse_args(["run", "12.8", "--", "nvcc", "--version", "--json"])
    assert (args.version, args.cmd, args.json) == ("12.8", ["nvcc", "--version", "--json"], False)


# -- default -------------------------------------------------------------------------------
def test_default_set_print_and_unset(store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cudaup(capsys, "default")
    assert (code, out) == (0, "no default toolkit; set one with `cudaup default VERSION`\n")
    code, out, _ = cudaup(capsys, "default", "12.8")
    assert code == 0
    assert out.splitlines()[0] == (f"default: 12.8 → CUDA 12.8.1 ({store.toolkits_dir / '12.8.1'})")
    assert f"note: add {store.bin_dir} to PATH" in out
    assert store.default() == "12.8"
    assert (store.bin_dir / "nvcc").exists()  # the shims are written with the default
    assert (store.bin_dir / "ptxas").exists()
    assert cudaup(capsys, "default")[1] == (
        f"default: 12.8 → CUDA 12.8.1 ({store.toolkits_dir / '12.8.1'})\n"
    )
    document = cudaup_json(capsys, "default")
    assert document["default"] == {
        "value": "12.8",
        "path": str(store.toolkits_dir / "12.8.1"),
        "version": "12.8.1",
        "problem": None,
    }
    assert cudaup(capsys, "default", "--unset")[1] == "no default toolkit now\n"
    assert store.default() is None


def test_default_errors(store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cudaup(capsys, "default", "12.4")
    assert code == 3
    assert "no installed toolkit matches 12.4 (installed: 13.0.1, 12.8.1)" in err
    assert cudaup(capsys, "default", "twelve")[0] == 2
    document = cudaup_json(capsys, "default", "12.4")
    assert document["error"]["kind"] == "release-not-found"


def test_default_to_a_path_and_precedence_note(
    store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    vendored = make_tree(tmp_path / "vendor" / "cuda-12.6", "12.6.3", ("nvcc", "nvvp"))
    (Path.cwd() / ".cuda-version").write_text("13.0\n")
    document = cudaup_json(capsys, "default", str(vendored))
    assert document["default"]["value"] == str(vendored)
    assert document["notes"][0] == f"here, {Path.cwd() / '.cuda-version'} takes precedence (13.0)"
    assert (store.bin_dir / "nvvp").exists()  # tools of a path default get shims too


# -- pin ------------------------------------------------------------------------------------------
def test_pin_and_unset(store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    here = Path.cwd()
    code, out, err = cudaup(capsys, "pin", "12.8")
    assert (code, err) == (0, "")
    assert (
        out
        == f"wrote {here / '.cuda-version'}: 12.8 → CUDA 12.8.1 ({store.toolkits_dir / '12.8.1'})\n"
    )
    assert (here / ".cuda-version").read_text() == "12.8\n"
    assert cudaup(capsys, "pin")[1] == f"{here / '.cuda-version'}: 12.8\n"
    code, out, _ = cudaup(capsys, "pin", "--unset")
    assert (code, out) == (0, f"removed {here / '.cuda-version'}\n")
    assert not (here / ".cuda-version").exists()
    assert cudaup(capsys, "pin", "--unset")[1] == f"no .cuda-version in {here}\n"


def test_pin_warns_when_nothing_installed_matches(
    store: Store, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = cudaup(capsys, "pin", "12.4")
    assert code == 0
    assert (Path.cwd() / ".cuda-version").read_text() == "12.4\n"
    assert err.startswith("cudaup: warning: ")
    assert "asks for CUDA 12.4, which is not installed (installed: 13.0.1, 12.8.1)" in err
    assert err.endswith("; install it with `cudaup install 12.4`\n")
    assert cudaup(capsys, "pin", "not a version")[0] == 2
    monkeypatch.setenv("CUDAUP_TOOLKIT", "13.0")
    code, out, err = cudaup(capsys, "pin", "cu128")
    assert (code, err) == (0, "")
    assert out.splitlines()[1] == "note: CUDAUP_TOOLKIT=13.0 overrides it in this environment"
    code, out, err = cudaup(capsys, "pin", "./no/such/dir")
    assert err == (
        f"cudaup: warning: {Path.cwd() / '.cuda-version'} names ./no/such/dir, "
        "which is not a directory\n"
    )


def test_unpin_says_when_a_parent_pin_still_applies(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    parent = Path.cwd()
    (parent / ".cuda-version").write_text("13.0\n")
    child = parent / "child"
    child.mkdir()
    os.chdir(child)
    pins.write_pin(child, "12.8")
    document = cudaup_json(capsys, "pin", "--unset")
    assert document == {
        "schema": 1,
        "removed": str(child / ".cuda-version"),
        "applies_here": str(parent / ".cuda-version"),
    }


# -- env -------------------------------------------------------------------------------------------
def test_env_for_each_shell_and_json(
    store: Store, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    toolkit = store.toolkits_dir / "13.0.1"
    code, out, err = cudaup(capsys, "env", "13.0", "--shell", "bash")
    assert (code, err) == (0, "")
    assert out == (
        f"export CUDA_HOME={toolkit}\n"
        f"export CUDA_PATH={toolkit}\n"
        f"export PATH={toolkit}/bin:/usr/bin:/bin\n"
        f"export LD_LIBRARY_PATH={toolkit}/lib64\n"
    )
    monkeypatch.setenv("SHELL", "/usr/bin/fish")
    code, out, _ = cudaup(capsys, "env", "13.0")
    assert out.splitlines()[2] == f"set -gx PATH '{toolkit}/bin' '/usr/bin' '/bin';"
    monkeypatch.setenv("SHELL", "/bin/zsh")
    assert cudaup(capsys, "env", "13.0")[1].startswith(f"export CUDA_HOME={toolkit}\n")
    document = cudaup_json(capsys, "env", "13.0")
    assert document["shell"] == "zsh"
    assert document["variables"]["CUDA_HOME"] == str(toolkit)
    assert document["toolkit"]["version"] == "13.0.1"
    code, _, err = cudaup(capsys, "env")
    assert code == 2  # the user's to fix, not a bug
    assert "no CUDA toolkit is chosen here" in err


def test_env_takes_other_toolkits_libraries_off_ld_library_path(
    store: Store, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A profile's /usr/local/cuda/lib64 (what doctor calls mixing toolkits) goes; what
    is not a toolkit's library directory stays, in its order."""
    root = SystemRoot.from_env()
    for line in ("12.4", "12.6"):
        tree = make_tree(root.path(f"/usr/local/cuda-{line}"), line)
        (tree / "nvvm").mkdir()
        (tree / "targets" / "x86_64-linux" / "lib").mkdir(parents=True)
    root.path("/usr/local/cuda").symlink_to("/usr/local/cuda-12.4")
    make_tree(root.path("/opt/cuda-notes"), "notes")  # named cuda, but no toolkit
    kept = ["/opt/mine/lib", "/opt/cuda-notes/lib64", "/usr/lib/x86_64-linux-gnu"]
    monkeypatch.setenv(
        "LD_LIBRARY_PATH",
        ":".join([
            "/usr/local/cuda/lib64", kept[0], "/usr/local/cuda-12.6/targets/x86_64-linux/lib",
            kept[1], "/usr/local/cuda-12.4/lib", kept[2],
        ]),
    )  # fmt: skip
    document = cudaup_json(capsys, "env", "13.0", "--shell", "bash")
    toolkit = store.toolkits_dir / "13.0.1"
    assert document["variables"]["LD_LIBRARY_PATH"] == ":".join([f"{toolkit}/lib64", *kept])


def test_evaluating_env_in_bash_sets_it_and_does_not_stack(store: Store, tmp_path: Path) -> None:
    base = [
        sys.executable,
        "-c",
        "import sys; from cudaup.cli import main; sys.exit(main(sys.argv[1:]))",
    ]
    cli = " ".join(f"'{a}'" for a in base)
    script = (
        f'eval "$({cli} env 12.8 --shell bash)" && eval "$({cli} env 12.8 --shell bash)" && '
        f'eval "$({cli} env 13.0 --shell bash)" && '
        'echo "$CUDA_HOME" && echo "$PATH" && echo "$LD_LIBRARY_PATH" && nvcc'
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        ["bash", "-c", script], env=env, cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    toolkit = store.toolkits_dir / "13.0.1"
    assert done.stdout.splitlines()[:4] == [
        str(toolkit),
        f"{toolkit}/bin:/usr/bin:/bin",
        f"{toolkit}/lib64",
        "nvcc from 13.0.1",
    ]


# -- run ---------------------------------------------------------------------------------------------
def test_run_execs_the_command_with_the_toolkit(store: Store, tmp_path: Path) -> None:
    done = cudaup_process("run", "12.8", "--", "nvcc", "--version", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    toolkit = store.toolkits_dir / "12.8.1"
    lines = done.stdout.splitlines()
    assert lines[:2] == ["nvcc from 12.8.1", f"CUDA_HOME={toolkit}"]
    assert lines[4] == "ARGS=--version"
    script = 'echo "$CUDAUP_TOOLKIT"; exit 7'
    done = cudaup_process("run", "13.0", "--", "sh", "-c", script, cwd=tmp_path)
    assert done.returncode == 7
    assert done.stdout == f"{store.toolkits_dir / '13.0.1'}\n"


def test_run_errors(store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    done = cudaup_process("run", "12.4", "--", "nvcc", cwd=tmp_path)
    assert done.returncode == 3
    assert done.stderr == (
        "cudaup: error: the command line asks for CUDA 12.4, which is not installed "
        "(installed: 13.0.1, 12.8.1)\n"
    )
    done = cudaup_process("run", "12.8", "--", "no-such-command-here", cwd=tmp_path)
    assert done.returncode == 127
    assert "no-such-command-here: command not found" in done.stderr
    code, _, err = cudaup(capsys, "run", "12.8")
    assert code == 2
    assert "name a command to run" in err


# -- which / show ---------------------------------------------------------------------------------------
def test_which(
    store: Store, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CUDAUP_TOOLKIT", "13.0")
    code, out, err = cudaup(capsys, "which", "ptxas")
    assert code == 0
    assert out == f"{store.toolkits_dir / '13.0.1' / 'bin' / 'ptxas'}\n"
    assert err == "CUDA 13.0.1, from CUDAUP_TOOLKIT (13.0)\n"
    monkeypatch.setenv("CUDAUP_TOOLKIT", "12.8")
    code, _, err = cudaup(capsys, "which", "ptxas")
    assert code == 127  # as `cudaup run 12.8 -- ptxas` and the ptxas shim answer
    assert err == (
        f"cudaup: error: ptxas is not in CUDA 12.8.1 ({store.toolkits_dir / '12.8.1'}), "
        "chosen by CUDAUP_TOOLKIT; its cuda_nvcc is installed but holds no ptxas: reinstall it\n"
    )
    ran = cudaup_process("run", "12.8", "--", "ptxas", cwd=Path.cwd())
    assert ran.returncode == 127
    document = cudaup_json(capsys, "which", "nvcc")
    assert document["path"] == str(store.toolkits_dir / "12.8.1" / "bin" / "nvcc")
    assert document["toolkit"]["source"] == "env"


def test_show_reasons(
    store: Store, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    text = cudaup(capsys, "show")[1]
    assert text.startswith("active     none: no CUDA toolkit is chosen here")
    assert "system     /usr/local/cuda does not exist" in text
    store.set_default("13.0")
    out = cudaup(capsys, "show")[1].splitlines()
    assert out[1] == "           the default (13.0)"
    assert out[3] == f"installed  13.0.1   {store.toolkits_dir / '13.0.1'}  (active, default)"
    assert out[4] == f"           12.8.1   {store.toolkits_dir / '12.8.1'}"
    nested = Path.cwd() / "a" / "b"
    nested.mkdir(parents=True)
    (Path.cwd() / ".cuda-version").write_text("12.8\n")
    monkeypatch.chdir(nested)
    out = cudaup(capsys, "show")[1].splitlines()
    assert out[1] == f"           from {nested.parent.parent / '.cuda-version'} (12.8)"
    monkeypatch.setenv("CUDAUP_TOOLKIT", "12.8.1")
    out = cudaup(capsys, "show")[1].splitlines()  # the active one and the default, in words
    assert out[3:5] == [
        f"installed  13.0.1   {store.toolkits_dir / '13.0.1'}  (default)",
        f"           12.8.1   {store.toolkits_dir / '12.8.1'}  (active)",
    ]
    document = cudaup_json(capsys, "show")
    assert document["active"]["reason"] == "from CUDAUP_TOOLKIT"
    assert document["default"] == "13.0"
    assert [t["active"] for t in document["installed"]] == [False, True]
    assert document["system_link"]["kind"] == "absent"
    monkeypatch.setenv("CUDAUP_TOOLKIT", "11.0")
    document = cudaup_json(capsys, "show")
    assert document["active"]["reason"].startswith("none: CUDAUP_TOOLKIT asks for CUDA 11.0")


# -- shims -----------------------------------------------------------------------------------------------------
def test_shims_of_a_moved_cudaup_say_so_and_shims_rebuild_repairs_them(
    store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A checkout (or virtual environment) moved after writing the shims: each shim
    names the way out instead of sh's "not found", and `shims --rebuild` rewrites them."""
    store.set_default("13.0.1")
    gone = tmp_path / "old-checkout" / ".venv" / "bin" / "python"
    shim_files.write_shims(store, shim_files.available_tools(store), python=str(gone))
    env = {"PATH": f"{store.bin_dir}:/usr/bin:/bin", "CUDAUP_HOME": str(store.home)}
    broken = subprocess.run(
        ["nvcc", "--version"], env=env, capture_output=True, text=True, check=False
    )
    assert broken.returncode == 127
    assert broken.stderr == (
        f"cudaup: the nvcc shim's cudaup ({gone}, {shim_files.package_root()}) is gone (moved?); "
        "run `cudaup shims --rebuild` with the cudaup you use now\n"
    )
    listed = cudaup_json(capsys, "shims")
    assert listed["stale"] == ["nvcc", "ptxas"] and listed["rebuilt"] == []
    code, out, _ = cudaup(capsys, "shims")
    assert code == 0 and "`cudaup shims --rebuild` rewrites them" in out
    rebuilt = cudaup_json(capsys, "shims", "--rebuild")
    assert rebuilt["rebuilt"] == ["nvcc", "ptxas"] and rebuilt["stale"] == []
    assert cudaup_json(capsys, "shims")["stale"] == []
    works = subprocess.run(
        ["nvcc", "--version"], env=env, capture_output=True, text=True, check=False
    )
    assert works.returncode == 0, works.stderr
    assert works.stdout.startswith("nvcc from 13.0.1")


# -- default --system / undo --------------------------------------------------------------------------------
def test_default_system_and_undo_with_a_plain_link(
    store: Store, capsys: pytest.CaptureFixture[str], real_link_untouched: None
) -> None:
    root = SystemRoot.from_env()
    for line in ("12.8", "13.0"):
        make_tree(root.path(f"/usr/local/cuda-{line}"), line)
    root.path("/usr/local/cuda").symlink_to("/usr/local/cuda-13.0")
    code, out, err = cudaup(capsys, "default", "--system", "/usr/local/cuda-12.8")
    assert (code, err) == (0, "")
    assert out == (
        "/usr/local/cuda → /usr/local/cuda-12.8\n"
        "  was → /usr/local/cuda-13.0; `cudaup undo` puts it back\n"
    )
    assert cudaup(capsys, "default", "--system")[1] == "/usr/local/cuda → /usr/local/cuda-12.8\n"
    assert store.default() is None  # cudaup's own default is a different thing
    document = cudaup_json(capsys, "undo")
    assert document["after"]["target"] == "/usr/local/cuda-13.0"
    assert readlink(root.path("/usr/local/cuda")) == "/usr/local/cuda-13.0"
    code, _, err = cudaup(capsys, "undo")
    assert code == EXIT_CODES["conflict"]
    assert "nothing to undo" in err


def test_uninstalling_the_toolkit_the_system_link_leads_to_undoes_the_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    real_link_untouched: None,
) -> None:  # fmt: skip
    root = tmp_path / "root"
    home = root / "opt" / "cudaup"  # a store inside the system root: /opt/cudaup
    monkeypatch.setenv("CUDAUP_HOME", str(home))
    monkeypatch.setenv("CUDAUP_SYSTEM_ROOT", str(root))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    store = Store.from_env()
    for version in ("12.8.1", "13.0.1"):
        make_toolkit(store, version)
    system = SystemRoot.from_env()
    make_tree(system.path("/usr/local/cuda-12.4"), "12.4")
    system.path("/usr/local/cuda").symlink_to("/usr/local/cuda-12.4")
    assert cudaup(capsys, "default", "--system", "13.0.1")[0] == 0
    assert readlink(system.path("/usr/local/cuda")) == "/opt/cudaup/toolkits/13.0.1"
    code, out, err = cudaup(capsys, "uninstall", "13.0.1")
    assert (code, err) == (0, "")
    assert out.splitlines()[:2] == [
        f"removed CUDA 13.0.1 from {home}/toolkits/13.0.1",
        "note: /usr/local/cuda led to it (`cudaup default --system`): undone, "
        "/usr/local/cuda → /usr/local/cuda-12.4 again",
    ]
    assert readlink(system.path("/usr/local/cuda")) == "/usr/local/cuda-12.4"
    assert cudaup(capsys, "undo")[0] == EXIT_CODES["conflict"]  # nothing left to undo
    # A link someone else set is left as it is, and the uninstall says it now dangles.
    system.path("/usr/local/cuda").unlink()
    system.path("/usr/local/cuda").symlink_to("/opt/cudaup/toolkits/12.8.1")
    document = cudaup_json(capsys, "uninstall", "12.8.1")
    assert document["system_link"] == []
    assert document["notes"] == [
        f"/usr/local/cuda leads to {home}/toolkits/12.8.1 and cudaup did not set it so; it "
        "leads nowhere now: point it elsewhere with `cudaup default --system VERSION`"
    ]
    assert readlink(system.path("/usr/local/cuda")) == "/opt/cudaup/toolkits/12.8.1"


def test_default_system_refuses_a_real_directory(
    store: Store, capsys: pytest.CaptureFixture[str], real_link_untouched: None
) -> None:
    root = SystemRoot.from_env()
    make_tree(root.path("/usr/local/cuda-12.8"), "12.8")
    make_tree(root.path("/usr/local/cuda"), "runfile")
    code, _, err = cudaup(capsys, "default", "--system", "/usr/local/cuda-12.8")
    assert code == EXIT_CODES["conflict"]
    assert "/usr/local/cuda is a real directory, not a link; cudaup will not replace it" in err


def test_default_system_and_undo_with_alternatives(
    store: Store, capsys: pytest.CaptureFixture[str], real_link_untouched: None
) -> None:
    require_tool(UPDATE_ALTERNATIVES, "dpkg")
    root = SystemRoot.from_env()
    for line in ("12.8", "13.0"):
        make_tree(root.path(f"/usr/local/cuda-{line}"), line)
    subprocess.run(
        [
            *(UPDATE_ALTERNATIVES, "--root", str(root.root), "--install", "/usr/local/cuda"),
            *("cuda", "/usr/local/cuda-13.0", "120"),
        ],
        check=True,
        capture_output=True,
    )
    code, out, err = cudaup(capsys, "default", "--system", "/usr/local/cuda-12.8")
    assert (code, err) == (0, "")
    assert out.splitlines()[0] == (
        "/usr/local/cuda → /usr/local/cuda-12.8 (update-alternatives 'cuda', manual mode) "
        "through update-alternatives"
    )
    document = cudaup_json(capsys, "undo")
    assert document["method"] == "update-alternatives"
    assert document["after"]["value"] == "/usr/local/cuda-13.0"
    assert document["after"]["status"] == "auto"
    assert "/usr/local/cuda-12.8" not in root.path("/var/lib/dpkg/alternatives/cuda").read_text()


def test_shell_choices_match_the_library() -> None:
    from cudaup.switch import environment

    parser = build_parser("env")
    for shell in environment.ENV_FORMATS:
        assert parser.parse_args(["env", "--shell", shell]).shell == shell


def test_list_marks_a_default_given_as_a_request(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    for version in ("13.0.1", "13.0.2", "12.8.1"):
        make_toolkit(store, version)
    assert cudaup(capsys, "default", "13.0")[0] == 0
    document = cudaup_json(capsys, "list")
    assert [t["version"] for t in document["installed"] if t["default"]] == ["13.0.2"]
    assert document["default"] == "13.0"
    code, out, _ = cudaup(capsys, "list")
    assert code == 0
    marked = [line.split()[0] for line in out.splitlines() if line.endswith(" (default)")]
    assert marked == ["13.0.2"] and "*" not in out


def test_uninstall_names_who_owns_a_toolkit_cudaup_did_not_install(
    store: Store, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = SystemRoot.from_env()
    # nvcc 12.6.85 with cudart 12.6.77 is 12.6.3 and nothing else
    tree = fm.toolkit_tree(root.path("/opt/cuda-12.6"), nvcc="12.6.85", cudart="12.6.77")
    monkeypatch.setenv("CUDA_HOME", str(tree))  # the environment names real paths
    code, _, err = cudaup(capsys, "uninstall", "12.6.3")
    assert code == EXIT_CODES["usage"]
    assert "was not installed by cudaup (found via CUDA_HOME)" in err, err
    assert "not cudaup, not cudaup" not in err and tree.is_dir()


# -- a floating request and a partial toolkit ---------------------------------------------------------------
def test_a_partial_newer_toolkit_does_not_take_nvcc_from_a_floating_default(
    store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 13.0.2 installed with libraries only (cublas), plus one tool no other toolkit has.
    partial = store.toolkits_dir / "13.0.2"
    (partial / "lib64").mkdir(parents=True)
    (partial / "lib64" / "libcublas.so.13").write_text("ELF")
    make_tree(partial, "13.0.2", ("ncu",))
    store.write_record(partial, {"version": "13.0.2", "components": ["libcublas"]})
    assert cudaup(capsys, "default", "13.0")[0] == 0
    full = store.toolkits_dir / "13.0.1"
    env = {"PATH": f"{store.bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path)}
    nvcc = subprocess.run(["nvcc"], env=env, capture_output=True, text=True, check=True)
    assert nvcc.stdout.startswith("nvcc from 13.0.1")  # the shim
    assert cudaup_json(capsys, "which", "nvcc")["path"] == str(full / "bin" / "nvcc")
    shown = cudaup_json(capsys, "show")
    assert shown["active"]["version"] == "13.0.1"
    assert [t["version"] for t in shown["installed"] if t["active"]] == ["13.0.1"]
    assert cudaup_json(capsys, "env", "--shell", "bash")["variables"]["CUDA_HOME"] == str(full)
    assert [t["version"] for t in cudaup_json(capsys, "list")["installed"] if t["default"]] == [
        "13.0.1"
    ]
    # Per tool: what only 13.0.2 has comes from 13.0.2, through the shim, which and run.
    ncu = subprocess.run(["ncu"], env=env, capture_output=True, text=True, check=True)
    assert ncu.stdout.startswith("ncu from 13.0.2")
    assert cudaup_json(capsys, "which", "ncu")["path"] == str(partial / "bin" / "ncu")
    ran = cudaup_process("run", "13.0", "--", "ncu", cwd=tmp_path)
    assert ran.returncode == 0 and ran.stdout.startswith("ncu from 13.0.2"), ran.stderr
    # The release named exactly is that release, partial or not.
    exact = subprocess.run(
        ["nvcc"],
        env={**env, "CUDAUP_TOOLKIT": "13.0.2"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert exact.returncode == 127
    assert "nvcc is not in CUDA 13.0.2" in exact.stderr and "cuda_nvcc component" in exact.stderr


# -- run never falls through to another toolkit's tool ----------------------------------------------------------
def test_run_refuses_another_toolkits_nvcc_and_names_the_component(
    store: Store, tmp_path: Path
) -> None:
    # 12.9.0 as PyPI's CUDA 12 wheels make it: ptxas, no nvcc.
    make_toolkit(store, "12.9.0", ("ptxas",))
    elsewhere = make_tree(tmp_path / "usr-local" / "cuda-13.0", "system", ("nvcc", "nvvp"))
    (elsewhere / "include").mkdir()
    (elsewhere / "include" / "cuda_runtime_api.h").write_text("#define CUDART_VERSION 13000\n")
    plain = make_tree(tmp_path / "usr-local-bin", "wrapper", ("nvcc",))  # like /usr/local/bin
    for directory in (elsewhere / "bin", plain / "bin"):
        env = {"PATH": f"{directory}:/usr/bin:/bin"}
        done = cudaup_process("run", "12.9", "--", "nvcc", "--version", cwd=tmp_path, env=env)
        assert done.returncode == 127, done.stdout
        assert done.stdout == ""  # the other nvcc never ran
        assert f"nvcc is not in CUDA 12.9.0 ({store.toolkits_dir / '12.9.0'})" in done.stderr
        assert "cuda_nvcc" in done.stderr and "--channel redist" in done.stderr
    # Every tool NVIDIA's toolkits ship (cudaup.core.tools) is a toolkit's, whether or not
    # an installed toolkit has it: another toolkit's nvvp is refused too.
    env = {"PATH": f"{elsewhere / 'bin'}:/usr/bin:/bin"}
    make_toolkit(store, "13.0.2", ("nvcc", "nvvp"))
    shim_files.refresh_shims(store)
    other = cudaup_process("run", "12.9", "--", "nvvp", cwd=tmp_path, env=env)
    assert other.returncode == 127 and other.stdout == ""
    assert f"cudaup does not run {elsewhere / 'bin' / 'nvvp'} instead" in other.stderr
    # Commands that are no toolkit's run as they are; a nested nvcc meets the shims first.
    nested = cudaup_process("run", "12.9", "--", "sh", "-c", "nvcc; echo $?", cwd=tmp_path, env=env)
    assert nested.returncode == 0
    assert nested.stdout == "127\n" and "nvcc is not in CUDA 12.9.0" in nested.stderr
    assert cudaup_process("run", "12.9", "--", "ptxas", cwd=tmp_path, env=env).returncode == 0
