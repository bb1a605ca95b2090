"""A test that needs a program the machine lacks skips outside CI and fails under CI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

NEEDS_A_MISSING_PROGRAM = """
from tests.helpers import require_tool

def test_it():
    require_tool("cudaup-test-no-such-program", "cudaup-test-package")

def test_an_absolute_path():
    require_tool("/nonexistent/bin/zsh", "zsh")

def test_a_present_program():
    assert require_tool("sh", "dash").endswith("/sh")
"""


def run_pytest(tmp_path: Path, ci: str | None) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_needs.py").write_text(NEEDS_A_MISSING_PROGRAM)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTHONPATH"] = str(REPO)
    if ci is not None:
        env["CI"] = ci
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", "-p", "tests.cipolicy",
         "--rootdir", str(tmp_path), "-c", os.devnull, "test_needs.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize("ci", [None, "", "false"])
def test_outside_ci_a_missing_program_skips_naming_its_package(
    tmp_path: Path, ci: str | None
) -> None:
    done = run_pytest(tmp_path, ci)
    assert done.returncode == 0, done.stdout
    assert "1 passed, 2 skipped" in done.stdout
    assert (
        "cudaup-test-no-such-program is not installed: apt-get install cudaup-test-package"
        in done.stdout
    )
    assert "/nonexistent/bin/zsh is not installed: apt-get install zsh" in done.stdout


@pytest.mark.parametrize("ci", ["true", "1"])
def test_under_ci_the_same_skip_is_a_failure(tmp_path: Path, ci: str) -> None:
    done = run_pytest(tmp_path, ci)
    assert done.returncode == 1, done.stdout
    assert "2 failed, 1 passed" in done.stdout
    assert (
        "skipped under CI, where every test must run: cudaup-test-no-such-program is not "
        "installed: apt-get install cudaup-test-package"
    ) in done.stdout
