"""cudaup's own shims on PATH, as the README asks users to put them: ``list`` and
``doctor`` follow them to the toolkit they run, and never report ``$CUDAUP_HOME`` as
a toolkit of its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from cudaup.install.store import Store
from cudaup.machine.sysroot import SystemRoot
from cudaup.machine.toolkits import SHIM_QUERY_ENV, Lookup, ask_shim, find_toolkits
from cudaup.switch import shim, shim_files
from tests.helpers import run_cli
from tests.switch.test_switch import make_toolkit


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Store:
    monkeypatch.setenv("CUDAUP_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CUDAUP_SYSTEM_ROOT", str(tmp_path / "root"))
    (tmp_path / "root").mkdir()
    for name in ("CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH", "CONDA_PREFIX", "CUDAUP_TOOLKIT"):
        monkeypatch.delenv(name, raising=False)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    store = Store(tmp_path / "home")
    make_toolkit(store, "13.0.1", ("nvcc", "ptxas"))
    shim_files.refresh_shims(store)
    monkeypatch.setenv("PATH", f"{store.bin_dir}:/usr/bin:/bin")
    return store


def test_the_query_env_is_the_shims_own() -> None:
    assert SHIM_QUERY_ENV == shim.QUERY_ENV


def test_list_and_doctor_follow_the_nvcc_shim_to_the_active_toolkit(
    store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store.set_default("13.0")
    toolkit = store.toolkits_dir / "13.0.1"
    listed = run_cli(capsys, "list", "--json").json()
    assert [t["path"] for t in listed["installed"]] == [str(toolkit)]
    assert all(Path(t["path"]) != store.home for t in listed["other"]), listed["other"]
    assert listed["other"] == []  # the store's toolkit, found through the shim, is one entry
    doctor = run_cli(capsys, "doctor", "--json", "--python", str(tmp_path / "none")).json()
    paths = [t["path"] for t in doctor["toolkits"]]
    assert str(store.home) not in paths and paths.count(str(toolkit)) == 1
    [found] = [t for t in doctor["toolkits"] if t["path"] == str(toolkit)]
    assert found["found_via"] == ["cudaup store", "nvcc on PATH"]
    assert doctor["nvcc"].startswith(f"{store.bin_dir / 'nvcc'} (cudaup shim) → {toolkit} (CUDA ")
    assert not [p for p in doctor["problems"] if "shim" in p["message"]]


def test_a_shim_that_runs_nothing_here_is_no_toolkit_and_doctor_says_why(
    store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # No default, no pin: the shim would refuse to run anything.
    doctor = run_cli(capsys, "doctor", "--json", "--python", str(tmp_path / "none")).json()
    assert str(store.home) not in [t["path"] for t in doctor["toolkits"]]
    assert not [t for t in doctor["toolkits"] if "nvcc on PATH" in t["found_via"]]
    assert doctor["nvcc"] == f"{store.bin_dir / 'nvcc'} (cudaup shim; it runs no toolkit here)"
    [problem] = [p for p in doctor["problems"] if "cudaup's shim" in p["message"]]
    assert problem["severity"] == "warning"
    assert "no CUDA toolkit is chosen here" in problem["message"]
    assert "cudaup default VERSION" in problem["fix"]
    listed = run_cli(capsys, "list", "--json").json()
    assert listed["other"] == []


def test_ask_shim_answers_in_the_lookups_environment_and_survives_a_broken_shim(
    store: Store, tmp_path: Path
) -> None:
    lookup = Lookup(root=SystemRoot(tmp_path / "root"), env={"CUDAUP_TOOLKIT": "13.0.1"})
    answer = ask_shim(store.bin_dir / "nvcc", lookup)
    assert answer.executable == store.toolkits_dir / "13.0.1" / "bin" / "nvcc"
    assert answer.toolkit == store.toolkits_dir / "13.0.1" and answer.problem is None
    missing = ask_shim(
        store.bin_dir / "ptxas", Lookup(root=lookup.root, env={"CUDAUP_TOOLKIT": "12.4"})
    )
    assert missing.executable is None and "CUDA 12.4, which is not installed" in str(
        missing.problem
    )
    # A file that only looks like a shim answers garbage: an answer, not a crash, and
    # not a toolkit either.
    liars = tmp_path / "liars"
    liars.mkdir()
    liar = liars / "nvcc"
    liar.write_text("#!/bin/sh\n# cudaup shim: not really\necho '{not json'\n")
    liar.chmod(0o755)
    broken = ask_shim(liar, lookup)
    assert broken.executable is None and "did not answer" in str(broken.problem)
    found = find_toolkits(Lookup(root=lookup.root, env={"PATH": str(liars)}, python="/none"))
    assert not [t for t in found if "nvcc on PATH" in t.found_via]
