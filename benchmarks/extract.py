"""Benchmark unpacking an NVIDIA-style redist archive (.tar.xz) against GNU tar.

The archive is built here the way NVIDIA's are: one top directory
``cuda_nvcc-linux-x86_64-<version>-archive/`` holding a CUDA tree, compressed
with ``xz -6`` in one thread.  The tree is the content of PyPI's
``nvidia-cuda-nvcc`` wheel (the same binaries NVIDIA ships in its redist
archive), downloaded with pip, so the benchmark runs anywhere PyPI answers.

Compared, each into a fresh directory, best of ``--runs``:

* ``tar -xJf`` (GNU tar piping through xz): what people run by hand;
* Python's ``tarfile`` with the ``data`` filter: what a Python tool does by default;
* cudaup's safe extraction (``cudaup.install.extract.extract_archive``).

    .venv/bin/python benchmarks/extract.py --output docs/performance.md
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from report import parser_for, publish

from cudaup.install.extract import extract_archive

BEGIN, END = "<!-- BEGIN extract benchmark -->", "<!-- END extract benchmark -->"
WHEEL = "nvidia-cuda-nvcc==13.0.88"
TOP = "cuda_nvcc-linux-x86_64-13.0.88-archive"


def build_archive(work: Path) -> Path:
    wheels = work / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:",
         "--platform", "manylinux2014_x86_64", "--index-url", "https://pypi.org/simple",
         "-d", str(wheels), WHEEL],
        check=True,
    )  # fmt: skip
    [wheel] = wheels.glob("*.whl")
    tree = work / "tree"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(tree)
    cuda = next(tree.glob("nvidia/cu*"))
    top = work / TOP
    cuda.rename(top)
    for path in top.rglob("*"):  # zipfile drops modes; the binaries must be executable
        if path.is_file() and (path.parent.name == "bin" or ".so" in path.name):
            path.chmod(0o755)
    archive_path = work / f"{TOP}.tar.xz"
    with archive_path.open("wb") as out:
        tar = subprocess.Popen(["tar", "-C", str(work), "-cf", "-", TOP], stdout=subprocess.PIPE)
        subprocess.run(["xz", "-6", "-T1", "-c"], stdin=tar.stdout, stdout=out, check=True)
        assert tar.wait() == 0
    shutil.rmtree(top)
    shutil.rmtree(tree)
    return archive_path


def main() -> None:
    parser = parser_for(__doc__, runs=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cudaup-extract-bench-") as tmp:
        work = Path(tmp)
        print("building the archive (xz -6, one thread: about a minute)", flush=True)
        archive = build_archive(work)

        def gnu_tar(destination: Path) -> None:
            subprocess.run(["tar", "-xJf", str(archive), "-C", str(destination)], check=True)

        def python_tarfile(destination: Path) -> None:
            with tarfile.open(archive) as tar:
                tar.extractall(destination, filter="data")

        def cudaup(destination: Path) -> None:
            extract_archive(archive, destination, strip_top=True)

        tools: dict[str, Callable[[Path], None]] = {
            "cudaup (checked, one pass)": cudaup,
            "tar -xJf": gnu_tar,
            "python tarfile, data filter": python_tarfile,
        }
        best = dict.fromkeys(tools, float("inf"))
        for run in range(args.runs):
            for name, extract in tools.items():  # taking turns: drift falls on all alike
                destination = work / f"out-{run}-{len(name)}"
                destination.mkdir()
                started = time.perf_counter()
                extract(destination)
                seconds = time.perf_counter() - started
                best[name] = min(best[name], seconds)
                print(f"run {run + 1} {name:<30} {seconds:.2f} s", flush=True)
                shutil.rmtree(destination)
        with tarfile.open(archive) as tar:
            unpacked = sum(member.size for member in tar.getmembers() if member.isfile())
        size = archive.stat().st_size
    lines = [
        BEGIN,
        "## Unpacking a redist archive (.tar.xz)",
        "",
        "Command: `.venv/bin/python benchmarks/extract.py --output docs/performance.md`",
        "",
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on this machine: "
        f"`{WHEEL}`'s tree packed as NVIDIA packs `{TOP}.tar.xz` ({size / 2**20:.0f} MiB, "
        f"{unpacked / 2**20:.0f} MiB unpacked, `xz -6`, one thread); best of {args.runs}, "
        "tools taking turns.",
        "",
        "| tool | seconds | x tar |",
        "|---|---|---|",
    ]
    reference = best["tar -xJf"]
    for name, seconds in best.items():
        lines.append(f"| {name} | {seconds:.2f} | {seconds / reference:.2f} |")
    lines += [
        "",
        "Ratios are time ratios: below 1 means faster than tar. cudaup checks every member "
        "(paths, links, modes, sizes, limits) and decompresses in a thread of its own while "
        "the main thread writes, as tar does with its xz child process.",
        END,
    ]
    publish(lines, args.output, BEGIN, END)


if __name__ == "__main__":
    main()
