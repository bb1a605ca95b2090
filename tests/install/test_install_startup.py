"""What ``cudaup install --channel pypi`` loads: only what installing from PyPI needs.

Start-up is measured in modules imported (times are benchmarks, ``benchmarks/install.py``,
never assertions): a real install from a loopback index, in a fresh interpreter,
then the modules it loaded.  Each module named here is one an install without
``--lock``, on a machine without a driver, from PyPI, of no library, never uses.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_startup import loaded
from tests.faultserver import FaultServer
from tests.install.served import CUDART, make_wheel, serve_pypi

#: What such an install must not import, each with the only case that needs it.
NOT_NEEDED = {
    "cudaup.fleet": "--lock (lock files, mirrors)",
    "tomllib": "--lock (a cuda.lock.toml)",
    "cudaup.switch.system_link": "uninstall (the /usr/local/cuda link)",
    "cudaup.switch.overview": "list",
    "cudaup.core.compat": "a driver to check the toolkit against",
    "cudaup.install.runfile": "--channel installer",
    "cudaup.resolve.libraries": "a library among the components (cudnn)",
    "cudaup.plan": "plan and upgrade",
    "cudaup.upgrade": "upgrade",
    "cudaup.switch.pins": "no version given (the nearest .cuda-version names it)",
    "cudaup.switch.selection": "the next step's wording where the shims are on PATH",
    "cudaup.resolve.sources": "NVIDIA's channels (redist, installer)",
    "cudaup.nvidia.archive_page": "NVIDIA's channels (redist, installer)",
    "cudaup.nvidia.manifest": "NVIDIA's channels (redist, installer)",
    "cudaup.nvidia.listing": "NVIDIA's channels (redist, installer)",
}


def test_a_pypi_install_imports_only_what_it_uses(
    fault_server: FaultServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel = make_wheel("nvidia-cuda-runtime", "13.0.88", CUDART)
    monkeypatch.setenv("CUDAUP_PYPI_URL", serve_pypi(fault_server, "13.0.1", wheel))
    monkeypatch.setenv("CUDAUP_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CUDAUP_SYSTEM_ROOT", str(tmp_path / "root"))  # no driver there
    monkeypatch.delenv("CUDAUP_DRIVER_VERSION", raising=False)
    (tmp_path / "root").mkdir()
    prefix = tmp_path / "cuda"
    code, modules, _ = loaded(
        "install", "13.0.1", "--channel", "pypi", "--components", "cudart",
        "--platform", "linux-x86_64", "--prefix", str(prefix), "-q",
    )  # fmt: skip
    assert code == 0
    record = json.loads((prefix / "cudaup-record.json").read_text())
    assert [a["filename"] for a in record["artifacts"]] == [
        "nvidia_cuda_runtime-13.0.88-py3-none-manylinux_2_27_x86_64.whl"
    ]
    assert (prefix / "lib" / "libcudart.so.13").is_file()
    # what it did use is there: the check sees real imports, not an empty set
    assert {
        "cudaup.install.installer",
        "cudaup.resolve.pypi",
        "cudaup.install.extract.zip",
    } <= modules
    unneeded = {
        module: why
        for module in modules
        for prefix_, why in NOT_NEEDED.items()
        if module == prefix_ or module.startswith(prefix_ + ".")
    }
    assert not unneeded, unneeded
