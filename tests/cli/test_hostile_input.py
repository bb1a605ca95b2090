"""What an audit of every command with hostile arguments, environments and streams found
ending in exit 1 (an internal error) or a hang, each now a documented exit code and one
sentence naming the cause: paths no file system takes, bytes that are no text, settings
past what a clock can wait, files that are FIFOs or endless devices, closed streams.

Each case runs the real command in a fresh interpreter (``python -m cudaup``), as a user
would, offline or against nothing: none needs the network.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from collections.abc import Mapping
from functools import partial
from pathlib import Path

import pytest

from cudaup.cli import switch
from cudaup.errors import EXIT_CODES
from tests.helpers import run_cli


def cudaup(
    tmp_path: Path,
    *argv: str | bytes,
    env: Mapping[str, str | bytes] | None = None,
    memory: int | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """``python -m cudaup ARGV`` with a home and cache of its own under ``tmp_path``
    (``env``'s values may be bytes that are no text; ``memory``: the bytes of address
    space it may take, so that a read without end fails instead of filling the machine)."""
    environment = {os.fsencode(k): os.fsencode(v) for k, v in os.environ.items()}
    environment[b"CUDAUP_HOME"] = os.fsencode(tmp_path / "home")
    environment[b"CUDAUP_CACHE_DIR"] = os.fsencode(tmp_path / "cache")
    environment.update({os.fsencode(k): os.fsencode(v) for k, v in (env or {}).items()})
    return subprocess.run(
        [sys.executable, "-m", "cudaup", *argv],
        env=environment,
        capture_output=True,
        timeout=60,
        check=False,
        preexec_fn=None if memory is None else partial(_limit_memory, memory),
    )


def _limit_memory(limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def said(run: subprocess.CompletedProcess[bytes]) -> str:
    err = run.stderr.decode(errors="replace")
    assert "Traceback" not in err and "internal error" not in err, err
    return err


def test_a_path_no_file_system_takes_is_bad_input_in_words_and_json(tmp_path: Path) -> None:
    long = "x" * 5000
    run = cudaup(tmp_path, "--json", "--offline", "download", "13.0", "-o", long)
    assert run.returncode == EXIT_CODES["usage"] == 2
    assert f"cannot use {long}: File name too long" in said(run)
    error = json.loads(run.stdout)["error"]
    assert error["kind"] == "usage" and "File name too long" in error["message"]


def test_a_home_that_is_a_file_is_bad_input(tmp_path: Path) -> None:
    home = tmp_path / "a-file"
    home.write_text("")
    run = cudaup(tmp_path, "default", "13.0", env={"CUDAUP_HOME": str(home)})
    assert run.returncode == 2 and f"cannot use {home}/default" in said(run)


@pytest.mark.parametrize(
    ("argv", "env"),
    [
        ((b"--mirror", b"\xff", b"--offline", b"resolve", b"13.0"), {}),
        ((b"--offline", b"resolve", b"13.0"), {"CUDAUP_PYPI_URL": b"http://x/\xff"}),
    ],
)
def test_a_url_of_bytes_that_are_no_text_is_bad_input(
    tmp_path: Path, argv: tuple[bytes, ...], env: dict[str, str | bytes]
) -> None:
    run = cudaup(tmp_path, *argv, env=env)
    assert run.returncode == 2 and "is not a URL cudaup can ask" in said(run)


def test_a_proxy_of_bytes_that_are_no_text_is_bad_input(tmp_path: Path) -> None:
    run = cudaup(tmp_path, "probe", "https://pypi.org/simple/", env={"HTTPS_PROXY": b"\xff"})
    assert run.returncode == 2 and "is not an http:// or https:// proxy URL" in said(run)


def test_a_wait_longer_than_a_clock_takes_is_bad_input(tmp_path: Path) -> None:
    env = {"CUDAUP_STALL_TIMEOUT": "9" * 23}
    run = cudaup(tmp_path, "probe", "https://pypi.org/simple/", env=env)
    assert run.returncode == 2
    assert f"CUDAUP_STALL_TIMEOUT='{'9' * 23}' is not a number of more than 0" in said(run)


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_lock_that_is_a_fifo_or_an_endless_device_is_refused_at_once(
    tmp_path: Path, kind: str
) -> None:
    lock = tmp_path / "cuda.lock.toml"
    if kind == "fifo":
        os.mkfifo(lock)
    else:
        lock = Path("/dev/zero")
    for argv in (("install", "--lock", str(lock)), ("mirror", str(lock), str(tmp_path / "m"))):
        run = cudaup(tmp_path, *argv)
        assert run.returncode == 2, argv
        assert f"cannot read the lock {lock}: not a regular file" in said(run)


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_small_files_that_are_fifos_or_endless_devices_are_unreadable_not_read(
    tmp_path: Path, kind: str
) -> None:
    """Files cudaup wrote and keeps small (a toolkit's record, the list of ``--prefix``
    installs) and a found toolkit's version files and header: a FIFO in their place (an
    open that blocks for ever) or a link to ``/dev/zero`` (a read that never ends: it
    filled the memory) is an unreadable file, and ``list`` and ``show`` go on."""
    home = tmp_path / "home"
    toolkit = home / "toolkits" / "13.0.2"
    found = tmp_path / "system" / "usr" / "local" / "cuda-12.8"
    (found / "include").mkdir(parents=True)
    toolkit.mkdir(parents=True)
    (found / "nvvm").mkdir()
    small = [
        toolkit / "cudaup-record.json",
        home / "external.json",
        found / "version.json",
        found / "version.txt",
        found / "include" / "cuda_runtime_api.h",
    ]
    for path in small:
        if kind == "fifo":
            os.mkfifo(path)
        else:
            path.symlink_to("/dev/zero")
    env = {"CUDAUP_SYSTEM_ROOT": str(tmp_path / "system")}
    listed = cudaup(tmp_path, "list", env=env, memory=2 << 30)
    assert listed.returncode == 0, said(listed)
    assert f"13.0.2    {toolkit}  (its cudaup-record.json cannot be read)" in listed.stdout.decode()
    assert " /usr/local/cuda-12.8  (found via /usr/local/cuda-*)" in listed.stdout.decode()
    shown = cudaup(tmp_path, "--json", "show", env=env, memory=2 << 30)
    assert shown.returncode == 0, said(shown)
    (installed,) = json.loads(shown.stdout)["installed"]
    assert installed == {
        "version": "13.0.2",
        "path": str(toolkit),
        "external": False,
        "active": False,
    }


def test_a_default_that_is_no_text_is_no_default(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "default").write_bytes(b"\xff\xfe\x00" * 10)
    for argv in (("show",), ("list",)):
        run = cudaup(tmp_path, *argv)
        assert run.returncode == 0, said(run)
    assert b"default    none" in cudaup(tmp_path, "show").stdout


def test_closed_streams_neither_crash_nor_stop_the_command(tmp_path: Path) -> None:
    """``>&-``: Python starts with no ``sys.stdout``; what would go there goes nowhere."""
    closed = subprocess.run(
        ["bash", "-c", f'exec "{sys.executable}" -m cudaup list >&-'],
        env={**os.environ, "CUDAUP_HOME": str(tmp_path / "home")},
        capture_output=True, timeout=60, check=False,
    )  # fmt: skip
    assert closed.returncode == 0 and said(closed) == ""
    failing = subprocess.run(
        ["bash", "-c", f'exec "{sys.executable}" -m cudaup --json --offline compat >&-'],
        env={**os.environ, "CUDAUP_HOME": str(tmp_path / "home")},
        capture_output=True, timeout=60, check=False,
    )  # fmt: skip
    assert failing.returncode == 2 and "no NVIDIA driver found" in said(failing)


def test_a_c_locale_without_utf8_mode_reads_the_shipped_tables(tmp_path: Path) -> None:
    run = cudaup(tmp_path, "--offline", "compat", "13.0", env={"LC_ALL": "C", "PYTHONUTF8": "0"})
    assert run.returncode == 0, said(run)


def test_an_over_long_python_version_is_bad_input(tmp_path: Path) -> None:
    run = cudaup(tmp_path, "--offline", "plan", "torch", "--python", "13." + "9" * 5000)
    assert run.returncode == 2 and "to learn its version" in said(run)


def test_an_internal_error_is_an_error_object_under_json_too(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exit 1 is a bug, and still one JSON object on stdout under ``--json``."""

    def broken(_args: object) -> int:
        raise RuntimeError("a bug")

    monkeypatch.setattr(switch, "cmd_show", broken)
    run = run_cli(capsys, "--json", "show")
    assert run.code == 1 and "internal error: RuntimeError('a bug')" in run.err
    assert run.json()["error"] == {
        "kind": "internal",
        "message": "internal error: RuntimeError('a bug')",
        "exit_code": 1,
    }


