"""``cudaup env --shell github|dockerfile``: GitHub's file commands and Dockerfile ``ENV`` lines.

What cudaup writes is read back by parsers written here from each format's own
rules (:mod:`tests.github_runner` for the runner's files; BuildKit's word rules
for ``ENV``), with values that have spaces, line breaks, quotes, ``$``, ``=``,
``<<`` and backslashes.  The faults (no workflow, a missing file, a directory, a
read-only or full filesystem, a path no format can carry) each end with one
sentence, their exit code, and every file as it was before.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cudaup.errors import UsageError
from cudaup.install.store import Store
from cudaup.switch import github
from tests.github_runner import FileCommandError, parse_key_values, parse_path_file
from tests.helpers import CliResult, run_cli
from tests.switch.test_switch import make_toolkit, make_tree

#: A home whose path has everything a careless writer gets wrong.
AWKWARD = 'home with space=equals<<EOF "quoted" $HOME `tick` \\back é'
FILES = ("GITHUB_ENV", "GITHUB_PATH", "GITHUB_OUTPUT")


@pytest.fixture
def awkward(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A store at an awkward path, holding CUDA 13.0.1; the runner's three files, empty."""
    home = tmp_path / AWKWARD
    monkeypatch.setenv("CUDAUP_HOME", str(home))
    monkeypatch.setenv("CUDAUP_SYSTEM_ROOT", str(tmp_path / "root"))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    for name in ("CUDAUP_TOOLKIT", "CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    for name in FILES:
        (tmp_path / name.lower()).write_bytes(b"")
        monkeypatch.setenv(name, str(tmp_path / name.lower()))
    return make_toolkit(Store.from_env(), "13.0.1")


def contents(tmp_path: Path) -> dict[str, bytes]:
    return {name: (tmp_path / name.lower()).read_bytes() for name in FILES}


def env(capsys: pytest.CaptureFixture[str], *argv: str) -> CliResult:
    return run_cli(capsys, "env", *argv)


# -- GitHub Actions ------------------------------------------------------------------------
def test_github_round_trips_spaces_and_newlines_through_the_runner_format(
    awkward: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    earlier = "EARLIER=from another step\n"
    (tmp_path / "github_env").write_text(earlier)
    (tmp_path / "github_path").write_text("/opt/earlier/bin\n")
    monkeypatch.setenv("LD_LIBRARY_PATH", "/opt/with space/lib:/opt/new\nline/lib")

    result = env(capsys, "13.0", "--shell", "github", "--output")

    assert (result.code, result.err) == (0, "")
    assert result.out.splitlines() == [
        f"CUDA 13.0.1 ({awkward})",
        "  $GITHUB_ENV     CUDA_HOME, CUDA_PATH, LD_LIBRARY_PATH",
        f"  $GITHUB_PATH    {awkward}/bin",
        f"  $GITHUB_OUTPUT  cuda-version=13.0.1, cuda-home={awkward}",
    ]
    written = (tmp_path / "github_env").read_text(encoding="utf-8")
    assert written.startswith(earlier)  # appended, never rewritten
    assert parse_key_values(written) == {
        "EARLIER": "from another step",
        "CUDA_HOME": str(awkward),
        "CUDA_PATH": str(awkward),
        "LD_LIBRARY_PATH": f"{awkward}/lib64:/opt/with space/lib:/opt/new\nline/lib",
    }
    delimiters = re.findall(r"^[A-Z_]+<<(.*)$", written, flags=re.MULTILINE)
    assert len(set(delimiters)) == 3 and all(d.startswith("ghadelimiter_") for d in delimiters)
    assert parse_path_file((tmp_path / "github_path").read_text()) == [
        "/opt/earlier/bin",
        f"{awkward}/bin",
    ]
    assert parse_key_values((tmp_path / "github_output").read_text()) == {
        "cuda-version": "13.0.1",
        "cuda-home": str(awkward),
    }


def test_github_json_names_the_files_it_wrote(
    awkward: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = env(capsys, str(awkward), "--shell", "github", "--json").json()
    assert document["shell"] == "github"
    assert document["files"] == {
        "GITHUB_ENV": str(tmp_path / "github_env"),
        "GITHUB_PATH": str(tmp_path / "github_path"),
    }
    assert document["variables"]["CUDA_HOME"] == str(awkward)
    assert (tmp_path / "github_output").read_bytes() == b""  # no --output: no outputs


@pytest.mark.property
@given(
    name=st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,20}", fullmatch=True),
    value=st.text(st.characters(exclude_categories=["Cs"])),
)
def test_any_value_round_trips(name: str, value: str) -> None:
    text = github.key_value(name, value).decode("utf-8")
    assert parse_key_values(text) == {name: value}
    assert parse_key_values(text + text) == {name: value}  # entries end where they should


def test_names_and_path_entries_the_format_cannot_carry_are_refused() -> None:
    for name in ("", "1ST", "A B", "A=B", "A<<B", "A\nB"):
        with pytest.raises(UsageError, match="cannot be a variable name"):
            github.key_value(name, "value")
    assert github.key_value("cuda-version", "13.0.1", output=True).startswith(b"cuda-version<<")
    for directory in ("", "/opt/a\nb", "/opt/a\rb", "/opt/a:b"):
        with pytest.raises(UsageError, match=r"cannot go on PATH through \$GITHUB_PATH"):
            github.path_entry(directory)


def test_the_parser_here_rejects_what_the_runner_rejects() -> None:
    """The round trips above prove something only if this parser is as strict as the runner."""
    with pytest.raises(FileCommandError, match="matching delimiter not found"):
        parse_key_values("NAME<<EOF\nvalue\n")
    with pytest.raises(FileCommandError, match="invalid format"):
        parse_key_values("NAME value\n")
    assert parse_key_values("A=1\nB<<X\nline 1\n\nX\n") == {"A": "1", "B": "line 1\n"}


def test_github_outside_a_workflow_says_so_and_writes_nothing(
    awkward: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("GITHUB_PATH")
    result = env(capsys, "13.0", "--shell", "github", "--json")
    assert result.code == 2
    assert result.json()["error"]["kind"] == "usage"
    assert "$GITHUB_PATH is not set" in result.err and "workflow step" in result.err
    assert contents(tmp_path) == dict.fromkeys(FILES, b"")  # not even $GITHUB_ENV


@contextlib.contextmanager
def tmpfs(where: Path, size: str) -> Iterator[Path]:
    where.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True)


def fill(directory: Path) -> None:
    """Write until the filesystem is full."""
    fd = os.open(directory / "filler", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"\0" * 4096)
    finally:
        os.close(fd)


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_faults_in_the_runner_files_leave_every_file_as_it_was(
    awkward: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    before = {"GITHUB_ENV": b"KEEP=1\n", "GITHUB_PATH": b"/keep/bin\n", "GITHUB_OUTPUT": b""}
    for name, data in before.items():
        (tmp_path / name.lower()).write_bytes(data)
    argv = ("13.0", "--shell", "github", "--output")

    monkeypatch.setenv("GITHUB_OUTPUT", str(tmp_path / "no-such-file"))
    result = env(capsys, *argv)
    assert result.code == 2
    assert f"$GITHUB_OUTPUT ({tmp_path / 'no-such-file'}) does not exist" in result.err
    assert contents(tmp_path) == before

    monkeypatch.setenv("GITHUB_PATH", str(tmp_path))  # a directory
    result = env(capsys, *argv)
    assert result.code == 2
    assert f"cannot append to $GITHUB_PATH ({tmp_path}): Is a directory" in result.err
    monkeypatch.setenv("GITHUB_PATH", str(tmp_path / "github_path"))

    with tmpfs(tmp_path / "ro", "64k") as mounted:
        (mounted / "output").write_bytes(b"")
        subprocess.run(["mount", "-o", "remount,ro", str(mounted)], check=True)
        monkeypatch.setenv("GITHUB_OUTPUT", str(mounted / "output"))
        result = env(capsys, *argv, "--json")
        assert result.code == 14
        assert result.json()["error"]["kind"] == "permission-denied"
        assert f"cannot write to $GITHUB_OUTPUT ({mounted / 'output'})" in result.err
        assert contents(tmp_path) == before

    with tmpfs(tmp_path / "full", "64k") as mounted:
        (mounted / "output").write_bytes(b"")
        fill(mounted)
        monkeypatch.setenv("GITHUB_OUTPUT", str(mounted / "output"))
        result = env(capsys, *argv)
        assert result.code == 10
        assert f"no space left on the device of $GITHUB_OUTPUT ({mounted / 'output'})" in result.err
        # $GITHUB_ENV and $GITHUB_PATH had been written: they are cut back to what they held.
        assert contents(tmp_path) == before
        assert (mounted / "output").read_bytes() == b""


def test_a_toolkit_path_the_runner_cannot_read_is_refused(
    tmp_path: Path, awkward: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    not_utf8 = Path(os.fsdecode(bytes(tmp_path) + b"/cuda-\xff"))
    make_tree(not_utf8, "13.0")
    line_break = make_tree(tmp_path / "cuda\n13", "13.0")
    for toolkit, message in (
        (not_utf8, r"is not valid UTF-8, which the runner needs"),
        (line_break, r"cannot go on PATH through \$GITHUB_PATH"),
    ):
        result = env(capsys, str(toolkit), "--shell", "github")
        assert result.code == 2
        assert re.search(message, result.err)
        assert contents(tmp_path) == dict.fromkeys(FILES, b"")


def test_output_needs_github_and_a_release_cudaup_knows(
    tmp_path: Path, awkward: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = env(capsys, "13.0", "--shell", "bash", "--output")
    assert result.code == 2 and "--output goes with --shell github" in result.err
    elsewhere = make_tree(tmp_path / "opt-cuda", "13.0")
    result = env(capsys, str(elsewhere), "--shell", "github", "--output")
    assert result.code == 2
    assert f"cudaup did not install the toolkit at {elsewhere}" in result.err
    assert contents(tmp_path) == dict.fromkeys(FILES, b"")
    assert env(capsys, str(elsewhere), "--shell", "github").code == 0  # without --output, fine


# -- Dockerfiles ---------------------------------------------------------------------------
def _docker_word(text: str, env: Mapping[str, str], stop: str = "") -> tuple[str, int]:
    """BuildKit's word rules (frontend/dockerfile/shell/lex.go), the subset ENV values use:
    double and single quotes, ``\\`` escapes, ``$NAME``, ``${NAME}``, ``${NAME:+word}`` and
    ``${NAME:-word}``.  Returns the value and how many characters were read."""
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if stop and c == stop:
            return "".join(out), i + 1
        if c == "$":
            value, used = _docker_dollar(text[i:], env)
            out.append(value)
            i += used
        elif c == "'":
            end = text.index("'", i + 1)
            out.append(text[i + 1 : end])
            i = end + 1
        elif c == '"':
            i += 1
            while text[i] != '"':
                if text[i] == "$":
                    value, used = _docker_dollar(text[i:], env)
                    out.append(value)
                    i += used
                elif text[i] == "\\" and text[i + 1] in '"$\\':
                    out.append(text[i + 1])
                    i += 2
                else:
                    out.append(text[i])
                    i += 1
            i += 1
        elif c == "\\":
            out.append(text[i + 1])
            i += 2
        else:
            out.append(c)
            i += 1
    assert not stop, f"no closing {stop!r} in {text!r}"
    return "".join(out), i


def _docker_dollar(text: str, env: Mapping[str, str]) -> tuple[str, int]:
    if not text.startswith("${"):
        bare = re.match(r"\$([A-Za-z_][A-Za-z0-9_]*)", text)
        return (env.get(bare.group(1), ""), bare.end()) if bare else ("$", 1)
    match = re.match(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(\}|:[+-])", text)
    assert match, f"bad substitution in {text!r}"
    name, operator = match.groups()
    if operator == "}":
        return env.get(name, ""), match.end()
    word, used = _docker_word(text[match.end() :], env, stop="}")
    value = env.get(name, "")
    chosen = (word if value else "") if operator == ":+" else (value or word)
    return chosen, match.end() + used


def docker_env(dockerfile: str, image: Mapping[str, str]) -> dict[str, str]:
    """The image's environment after the ``ENV NAME=value`` lines, each seeing those before."""
    result = dict(image)
    for line in dockerfile.splitlines():
        match = re.fullmatch(r"ENV ([A-Za-z_][A-Za-z0-9_]*)=(.*)", line)
        assert match, f"not an ENV line: {line!r}"
        result[match.group(1)] = _docker_word(match.group(2), result)[0]
    return result


def test_dockerfile_env_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    toolkit = make_tree(tmp_path / "usr/local/cuda-13.0", "13.0")
    result = env(capsys, str(toolkit), "--shell", "dockerfile")
    assert (result.code, result.err) == (0, "")
    assert result.out == (
        f'ENV CUDA_HOME="{toolkit}"\n'
        f'ENV CUDA_PATH="{toolkit}"\n'
        f'ENV PATH="{toolkit}/bin:${{PATH}}"\n'
        f'ENV LD_LIBRARY_PATH="{toolkit}/lib64${{LD_LIBRARY_PATH:+:${{LD_LIBRARY_PATH}}}}"\n'
    )
    # The machine running cudaup has its own PATH: none of it reaches the image.
    assert os.environ["PATH"] not in result.out
    document = env(capsys, str(toolkit), "--shell", "dockerfile", "--json").json()
    assert document["variables"]["PATH"] == f"{toolkit}/bin:${{PATH}}"


def test_dockerfile_values_round_trip_through_docker_word_rules(
    awkward: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = env(capsys, "13.0", "--shell", "dockerfile")
    assert result.code == 0
    image = {"PATH": "/usr/local/sbin:/usr/bin:/bin"}
    built = docker_env(result.out, image)
    assert built["CUDA_HOME"] == built["CUDA_PATH"] == str(awkward)
    assert built["PATH"] == f"{awkward}/bin:/usr/local/sbin:/usr/bin:/bin"
    assert built["LD_LIBRARY_PATH"] == f"{awkward}/lib64"  # none in the image: no stray ':'
    with_libraries = docker_env(result.out, {**image, "LD_LIBRARY_PATH": "/opt/lib"})
    assert with_libraries["LD_LIBRARY_PATH"] == f"{awkward}/lib64:/opt/lib"


def test_dockerfile_refuses_paths_it_cannot_hold(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line_break = make_tree(tmp_path / "cuda\n13", "13.0")
    result = env(capsys, str(line_break), "--shell", "dockerfile")
    assert result.code == 2 and "has a line break, which a Dockerfile cannot hold" in result.err
    not_utf8 = make_tree(Path(os.fsdecode(bytes(tmp_path) + b"/cuda-\xfe")), "13.0")
    result = env(capsys, str(not_utf8), "--shell", "dockerfile")
    assert result.code == 2 and "is not valid UTF-8, which a Dockerfile needs" in result.err
    assert result.out == ""
