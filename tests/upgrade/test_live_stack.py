"""Issue 21's afternoon, for real: the ML stack from PyPI moved from CUDA 12.8 to 13.0 with
no line given, on a host without a GPU driver, then rolled back with the network cut off.

The environment (Python 3.11, built with uv as a user would, ``--no-config``):
``torch==2.10.0 'flashinfer-python[cu12]==0.6.8.post1' flashinfer-cubin==0.6.8.post1
sglang-kernel==0.4.1 cupy-cuda12x==14.2.0``, 55 distributions, about 11 GB.  What PyPI says
(read from the files): torch 2.14.1 is the newest CUDA 13.0 torch (2.15.0 is 13.2, and there
is no 13.1 torch); sglang-kernel 0.4.9 and 0.4.10 pin ``torch==2.14.1``, and its
``spatial_ops.abi3.so`` links ``libtorch.so``/``libc10.so`` and ``libcuda.so.1``;
flashinfer-python's extras ``cu12``/``cu13`` pick nvidia-cutlass-dsl's; cuda-bindings 13.0.0-
13.0.3 are 13.0's.  Driver 590.48.01 is 13.1.1's toolkit driver: 13.1 runs fully, 13.2 and
newer only under minor-version compatibility.

Disk is bounded: one environment, one snapshot, and one uv cache (``$CUDAUP_CACHE_DIR/plan/uv``,
the one the upgrade installs from, so the build's wheels are not downloaded twice), all inside
the test's directory and removed at its end.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from cudaup.plan.uv import find_uv
from tests.helpers import run_cli
from tests.upgrade.world import freeze, tree_state

pytestmark = pytest.mark.pypi
STACK = [
    "torch==2.10.0",
    "flashinfer-python[cu12]==0.6.8.post1",
    "flashinfer-cubin==0.6.8.post1",
    "sglang-kernel==0.4.1",
    "cupy-cuda12x==14.2.0",
]
DRIVER = ("--driver", "590.48.01")


@pytest.fixture
def workplace(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Where the environment, its snapshot, cudaup's cache (uv's with it) and home live,
    removed at the end whatever happened (pytest would keep the last runs' tens of GB).

    A long path on purpose: sgl_kernel's import error names its directory three times before
    the loader's own line (``libcuda.so.1: cannot open shared object file``) that tells a
    host reason, and the check must read that line wherever it falls (it once kept only the
    first 1000 characters, and an environment under a long path failed the upgrade)."""
    top = Path(tempfile.mkdtemp(prefix="c21-", dir="/tmp"))
    place = top / ("a-project-directory-with-a-long-name-as-real-ones-have-" * 3)
    place.mkdir()
    monkeypatch.setenv("CUDAUP_CACHE_DIR", str(place / "cache"))
    monkeypatch.setenv("CUDAUP_HOME", str(place / "home"))
    yield place
    shutil.rmtree(top, ignore_errors=True)


def build(root: Path, cache: Path, packages: list[str]) -> Path:
    uv = find_uv()
    environment = {k: v for k, v in os.environ.items() if not k.startswith("UV_")}
    subprocess.run(
        [uv, "venv", "--no-config", "--quiet", "--python", "3.11", str(root)],
        check=True, env=environment,
    )  # fmt: skip
    python = root / "bin" / "python"
    subprocess.run(
        [uv, "pip", "install", "--no-config", "--quiet", "--python", str(python),
         "--cache-dir", str(cache), *packages],
        check=True, env=environment,
    )  # fmt: skip
    return python


