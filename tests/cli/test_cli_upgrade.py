"""``cudaup upgrade`` / ``rollback`` / ``snapshots`` on environments built from the loopback
world (tests/upgrade/world.py), applied by uv for real."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cudaup.errors import EXIT_CODES
from tests.helpers import run_cli
from tests.plan.pyindex import IndexServer
from tests.upgrade.conftest import MakeEnv
from tests.upgrade.world import freeze, tree_state, upgrade

NO_TOOLKIT = ("--no-toolkit",)


def test_dry_run_names_every_change_and_touches_nothing(
    make_env: MakeEnv, world: IndexServer, capsys: pytest.CaptureFixture[str]
) -> None:
    python = make_env()
    root = python.parent.parent
    before = tree_state(root.parent)
    result = upgrade(capsys, python, "13.0", "--dry-run", "--json")
    assert result.code == 0, result.err
    plan = result.json()
    assert plan["line_before"] == "12.8" and plan["line_after"] == "13.0"
    assert plan["release"] == "13.0.2" and plan["dry_run"] is True
    assert next(iter(plan)) == "schema" and list(plan)[-2:] == ["notes", "dry_run"]
    changes = {
        (c["kind"], (c["old"] or {}).get("name"), (c["new"] or {}).get("name")): c
        for c in plan["changes"]
    }
    torch = changes[("change", "torch", "torch")]
    assert torch["old"]["version"] == "2.9.1+cu128" and torch["new"]["version"] == "2.11.0+cu130"
    assert torch["index"] == "pytorch" and torch["index_url"] == world.url("torch-cu130")
    assert torch["reason"] == f"CUDA 13.0: from {world.url('torch-cu130')}"
    assert changes[("change", "torchvision", "torchvision")]["new"]["version"] == "0.26.0+cu130"
    cupy = changes[("rename", "cupy-cuda12x", "cupy-cuda13x")]
    assert cupy["new"]["version"] == "14.0.0" and cupy["reason"].startswith(
        "the CUDA 13 build of cupy-cuda12x"
    )
    runtime = changes[("rename", "nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime")]
    assert runtime["new"]["version"] == "13.0.96"
    bindings = changes[("change", "cuda-bindings", "cuda-bindings")]
    assert bindings["new"]["version"] == "13.0.3" and "held to 13.0.*" in bindings["reason"]
    # What carries no line stays: fastlock 1.0 though 1.1 exists, servellm as it is.
    names = {name for key in changes for name in key[1:]}
    assert "fastlock" not in names and "servellm" not in names
    assert tree_state(root.parent) == before  # nothing written, not even the snapshot store


def test_text_dry_run(make_env: MakeEnv, capsys: pytest.CaptureFixture[str]) -> None:
    python = make_env()
    result = upgrade(capsys, python, "13.0", "--dry-run")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0].endswith("CUDA 12.8 → 13.0")
    assert "toolkit CUDA 13.0.2 (to install side by side)" in lines[1]
    assert any(line.startswith("  cupy-cuda12x 13.4.1 → cupy-cuda13x 14.0.0") for line in lines)


def test_without_a_terminal_or_yes_it_prints_and_exits_with_the_usage_code(
    make_env: MakeEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    python = make_env()
    before = tree_state(python.parent.parent.parent)
    result = upgrade(capsys, python, "13.0", *NO_TOOLKIT)
    assert result.code == EXIT_CODES["usage"]
    assert "cupy-cuda12x 13.4.1 → cupy-cuda13x 14.0.0" in result.out
    assert "apply it with --yes" in result.err
    assert tree_state(python.parent.parent.parent) == before
    # under --json: the plan, said to be a dry run, with the refusal as its error object
    refused = upgrade(capsys, python, "13.0", "--json", *NO_TOOLKIT)
    assert refused.code == EXIT_CODES["usage"]
    document = refused.json()
    assert list(document)[-3:] == ["notes", "dry_run", "error"] and document["dry_run"] is True
    assert document["error"]["message"] == (
        "nothing was changed: there is no terminal to ask on; apply it with --yes"
    )
    assert tree_state(python.parent.parent.parent) == before


def test_upgrade_then_rollback_byte_for_byte(
    make_env: MakeEnv, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    python = make_env()
    root = python.parent.parent
    frozen, state = freeze(python), tree_state(root)
    result = upgrade(capsys, python, "13.0", "--yes", "--json", *NO_TOOLKIT)
    assert result.code == 0, result.err
    outcome = result.json()
    assert outcome["applied"] is True and outcome["snapshot"]
    steps = {(c["step"], c["status"]) for c in outcome["verification"]}
    assert {("versions", "ok"), ("check", "ok"), ("import", "ok"), ("line", "ok")} <= steps
    assert ("gpu", "skipped") in steps
    after = freeze(python)
    assert "torch==2.11.0+cu130" in after and "cupy-cuda13x==14.0.0" in after
    assert "cuda-bindings==13.0.3" in after and "nvidia-cuda-runtime==13.0.96" in after
    assert "fastlock==1.0" in after and "servellm==1.0" in after
    assert not [line for line in after if "cu12" in line.split("==")[0]]
    # The new console script names the environment's own interpreter, not the work tree's.
    script = root / "bin" / "torchrun"
    assert script.read_text().splitlines()[0] == f"#!{python}"
    import subprocess

    assert (
        subprocess.run([str(script)], capture_output=True, text=True, check=True).stdout
        == "torchrun ok\n"
    )
    assert not [
        p.name
        for p in (root.parent / ".cudaup-snapshots" / root.name).iterdir()
        if p.name.startswith("work-")
    ]

    listed = run_cli(capsys, "snapshots", "--python", str(python), "--json").json()
    [snapshot] = listed["snapshots"]
    assert snapshot["status"] == "applied" and snapshot["line_before"] == "12.8"
    assert snapshot["line_after"] == "13.0" and len(snapshot["changes"]) == len(outcome["changes"])
    # The replaced builds are the snapshot's alone now: removing it frees them.
    assert snapshot["holds"] >= snapshot["frees"] > 0

    # Rollback needs no network: every proxy refuses.
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.delenv("NO_PROXY", raising=False)
    restored = run_cli(capsys, "rollback", "--python", str(python), "--json")
    assert restored.code == 0, restored.err
    assert restored.json()["restored"]["id"] == snapshot["id"]
    assert freeze(python) == frozen
    assert tree_state(root) == state
    again = run_cli(capsys, "rollback", "--python", str(python))
    assert again.code == EXIT_CODES["conflict"] and "no snapshot" in again.err


def test_a_verification_failure_rolls_back(
    index_server: IndexServer, make_env: MakeEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.upgrade.world import cupy

    python = make_env()
    root = python.parent.parent
    state = tree_state(root)
    # cupy-cuda13x 14.0.0 is now a build that raises on import.
    del index_server.root("pypi").pages["cupy-cuda13x"]
    index_server.add("pypi", *cupy("cupy-cuda13x", "14.0.0", 13000, broken=True))
    result = upgrade(capsys, python, "13.0", "--yes", "--json", *NO_TOOLKIT)
    assert result.code == EXIT_CODES["verification-failed"] == 19
    error = result.json()["error"]
    assert error["details"] == {"step": "import", "package": "cupy-cuda13x"}
    assert "this cupy build is broken" in error["message"] and "rolled back" in error["message"]
    assert tree_state(root) == state
    store = root.parent / ".cudaup-snapshots" / root.name
    assert sorted(p.name for p in store.iterdir()) == ["lock"]  # no snapshot, no work tree left


def test_a_driver_too_old_is_refused_before_anything_changes(
    make_env: MakeEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    python = make_env()
    state = tree_state(python.parent.parent)
    result = upgrade(capsys, python, "13.0", "--yes", "--driver", "535.104.05", *NO_TOOLKIT)
    assert result.code == EXIT_CODES["driver-too-old"]
    assert "driver 535.104.05 cannot run CUDA 13.0.2" in result.err and "--force" in result.err
    assert tree_state(python.parent.parent) == state
    # --force plans by the packages alone, and says so.
    forced = upgrade(
        capsys, python, "13.0", "--dry-run", "--json", "--driver", "535.104.05", "--force"
    )
    assert forced.code == 0, forced.err
    assert "--force: the driver and the GPUs were not checked" in forced.json()["notes"]


def test_minor_version_compatibility_is_allowed_with_a_note(
    make_env: MakeEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    python = make_env()
    result = upgrade(capsys, python, "13.0", "--dry-run", "--json", "--driver", "580.65.06")
    assert result.code == 0, result.err
    assert result.json()["driver"]["verdict"] == "minor-version"
    assert any("minor-version compatibility" in n for n in result.json()["notes"])


def test_a_line_that_drops_the_gpu_is_refused(
    make_env: MakeEnv, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from tests import fakemachine as fm

    machine = tmp_path / "machine"
    fm.write(machine / "sys/module/nvidia/version", "590.48.01\n")
    fm.script(machine / "usr/bin/nvidia-smi", "590.48.01, Tesla V100-SXM2-32GB, 7.0, 32768 MiB\n")
    python = make_env()
    result = upgrade(capsys, python, "13.0", "--dry-run")
    assert result.code == EXIT_CODES["gpu-unsupported"] == 20
    assert "cannot target GPU 0 Tesla V100-SXM2-32GB (compute capability 7.0" in result.err
    # Without a line, the newest line the GPU and the packages allow: 12.8 (torch has no 12.9
    # build; 13.x is not tried, since every 13 line drops sm_70).
    newest = upgrade(capsys, python, "--dry-run", "--json")
    assert newest.code == 0, newest.err
    plan = newest.json()
    assert plan["line_after"] == "12.8" and plan["changes"] == []
    assert [e["line"] for e in plan["excluded"]] == ["12.9"]


def test_the_newest_line_every_package_allows(
    make_env: MakeEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    """13.2 has runtime and bindings builds, but no torch (no torch-cu132 index): 13.0."""
    python = make_env()
    result = upgrade(capsys, python, "--dry-run", "--json", "--driver", "590.48.01")
    assert result.code == 0, result.err
    plan = result.json()
    assert plan["line_after"] == "13.0"
    assert [e["line"] for e in plan["excluded"]] == ["13.2"]
    # Without torch, 13.2 fits.
    small = make_env(["cupy-cuda12x==13.4.1", "cuda-bindings==12.8.0"], name="small")
    plan = upgrade(capsys, small, "--dry-run", "--json").json()
    assert plan["line_after"] == "13.2"
    assert {(c["new"] or {}).get("version") for c in plan["changes"]} >= {"13.2.0", "14.0.0"}


def test_nothing_to_move(make_env: MakeEnv, capsys: pytest.CaptureFixture[str]) -> None:
    python = make_env(["fastlock==1.0"])
    result = upgrade(capsys, python, "13.0", "--dry-run")
    assert result.code == EXIT_CODES["conflict"]
    assert "carries a CUDA line" in result.err


@pytest.mark.parametrize(
    ("python", "message"),
    [
        ("/nonexistent/bin/python", "does not exist"),
        ("/usr/bin/python3", "not in a virtual environment"),
    ],
)
def test_what_is_not_an_environment(
    python: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run_cli(capsys, "upgrade", "--python", python, "--dry-run")
    assert result.code == EXIT_CODES["usage"] and message in result.err


def test_an_interpreter_that_answers_nonsense(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "fake"
    (root / "bin").mkdir(parents=True)
    (root / "pyvenv.cfg").write_text("home = /usr/bin\n")
    python = root / "bin" / "python"
    python.write_text('#!/bin/sh\necho \'{"schema": 1, "prefix": 3}\'\n')
    python.chmod(0o755)
    result = upgrade(capsys, python, "--dry-run")
    assert result.code == EXIT_CODES["source-format"] and "'prefix' is not a path" in result.err
    python.write_text("#!/bin/sh\nprintf '\\377\\376'\n")
    result = upgrade(capsys, python, "--dry-run")
    assert result.code == EXIT_CODES["source-format"] and "is not UTF-8" in result.err
    python.write_text("#!/bin/sh\necho boom >&2\nexit 3\n")
    result = upgrade(capsys, python, "--dry-run")
    assert result.code == EXIT_CODES["usage"] and "exit 3: boom" in result.err


def test_a_broken_snapshot_record_is_named(
    make_env: MakeEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    python = make_env()
    root = python.parent.parent
    assert upgrade(capsys, python, "13.0", "--yes", *NO_TOOLKIT).code == 0
    store = root.parent / ".cudaup-snapshots" / root.name
    [snapshot] = [p for p in store.iterdir() if p.is_dir()]
    (snapshot / "snapshot.json").write_text(json.dumps({"schema": 1, "id": "other"}))
    result = run_cli(capsys, "rollback", "--python", str(python))
    assert result.code == EXIT_CODES["source-format"]
    assert str(snapshot / "snapshot.json") in result.err and "not a snapshot record" in result.err


def test_a_framework_reporting_another_line_rolls_back(
    index_server: IndexServer, make_env: MakeEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cupy-cuda13x build whose runtime answers 12.8: it imports, but is not the line."""
    from tests.upgrade.world import cupy

    python = make_env(["cupy-cuda12x==13.4.1", "cuda-bindings==12.8.0"])
    state = tree_state(python.parent.parent)
    del index_server.root("pypi").pages["cupy-cuda13x"]
    index_server.add("pypi", *cupy("cupy-cuda13x", "14.0.0", 12080))
    result = upgrade(capsys, python, "13.0", "--yes", *NO_TOOLKIT)
    assert result.code == EXIT_CODES["verification-failed"]
    assert (
        "failed 'line' for cupy-cuda13x: cupy reports CUDA runtime 12080, not CUDA 13" in result.err
    )
    assert tree_state(python.parent.parent) == state


