"""Benchmark the two ways CUDA gets into a CI job: the action's PyPI install, and a runfile.

**cudaup (what action.yml does)**, live PyPI: set up cudaup (a virtual environment and
``pip install`` of this checkout), ``cudaup lock REQUEST --channel pypi --components
nvcc,cudart``, then ``cudaup install --lock … --prefix …``: cold (empty cache) and warm
(the cache directories a restored ``actions/cache`` gives, a new prefix and home).

**The runfile route**, on loopback: nginx serves a file the size of the same release's
Linux x86_64 runfile (the size NVIDIA publishes, from cudaup's shipped snapshot); curl
downloads it in one stream (as a generic download step does), then it is extracted
the way makeself runs its payload (``tail -c +N FILE | gzip -cd | tar -x``).  The
payload is synthetic: a gzip'd tar whose content compresses 2:1, as binaries do.  The
network is loopback and the real installer does more than extract (it copies the
toolkit into place and runs its own checks), so the runfile times are a lower bound.

Disk: bytes on disk afterwards (``du``: hard links counted once), and for the runfile
route the peak (the runfile and its extracted tree side by side).

    .venv/bin/python benchmarks/ci.py --output docs/github-actions.md
"""

from __future__ import annotations

import datetime
import io
import json
import os
import platform
import random
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
from pathlib import Path

from isal import igzip

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from report import parser_for, publish  # noqa: E402
from tests.nginx import Nginx  # noqa: E402

BEGIN, END = "<!-- BEGIN ci benchmark -->", "<!-- END ci benchmark -->"
MiB = 1 << 20
GiB = 1 << 30
#: makeself's shell header is a few KiB; the payload starts after it.
HEADER = b"#!/bin/sh\n# a stand-in for a makeself header: the gzip'd tar starts at byte 4097\n"


