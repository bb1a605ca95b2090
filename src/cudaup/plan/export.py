"""``plan --export``: the plan's pins as a PEP 751 ``pylock.toml``, resolved by uv."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from cudaup.core.platforms import FACTS
from cudaup.errors import CudaupError, UsageError
from cudaup.plan.indexes import Index
from cudaup.plan.offers import PlanResult


def export_pylock(result: PlanResult, destination: Path, indexes: dict[str, Index]) -> Path:
    """Write a PEP 751 ``pylock.toml`` for the plan, resolved and hashed by uv."""
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if uv is None:
        raise UsageError("--export needs uv to resolve the full dependency closure: pip install uv")
    assert result.target is not None
    pypi = indexes.get("pypi")
    base = pypi.urls.get("", "https://pypi.org/simple") if pypi else "https://pypi.org/simple"
    argv = [
        uv, "pip", "compile", "-", "--quiet", "--format", "pylock.toml", "-o", str(destination),
        "--python-version", f"{result.target.python[0]}.{result.target.python[1]}",
        "--python-platform", FACTS[result.target.platform].uv_platform,
        "--index-url", base, "--index-strategy", "unsafe-best-match", "--no-header",
    ]  # fmt: skip
    for url in result.extra_index_urls():
        argv += ["--extra-index-url", url]
    done = subprocess.run(
        argv, input="\n".join(result.pins()) + "\n", capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise CudaupError(f"uv could not lock the plan: {done.stderr.strip()[-800:]}")
    return destination