def test_on_a_terminal_it_asks(
    make_env: MakeEnv, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    python = make_env()
    state = tree_state(python.parent.parent)

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("sys.stdin", Terminal())
    answers = iter(["n", "yes"])
    monkeypatch.setattr("builtins.input", lambda prompt: next(answers))
    declined = upgrade(capsys, python, "13.0", *NO_TOOLKIT)
    assert declined.code == 0 and "cupy-cuda12x 13.4.1 → cupy-cuda13x 14.0.0" in declined.out
    assert "nothing was changed" in declined.out
    assert tree_state(python.parent.parent) == state
    accepted = upgrade(capsys, python, "13.0", *NO_TOOLKIT)
    assert accepted.code == 0 and "CUDA 12.8 → 13.0, " in accepted.out
    assert "cupy-cuda13x==14.0.0" in freeze(python)
    # On 13.0 with the same builds, nothing is left to change (and nothing is asked).
    again = upgrade(capsys, python, "13.0", *NO_TOOLKIT)
    assert again.code == 0 and "is on CUDA 13.0 and has nothing to change" in again.out


def test_options_and_defaults(
    make_env: MakeEnv, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    python = make_env(["cupy-cuda12x==13.4.1"])
    both = upgrade(capsys, python, "--no-toolkit", "--components", "nvcc", "--dry-run")
    assert both.code == EXIT_CODES["usage"] and "exclude each other" in both.err
    nowhere = run_cli(capsys, "upgrade", "--dry-run")
    assert nowhere.code == EXIT_CODES["usage"] and "--python" in nowhere.err
    monkeypatch.setenv("VIRTUAL_ENV", str(python.parent.parent))  # the environment's directory
    assert run_cli(capsys, "upgrade", "13.0", "--dry-run").code == 0
    assert run_cli(capsys, "snapshots").out.endswith("has no snapshot\n")
    assert run_cli(capsys, "snapshots", "--prune", "--keep", "-1").code == EXIT_CODES["usage"]
    assert upgrade(capsys, python, "13.0", "--yes", "--no-toolkit").code == 0
    unknown = run_cli(capsys, "rollback", "--to", "20000101T000000000000Z-000000")
    assert (
        unknown.code == EXIT_CODES["conflict"]
        and "no snapshot 20000101T000000000000Z-000000" in unknown.err
    )


def test_pre_lets_the_upgrade_take_a_pre_release(
    make_env: MakeEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    """As plan --pre: without it a release candidate is never chosen, with it the newest is."""
    python = make_env(["cupy-cuda12x==13.4.1"], name="pre")
    stable = upgrade(capsys, python, "13.0", "--dry-run", "--json").json()
    chosen = {
        (c["new"] or {}).get("name"): (c["new"] or {}).get("version") for c in stable["changes"]
    }
    assert chosen["cupy-cuda13x"] == "14.0.0"
    pre = upgrade(capsys, python, "13.0", "--dry-run", "--json", "--pre")
    assert pre.code == 0, pre.err
    chosen = {
        (c["new"] or {}).get("name"): (c["new"] or {}).get("version") for c in pre.json()["changes"]
    }
    assert chosen["cupy-cuda13x"] == "15.0.0rc1"