def timed(command: list[str], env: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed: {done.stderr[-2000:]}")
    return seconds


def disk(*paths: Path) -> int:
    """Bytes on disk under ``paths``, a file hard-linked twice counted once (``du -scb``)."""
    done = subprocess.run(
        ["du", "-scb", *map(str, paths)], capture_output=True, text=True, check=True
    )
    return int(done.stdout.splitlines()[-1].split()[0])


def runfile_size(cudaup: Path, release: str) -> int:
    done = subprocess.run(
        [str(cudaup), "resolve", release, "--offline", "--platform", "linux-x86_64", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    [artifact] = json.loads(done.stdout)["artifacts"]
    size: int = artifact["size"]
    return size


def make_runfile(path: Path, size: int) -> int:
    """A makeself-like file of about ``size`` bytes: header, then a gzip'd tar of 2:1 content."""
    chunk = 8 * MiB
    noise = random.Random(13)
    with path.open("wb") as out:
        out.write(HEADER.ljust(4096, b"#"))
        # isal's gzip writer: several times zlib's speed, and the same format.
        gz = igzip.IGzipFile(fileobj=out, mode="wb", compresslevel=1)  # type: ignore[no-untyped-call]
        with gz, tarfile.open(fileobj=gz, mode="w|") as tar:
            number = 0
            while out.tell() < size - 2 * chunk:
                data = b"".join(noise.randbytes(64 * 1024) + bytes(64 * 1024) for _ in range(64))
                info = tarfile.TarInfo(f"cuda/part{number // 64:04d}/blob{number:06d}.bin")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
                number += 1
    return path.stat().st_size


def row(name: str, seconds: float, disk_bytes: int, note: str) -> str:
    return f"| {name} | {seconds:.1f} | {disk_bytes / MiB:,.0f} | {note} |"


def main() -> None:
    parser = parser_for(__doc__, runs=1)
    parser.add_argument("--cuda", default="13.0", help="the release request (default 13.0)")
    parser.add_argument("--runfile-size", type=int, help="bytes (default: the release's runfile)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cudaup-ci-bench-") as tmp:
        work = Path(tmp)
        venv = work / "venv"
        setup = timed([sys.executable, "-m", "venv", str(venv)])
        setup += timed([str(venv / "bin/python"), "-m", "pip", "install", "-q", str(ROOT)])
        cudaup = venv / "bin" / "cudaup"
        venv_bytes = disk(venv)

        def env(home: str) -> dict[str, str]:
            return {
                **os.environ,
                "CUDAUP_HOME": str(work / home),
                "CUDAUP_CACHE_DIR": str(work / "cache"),
            }

        lock = work / "cuda.lock.toml"
        locking = timed(
            [str(cudaup), "lock", args.cuda, "--channel", "pypi", "--components", "nvcc,cudart",
             "-o", str(lock)], env("home1"),
        )  # fmt: skip
        locked = tomllib.loads(lock.read_text())["toolkits"][0]
        release, wheels = locked["release"], sum(f["size"] for f in locked["files"])

        def install(home: str, prefix: str) -> float:
            command = [str(cudaup), "install", "--lock", str(lock), "--prefix", str(work / prefix)]
            return timed([*command, "-q"], env(home))

        cold = install("home1", "cuda-cold")
        cold_disk = disk(work / "cache", work / "cuda-cold")
        warm = install("home2", "cuda-warm")
        warm_disk = disk(work / "cache", work / "cuda-cold", work / "cuda-warm") - cold_disk

        size = args.runfile_size or runfile_size(cudaup, release)
        served = work / "served"
        served.mkdir()
        runfile = served / f"cuda_{release}_linux.run"
        actual = make_runfile(runfile, size)
        with Nginx(served) as nginx:
            target = work / "downloaded.run"
            download = timed(
                ["curl", "-sS", "-o", str(target), f"{nginx.url('plain')}/{runfile.name}"]
            )
        runfile.unlink()
        tree = work / "extracted"
        tree.mkdir()
        extract = timed(["sh", "-c", f"tail -c +4097 '{target}' | gzip -cd | tar -x -C '{tree}'"])
        tree_bytes = disk(tree)
        peak = disk(target, tree)

    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        BEGIN,
        "Command: `.venv/bin/python benchmarks/ci.py --output docs/github-actions.md`",
        "",
        f"Measured {now} on {platform.system().lower()} ({os.cpu_count()} cores, shared), "
        f"Python {platform.python_version()}: CUDA {release}, `nvcc,cudart` from the live PyPI "
        f"({wheels / MiB:,.0f} MiB of wheels) against a {actual / GiB:.2f} GiB runfile-sized file "
        "from nginx on loopback.",
        "",
        "| step | seconds | MiB on disk | what |",
        "|---|---|---|---|",
        row(
            "set up cudaup",
            setup,
            venv_bytes,
            "a virtual environment, `pip install` of the checkout",
        ),
        row("cudaup lock", locking, 0, "resolution against PyPI: the cache key"),
        row("cudaup install, cold", cold, cold_disk, "download, verify, unpack, hard-link"),
        row("cudaup install, warm", warm, warm_disk, "cache restored: hard links only"),
        row("runfile: download", download, actual, "one stream over loopback"),
        row("runfile: extract", extract, tree_bytes, "`gzip -cd`, then `tar -x`; 2:1 content"),
        "",
        f"In all, a cold job: cudaup {setup + locking + cold:.1f} s, the runfile route at least "
        f"{download + extract:.1f} s; a warm job: cudaup {setup + locking + warm:.1f} s. Peak disk: "
        f"the runfile route {peak / GiB:.1f} GiB (the file and its tree side by side), cudaup "
        f"{cold_disk / MiB:,.0f} MiB (each wheel is dropped once unpacked) plus its "
        f"{venv_bytes / MiB:,.0f} MiB environment.",
        END,
    ]
    publish(lines, args.output, BEGIN, END)


if __name__ == "__main__":
    main()
