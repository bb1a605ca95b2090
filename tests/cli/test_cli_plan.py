"""``cudaup plan`` on the command line: the index table, JSON, exit codes, the export."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import NoReturn

import pytest

from cudaup.errors import EXIT_CODES, OfflineError, UsageError
from cudaup.plan import python_version
from tests.cli.test_startup import loaded
from tests.helpers import run_cli
from tests.plan.pyindex import IndexServer
from tests.plan.world import build

TARGET = ("--driver", "590.48.01", "--python", "3.12", "--platform", "linux-x86_64")


@pytest.fixture
def world(
    index_server: IndexServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> IndexServer:
    """The loopback world, with the user's index table pointing pytorch at it."""
    build(index_server)
    monkeypatch.setenv("CUDAUP_PYPI_URL", index_server.url("pypi"))
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    urls = "".join(
        f'{tag} = "{index_server.url(f"torch-{tag}")}"\n' for tag in ("cu128", "cu130", "cu132")
    )
    (home / "indexes.toml").write_text(
        f'[indexes.pytorch]\nprojects = ["torch"]\n[indexes.pytorch.urls]\n{urls}'
    )
    return index_server


def test_json_plan(world: IndexServer, capsys: pytest.CaptureFixture[str]) -> None:
    # The driver runs 13.0 fully, 13.2 only under minor-version compatibility.
    default = run_cli(
        capsys, "plan", "torch", "--index", "pypi", "--index", "pytorch", *TARGET, "--json"
    )
    assert default.code == 0, default.err
    assert default.json()["cuda_line"] == "13.0"
    assert default.json()["driver"]["verdict"] == "full"
    result = run_cli(
        capsys, "plan", "torch", "--index", "pypi", "--index", "pytorch", *TARGET, "--json",
        "--allow-minor-compat",
    )  # fmt: skip
    assert result.code == 0, result.err
    document = result.json()
    assert document["schema"] == 2 and document["cuda_line"] == "13.2"
    assert "minor-version compatibility (--allow-minor-compat)" in document["notes"][0]
    assert document["release"] == "13.2.0" and document["releases"]["source"] == "pypi"
    assert document["driver"]["verdict"] == "minor-version"
    (package,) = document["packages"]
    assert package["version"] == "2.12.0+cu132" and package["index"] == "pytorch"
    assert package["evidence"] == f"from {world.url('torch-cu132')}"
    assert (
        document["uv"]
        == f"uv pip install torch==2.12.0+cu132 --index {world.url('torch-cu132')} --default-index {world.url('pypi')}"
    )
    assert "--extra-index-url" in document["pip"]


