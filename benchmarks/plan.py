"""Benchmark ``cudaup plan``, cold and warm, beside ``uv pip compile`` of the same requests.

Each run is the whole command as a user runs it (a new process).  *Cold* starts from
an empty cache directory (cudaup's, and so uv's inside it; ``uv pip compile`` gets an
empty ``--cache-dir`` of its own); *warm* runs again on the cache the cold run left.
The loopback indexes of the test suite (``tests/plan/world.py``) show cudaup's own cost
without the network's; the live PyPI (``--index pypi``: the CUDA vendors' own indexes
cannot be reached from the test machines) runs the stacks that were slowest cold (vllm
pinned, a conflict that ends in the no-line error, bitsandbytes) and a three-package one.
Runs of cudaup and uv are interleaved, so the ratio is taken under the same load.

cudaup's bytecode is compiled first, as pip does when it installs cudaup's wheel: an
editable checkout under ``PYTHONDONTWRITEBYTECODE`` (set on these machines) would
otherwise recompile some 70 modules, 0.17-0.3 s, on every plan (most of a warm one).

    .venv/bin/python benchmarks/plan.py [--runs 5] [--no-pypi] [--only vllm] [--output docs/performance.md]

With ``--output`` the results replace the ``plan`` section of that file.

With ``--baseline DIR`` (the ``src/`` of another cudaup, for instance ``git archive
COMMIT src | tar -x -C /tmp/before``) each run also plans cold with that cudaup, first on
``PYTHONPATH``, right before or right after this one (the order alternating from run to
run: the network's speed drifts over minutes, and a tool always run second met another
network than the first), and the section adds this cudaup's cold time against the
baseline's, as ratios within each run.

    .venv/bin/python benchmarks/plan.py --only "vllm flashinfer" --runs 8 --baseline /tmp/before/src
"""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from report import parser_for, publish  # noqa: E402
from tests.plan.pyindex import IndexServer  # noqa: E402
from tests.plan.world import build  # noqa: E402

import cudaup  # noqa: E402  (the package under test: PYTHONPATH may name another tree)

BEGIN, END = "<!-- BEGIN plan benchmark -->", "<!-- END plan benchmark -->"
BIN = Path(sys.executable).parent
TARGET = ["--python", "3.12", "--platform", "linux-x86_64", "--driver", "590.48.01"]
UV_TARGET = ["--python-version", "3.12", "--python-platform", "x86_64-manylinux_2_39"]
#: The live-PyPI stacks (requests, whether they conflict): issue #27.4's slowest cold plans.
LIVE = [
    (["vllm==0.20.0"], False),
    (["vllm==0.25.0"], False),
    (["vllm==0.20.0", "torch==2.9.0"], True),
    (["bitsandbytes==0.45.5", "torch==2.10.0"], False),
    (["torch", "flashinfer-python", "sgl-kernel"], False),
    (["vllm", "flashinfer-python"], False),
]


@dataclass(frozen=True)
class World:
    name: str
    packages: list[str]
    plan_args: list[str]
    pypi_url: str | None
    uv_args: list[str]
    home: Path | None = None
    #: The requests have no resolution: both commands end in an error, timed all the same.
    conflict: bool = False


def _timed(
    argv: list[str], env: dict[str, str], stdin: str | None = None, *, fails: bool = False
) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, input=stdin, capture_output=True, text=True, env=env, check=False)
    elapsed = time.perf_counter() - started
    if (done.returncode != 0) != fails:
        raise SystemExit(f"{argv[0]} exited {done.returncode}: {done.stderr.strip()[-600:]}")
    return elapsed


def _environment(cache: Path, world: World) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUDAUP_", "UV_"))}
    env["CUDAUP_CACHE_DIR"] = str(cache)
    if world.pypi_url:
        env["CUDAUP_PYPI_URL"] = world.pypi_url
    if world.home:
        env["CUDAUP_HOME"] = str(world.home)
    return env


