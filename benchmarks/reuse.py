"""Benchmark a warm ``cudaup install`` (every archive already unpacked in the cache):
what checking the cached trees costs, hard-linked and copied (live PyPI).

The toolkit: ``cuda-toolkit[nvcc,cudart]==13.0.1`` from the pypi channel (nvcc, nvvm,
crt, cudart).  One cold install fills the cache; then each variant installs into a
fresh prefix, taking turns, best of ``--runs``:

* default: the trees' types, modes and sizes are checked (one ``lstat`` per entry),
  their digests vouched for by the stamp of the first use since boot;
* ``--verify``: the sha256 of every file is computed again;
* the same two with ``--link-mode copy``.

With ``--tree DIR`` (default ``/usr/local/cuda`` when there is one), the two checks
are also timed alone on that tree, in this process: its manifest is built (every
file hashed once), then checking sizes+modes and checking digests are each timed.

    .venv/bin/python benchmarks/reuse.py --output docs/performance.md
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from report import parser_for, publish

import cudaup as package_under_test
from cudaup.install.tree import TreeManifest, check_digests, compare, describe, scan

BEGIN, END = "<!-- BEGIN reuse benchmark -->", "<!-- END reuse benchmark -->"
RELEASE, COMPONENTS = "13.0.1", "nvcc,cudart"
VARIANTS: dict[str, tuple[str, ...]] = {
    "hardlink, sizes+modes (default)": (),
    "hardlink, digests (`--verify`)": ("--verify",),
    "copy, sizes+modes": ("--link-mode", "copy"),
    "copy, digests (`--verify`)": ("--link-mode", "copy", "--verify"),
}


def install(env: dict[str, str], prefix: Path, *extra: str) -> float:
    argv = [
        sys.executable, "-m", "cudaup", "install", RELEASE, "--channel", "pypi",
        "--components", COMPONENTS, "--platform", "linux-x86_64", "--prefix", str(prefix),
        "-q", *extra,
    ]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"cudaup install failed: {done.stderr[-2000:]}")
    return seconds


def tree_size(cache: Path) -> tuple[int, int]:
    """Files and bytes of the unpacked trees, from their manifests."""
    files = size = 0
    for manifest in (cache / "unpacked").glob("*/manifest.json"):
        entries = json.loads(manifest.read_text())["entries"]
        files += sum(1 for entry in entries if entry["type"] == "file")
        size += sum(entry.get("size", 0) for entry in entries)
    return files, size


def check_in_place(tree: Path, runs: int) -> tuple[int, int, float, float]:
    """Files, bytes, and the best seconds of checking sizes+modes, and of digests."""
    digests = {}
    for path, seen in scan(tree).items():
        if seen.kind == "file":
            with (tree / path).open("rb") as handle:
                digests[path] = hashlib.file_digest(handle, "sha256").hexdigest()
    manifest = TreeManifest(tree.name, "0" * 64, describe(scan(tree), digests))
    sizes = hashes = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        assert compare(scan(tree), manifest) is None
        sizes = min(sizes, time.perf_counter() - started)
        started = time.perf_counter()
        assert check_digests(tree, manifest) is None
        hashes = min(hashes, time.perf_counter() - started)
    return len(digests), manifest.file_bytes, sizes, hashes


def main() -> None:
    parser = parser_for(__doc__, runs=3)
    default_tree = Path("/usr/local/cuda")
    parser.add_argument(
        "--tree", type=Path, default=default_tree if default_tree.is_dir() else None,
        help="also time the checks alone on this tree (default: /usr/local/cuda)",
    )  # fmt: skip
    args = parser.parse_args()
    package = Path(package_under_test.__file__).parent
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(package)], check=True)
    with tempfile.TemporaryDirectory(prefix="cudaup-reuse-bench-") as tmp:
        work = Path(tmp)
        env = {
            **os.environ,
            "CUDAUP_CACHE_DIR": str(work / "cache"),
            "CUDAUP_HOME": str(work / "home"),
        }
        cold = install(env, work / "cold")
        print(f"cold install {cold:.2f} s", flush=True)
        best = dict.fromkeys(VARIANTS, float("inf"))
        for run in range(args.runs):
            for index, (name, extra) in enumerate(VARIANTS.items()):  # taking turns
                seconds = install(env, work / f"warm-{run}-{index}", *extra)
                best[name] = min(best[name], seconds)
                print(f"run {run + 1} {name:<34} {seconds:.2f} s", flush=True)
        files, size = tree_size(work / "cache")
    lines = [
        BEGIN,
        "## Reusing the unpacked cache: what checking it costs",
        "",
        "Command: `.venv/bin/python benchmarks/reuse.py --output docs/performance.md`",
        "",
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on this machine: "
        f"`cudaup install {RELEASE} --channel pypi --components {COMPONENTS}` into a fresh "
        f"`--prefix`, every archive already unpacked in the cache ({files} files, "
        f"{size / 2**20:.0f} MiB); whole-process wall time, best of {args.runs}, variants "
        f"taking turns. The cold install that filled the cache took {cold:.2f} s.",
        "",
        "| reuse | seconds |",
        "|---|---|",
    ]
    lines += [f"| {name} | {seconds:.2f} |" for name, seconds in best.items()]
    if args.tree is not None:
        tree = args.tree.resolve()
        count, size, sizes, hashes = check_in_place(tree, args.runs)
        lines += [
            "",
            f"The checks alone, on `{args.tree}` (`{tree}`: {count} files, "
            f"{size / 2**20:.0f} MiB, in the page cache), one thread, best of {args.runs}: "
            f"sizes+modes {sizes * 1000:.0f} ms, digests {hashes:.2f} s "
            f"({size / 2**20 / hashes:.0f} MiB/s).",
        ]
    lines += [
        "",
        "Sizes and modes are checked on every install (one `lstat` per entry, in the cache "
        "and in the new toolkit); digests on the first use of a tree after each boot, when "
        "a file's inode or ctime moved since, and with `--verify`.",
        END,
    ]
    publish(lines, args.output, BEGIN, END)


if __name__ == "__main__":
    main()