def test_text_plan_names_its_release_list(
    world: IndexServer, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run_cli(capsys, "plan", "servellm", "--index", "pypi", "--index", "pytorch", *TARGET)
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert (
        lines[0]
        == "CUDA 13.0: install 13.0.2 (servellm 1.0 → torch 2.11.0+cu130 → cuda-toolkit 13.0.2 pins it)"
    )
    assert f"releases: the versions of cuda-toolkit on {world.url('pypi')}" in lines
    assert any(
        line.startswith("excluded 13.2: driver 590.48.01 runs it only under minor-version")
        for line in lines
    )


def test_exit_codes(world: IndexServer, capsys: pytest.CaptureFixture[str]) -> None:
    missing = run_cli(capsys, "plan", "no-such-project", "--index", "pypi", *TARGET)
    assert (
        missing.code == EXIT_CODES["package-not-found"]
        and "no index consulted has a project named" in missing.err
    )
    failed = run_cli(
        capsys, "plan", "onnxish-gpu[cuda]", "--index", "pypi", "--driver", "570.124.06",
        "--python", "3.12", "--platform", "linux-x86_64", "--json",
    )  # fmt: skip
    assert failed.code == 13
    error = failed.json()["error"]
    assert error["kind"] == "no-common-line" and error["exit_code"] == 13
    assert error["details"]["packages"][0]["lines"] == ["13.2", "13.0"]
    kinds = {e["line"]: e["kind"] for e in error["details"]["excluded"]}
    assert kinds == {"13.2": "driver", "13.0": "driver", "12.9": "resolution", "12.8": "resolution"}
    unknown = run_cli(capsys, "plan", "torch", "--index", "pypi", "--cuda", "13.1", *TARGET)
    assert unknown.code == 3 and "no CUDA 13.1 release is known" in unknown.err
    # The shipped table's FlashInfer index cannot be reached from here: no plan is made.
    down = run_cli(capsys, "plan", "flashinfer-jit-cache", *TARGET)
    assert down.code == 5 and "could not reach flashinfer" in down.err and "--index" in down.err
    bad = run_cli(capsys, "plan", "torch", "--cuda", "thirteen", *TARGET)
    assert bad.code == 2


def test_export_keeps_extras_and_builds(
    world: IndexServer, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    lock = tmp_path / "stack.lock"  # any name: uv's own naming rule is cudaup's to meet
    result = run_cli(
        capsys, "plan", "jaxish[cuda13]", "--index", "pypi", *TARGET, "--export", str(lock),
        "--allow-minor-compat",
    )  # fmt: skip
    assert result.code == 0, result.err
    packages = {p["name"]: p for p in tomllib.loads(lock.read_text())["packages"]}
    assert set(packages) == {"jaxish", "jaxish-cuda13-plugin", "nvidia-cuda-runtime"}
    assert packages["nvidia-cuda-runtime"]["version"] == "13.2.51"
    built = tmp_path / "torch.toml"
    result = run_cli(
        capsys, "plan", "torch", "--index", "pypi", "--index", "pytorch", "--cuda", "13.0",
        *TARGET, "--export", str(built),
    )  # fmt: skip
    assert result.code == 0, result.err
    torch = next(p for p in tomllib.loads(built.read_text())["packages"] if p["name"] == "torch")
    assert torch["version"] == "2.11.0+cu130"
    assert torch["wheels"][0]["url"].startswith(world.url("torch-cu130"))
    assert "file:" not in built.read_text()


def test_pypi_unreachable_is_exit_5(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDAUP_PYPI_URL", "http://127.0.0.1:9/simple")
    result = run_cli(capsys, "plan", "torch==2.11.0", "--index", "pypi", *TARGET, "--json")
    assert result.code == 5 and result.json()["error"]["kind"] == "network"
    assert "could not reach pypi" in result.err


def test_pre_and_the_nightly_index(
    world: IndexServer, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A nightly index (``pre = true``) is consulted with --pre, or when --index names it."""
    table = tmp_path / "home" / "indexes.toml"
    table.write_text(
        table.read_text()
        + '[indexes.pytorch-nightly]\npre = true\nprojects = ["torch", "pytorch-triton"]\n'
        + 'only = ["pytorch-triton"]\n[indexes.pytorch-nightly.urls]\n'
        + f'cu130 = "{world.url("torch-nightly-cu130")}"\n'
    )
    indexes = ("--index", "pypi", "--index", "pytorch")
    stable = run_cli(capsys, "plan", "torch>2.12", *indexes, *TARGET)
    assert stable.code == EXIT_CODES["package-not-found"]
    assert "torch-nightly" not in stable.err  # left out without --pre
    named = run_cli(capsys, "plan", "torch>2.12", *indexes, "--index", "pytorch-nightly", *TARGET)
    assert named.code == EXIT_CODES["package-not-found"] and "--pre takes them" in named.err
    nightly = run_cli(
        capsys, "plan", "torch>2.12", *indexes, "--index", "pytorch-nightly", "--pre", *TARGET
    )
    assert nightly.code == 0, nightly.err
    assert "torch 2.13.0.dev20261130+cu130  from " in nightly.out
    assert "note: takes pre-releases (--pre): " in nightly.out
    assert "--prerelease allow" in nightly.out and "pip install --pre " in nightly.out
    table.write_text(table.read_text().replace("pre = true", 'pre = "yes"'))
    bad = run_cli(capsys, "plan", "torch", *indexes, "--pre", *TARGET)
    assert bad.code == EXIT_CODES["usage"] and "pre must be true or false" in bad.err


@pytest.mark.parametrize(
    ("request_", "line", "marker", "note", "field", "value"),
    [
        (
            "kernlib==2.0",
            "kernlib 2.0  from ",
            "[yanked: broken ABI, use 2.0.1]",
            "note: kernlib 2.0 is yanked on pypi (broken ABI, use 2.0.1)",
            "yanked",
            "broken ABI, use 2.0.1",
        ),
        (
            "fastattn",
            "fastattn 1.1  from ",
            "[pure Python: no compiled code]",
            "note: fastattn 1.1 is a pure-Python wheel (fastattn-1.1-py3-none-any.whl)",
            "pure_wheel",
            "fastattn-1.1-py3-none-any.whl",
        ),
    ],
    ids=["yanked-pin", "pure-python-version"],
)
def test_a_pick_worth_a_word_on_the_command_line(
    world: IndexServer,
    capsys: pytest.CaptureFixture[str],
    request_: str,
    line: str,
    marker: str,
    note: str,
    field: str,
    value: str,
) -> None:
    """A yanked exact pin, a version with no compiled code of a compiled project: marked on
    the package's line, named in a note, and given in ``--json``."""
    result = run_cli(capsys, "plan", request_, "--index", "pypi", *TARGET)
    assert result.code == 0, result.err
    assert line in result.out and marker in result.out and note in result.out
    listed = run_cli(capsys, "plan", request_, "--index", "pypi", *TARGET, "--json")
    assert listed.json()["packages"][0][field] == value


def test_requests_that_conflict_among_themselves(
    world: IndexServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same exit code and error object as any plan that finds no line, with uv's
    reason said once instead of every package's lines."""
    asked = ("plan", "servellm==1.0", "torch==2.9.1", "--index", "pypi", "--index", "pytorch")
    text = run_cli(capsys, *asked, *TARGET)
    assert text.code == EXIT_CODES["no-common-line"] == 13
    assert "the requests conflict among themselves, whatever the CUDA line: " in text.err
    assert "you require torch==2.9.1" in text.err and "resolves on" not in text.err
    failed = run_cli(capsys, *asked, *TARGET, "--json")
    error = failed.json()["error"]
    assert failed.code == 13 and error["kind"] == "no-common-line" and error["exit_code"] == 13
    assert "you require torch==2.9.1" in error["details"]["conflict"]
    assert error["details"]["packages"] == []  # none was resolved alone


#: What a plan answered from the cache never loads (``ssl`` comes with http.client; the
#: probe itself loads it, to count the TLS contexts built).
NOT_FOR_A_WARM_PLAN = (
    "urllib3",
    "http.client",
    "http.server",
    "email",
    "html.parser",
    "packaging.metadata",
    "cudaup.net.deadline",
    "cudaup.plan.elf",
)


def test_a_plan_imports_only_what_it_uses(world: IndexServer) -> None:
    """A warm plan spends most of its time importing: with --driver, no --gpu and no
    --export, neither the driver probe, nor the kernel reader, nor the lock writer load."""
    asked = ("plan", "torch", "--index", "pypi", "--index", "pytorch", *TARGET)
    code, modules, _ = loaded(*asked)
    assert code == 0 and "cudaup.plan.planner" in modules
    unused = ("cudaup.binaries", "cudaup.machine.driver_probe", "cudaup.plan.export")
    assert not [m for m in modules if m.startswith(unused)]
    # Warm, every answer comes from the cache: the wire's modules never load (urllib3,
    # http.client with ssl and email: a fifth of the import time), nor the HTML parser,
    # the metadata and ELF readers (the pages come from their digests, the wheels' facts
    # from the plan's cache).  One line, so that
    # every uv answer was kept (in a window a line's run can be stopped, and is then
    # resolved again: through the memo, on the wire).
    one_line = (*asked, "--cuda", "13.0")
    assert loaded(*one_line)[0] == 0
    code, modules, contexts = loaded(*one_line)
    assert code == 0 and not [m for m in modules if m.startswith(NOT_FOR_A_WARM_PLAN)]
    assert contexts == 0
    code, modules, _ = loaded(*asked, "--gpu", "sm_90")
    assert "cudaup.plan.kernels" in modules and "cudaup.binaries.coverage" in modules


def test_the_interpreter_starts_while_the_driver_is_found(tmp_path: Path) -> None:
    """``python3`` (a pyenv shim: 0.1-0.15 s) and the driver's nvidia-smi run at once.

    They meet at a FIFO: the fake ``python3`` answers only once nvidia-smi has written to
    it, and nvidia-smi's write waits for ``python3`` to open it.  Run one after the other
    (the interpreter first, as before), ``python3`` waits until cudaup gives up on it
    after 10 s: "cannot run … to learn its version", exit 2.
    """
    meeting = tmp_path / "meeting"
    os.mkfifo(meeting)
    bin_dir, root = tmp_path / "bin", tmp_path / "machine"
    smi = root / "usr" / "bin" / "nvidia-smi"
    for path, script in (
        (bin_dir / "python3", f"#!/bin/sh\nread line < {meeting}\necho 3.12\n"),
        # Its first run only: a failed query is followed by a run for the plain table.
        (smi, f"#!/bin/sh\nmkdir {tmp_path / 'met'} 2>/dev/null && echo met > {meeting}\nexit 1\n"),
    ):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(script)
        path.chmod(0o755)
    environment = {
        **{k: v for k, v in os.environ.items() if k != "CUDAUP_DRIVER_VERSION"},
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "CUDAUP_SYSTEM_ROOT": str(root),
        "CUDAUP_HOME": str(tmp_path / "home"),
        "CUDAUP_CACHE_DIR": str(tmp_path / "cache"),
    }
    run = subprocess.run(
        [sys.executable, "-m", "cudaup", "--offline", "plan", "torch"],
        env=environment, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    # Both ran, and the plan went on to what --offline cannot answer.
    assert run.returncode == OfflineError.exit_code, run.stderr
    assert "plan reads the package indexes live" in run.stderr


def test_the_interpreter_running_cudaup_is_not_run_to_learn_its_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``python3`` on PATH that is this very interpreter (an activated environment's) is
    this process's version; another one is run."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    monkeypatch.setenv("PATH", str(bin_dir))

    def no_process(*_args: object, **_kwargs: object) -> NoReturn:
        raise AssertionError("the interpreter was run")

    with monkeypatch.context() as patched:
        patched.setattr(subprocess, "Popen", no_process)
        assert python_version(None) == sys.version_info[:2]
        assert python_version(str(bin_dir / "python3")) == sys.version_info[:2]
    (bin_dir / "python3").unlink()
    (bin_dir / "python3").write_text("#!/bin/sh\necho 3.9\n")
    (bin_dir / "python3").chmod(0o755)
    assert python_version(None) == (3, 9)
    (bin_dir / "python3").write_text("#!/bin/sh\necho no version\n")
    with pytest.raises(UsageError, match="to learn its version"):
        python_version(None)
