"""Benchmark cudaup's start-up and a probe against their floors.

- ``cudaup --version`` and ``cudaup --help`` against ``python -c pass`` (the same
  interpreter): what importing and building the parser costs on top of Python;
- ``cudaup show`` and ``cudaup cache dir``, commands that read only this machine (an
  empty store, the toolkits found here, the cache's path): no network stack to import;
- ``cudaup probe URL`` of a file that exists, on a host already answering (the test
  suite's fake NVIDIA server on loopback), against ``curl -sI URL`` plus ``python -c
  pass``: a Python tool cannot start faster than Python, nor ask faster than curl.
  ``python -c 'import http.client'`` and ``'import urllib3'`` show what importing an
  HTTP client costs before any request.
  A probe of an installer also reads the release's md5sum.txt (one more request,
  cached afterwards); the probe of a manifest (no md5 to look up) and the warm probe
  show that request's share.

Both install forms are measured: this checkout's editable install (run from compiled
bytecode: this machine sets ``PYTHONDONTWRITEBYTECODE``, and an editable checkout would
otherwise compile every module on every start), and the wheel built from it, installed
with pip (which compiles it) into a fresh virtual environment without dependencies
(``--version`` and ``--help`` need none); each form through its console script, against
``python -c pass`` of its own interpreter.

Each run takes every command in turn; the table gives the median and the range across
runs, and ratios taken within each run.

    .venv/bin/python benchmarks/startup.py --output docs/performance.md [--against COPY/src]
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from report import parser_for, publish  # noqa: E402
from tests.fakenvidia import FakeNvidiaServer, build_site  # noqa: E402

import cudaup as package_under_test  # noqa: E402

BEGIN, END = "<!-- BEGIN startup benchmark -->", "<!-- END startup benchmark -->"
INSTALLER = "/compute/cuda/13.0.1/local_installers/cuda_13.0.1_580.82.07_linux.run"
MANIFEST = "/compute/cuda/redist/redistrib_13.0.1.json"
WHEEL_FLOOR = "`python -c pass`, the wheel's environment"


def timed(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False
    )
    seconds = time.perf_counter() - started
    if done.returncode not in {0, 2}:  # --help without a command exits 2 (a usage answer)
        raise SystemExit(f"{command} failed: {done.stderr.decode()[-2000:]}")
    return seconds


def wheel_install(directory: Path) -> Path:
    """The ``bin`` of a fresh virtual environment holding cudaup's wheel, built from this
    checkout, installed by pip without dependencies."""
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    env = {**os.environ, "PIP_CONFIG_FILE": os.devnull}  # no local index: this wheel only
    wheels, venv = directory / "dist", directory / "venv"
    for command in (
        [*pip, "wheel", "--no-deps", "-w", str(wheels), str(ROOT)],
        [sys.executable, "-m", "venv", "--without-pip", str(venv)],
        [*pip, "--python", str(venv / "bin" / "python"), "install", "--no-deps", "--no-index",
         "--find-links", str(wheels), "cudaup"],
    ):  # fmt: skip
        subprocess.run(command, env=env, stdout=subprocess.DEVNULL, check=True)
    return venv / "bin"


def main() -> None:
    parser = parser_for(__doc__, runs=21)
    parser.add_argument(
        "--against",
        type=Path,
        help="another tree's src/ (compiled here first; give a copy): its --version, --help, "
        "show and cache dir run through the same console script with PYTHONPATH at it, in the "
        "same rounds",
    )
    args = parser.parse_args()
    python = sys.executable
    package = Path(package_under_test.__file__).parent
    subprocess.run([python, "-m", "compileall", "-q", str(package)], check=True)
    if args.against:
        subprocess.run([python, "-m", "compileall", "-q", str(args.against)], check=True)
    script = Path(python).parent / "cudaup"
    cudaup = [str(script)] if script.exists() else [python, "-m", "cudaup"]
    samples: dict[str, list[float]] = {}
    ratios: dict[str, list[float]] = {}
    requests: dict[str, int] = {}
    with FakeNvidiaServer(build_site()) as server, tempfile.TemporaryDirectory() as tmp:
        wheel_bin = wheel_install(Path(tmp) / "wheel")
        base_env = {
            **os.environ,
            "CUDAUP_NVIDIA_DOWNLOAD_URL": server.download_url,
            "CUDAUP_NVIDIA_ARCHIVE_URL": server.archive_url,
            "CUDAUP_NVIDIA_PRERELEASE_URL": server.prerelease_url,
            "CUDAUP_HOME": str(Path(tmp) / "home"),  # an empty store, not this user's
        }
        installer, manifest = server.download_url + INSTALLER, server.download_url + MANIFEST
        commands: dict[str, tuple[list[str], str]] = {
            "`python -c pass`": ([python, "-c", "pass"], "fresh"),
            "`cudaup --version`": ([*cudaup, "--version"], "fresh"),
            "`cudaup --help`": ([*cudaup, "--help"], "fresh"),
            WHEEL_FLOOR: ([str(wheel_bin / "python"), "-c", "pass"], "fresh"),
            "`cudaup --version`, from the wheel": (
                [str(wheel_bin / "cudaup"), "--version"],
                "fresh",
            ),
            "`cudaup --help`, from the wheel": ([str(wheel_bin / "cudaup"), "--help"], "fresh"),
            "`cudaup show`": ([*cudaup, "show"], "fresh"),
            "`cudaup cache dir`": ([*cudaup, "cache", "dir"], "fresh"),
            **(
                {
                    "`cudaup --version`, the --against tree": ([*cudaup, "--version"], "fresh"),
                    "`cudaup --help`, the --against tree": ([*cudaup, "--help"], "fresh"),
                    "`cudaup show`, the --against tree": ([*cudaup, "show"], "fresh"),
                    "`cudaup cache dir`, the --against tree": ([*cudaup, "cache", "dir"], "fresh"),
                }
                if args.against
                else {}
            ),
            "`python -c 'import http.client'`": ([python, "-c", "import http.client"], "fresh"),
            "`python -c 'import urllib3'`": ([python, "-c", "import urllib3"], "fresh"),
            "`curl -sI URL`": (["curl", "-sI", installer], "fresh"),
            "`cudaup probe URL`, cold (+ md5sum.txt)": ([*cudaup, "probe", installer], "fresh"),
            "`cudaup probe URL`, cold, no md5 to look up": ([*cudaup, "probe", manifest], "fresh"),
            "`cudaup probe URL`, warm (md5sum.txt cached)": ([*cudaup, "probe", installer], "warm"),
        }
        if not shutil.which("curl"):
            del commands["`curl -sI URL`"]
        warm_cache = Path(tmp) / "warm"
        subprocess.run(
            [*cudaup, "probe", installer],
            env={**base_env, "CUDAUP_CACHE_DIR": str(warm_cache)},
            stdout=subprocess.DEVNULL,
            check=True,
        )
        for run in range(args.runs):
            times: dict[str, float] = {}
            for name, (command, cache) in commands.items():
                directory = (
                    warm_cache if cache == "warm" else Path(tmp) / f"cold-{run}-{len(times)}"
                )
                env = {**base_env, "CUDAUP_CACHE_DIR": str(directory)}
                if "--against" in name:
                    env["PYTHONPATH"] = str(args.against)
                before = len(server.log)
                times[name] = timed(command, env)
                requests[name] = len(server.log) - before
                samples.setdefault(name, []).append(times[name])
            floor = times["`python -c pass`"]
            probe_floor = floor + times.get("`curl -sI URL`", 0.0)
            for name, seconds in times.items():
                if "probe" in name:
                    ratios.setdefault(name, []).append(seconds / probe_floor)
                else:
                    own = times[WHEEL_FLOOR] if "wheel" in name else floor
                    ratios.setdefault(name, []).append(seconds / own)
    lines = [
        BEGIN,
        "## Start-up and a probe",
        "",
        "Command: `.venv/bin/python benchmarks/startup.py --output docs/performance.md"
        + (" --against COPY/src` (COPY: the tree before this one)" if args.against else "`"),
        "",
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {os.cpu_count()} CPUs, "
        f"Python {sys.version.split()[0]}, {args.runs} runs, every command in turn within each "
        "run, on a machine shared with other jobs; cudaup through its console script, from this "
        "checkout's editable install (compiled bytecode) and from its wheel installed by pip "
        "into a fresh environment. The probe asks the fake NVIDIA server on loopback. Ratios "
        "are taken within each run: `--version` and `--help` against `python -c pass` of the "
        "same environment, a probe against `curl -sI` plus `python -c pass`.",
        "",
        "| command | requests | median ms (range) | ratio, median (range) |",
        "|---|---|---|---|",
    ]
    for name, values in samples.items():
        sent = requests[name] if "probe" in name or "curl" in name else "-"
        ratio = ratios[name]
        lines.append(
            f"| {name} | {sent} | {statistics.median(values) * 1000:.1f} "
            f"({min(values) * 1000:.1f}-{max(values) * 1000:.1f}) | "
            f"{statistics.median(ratio):.2f}x ({min(ratio):.2f}-{max(ratio):.2f}) |"
        )
    lines += ["", END]
    publish(lines, args.output, BEGIN, END)


if __name__ == "__main__":
    main()
