"""What a shim costs: ``nvcc --version`` through ``$CUDAUP_HOME/bin/nvcc`` against the
same tool run directly, and the interpreter's own start-up as the floor.

The toolkit is a one-line ``sh`` script, so the difference is the shim alone.  cudaup's
modules are byte-compiled first, as an installed wheel has them.  Each command runs
``--runs`` times, the variants taking turns; the median wall time and the median CPU
time (user + system, of the child) are reported.  CPU time is what a busy build
machine pays; wall time on a shared machine also includes waiting for a core.

    .venv/bin/python benchmarks/shim.py --output docs/performance.md
"""

from __future__ import annotations

import compileall
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from report import parser_for, publish

import cudaup
from cudaup.install.store import Store
from cudaup.switch import shim_files

BEGIN, END = "<!-- BEGIN shim benchmark -->", "<!-- END shim benchmark -->"


def child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(
    variants: dict[str, list[str]], env: dict[str, str], runs: int
) -> dict[str, tuple[float, float]]:
    """Median (wall, cpu) seconds of each command, the variants interleaved."""
    walls: dict[str, list[float]] = {name: [] for name in variants}
    cpus: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(runs):
        for name, argv in variants.items():
            cpu, wall = child_cpu(), time.perf_counter()
            subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, check=True)
            walls[name].append(time.perf_counter() - wall)
            cpus[name].append(child_cpu() - cpu)
    return {n: (statistics.median(walls[n]), statistics.median(cpus[n])) for n in variants}


def main() -> None:
    args = parser_for(__doc__, runs=200).parse_args()
    compileall.compile_dir(str(Path(cudaup.__file__).parent), quiet=1)
    with tempfile.TemporaryDirectory() as scratch:
        home = Path(scratch) / "home"
        tool = home / "toolkits" / "13.0.1" / "bin" / "nvcc"
        tool.parent.mkdir(parents=True)
        tool.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 13.0, V13.0.88'\n")
        tool.chmod(0o755)
        store = Store(home)
        store.set_default("13.0")
        shim_files.refresh_shims(store)
        env = {"PATH": f"{store.bin_dir}:/usr/bin:/bin", "HOME": scratch}
        variants = {
            "nvcc itself": [str(tool), "--version"],
            "python -I -S -c pass (the floor)": [sys.executable, "-I", "-S", "-c", "pass"],
            "the nvcc shim": ["nvcc", "--version"],
        }
        results = measure(variants, env, args.runs)
    direct_wall, direct_cpu = results["nvcc itself"]
    lines = [
        BEGIN,
        "## A shim's cost",
        "",
        f"`benchmarks/shim.py --runs {args.runs}` on {os.cpu_count()} CPUs, Python "
        f"{sys.version.split()[0]}, bytecode compiled; medians.",
        "",
        "| command | wall | CPU | over nvcc itself (CPU) |",
        "|---|---|---|---|",
    ]
    for name, (wall, cpu) in results.items():
        lines.append(
            f"| {name} | {wall * 1e3:.1f} ms | {cpu * 1e3:.1f} ms | {(cpu - direct_cpu) * 1e3:+.1f} ms |"
        )
    lines += [
        "",
        f"The shim adds {(results['the nvcc shim'][1] - direct_cpu) * 1e3:.1f} ms of CPU and "
        f"{(results['the nvcc shim'][0] - direct_wall) * 1e3:.1f} ms of wall time per call.",
        END,
    ]
    publish(lines, args.output, BEGIN, END)


if __name__ == "__main__":
    main()
