"""``uv pip check`` runs beside the import check; its failure is still the one reported first.

A real environment (a virtual environment with one wheel that requires a distribution
nobody installed and whose module raises on import) fails both steps; the verification
names ``check``, as when the steps ran one after the other, and with nothing broken it
goes on to name ``import``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cudaup.core.driver import DriverInfo
from cudaup.errors import VerificationFailedError
from cudaup.plan.uv import find_uv
from cudaup.upgrade.changes import Change
from cudaup.upgrade.environment import read_environment
from cudaup.upgrade.families import load_families
from cudaup.upgrade.verify import Verifier
from tests.upgrade.world import wheel

NO_DRIVER = DriverInfo(None, None, (), "none", ("no driver on this host",))
ADDED = [Change("add", None, None, "brittle", "1.0", None, None, "the test's package")]
FAILING_IMPORT = {"brittle/__init__.py": "raise ImportError('brittle on purpose')\n"}


def environment_with(tmp_path: Path, requires: tuple[str, ...]) -> Path:
    """A virtual environment holding ``brittle 1.0`` (its import fails); its python."""
    name, data = wheel("brittle", "1.0", requires, files=FAILING_IMPORT)
    built = tmp_path / name
    built.write_bytes(data)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [find_uv(), "pip", "install", "--quiet", "--no-config", "--offline", "--no-deps",
         "--python", str(python), str(built)],
        check=True,
    )  # fmt: skip
    return python


def verify(python: Path) -> VerificationFailedError:
    """The verification of ``python``'s environment, upgraded from one without ``brittle``."""
    before = python.parent.parent.parent / "before"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(before)], check=True)
    original = read_environment(str(before / "bin" / "python"))
    with pytest.raises(VerificationFailedError) as failed:
        Verifier(NO_DRIVER, stubs=[]).verify(
            python, (13, 0), ADDED, {"brittle": "1.0"}, {}, load_families(), original
        )
    return failed.value


def test_a_broken_requirement_is_reported_before_a_failed_import(tmp_path: Path) -> None:
    error = verify(environment_with(tmp_path, ("missing-dependency>=1",)))
    assert error.step == "check" and error.package == "brittle", error
    assert "missing-dependency" in str(error)


def test_with_nothing_broken_the_failed_import_is_reported(tmp_path: Path) -> None:
    error = verify(environment_with(tmp_path, ()))
    assert error.step == "import" and error.package == "brittle", error
    assert "brittle on purpose" in str(error)