def measure(world: World, runs: int, baseline: Path | None = None) -> dict[str, list[float]]:
    """Seconds per run: cudaup cold/warm, uv cold/warm (and the baseline's cold plan)."""
    times: dict[str, list[float]] = {"plan cold": [], "plan warm": [], "uv cold": [], "uv warm": []}

    def plan(env: dict[str, str]) -> float:
        argv = [str(BIN / "cudaup"), "plan", *world.packages, *world.plan_args]
        return _timed(argv, env, fails=world.conflict)

    for run in range(runs):
        with tempfile.TemporaryDirectory(prefix="plan-bench-") as scratch:
            env = _environment(Path(scratch) / "cache", world)
            if baseline is not None and run % 2:
                times.setdefault("baseline cold", []).append(
                    _baseline(plan, scratch, world, baseline)
                )
            times["plan cold"].append(plan(env))
            times["plan warm"].append(plan(env))
            if baseline is not None and not run % 2:
                times.setdefault("baseline cold", []).append(
                    _baseline(plan, scratch, world, baseline)
                )
            uv_cache = Path(scratch) / "uv"
            argv = [
                str(BIN / "uv"), "pip", "compile", "-", "--quiet", "--no-config", "--no-build",
                "--python", sys.executable, *UV_TARGET, "--cache-dir", str(uv_cache),
                *world.uv_args,
            ]  # fmt: skip
            requirements = "\n".join(world.packages) + "\n"
            times["uv cold"].append(_timed(argv, env, requirements, fails=world.conflict))
            times["uv warm"].append(_timed(argv, env, requirements, fails=world.conflict))
    return times


def _baseline(
    plan: Callable[[dict[str, str]], float], scratch: str, world: World, baseline: Path
) -> float:
    """The baseline cudaup's cold plan, in a cache of its own."""
    env = _environment(Path(scratch) / "baseline-cache", world)
    env["PYTHONPATH"] = str(baseline)
    return plan(env)


def _against(name: str, times: dict[str, list[float]]) -> str:
    """This cudaup's cold plan against the baseline's, as ratios within each run."""
    ratios = sorted(a / b for a, b in zip(times["plan cold"], times["baseline cold"], strict=True))
    base = sorted(times["baseline cold"])
    return (
        f"{name}: this cudaup against the baseline, cold, {statistics.median(ratios):.2f}x "
        f"({ratios[0]:.2f}-{ratios[-1]:.2f}); the baseline's cold plan "
        f"{statistics.median(base):.2f} s ({base[0]:.2f}-{base[-1]:.2f})"
    )


def _row(name: str, times: dict[str, list[float]]) -> str:
    def span(key: str) -> str:
        values = sorted(times[key])
        return f"{statistics.median(values):.2f} ({values[0]:.2f}-{values[-1]:.2f})"

    ratio = statistics.median(times["plan cold"]) / statistics.median(times["uv cold"])
    return (
        f"| {name} | {span('plan cold')} | {span('plan warm')} | {span('uv cold')} | "
        f"{span('uv warm')} | {ratio:.1f}x |"
    )


