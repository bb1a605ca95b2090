"""Shared helpers: settings and CLI runs pointed at a fake NVIDIA server."""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cudaup.cli import main
from cudaup.config import Settings
from cudaup.core.platforms import Platform
from tests.fakenvidia.server import FakeNvidiaServer

CATALOG_PLATFORMS: dict[str, Platform] = {
    "linux-amd64": "linux-x86_64",
    "linux-arm64": "linux-sbsa",
    "windows-amd64": "windows-x86_64",
    "windows-arm64": "windows-arm64",
}


def settings_for(server: FakeNvidiaServer, **overrides: Any) -> Settings:
    return Settings.from_env(
        download_url=server.download_url,
        archive_url=server.archive_url,
        prerelease_url=server.prerelease_url,
        **overrides,
    )


def point_env_at(monkeypatch: pytest.MonkeyPatch, server: FakeNvidiaServer) -> None:
    monkeypatch.setenv("CUDAUP_NVIDIA_DOWNLOAD_URL", server.download_url)
    monkeypatch.setenv("CUDAUP_NVIDIA_ARCHIVE_URL", server.archive_url)
    monkeypatch.setenv("CUDAUP_NVIDIA_PRERELEASE_URL", server.prerelease_url)


@dataclass
class CliResult:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> CliResult:
    code = main(list(argv))
    captured = capsys.readouterr()
    return CliResult(code, captured.out, captured.err)


def require_tool(program: str, package: str) -> str:
    """The path of ``program`` (a name looked up on PATH, or an absolute path), which a
    test starts for real.  When the machine lacks it the test skips, naming the package
    that gives it; under CI every skip is a failure (``tests/cipolicy.py``)."""
    if Path(program).is_absolute():
        found = program if os.access(program, os.X_OK) else None
    else:
        found = shutil.which(program)
    if found is None:
        pytest.skip(
            f"{program} is not installed: apt-get install {package} "
            "(the README's Development section lists what the whole suite starts)"
        )
    return found


#: How long a wrapper's child runs (:func:`lingering_wrapper`): long enough that a test's
#: wait gives up first, so a kill that missed the child shows as that wait's timeout.
LINGER = 300


def lingering_wrapper(script: Path, first: str = "") -> Path:
    """Write ``script``: ``first`` (shell lines), then a long child started without
    ``exec``, its pid written to the returned file, and a wait for it, as a version
    manager's shim or a logging wrapper may run the program it stands for."""
    pid_file = script.with_name(script.name + ".child")
    script.write_text(
        f"#!/bin/sh\n{first}sleep {LINGER} &\n"
        f'echo $! > "{pid_file}.tmp"\nmv "{pid_file}.tmp" "{pid_file}"\nwait\n'
    )
    script.chmod(0o755)
    return pid_file


def started_child(pid_file: Path) -> int:
    """The pid of a :func:`lingering_wrapper`'s child, once the wrapper has written it."""
    deadline = time.monotonic() + 30
    while not pid_file.exists():
        assert time.monotonic() < deadline, "the wrapper never started its child"
        time.sleep(0.01)
    return int(pid_file.read_text())


def wait_until_ended(pid: int) -> None:
    """Wait until ``pid`` no longer runs (a zombie, killed but not yet reaped by whoever
    adopted it, has ended); fail after 30 s."""
    deadline = time.monotonic() + 30
    while True:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except FileNotFoundError:
            return
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return
        assert time.monotonic() < deadline, f"process {pid} still runs"
        time.sleep(0.01)
