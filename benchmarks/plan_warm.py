"""Warm plans of two source trees taking turns on one warm cache: a change to the warm path
measured against a baseline, under the same load.

A cold plan (with this tree) fills the cache; then each tree plans again, alternating
(the baseline's ``src`` on ``PYTHONPATH``, then this tree), ``--runs`` times each.  Each run
is the whole command in a new process; its wall time and its CPU (user + sys, uv's
included) are kept, and the outputs are compared (the same plan, or the change is wrong).
Both trees are bytecode-compiled first (``PYTHONDONTWRITEBYTECODE`` is set on these
machines).  Live PyPI, as ``benchmarks/plan.py``'s worlds; the cache stays warm for 10
minutes (the index pages' lifetime), so keep ``--runs`` to a few dozen.

    git archive main src | tar -x -C /tmp/base
    .venv/bin/python benchmarks/plan_warm.py --baseline /tmp/base/src [--runs 10] [torch flashinfer-python sgl-kernel]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
TARGET = ["--python", "3.12", "--platform", "linux-x86_64", "--driver", "590.48.01"]


def _run(argv: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Wall seconds, CPU seconds (the child's user + sys) and stdout of one plan."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in {0, 13}:  # 13: the requests conflict, an answer too
        raise SystemExit(f"plan exited {done.returncode}: {done.stderr.strip()[-600:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout


def _span(values: list[float]) -> str:
    ordered = sorted(values)
    return f"{statistics.median(ordered):.2f} ({ordered[0]:.2f}-{ordered[-1]:.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("packages", nargs="*", default=["torch", "flashinfer-python", "sgl-kernel"])
    parser.add_argument("--baseline", type=Path, required=True, help="the other tree's src/")
    parser.add_argument("--runs", type=int, default=10, help="warm runs of each tree")
    args = parser.parse_args()
    for tree in (ROOT / "src", args.baseline):
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree)], check=True)
    argv = [str(BIN / "cudaup"), "plan", *args.packages, *TARGET, "--index", "pypi"]
    with tempfile.TemporaryDirectory(prefix="plan-warm-") as cache:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CUDAUP_", "UV_"))}
        env.pop("PYTHONPATH", None)
        env["CUDAUP_CACHE_DIR"] = cache
        trees = {"baseline": {**env, "PYTHONPATH": str(args.baseline)}, "this tree": env}
        load_before = os.getloadavg()[0]
        cold, _, _ = _run(argv, env)
        walls: dict[str, list[float]] = {name: [] for name in trees}
        cpus: dict[str, list[float]] = {name: [] for name in trees}
        outputs: dict[str, set[str]] = {name: set() for name in trees}
        for turn in range(args.runs):
            order = list(trees) if turn % 2 == 0 else list(reversed(trees))
            for name in order:
                wall, cpu, out = _run(argv, trees[name])
                walls[name].append(wall)
                cpus[name].append(cpu)
                outputs[name].add(out)
    print(f"plan {' '.join(args.packages)}: cold {cold:.2f} s (this tree), then warm:")
    for name in trees:
        print(f"  {name}: wall {_span(walls[name])} s, CPU {_span(cpus[name])} s")
    same = len(outputs["baseline"] | outputs["this tree"]) == 1
    print(f"  the same plan from both: {'yes' if same else 'NO'}")
    print(f"  load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after")


if __name__ == "__main__":
    main()
