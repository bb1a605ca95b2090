"""Benchmark ``cudaup arch`` against NVIDIA's ``cuobjdump --list-elf --list-ptx``.

The file: PyPI's nvidia-curand libcurand.so.10 (the wheel is downloaded once with pip
unless ``--library`` names a copy), with the page cache warm (one untimed run of each
first), so both read memory, not the disk.  Timed, as processes (wall clock, median):
``cuobjdump -all --list-elf --list-ptx FILE``, ``cudaup arch FILE`` (the whole CLI:
Python's start, imports, the parse, the output), and in-process the parse alone
(:func:`cudaup.binaries.read.read_file`).  cudaup reads more than cuobjdump: every
``.nv_fatbin`` entry and the fatbins embedded in its data sections (a scan of them).

    .venv/bin/python benchmarks/arch.py --output docs/performance.md
"""

from __future__ import annotations

import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from report import parser_for, publish  # noqa: E402
from tests.binaries.truth import cuobjdump  # noqa: E402

from cudaup.binaries.read import read_file  # noqa: E402

BEGIN, END = "<!-- BEGIN arch benchmark -->", "<!-- END arch benchmark -->"
CURAND = "nvidia-curand==10.4.5.25"


def _library(directory: Path) -> Path:
    env = {**os.environ, "PIP_CONFIG_FILE": os.devnull}
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", CURAND, "-d", str(directory)],
        check=True, env=env,
    )  # fmt: skip
    (wheel,) = directory.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        (member,) = [n for n in archive.namelist() if "/libcurand.so" in n]
        archive.extract(member, directory)
    return directory / member


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _median(command: list[str], runs: int) -> tuple[float, float]:
    """Median wall and CPU (user + system) seconds of ``command``."""
    subprocess.run(command, check=True, capture_output=True)  # warm the page cache
    times, cpu = [], []
    for _ in range(runs):
        start, used = time.perf_counter(), _cpu()
        subprocess.run(command, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
        cpu.append(_cpu() - used)
    return statistics.median(times), statistics.median(cpu)


def main() -> None:
    parser = parser_for(__doc__, runs=15)
    parser.add_argument("--library", type=Path, help="a libcurand.so to read (else downloaded)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        library = args.library or _library(Path(scratch))
        tool = [str(cuobjdump()), "-all", "--list-elf", "--list-ptx", str(library)]
        theirs, theirs_cpu = _median(tool, args.runs)
        ours, ours_cpu = _median([sys.executable, "-m", "cudaup", "arch", str(library)], args.runs)
        read_file(library)
        parse = []
        for _ in range(args.runs):
            start = time.perf_counter()
            found = read_file(library)
            parse.append(time.perf_counter() - start)
        entries = len(found.entries) if found else 0
        size = library.stat().st_size
    lines = [
        BEGIN,
        "## Reading GPU targets (`cudaup arch`)",
        "",
        f"Command: `.venv/bin/python benchmarks/arch.py --output docs/performance.md` "
        f"({os.cpu_count()} CPUs shared, Python {platform.python_version()}; medians of "
        f"{args.runs}, page cache warm). File: {CURAND}'s libcurand.so.10, "
        f"{size / 1e6:.0f} MB, {entries} entries found (186 in `.nv_fatbin`, the rest in "
        "fatbins embedded in `.data`).",
        "",
        "| what | wall | vs cuobjdump | CPU | vs cuobjdump |",
        "|---|---|---|---|---|",
        f"| `cuobjdump -all --list-elf --list-ptx` | {theirs * 1000:.0f} ms | 1.00x "
        f"| {theirs_cpu * 1000:.0f} ms | 1.00x |",
        f"| `cudaup arch` (the whole command) | {ours * 1000:.0f} ms | {ours / theirs:.2f}x "
        f"| {ours_cpu * 1000:.0f} ms | {ours_cpu / theirs_cpu:.2f}x |",
        f"| the parse alone (`read_file`) | {statistics.median(parse) * 1000:.0f} ms "
        f"| {statistics.median(parse) / theirs:.2f}x | | |",
        "",
        "Headers are read and payloads skipped: the time is the magic scan of the data "
        "sections (for the embedded fatbins cuobjdump does not list) and Python's start. On a "
        "loaded machine the wall times swing; the CPU columns are the steadier comparison.",
        END,
    ]
    publish(lines, args.output, BEGIN, END)


if __name__ == "__main__":
    main()
