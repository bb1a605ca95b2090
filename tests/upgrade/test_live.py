"""``cudaup upgrade`` and ``rollback`` against the live PyPI, with small real packages.

The environment is the issue's: ``cuda-bindings==12.8.0``, ``nvidia-cuda-runtime-cu12==12.8.90``
and ``cupy-cuda12x==13.4.1`` (with ``numpy==2.2.6`` and ``fastrlock==0.8.4``, which
cupy-cuda12x 13.4.1 requires: ``numpy<2.6,>=1.22``, ``fastrlock>=0.5``).  What PyPI says
about CUDA 13.0 (metadata read from the files):

* ``cuda-bindings``: versioned by release; 13.0.0-13.0.3 are the 13.0 builds, 13.0.3 the
  newest (13.1.0 and later are other lines);
* ``nvidia-cuda-runtime``: the 13.x name of ``nvidia-cuda-runtime-cu12``; 13.0.48, 13.0.88,
  13.0.96 are 13.0's, and ``cuda-toolkit`` 13.0.2 and 13.0.3.0 pin 13.0.96;
* ``cupy-cuda13x``: CuPy's CUDA 13 project (cupy-cuda12x's counterpart), first published as
  13.6.0; it requires ``numpy`` and ``cuda-pathfinder``, so numpy 2.2.6 stays;
* the toolkit: ``cuda-toolkit`` 13.0.3.0 is the newest 13.0 release; its ``nvcc`` extra
  pins ``nvidia-cuda-nvcc==13.0.88.*``.

One toolkit install (``--components nvcc,cudart --channel pypi``, about 100 MB) per run.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from packaging.version import Version

from cudaup.plan.uv import find_uv
from tests.helpers import run_cli
from tests.upgrade.world import freeze, tree_state

pytestmark = pytest.mark.pypi
STACK = [
    "cuda-bindings==12.8.0",
    "nvidia-cuda-runtime-cu12==12.8.90",
    "cupy-cuda12x==13.4.1",
    "numpy==2.2.6",
    "fastrlock==0.8.4",
]


def test_upgrade_to_13_0_and_back_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "project" / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    python = root / "bin" / "python"
    install = [find_uv(), "pip", "install", "--python", str(python), "--no-config", "--quiet"]
    subprocess.run(
        [*install, "--cache-dir", str(tmp_path / "cache" / "plan" / "uv"), *STACK], check=True
    )
    frozen, state = freeze(python), tree_state(root)
    monkeypatch.chdir(tmp_path)

    result = run_cli(
        capsys, "upgrade", "13.0", "--python", str(python), "--yes", "--index", "pypi",
        "--components", "nvcc,cudart", "--channel", "pypi", "--pin", "--json",
    )  # fmt: skip
    assert result.code == 0, result.err
    outcome = result.json()
    assert outcome["line_before"] == "12.8" and outcome["line_after"] == "13.0"
    after = dict(line.split("==") for line in freeze(python))
    assert after["cuda-bindings"] == "13.0.3"
    assert after["nvidia-cuda-runtime"] == "13.0.96"
    assert Version(after["cupy-cuda13x"]) >= Version("13.6.0")
    assert after["numpy"] == "2.2.6" and after["fastrlock"] == "0.8.4"  # they carry no line
    assert not [name for name in after if "cu12" in name or "cuda12" in name]
    steps = {(c["step"], c["status"]) for c in outcome["verification"]}
    assert {("versions", "ok"), ("check", "ok"), ("import", "ok"), ("line", "ok")} <= steps
    imported = subprocess.run(
        [str(python), "-c", "import cupy, cuda.bindings; print(cupy.cuda.runtime.runtimeGetVersion() // 1000)"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert imported.stdout.strip() == "13"
    toolkit = outcome["toolkit"]
    assert toolkit["version"].startswith("13.0.") and toolkit["channel"] == "pypi"
    nvcc = subprocess.run(
        [str(Path(toolkit["path"]) / "bin" / "nvcc"), "--version"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "release 13.0" in nvcc.stdout
    assert (tmp_path / ".cuda-version").read_text().strip() == toolkit["version"]

    # Rollback with the network cut off: every proxy refuses.
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    restored = run_cli(capsys, "rollback", "--python", str(python))
    assert restored.code == 0, restored.err
    assert freeze(python) == frozen
    assert tree_state(root) == state
