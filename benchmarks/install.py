"""Benchmark ``cudaup install --channel pypi`` against ``pip install --target`` and
``uv pip install --target`` of the same wheels, cold and warm cache (live PyPI).

The wheels: what ``cuda-toolkit[nvcc,cudart]==13.0.1`` pulls in (nvcc, nvvm,
crt, cudart: ~100 MB).  Cold: an empty cache for each tool; warm: the same
cache again, into a fresh target.  pip runs with its configuration file
disabled and PyPI as its only index, so no local mirror helps it.  The tools
take turns within each run, so a change in the network's speed over the
minutes of a run falls on all of them alike.

cudaup's bytecode is compiled first, as pip does when it installs cudaup's
wheel: an editable checkout under ``PYTHONDONTWRITEBYTECODE`` (set on some CI
machines) would otherwise recompile every module on every start.

    .venv/bin/python benchmarks/install.py --output docs/performance.md
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from report import parser_for, publish

import cudaup as package_under_test

BEGIN, END = "<!-- BEGIN install benchmark -->", "<!-- END install benchmark -->"
REQUIREMENT = "cuda-toolkit[nvcc,cudart]==13.0.1"


def timed(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{command[0]} failed: {done.stderr[-2000:]}")
    return seconds


def main() -> None:
    parser = parser_for(__doc__, runs=2)
    args = parser.parse_args()
    python = sys.executable
    uv = shutil.which("uv", path=str(Path(python).parent)) or shutil.which("uv")
    base_env = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    package = Path(package_under_test.__file__).parent
    subprocess.run([python, "-m", "compileall", "-q", str(package)], check=True)
    with tempfile.TemporaryDirectory(prefix="cudaup-install-bench-") as tmp:
        work = Path(tmp)

        def cudaup(cache: Path, target: Path) -> list[str]:
            return [python, "-m", "cudaup", "install", "13.0.1", "--channel", "pypi",
                    "--components", "nvcc,cudart", "--prefix", str(target), "-q", "--platform", "linux-x86_64"]  # fmt: skip

        def pip(cache: Path, target: Path) -> list[str]:
            return [python, "-m", "pip", "install", "-q", "--index-url", "https://pypi.org/simple",
                    "--cache-dir", str(cache), "--target", str(target), REQUIREMENT]  # fmt: skip

        def uv_install(cache: Path, target: Path) -> list[str]:
            assert uv is not None
            return [uv, "pip", "install", "-q", "--python", python, "--index-url", "https://pypi.org/simple",
                    "--cache-dir", str(cache), "--target", str(target), REQUIREMENT]  # fmt: skip

        tools = {"cudaup": cudaup, "pip": pip}
        if uv:
            tools["uv"] = uv_install
        rows = {name: {"cold": float("inf"), "warm": float("inf")} for name in tools}
        for run in range(args.runs):
            for name, command in tools.items():
                best = rows[name]
                cache = work / f"cache-{name}-{run}"
                env = {
                    **base_env,
                    "CUDAUP_CACHE_DIR": str(cache),
                    "CUDAUP_HOME": str(work / f"home-{name}-{run}"),
                }
                for phase in ("cold", "warm"):
                    target = work / f"target-{name}-{run}-{phase}"
                    seconds = timed(command(cache, target), env)
                    best[phase] = min(best[phase], seconds)
                    shutil.rmtree(target, ignore_errors=True)
                    print(f"run {run + 1} {name:<8} {phase} {seconds:.2f} s", flush=True)
                shutil.rmtree(cache, ignore_errors=True)
    lines = [
        BEGIN,
        "## Install (pypi channel)",
        "",
        "Command: `.venv/bin/python benchmarks/install.py --output docs/performance.md`",
        "",
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, live PyPI, `{REQUIREMENT}` "
        f"(nvcc, nvvm, crt, cudart); whole-process wall time, best of {args.runs}. cudaup also lays the "
        "wheels out as a CUDA_HOME (lib64, unversioned .so links, version.json); pip and uv only unpack them. "
        "The tools take turns within each run; cudaup runs from compiled bytecode, as installed from its wheel.",
        "",
        "| tool | cold s | warm s | cold x uv | cold x pip | warm x uv | warm x pip |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, best in rows.items():
        cells = []
        for phase in ("cold", "warm"):
            for other in ("uv", "pip"):
                reference = rows.get(other, {}).get(phase)
                cells.append(f"{best[phase] / reference:.2f}" if reference else "-")
        lines.append(
            f"| {name} | {best['cold']:.2f} | {best['warm']:.2f} | {cells[0]} | {cells[1]} | {cells[2]} | {cells[3]} |"
        )
    lines += ["", "Ratios are time ratios: below 1 means faster than the other tool.", END]
    publish(lines, args.output, BEGIN, END)


if __name__ == "__main__":
    main()
