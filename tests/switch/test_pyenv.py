"""``cudaup env --python`` and ``cudaup run --python``: the toolkit of an environment's line
(read from files, never by importing), ``TORCH_CUDA_ARCH_LIST`` from the GPUs present, and
the host compiler against the toolkit's ``host_config.h``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cudaup.core.driver import GpuInfo
from cudaup.errors import EXIT_CODES, UsageError
from cudaup.install.store import Store
from cudaup.switch import pyenv
from tests import fakemachine as fm
from tests.helpers import run_cli
from tests.switch.test_switch import make_toolkit, store  # noqa: F401 - fixture

#: CUDA 13.0's guard, as its include/crt/host_config.h writes it.
HOST_CONFIG_13_0 = """
#if defined(__GNUC__)

#if __GNUC__ > 15

#error -- unsupported GNU version! gcc versions later than 15 are not supported! The nvcc flag '-allow-unsupported-compiler' can be used to override this version check; however, using an unsupported host compiler may cause compilation failure or incorrect run time execution. Use at your own risk.

#endif /* __GNUC__ > 15 */
"""
#: CUDA 12.4's (gcc 13 at most, minor versions not checked).
HOST_CONFIG_12_4 = (
    "#if defined(__GNUC__)\n#if __GNUC__ > 13\n#error -- unsupported GNU version!\n#endif\n"
)
H200_CSV = "590.48.01, NVIDIA H200, 9.0, 143771 MiB\n"


def _environment(root: Path, *, torch_cuda: str | None = None, cupy: str | None = None) -> Path:
    """A virtual environment's files: torch/version.py and/or a cupy build's dist-info.
    Its interpreter is never run (nothing here imports anything)."""
    site = root / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (root / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (root / "bin").mkdir()
    (root / "bin" / "python").write_text("#!/bin/sh\nexit 99\n")
    if torch_cuda is not None:
        (site / "torch").mkdir()
        cuda = repr(torch_cuda) if torch_cuda else "None"
        (site / "torch" / "version.py").write_text(f"__version__ = '2.14.1'\ncuda = {cuda}\n")
    if cupy is not None:
        (site / f"{cupy.replace('-', '_')}-14.0.0.dist-info").mkdir()
    return root / "bin" / "python"


@pytest.mark.parametrize(
    ("torch_cuda", "cupy", "request_text"),
    [("13.0", None, "13.0"), ("12.8", "cupy-cuda13x", "12.8"), (None, "cupy-cuda12x", "12")],
)
def test_the_line_comes_from_torch_then_cupy(
    tmp_path: Path, torch_cuda: str | None, cupy: str | None, request_text: str
) -> None:
    python = _environment(tmp_path / "venv", torch_cuda=torch_cuda, cupy=cupy)
    line = pyenv.environment_line(pyenv.environment_root(str(python)))
    assert line.request == request_text


def test_an_environment_that_names_no_line(tmp_path: Path) -> None:
    python = _environment(tmp_path / "venv", torch_cuda="")
    with pytest.raises(UsageError, match="torch without CUDA and no CuPy CUDA build"):
        pyenv.environment_line(pyenv.environment_root(str(python)))
    with pytest.raises(UsageError, match="no lib/python"):
        pyenv.environment_root(str(tmp_path))


def test_arch_list_from_the_gpus() -> None:
    gpus = [
        GpuInfo(0, "H200", "9.0", 1),
        GpuInfo(1, "A100", "8.0", 1),
        GpuInfo(2, "H200", "9.0", 1),
    ]
    assert pyenv.arch_list(gpus) == "8.0;9.0"
    assert pyenv.arch_list([GpuInfo(0, "?", None, None)]) is None and pyenv.arch_list([]) is None


def test_the_gcc_limit_of_real_headers() -> None:
    assert pyenv.gcc_limit(HOST_CONFIG_13_0) == 15
    assert pyenv.gcc_limit(HOST_CONFIG_12_4) == 13
    assert pyenv.gcc_limit("#if defined(__clang__)\n#endif\n") is None


def _gcc(tmp_path: Path, version: str) -> Path:
    return fm.script(tmp_path / "bin" / f"gcc-{version}", version)


def test_a_compiler_newer_than_the_toolkit_accepts_is_named_with_the_way_out(
    tmp_path: Path,
) -> None:
    toolkit = tmp_path / "toolkit"
    fm.write(toolkit / "include" / "crt" / "host_config.h", HOST_CONFIG_12_4)
    compiler = _gcc(tmp_path, "14.2.0")
    problem = pyenv.compiler_problem(toolkit, {"NVCC_CCBIN": str(compiler), "PATH": ""})
    assert problem is not None
    assert (
        f"the host compiler {compiler} is gcc 14.2.0, newer than this toolkit accepts (gcc 13"
        in problem
    )
    assert "install gcc-13 and g++-13 and set NVCC_CCBIN=g++-13" in problem
    assert "-allow-unsupported-compiler" in problem
    fm.write(toolkit / "include" / "crt" / "host_config.h", HOST_CONFIG_13_0)
    assert pyenv.compiler_problem(toolkit, {"NVCC_CCBIN": str(compiler), "PATH": ""}) is None


@pytest.fixture
def gpu_machine(store: Store) -> Path:  # noqa: F811 - the fixture
    """The system root with an nvidia-smi that lists one H200."""
    root = Path(os.environ["CUDAUP_SYSTEM_ROOT"])
    fm.script(root / "usr" / "bin" / "nvidia-smi", H200_CSV)
    return root


def test_env_python_names_the_toolkit_of_the_line_and_the_gpus(
    store: Store,  # noqa: F811 - the fixture
    gpu_machine: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    make_toolkit(store, "12.8.1")
    wanted = make_toolkit(store, "13.0.2")
    make_toolkit(store, "13.1.0")
    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
    python = _environment(tmp_path / "venv", torch_cuda="13.0")
    result = run_cli(capsys, "env", "--python", str(python), "--shell", "bash", "--json")
    assert result.code == 0, result.err
    document = result.json()
    assert document["toolkit"]["path"] == str(wanted)
    assert document["variables"]["CUDA_HOME"] == str(wanted)
    assert document["variables"]["TORCH_CUDA_ARCH_LIST"] == "9.0"
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "8.0")  # the user's wins
    again = run_cli(capsys, "env", "--python", str(python), "--shell", "bash", "--json").json()
    assert "TORCH_CUDA_ARCH_LIST" not in again["variables"]


def test_without_a_gpu_the_arch_list_stays_unset_and_v_says_so(
    store: Store,  # noqa: F811 - the fixture
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    make_toolkit(store, "13.0.2")
    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
    monkeypatch.setenv("PATH", f"{tmp_path / 'nothing'}")  # no nvidia-smi, no gcc
    python = _environment(tmp_path / "venv", torch_cuda="13.0")
    result = run_cli(capsys, "-v", "env", "--python", str(python), "--shell", "bash")
    assert result.code == 0, result.err
    assert "TORCH_CUDA_ARCH_LIST" not in result.out
    assert "no GPU found here: TORCH_CUDA_ARCH_LIST is left unset" in result.err
    assert "torch 2.14.1 is built for CUDA 13.0" in result.err


def test_a_line_with_no_toolkit_installed_says_install(
    store: Store,  # noqa: F811 - the fixture
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    make_toolkit(store, "12.8.1")
    python = _environment(tmp_path / "venv", cupy="cupy-cuda13x")
    result = run_cli(capsys, "env", "--python", str(python))
    assert result.code == EXIT_CODES["release-not-found"]
    assert result.err.endswith(
        "\ncudaup: hint: --install installs it (cupy-cuda13x is CuPy's CUDA 13 build)\n"
    )
    both = run_cli(capsys, "env", "13.0", "--python", str(python))
    assert both.code == UsageError.exit_code and "not both" in both.err
    alone = run_cli(capsys, "env", "12.8", "--install")
    assert alone.code == UsageError.exit_code and "--install goes with --python" in alone.err


def test_run_python_runs_the_command_with_the_environments_toolkit_and_tools(
    store: Store,  # noqa: F811 - the fixture
    gpu_machine: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    wanted = make_toolkit(store, "13.0.2")
    make_toolkit(store, "12.8.1")
    python = _environment(tmp_path / "venv", torch_cuda="13.0")
    fm.script(python.parent / "env-tool", "the environment's tool")
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"CUDA_HOME", "CUDA_PATH", "TORCH_CUDA_ARCH_LIST"}
    }
    script = 'echo "$CUDA_HOME $TORCH_CUDA_ARCH_LIST"; env-tool'
    done = subprocess.run(
        [sys.executable, "-m", "cudaup", "run", "--python", str(python), "--", "sh", "-c", script],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"{wanted} 9.0", "the environment's tool"]


def test_install_brings_the_lines_toolkit_into_an_empty_store_as_its_default(
    store: Store,  # noqa: F811 - the fixture
    fake_nvidia: object,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from tests.helpers import point_env_at

    point_env_at(monkeypatch, fake_nvidia)  # type: ignore[arg-type]
    python = _environment(tmp_path / "venv", torch_cuda="13.0")
    assert store.is_empty()
    result = run_cli(
        capsys, "env", "--python", str(python), "--install", "--shell", "bash", "--json"
    )
    assert result.code == 0, result.err
    toolkit = result.json()["toolkit"]
    assert toolkit["version"].startswith("13.0.") and Path(toolkit["path"], "bin", "nvcc").is_file()
    assert store.default() == toolkit["version"]  # the first toolkit, as `cudaup install` makes it
    again = run_cli(capsys, "env", "--python", str(python), "--install", "--json")
    assert again.code == 0 and again.json()["toolkit"]["path"] == toolkit["path"]  # nothing new