@pytest.mark.parametrize(
    ("text", "code", "says"),
    [
        (b"indexes = 5\n", 2, "'indexes' must be a table of tables"),
        (b"a = " + b"[" * 100_000 + b"\n", 8, "is nested too deeply"),
        (b"\xff\n", 8, "is not UTF-8"),
    ],
)
def test_a_user_index_table_of_another_shape_is_named(
    tmp_path: Path, text: bytes, code: int, says: str
) -> None:
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "indexes.toml").write_bytes(text)
    run = cudaup(tmp_path, "--offline", "plan", "torch", "--python", "3.11")
    assert run.returncode == code and f"{tmp_path}/home/indexes.toml" in said(run)
    assert says in said(run)


def test_a_toolkit_whose_version_json_is_nested_too_deeply_is_still_listed(
    tmp_path: Path,
) -> None:
    """A toolkit's own file, read to tell its components: unusable, so not read."""
    toolkit = tmp_path / "cuda-x"
    (toolkit / "bin").mkdir(parents=True)
    (toolkit / "version.json").write_text("[" * 100_000)
    run = cudaup(tmp_path, "--json", "list", env={"CUDA_HOME": str(toolkit)})
    assert run.returncode == 0, said(run)


@pytest.mark.parametrize("json_wanted", [False, True])
def test_output_to_a_full_disk_is_exit_10_naming_standard_output(
    tmp_path: Path, json_wanted: bool
) -> None:
    """``> /dev/full``, with output buffered as a user's shell gives it (this machine's
    environment may set PYTHONUNBUFFERED): it exited 120, in Python's words."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    env["CUDAUP_HOME"] = str(tmp_path / "home")
    with Path("/dev/full").open("w") as full:
        run = subprocess.run(
            [sys.executable, "-m", "cudaup", *(["--json"] if json_wanted else []), "list"],
            stdout=full, stderr=subprocess.PIPE, env=env, timeout=60, check=False,
        )  # fmt: skip
    err = said(run)
    assert run.returncode == EXIT_CODES["insufficient-space"] == 10
    assert err == (
        "cudaup: error: cannot write cudaup's output to standard output: No space left on "
        "device (where it is redirected: free space there, or redirect it elsewhere)\n"
    )


def _to_full(tmp_path: Path, stream: str, *argv: str) -> subprocess.CompletedProcess[bytes]:
    """``python -m cudaup ARGV`` with ``stream`` (stdout or stderr) on a full disk, each
    write reaching it at once (PYTHONUNBUFFERED, as this project's machines set it)."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", CUDAUP_HOME=str(tmp_path / "home"))
    env["CUDAUP_CACHE_DIR"] = str(tmp_path / "cache")
    with Path("/dev/full").open("w") as full:
        out, err = (full, subprocess.PIPE) if stream == "stdout" else (subprocess.PIPE, full)
        return subprocess.run(
            [sys.executable, "-m", "cudaup", *argv],
            env=env, timeout=60, check=False, stdout=out, stderr=err,
        )  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "kind"),
    [
        (("which", "nvcc"), "usage"),  # no toolkit is chosen: the error's sentence is lost
        (("resolve", "99.0", "--offline"), "release-not-found"),
        (("--json", "resolve", "99.0", "--offline"), "release-not-found"),
    ],
)
def test_errors_told_to_a_full_stderr_keep_their_exit_code(
    tmp_path: Path, argv: tuple[str, ...], kind: str
) -> None:
    """``2>/dev/full``: the error's sentence could not be written, and Python ended the run
    with exit 1, as for a bug ("lost sys.stderr")."""
    run = _to_full(tmp_path, "stderr", *argv)
    assert run.returncode == EXIT_CODES[kind], run.stdout
    if "--json" in argv:
        assert json.loads(run.stdout)["error"]["kind"] == kind