def main() -> None:
    parser = parser_for(__doc__, runs=5)
    parser.add_argument("--no-pypi", action="store_true", help="skip the live-PyPI worlds")
    parser.add_argument("--only", help="run only the worlds whose name contains this")
    parser.add_argument(
        "--baseline", type=Path, help="the src/ of another cudaup, planned cold in turns"
    )
    args = parser.parse_args()
    for tree in [
        Path(cudaup.__file__).parent,
        *([args.baseline / "cudaup"] if args.baseline else []),
    ]:
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree)], check=True)
    against: list[str] = []
    load_before = os.getloadavg()[0]
    rows = []
    with IndexServer() as server, tempfile.TemporaryDirectory() as home:
        build(server)
        (Path(home) / "indexes.toml").write_text(
            '[indexes.pytorch]\nprojects = ["torch"]\n[indexes.pytorch.urls]\n'
            + "".join(f'{t} = "{server.url(f"torch-{t}")}"\n' for t in ("cu128", "cu130", "cu132"))
            + '[indexes.sglang]\nprojects = ["sgl-kernel"]\n[indexes.sglang.urls]\n'
            + f'cu130 = "{server.url("sgl-cu130")}"\n'
        )
        loopback = World(
            "loopback: torch servellm sgl-kernel",
            ["torch", "servellm", "sgl-kernel"],
            [*TARGET, "--index", "pypi", "--index", "pytorch", "--index", "sglang"],
            server.url("pypi"),
            ["--default-index", server.url("pypi")],
            Path(home),
        )
        if not args.only or args.only in loopback.name:
            times = measure(loopback, args.runs, args.baseline)
            rows.append(_row(loopback.name, times))
            against += [_against(loopback.name, times)] if args.baseline else []
    live = [
        World(f"live PyPI: {' '.join(packages)}", packages, [*TARGET, "--index", "pypi"], None,
              [], conflict=conflict)
        for packages, conflict in LIVE
    ]  # fmt: skip
    for world in [] if args.no_pypi else live:
        if not args.only or args.only in world.name:
            times = measure(world, args.runs, args.baseline)
            rows.append(_row(world.name, times))
            against += [_against(world.name, times)] if args.baseline else []
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load_after = os.getloadavg()[0]
    uv_version = subprocess.run(
        [str(BIN / "uv"), "--version"], capture_output=True, text=True, check=False
    ).stdout.strip()
    cpus = os.cpu_count()
    lines = [
        BEGIN,
        "## Plan",
        "",
        "Command: `.venv/bin/python benchmarks/plan.py --output docs/performance.md"
        + (f" --baseline {args.baseline}" if args.baseline else "")
        + "`",
        "",
        f"Measured {stamp} on {cpus} CPUs, Python {platform.python_version()}, {uv_version}: "
        f"seconds for the whole command, median (min-max) of {args.runs} runs. Cold: empty cache "
        "directories; warm: the same command again. `uv pip compile` resolves the same "
        "requests once, with no line constraints, for the same target.",
        "",
        "| world | plan cold | plan warm | uv compile cold | uv compile warm | plan/uv cold |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
        f"Load average {load_before:.1f} before, {load_after:.1f} after (the plans' own uv "
        "processes count in it); absolute times move with the load and the network, so each "
        "ratio is taken within one run, cudaup and uv interleaved. A plan resolves once per "
        "candidate line (two at a time, newest first: `planner.WINDOW`; a warm plan's kept "
        "answers decide it without a uv run), reads silent wheels' libraries by range "
        "requests, then checks that "
        "the printed line installs the plan (uv again, unconstrained). Its uv runs read the "
        "flat indexes through the plan's index memo (`plan/index_memo.py`): each page, HEAD "
        "and wheel range is fetched once for all of them, and a later run takes what an "
        "earlier one read from the plan's uv cache without asking (a fully memoized "
        "resolution of vllm costs uv 0.2-0.4 s instead of 1.0-1.5 s). The PyPI these "
        "machines see (an intercepting proxy) sends neither cache lifetimes nor PEP 658 "
        "metadata, so uv reads each wheel's METADATA by a HEAD and two or three ranges: a "
        "cold `vllm==0.20.0` plan's uv runs send about 700 requests upstream; the memo reads "
        "each wheel's tail, zip directory and METADATA ahead of uv from its HEAD on and answers "
        "uv's ranges from them (`plan/read_ahead.py`), and when uv walks a project down, "
        "version after version, the next older versions' as well. Where its time goes now "
        "(uv runs logged, 9.3 s, 22:12 UTC): the unconstrained resolution of the exact pin, "
        "started before the survey (6.4 s; uv alone 7.0-7.2 s), 13.0's first round from the "
        "plan's memo and uv cache (0.3 s), its read-back (0.67 s: vllm's wheel read for its "
        "libraries) with its second round, without nvidia-cutlass-dsl-libs-cu12, started "
        "beside it as soon as the names decided it (1.6 s: `plan/next_round.py`), and the "
        "install check's second resolution (0.15 s). uv alone sends its requests over one "
        "HTTP/2 connection per host; the memo forwards them over HTTP/1.1 connections opened "
        "two at a time, each counted as open once connected, with each host looked up once "
        "per plan, since this machine's resolver stalls 5 s when many lookups arrive at once. "
        "`uv --offline` would answer in 0.1 s, but it "
        "silently takes an older version whose metadata is cached when a newer one is not "
        "(`requests` cached at 2.31.0 resolves offline to 2.31.0 with 2.34.2 published), so "
        "its answers are not used. The conflict (`vllm==0.20.0 torch==2.9.0`) is proven by one "
        "resolution with no line constraint over every line's pages (`plan/conflict.py`), run "
        "at once for exact pins, before the survey, and the lines wait for it: if the "
        "requests fail without any line's constraints, they fail on every line. Exact pins "
        "from one index are also checked against the pinned wheels' own Requires-Dist, read "
        "from what the memo read ahead for uv (`conflict.pins_contradict`): vllm 0.20.0's "
        "wheel requires torch==2.11.0, which ends this plan before uv's answer (uv is stopped).",
        *(["", *(f"- {line}" for line in against)] if against else []),
        END,
    ]
    publish(lines, args.output, BEGIN, END)


if __name__ == "__main__":
    main()
