"""The binding (``cudaup-toolkit.pth``): what the environment's own interpreter sees, without
activation; what ``upgrade`` binds; and ``rollback`` putting the previous binding back."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cudaup.install.store import Store
from cudaup.upgrade.binding import BINDING, read_binding, write_binding
from tests.fakenvidia.products import with_products
from tests.fakenvidia.site import build_site
from tests.helpers import point_env_at, run_cli
from tests.upgrade.conftest import MakeEnv
from tests.upgrade.world import tree_state, upgrade

SHOW = "import os; print(os.environ.get('CUDA_HOME'), os.environ.get('CUDA_PATH'))"


def _site(python: Path) -> Path:
    [site] = (python.parent.parent / "lib").glob("python*/site-packages")
    return site


def _seen(
    python: Path, *argv: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> str:
    base = {k: v for k, v in os.environ.items() if k not in {"CUDA_HOME", "CUDA_PATH"}}
    done = subprocess.run(
        [str(python), *argv], capture_output=True, text=True, check=True,
        env={**base, **(env or {})}, cwd=cwd,
    )  # fmt: skip
    return done.stdout.strip()


def test_the_environments_interpreter_sees_its_toolkit_without_activation(tmp_path: Path) -> None:
    root = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    python = root / "bin" / "python"
    toolkit = tmp_path / "store" / "toolkits" / "it's 13.0.2"  # a quote survives the .pth
    write_binding(_site(python), toolkit)
    assert read_binding(_site(python)) == toolkit
    assert _seen(python, "-c", SHOW) == f"{toolkit} {toolkit}"
    (tmp_path / "show.py").write_text(SHOW + "\n")
    assert _seen(python, "-m", "show", cwd=tmp_path) == f"{toolkit} {toolkit}"
    child = "import subprocess; subprocess.run(['sh', '-c', 'echo $CUDA_HOME'])"
    assert _seen(python, "-c", child) == str(toolkit)  # what it starts (nvcc builds) too
    # A value the user chose wins; the other is then not set behind their back.
    assert _seen(python, "-c", SHOW, env={"CUDA_HOME": "/mine"}) == "/mine None"
    assert _seen(python, "-c", SHOW, env={"CUDA_PATH": "/mine"}) == "None /mine"
    write_binding(_site(python), None)
    assert not (_site(python) / BINDING).exists() and _seen(python, "-c", SHOW) == "None None"
    assert read_binding(_site(python)) is None


def test_upgrade_binds_the_new_toolkit_and_rollback_restores_the_old_binding(
    make_env: MakeEnv,
    fake_nvidia: object,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    point_env_at(monkeypatch, fake_nvidia)  # type: ignore[arg-type]
    python = make_env(["cupy-cuda12x==13.4.1", "cuda-bindings==12.8.0"])
    old = tmp_path / "opt" / "cuda-12.8"
    write_binding(_site(python), old)  # bound before, by an earlier cudaup
    root = python.parent.parent
    state = tree_state(root)
    store = Store.from_env()
    assert store.is_empty()

    result = upgrade(capsys, python, "13.0", "--yes", "--channel", "redist", "--json")
    assert result.code == 0, result.err
    outcome = result.json()
    toolkit = Path(outcome["toolkit"]["path"])
    assert outcome["binding"] == str(toolkit) and read_binding(_site(python)) == toolkit
    assert _seen(python, "-c", SHOW) == f"{toolkit} {toolkit}"
    # The first toolkit in an empty store became the default, as `cudaup install` makes it.
    assert store.default() == outcome["toolkit"]["version"]
    assert f"default: {outcome['toolkit']['version']}" in " ".join(outcome["notes"])

    restored = run_cli(capsys, "rollback", "--python", str(python))
    assert restored.code == 0, restored.err
    assert read_binding(_site(python)) == old and tree_state(root) == state


def test_without_a_toolkit_of_the_new_line_an_old_binding_goes_and_says_so(
    make_env: MakeEnv, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    python = make_env(["cupy-cuda12x==13.4.1"])
    old = tmp_path / "opt" / "cuda-12.8"
    write_binding(_site(python), old)
    result = upgrade(capsys, python, "13.0", "--yes", "--no-toolkit", "--json")
    assert result.code == 0, result.err
    outcome = result.json()
    assert outcome["binding"] is None and read_binding(_site(python)) is None
    assert f"was bound to {old}, not a CUDA 13.0 toolkit: no longer" in " ".join(outcome["notes"])
    assert run_cli(capsys, "rollback", "--python", str(python)).code == 0
    assert read_binding(_site(python)) == old


def test_the_old_toolkits_libraries_move_with_the_line(
    make_env: MakeEnv,
    make_fake_nvidia: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An environment bound to a 12.8 toolkit with cuDNN (its cuda12 build) moves to 13.0: the
    new line's toolkit gets cuDNN's cuda13 build, as the library's own manifest offers it."""
    point_env_at(monkeypatch, make_fake_nvidia(with_products(build_site())))
    installed = run_cli(
        capsys, "--json", "install", "12.8.1", "--channel", "redist",
        "--components", "nvcc,cudnn", "--platform", "linux-x86_64",
    )  # fmt: skip
    assert installed.code == 0, installed.err
    old = Path(installed.json()["path"])
    python = make_env(["cupy-cuda12x==13.4.1", "cuda-bindings==12.8.0"])
    write_binding(_site(python), old)

    result = upgrade(capsys, python, "13.0", "--yes", "--channel", "redist", "--json")
    assert result.code == 0, result.err
    outcome = result.json()
    assert "cudnn" in outcome["toolkit"]["components"]
    assert any("cudnn of" in note and "move with the line" in note for note in outcome["notes"])
    record = Store.from_env().at(Path(outcome["toolkit"]["path"]))
    assert record is not None and record.record is not None
    assert record.record["libraries"]["cudnn"]["cuda_variant"] == "cuda13"
    assert (old / "cudaup-record.json").is_file()  # the old toolkit stays, side by side
