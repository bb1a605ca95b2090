"""A real CUDA 13.0 toolkit for the tests that compile: nvcc and cudart from the live PyPI.

Installed once per session by cudaup itself (``install 13.0.2 --channel pypi --components
nvcc,cudart``) into a session directory, so a test needs no toolkit on the machine: a fresh
clone compiles with the same nvcc (V13.0.88) everywhere.  Tests that use it are marked ``pypi``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

#: The release the compiling tests build with; its nvcc is V13.0.88.
RELEASE = "13.0.2"


@pytest.fixture(scope="session")
def pypi_toolkit(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The root of a CUDA 13.0.2 toolkit (``bin/nvcc``, ``include/``, ``lib/``) from PyPI."""
    home = tmp_path_factory.mktemp("pypi-toolkit")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUDAUP_")}
    env.update(CUDAUP_HOME=str(home / "home"), CUDAUP_CACHE_DIR=str(home / "cache"))
    done = subprocess.run(
        [sys.executable, "-m", "cudaup", "--json", "install", RELEASE, "--channel", "pypi",
         "--components", "nvcc,cudart", "--platform", "linux-x86_64"],
        capture_output=True, text=True, env=env, check=False, timeout=900,
    )  # fmt: skip
    if done.returncode != 0:
        pytest.fail(f"installing CUDA {RELEASE} from PyPI failed: {done.stderr}")
    return Path(json.loads(done.stdout)["path"])
