"""Completion scripts, run by the real shells: bash and fish complete for real; zsh runs the
generated function with its completion builtins replaced by ones that print what they get
(zsh completes only inside an interactive line editor)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cudaup.cli.commands import COMMANDS
from cudaup.install.store import Store
from tests.helpers import require_tool, run_cli
from tests.switch.test_switch import make_toolkit


def script(capsys: pytest.CaptureFixture[str], tmp_path: Path, shell: str) -> Path:
    result = run_cli(capsys, "completions", shell)
    assert result.code == 0, result.err
    path = tmp_path / f"cudaup.{shell}"
    path.write_text(result.out)
    return path


def bash_complete(path: Path, *words: str) -> list[str]:
    require_tool("bash", "bash")
    quoted = " ".join(f"'{w}'" for w in words)
    program = (
        f"source {path}; COMP_WORDS=(cudaup {quoted}); COMP_CWORD={len(words)}; "
        '_cudaup; printf "%s\\n" "${COMPREPLY[@]}"'
    )
    done = subprocess.run(["bash", "-c", program], capture_output=True, text=True, check=True)
    return done.stdout.split()


def test_bash_completes_commands_options_and_choices(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = script(capsys, tmp_path, "bash")
    assert bash_complete(path, "ins") == ["install"]
    assert set(bash_complete(path, "")) >= set(COMMANDS) | {"--json", "--mirror"}
    # a global option's value is not taken for the command
    assert bash_complete(path, "--mirror", "http://m/", "ins") == ["install"]
    assert bash_complete(path, "install", "--chan") == ["--channel"]
    assert bash_complete(path, "install", "--channel", "") == [
        "auto",
        "installer",
        "redist",
        "pypi",
    ]
    assert bash_complete(path, "cache", "p") == ["prune"]
    assert "--json" in bash_complete(path, "resolve", "13.0", "--")  # globals after the command
    assert bash_complete(path, "completions", "") == ["bash", "zsh", "fish"]


def test_fish_completes_commands_with_their_descriptions(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    require_tool("fish", "fish")
    path = script(capsys, tmp_path, "fish")

    def complete(line: str) -> list[str]:
        done = subprocess.run(
            ["fish", "--no-config", "-c", f"source {path}; complete -C '{line}'"],
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout.splitlines()

    assert complete("cudaup ins") == [f"install\t{COMMANDS['install'].summary}"]
    assert any(line.startswith("--channel\t") for line in complete("cudaup install --cha"))
    # fish sorts what it offers
    assert [line.split("\t")[0] for line in complete("cudaup install --channel ")] == [
        "auto",
        "installer",
        "pypi",
        "redist",
    ]
    assert [line.split("\t")[0] for line in complete("cudaup cache ")] == [
        "clean",
        "dir",
        "info",
        "prune",
    ]


def test_zsh_function_offers_the_same(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    require_tool("zsh", "zsh")
    path = script(capsys, tmp_path, "zsh")
    stubs = (
        'compdef() { :; }; _files() { print -r -- "FILES"; }; '
        'compadd() { shift; print -rl -- "$@"; }; '
        '_describe() { print -rl -- "${(@P)${@[-1]}}"; }; '
    )

    def complete(*words: str) -> list[str]:
        arrays = " ".join(f"'{w}'" for w in ("cudaup", *words))
        program = f"{stubs} source {path}; words=({arrays}); CURRENT={len(words) + 1}; _cudaup"
        done = subprocess.run(
            ["zsh", "-f", "-c", program], capture_output=True, text=True, check=False
        )
        assert done.returncode in {0, 1}, done.stderr
        assert not done.stderr, done.stderr
        return done.stdout.splitlines()

    offered = complete("")
    assert f"install:{COMMANDS['install'].summary}" in offered
    assert "--mirror:a cudaup mirror: every host and the PyPI index at one root" in offered
    assert complete("install", "--channel", "") == ["auto", "installer", "redist", "pypi"]
    assert (
        "--channel:where the files come from (default: auto, redist when NVIDIA answers, else pypi)"
        in complete("install", "")
    )
    assert complete("--mirror", "http://m/", "cache", "")[-5:] == [
        "dir",
        "info",
        "prune",
        "clean",
        "FILES",
    ]


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Two toolkits in the test's store, and this cudaup on PATH for the scripts to ask."""
    store = Store.from_env()
    for version in ("12.8.1", "13.0.1"):
        make_toolkit(store, version)
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:/usr/bin:/bin")
    return ["13.0.1", "12.8.1"]  # newest first, as `list` shows them


def test_values_complete_for_global_choices_platforms_and_installed_toolkits(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, installed: list[str]
) -> None:
    require_tool("fish", "fish")
    require_tool("zsh", "zsh")
    bash = script(capsys, tmp_path, "bash")
    assert bash_complete(bash, "--color", "") == ["auto", "always", "never"]
    assert bash_complete(bash, "install", "--platform", "linux-s") == ["linux-sbsa"]
    for command in ("default", "pin", "run", "env", "uninstall"):
        assert bash_complete(bash, command, "") == installed, command
    assert bash_complete(bash, "default", "13") == ["13.0.1"]
    fish = script(capsys, tmp_path, "fish")

    def fish_complete(line: str) -> list[str]:
        done = subprocess.run(
            ["fish", "--no-config", "-c", f"source {fish}; complete -C '{line}'"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        return [entry.split("\t")[0] for entry in done.stdout.splitlines()]

    assert fish_complete("cudaup --color ") == ["always", "auto", "never"]
    assert "linux-sbsa" in fish_complete("cudaup lock --platform ")
    offered = fish_complete("cudaup default ")  # the releases, and paths (a toolkit's too)
    assert set(installed) <= set(offered)
    zsh = script(capsys, tmp_path, "zsh")
    stubs = 'compdef() { :; }; _files() { :; }; compadd() { shift; print -rl -- "$@"; }; '
    stubs += "_describe() { :; }; "
    program = f"{stubs} source {zsh}; words=(cudaup --color ''); CURRENT=3; _cudaup"
    done = subprocess.run(["zsh", "-f", "-c", program], capture_output=True, text=True, check=False)
    assert done.stdout.split() == ["auto", "always", "never"], done.stderr
    program = f"{stubs} source {zsh}; words=(cudaup pin ''); CURRENT=3; _cudaup"
    done = subprocess.run(["zsh", "-f", "-c", program], capture_output=True, text=True, check=False)
    assert done.stdout.split() == installed, done.stderr


def test_json_completions_is_an_object_holding_the_script(
    capsys: pytest.CaptureFixture[str],
) -> None:
    plain = run_cli(capsys, "completions", "fish").out
    document = run_cli(capsys, "--json", "completions", "fish").json()
    assert document == {"schema": 1, "shell": "fish", "script": plain}
    missing = run_cli(capsys, "completions")
    assert missing.code == 2 and "name the shell" in missing.err