def cut_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every proxy refuses: nothing of the rollback may need the network."""
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy", "ALL_PROXY"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)


def requires_of(root: Path, project: str) -> list[Requirement]:
    site = next(root.glob("lib/python3.*/site-packages"))
    stem = project.replace("-", "_")
    (metadata,) = site.glob(f"{stem}-*.dist-info/METADATA")
    return [
        Requirement(line.split(":", 1)[1].strip())
        for line in metadata.read_text().splitlines()
        if line.startswith("Requires-Dist:")
    ]


def test_the_stack_moves_to_13_0_unattended_and_back(
    workplace: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = workplace / "cache" / "plan" / "uv"  # the cache the upgrade installs from
    root = workplace / "v"
    python = build(root, cache, STACK)
    frozen, state = freeze(python), tree_state(root)
    before = dict(line.split("==") for line in frozen)
    assert before["torch"] == "2.10.0" and before["cuda-bindings"].startswith("12.")
    monkeypatch.chdir(workplace)

    result = run_cli(
        capsys, "upgrade", "--python", str(python), *DRIVER, "--index", "pypi", "--yes", "--json"
    )
    assert result.code == 0, result.err
    outcome = result.json()
    # 1. The line: 13.2 and newer run only under minor-version compatibility, 13.1 fully but
    # nothing publishes a 13.1 torch: 13.0.
    assert outcome["line_before"].startswith("12.8") and outcome["line_after"] == "13.0"
    excluded = {e["line"]: e for e in outcome["excluded"]}
    assert "minor-version compatibility" in excluded["13.2"]["message"]
    assert excluded["13.1"]["kind"] in {"resolution", "inconsistent"}
    after = dict(line.split("==") for line in freeze(python))
    # 2. What carries the line moved; what is built together stayed together.
    assert after["torch"] == "2.14.1"
    version_py = next(root.glob("lib/python3.*/site-packages/torch/version.py")).read_text()
    assert re.search(r"^cuda\b[^=\n]*= '13\.0'$", version_py, re.MULTILINE), version_py
    assert after["sglang-kernel"] in {"0.4.9", "0.4.10"}
    assert any(
        r.name == "torch" and str(r.specifier) == "==2.14.1"
        for r in requires_of(root, "sglang-kernel")
    )
    assert any("pins torch==2.14.1 (it links libc10.so" in n for n in outcome["notes"])
    assert after["flashinfer-python"] == after["flashinfer-cubin"]
    assert "nvidia-cutlass-dsl-libs-cu13" in after  # what flashinfer-python[cu13] brings
    assert "cupy-cuda13x" in after and "cupy-cuda12x" not in after
    assert Version(after["cuda-bindings"]).release[:2] == (13, 0)
    assert after["nvidia-cuda-runtime"].startswith("13.0.")
    # nvidia-cutlass-dsl requires its -libs-cu12 on every line (and -libs-cu13 with [cu13]).
    twelve = [n for n in after if n.endswith("-cu12") or "cuda12" in n]
    assert twelve == ["nvidia-cutlass-dsl-libs-cu12"]
    # 3. Verified on this driverless host, sglang-kernel's extension included.
    steps = {(c["step"], c["status"]) for c in outcome["verification"]}
    assert ("import", "ok") in steps or ("import", "reported") in steps, steps
    assert not [c for c in outcome["verification"] if c["status"] == "failed"]
    toolkit = outcome["toolkit"]
    assert toolkit["version"].startswith("13.0.") and toolkit["channel"] == "pypi"

    # Rollback with the network cut off: byte for byte.
    cut_off(monkeypatch)
    restored = run_cli(capsys, "rollback", "--python", str(python), "--json")
    assert restored.code == 0, restored.err
    assert freeze(python) == frozen
    assert tree_state(root) == state
    # The snapshot was used up; no work tree or temporary directory is left behind.
    listed = run_cli(capsys, "snapshots", "--python", str(python), "--json")
    assert listed.code == 0 and listed.json()["snapshots"] == []
    store = root.parent / ".cudaup-snapshots" / root.name
    assert sorted(p.name for p in store.iterdir()) == ["lock"]


def test_a_toolkit_the_channel_cannot_install_is_refused_first(
    workplace: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """PyPI's CUDA 12 nvcc wheels hold ptxas, not nvcc: moving to 12.9 with its toolkit from
    PyPI is refused before the environment or its snapshot store is touched."""
    root = workplace / "v"
    python = build(root, workplace / "cache" / "plan" / "uv", ["cupy-cuda12x==13.4.1"])
    state = tree_state(root)
    result = run_cli(
        capsys, "upgrade", "12.9", "--python", str(python), *DRIVER, "--index", "pypi", "--yes",
        "--channel", "pypi",
    )  # fmt: skip
    assert result.code == 4, result.err
    assert re.search(r"the CUDA 12\.9\.\d+ toolkit cannot be installed from pypi", result.err)
    assert "nvidia_cuda_nvcc_cu12-12.9." in result.err
    assert "has no bin/nvcc; nothing was changed" in result.err
    assert "--no-toolkit" in result.err
    assert tree_state(root) == state
    # No snapshot, work tree or toolkit was made: the store holds its lock alone.
    store = workplace / ".cudaup-snapshots" / root.name
    assert sorted(p.name for p in store.iterdir()) == ["lock"]
    assert not (workplace / "home" / "toolkits").exists() or not any(
        (workplace / "home" / "toolkits").iterdir()
    )
