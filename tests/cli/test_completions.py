"""Completion scripts, run by the real shells: bash and fish complete for real; zsh runs the
generated function with its completion builtins replaced by ones that print what they get
(zsh completes only inside an interactive line editor)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from cudaup.cli.commands import COMMANDS
from tests.helpers import require_tool, run_cli


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