def test_a_command_that_answers_keeps_exit_0_with_stderr_full(tmp_path: Path) -> None:
    run = _to_full(tmp_path, "stderr", "-v", "versions", "--offline")
    assert run.returncode == 0 and b"13.0" in run.stdout


@pytest.mark.parametrize(
    "argv",
    [("resolve", "13.0", "--offline"), ("--json", "resolve", "13.0", "--offline"), ("--version",)],
)
def test_a_print_that_meets_a_full_stdout_is_exit_10_naming_it(
    tmp_path: Path, argv: tuple[str, ...]
) -> None:
    """Unbuffered, the handler's first print met the full disk: the error named the working
    directory as full ("the disk is full in …: 78 GiB are free"), and under ``--json`` the
    error object's own write failed into a traceback (exit 1); ``--version`` too."""
    run = _to_full(tmp_path, "stdout", *argv)
    assert run.returncode == EXIT_CODES["insufficient-space"] == 10
    assert said(run) == (
        "cudaup: error: cannot write cudaup's output to standard output: No space left on "
        "device (where it is redirected: free space there, or redirect it elsewhere)\n"
    )


def test_an_error_whose_json_meets_a_full_stdout_keeps_its_code(tmp_path: Path) -> None:
    """The command failed (no such release) and its error object cannot be written: the
    error's code stands and its sentence is on stderr (it was a traceback, exit 1)."""
    run = _to_full(tmp_path, "stdout", "--json", "resolve", "99.0", "--offline")
    assert run.returncode == EXIT_CODES["release-not-found"]
    assert said(run).startswith("cudaup: error: there is no CUDA 99.0.x")
