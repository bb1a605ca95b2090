"""Shims only for NVIDIA's tools (issue #20, item 2): a hostile toolkit archive whose
``bin/`` holds ``ls``, ``sudo`` and ``python3`` gets no shims of those names.

Served for real (NVIDIA's redist format, and a PyPI wheel's ``nvidia/cu13/bin``),
installed through the CLI: install names what it skipped, ``ls`` on a PATH that
starts with the shims is the system's, and ``run``, ``which`` and the shim refuse
the names the same way, changing nothing anywhere.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cudaup.errors import EXIT_CODES
from tests.faultserver import FaultServer
from tests.helpers import run_cli
from tests.install.served import Files, make_wheel, serve_extras, serve_redist
from tests.sandbox import Sandbox, make_sandbox

FOREIGN = ["ls", "python3", "sudo"]


def hostile_bin(marker: Path, prefix: str) -> Files:
    """nvcc, and three programs that are no NVIDIA tool, each leaving ``marker`` if run."""
    files: Files = {f"{prefix}bin/nvcc": (b"#!/bin/sh\necho 'release 13.0, V13.0.88'\n", 0o755)}
    for name in FOREIGN:
        script = f"#!/bin/sh\necho {name} >> {marker}\necho 'the archive's {name}'\n"
        files[f"{prefix}bin/{name}"] = (script.encode(), 0o755)
    return files


def cudaup(*argv: str) -> subprocess.CompletedProcess[str]:
    """The CLI as a process, in this test's environment (``run`` replaces its process)."""
    argv = (sys.executable, "-m", "cudaup", *argv)
    return subprocess.run(argv, capture_output=True, text=True, check=False)


@pytest.fixture
def box(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Sandbox:
    return make_sandbox(tmp_path / "S", monkeypatch)


def install_hostile(
    channel: str,
    server: FaultServer,
    box: Sandbox,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> str:
    """Serve and install the hostile toolkit; its release."""
    marker = box.root / "ran"
    if channel == "redist":
        release = "90.0.5"
        serve_redist(server, release, hostile_bin(marker, ""))
        monkeypatch.setenv("CUDAUP_NVIDIA_DOWNLOAD_URL", server.url)
        monkeypatch.setenv("CUDAUP_NVIDIA_ARCHIVE_URL", server.url)
    else:
        release = "13.0.1"
        wheel = make_wheel("nvidia-cuda-nvcc", "13.0.88", hostile_bin(marker, "nvidia/cu13/"))
        extras = {"nvcc": ("nvidia-cuda-nvcc", "13.0.88", wheel)}
        monkeypatch.setenv("CUDAUP_PYPI_URL", serve_extras(server, release, extras))
    argv = ["install", release, "--channel", channel, "--components", "nvcc"]
    done = run_cli(capsys, *argv, "--platform", "linux-x86_64")
    assert done.code == 0, done.err
    toolkit = box.home / "toolkits" / release
    assert (
        f"note: no shims for ls, python3, sudo in {toolkit / 'bin'}: they are not tools "
        "NVIDIA's toolkits ship, so they never shadow a system command\n"
    ) in done.out
    again = run_cli(capsys, *argv, "--platform", "linux-x86_64", "--json")
    assert again.code == 0, again.err
    assert again.json()["shims_skipped"] == FOREIGN
    return release


@pytest.mark.parametrize("channel", ["redist", "pypi"])
def test_a_hostile_archives_system_commands_get_no_shims(
    channel: str,
    fault_server: FaultServer,
    box: Sandbox,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    release = install_hostile(channel, fault_server, box, monkeypatch, capsys)
    shim_dir = box.home / "bin"
    assert sorted(p.name for p in shim_dir.iterdir()) == ["nvcc"]
    marker = box.root / "ran"
    before = box.snapshot()
    # As the README sets it up: the shims first on PATH.  ls is the system's.
    env = {"PATH": f"{shim_dir}:/usr/bin:/bin", "HOME": str(box.work)}
    listing = subprocess.run(["ls", "/"], env=env, capture_output=True, text=True, check=True)
    assert "usr" in listing.stdout.split()
    compiler = subprocess.run(["nvcc"], env=env, capture_output=True, text=True, check=False)
    assert compiler.stdout == "release 13.0, V13.0.88\n", compiler.stderr
    # run, which and the shim refuse the names the same way.
    refusal = "'sudo' is not one of the tools NVIDIA's CUDA toolkits ship"
    which = run_cli(capsys, "which", "sudo")
    assert which.code == EXIT_CODES["artifact-not-found"]
    assert which.err.startswith(f"cudaup: error: cannot run sudo: {refusal}")
    run = cudaup("run", release, "--", "sudo", "-n", "true")  # a process: run execs
    assert run.returncode == 127 and run.stderr.startswith(
        f"cudaup: error: cannot run sudo: {refusal}"
    )
    assert "which PATH would find first" in run.stderr
    shim = subprocess.run(
        [sys.executable, "-m", "cudaup.switch.shim", str(box.home), "sudo"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert shim.returncode == 127 and shim.stderr.startswith(f"cudaup: cannot run sudo: {refusal}")
    assert not marker.exists()  # none of the archive's programs ran
    assert box.changed(before, box.snapshot()) == set()
    # A command that is no toolkit's, and that the toolkit lacks, runs as before.
    plain = cudaup("run", release, "--", "true")
    assert plain.returncode == 0, plain.stderr
