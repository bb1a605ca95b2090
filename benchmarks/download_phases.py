"""Where one uncapped 1 GiB download's transfer phase waits: in-process, from loopback nginx.

Each run downloads the file with ``cudaup.download.download`` (default settings, sha256) in
a fresh interpreter and reports, from wrappers around the downloader's own functions:

- ``wall``: the call's seconds; ``hashed``: when the hasher had hashed the last byte;
- ``hash waited``: seconds the hasher waited for bytes to hash (a verified download cannot
  end before its hash, so each of them adds to ``wall`` when the hash has a core);
- ``writes held``: seconds of the part file's writes that took over 4 ms each (a write
  into the page cache takes ~0.3 ms per MiB; longer, it waited for something);
- ``syncs``: the part file's ``fdatasync`` calls and their seconds;
- the CPU seconds of each of the download's threads.

With ``--baseline DIR`` (the ``src/`` of another cudaup) the two trees take turns.  Each
run starts from settled free memory (see ``benchmarks/report.py``).

    .venv/bin/python benchmarks/download_phases.py --runs 6 --baseline /tmp/before/src
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SIZE = 1 << 30
#: a write of the part file that took longer than this waited for something
HELD = 0.004


def child(sha: str, url: str, out: Path) -> dict[str, Any]:
    """One download in this interpreter, instrumented (see the module docstring)."""
    from cudaup.config import Settings
    from cudaup.download import DownloadRequest, digest, download, parallel
    from cudaup.net.http import HttpClient

    found: dict[str, Any] = {"hash waited": 0.0, "writes held": 0.0, "syncs": [], "cpu": {}}
    began = time.perf_counter()  # again just before the download
    run, next_job, write, fdatasync = (
        threading.Thread.run,
        digest.PrefixHasher._next_job,
        parallel.Transfer._write,
        os.fdatasync,
    )

    def timed_run(self: threading.Thread) -> None:
        try:
            run(self)
        finally:
            found["cpu"][self.name] = round(time.thread_time(), 3)

    def timed_next_job(self: digest.PrefixHasher) -> Any:
        start = time.perf_counter()
        job = next_job(self)
        found["hash waited"] += time.perf_counter() - start
        found["hashed"] = time.perf_counter() - began
        return job

    def timed_write(self: parallel.Transfer, data: Any, offset: int) -> None:
        start = time.perf_counter()
        write(self, data, offset)
        if (took := time.perf_counter() - start) > HELD:
            found["writes held"] += took

    def timed_fdatasync(fd: Any) -> None:
        start = time.perf_counter()
        fdatasync(fd)
        found["syncs"].append(time.perf_counter() - start)

    threading.Thread.run = timed_run  # type: ignore[method-assign]
    digest.PrefixHasher._next_job = timed_next_job  # type: ignore[method-assign]
    parallel.Transfer._write = timed_write  # type: ignore[method-assign]
    os.fdatasync = timed_fdatasync
    http = HttpClient(Settings.from_env())
    began = time.perf_counter()
    download(DownloadRequest.from_url(url, sha256=sha), out, http=http)
    found["wall"] = time.perf_counter() - began
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--baseline", type=Path, help="the src/ of another cudaup")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        sha, url, out = args.child
        print(json.dumps(child(sha, url, Path(out))))
        return
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from report import settle_memory
    from tests.nginx import Nginx

    trees = {"this checkout": ROOT / "src"}
    if args.baseline:
        trees["baseline"] = args.baseline.resolve()
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory(prefix="cudaup-phases-") as tmp:
        served = Path(tmp) / "www" / "file.bin"
        served.parent.mkdir()
        digest = hashlib.sha256()
        with served.open("wb") as handle:
            for _ in range(SIZE // (4 << 20)):
                block = os.urandom(4 << 20)
                digest.update(block)
                handle.write(block)
            os.fsync(handle.fileno())  # its writeback would fall on the first runs
        with Nginx(served.parent) as server:
            for run in range(args.runs):
                # The trees take turns in both orders (the first after a file is made,
                # then after the other's run), so that neither always runs in one place.
                order = list(trees.items())[:: -1 if run % 2 else 1]
                for number, (name, src) in enumerate(order):
                    # A directory of a new name for every run of either tree: one made
                    # again under the name just removed fills faster on this machine.
                    out = Path(tmp) / f"out-{run}-{number}"
                    env = {**os.environ, "PYTHONPATH": f"{src}:{ROOT}"}
                    command = [sys.executable, __file__, "--child", digest.hexdigest()]
                    command += [server.url("plain") + "/file.bin", str(out)]
                    settle_memory()
                    answer = subprocess.run(command, env=env, check=True, capture_output=True)
                    found = json.loads(answer.stdout)
                    rows[name].append(found)
                    syncs = found["syncs"]
                    print(
                        f"run {run + 1} {name:<14} wall {found['wall']:.2f} s, hashed at "
                        f"{found['hashed']:.2f}, hash waited {found['hash waited']:.3f}, writes "
                        f"held {found['writes held']:.3f}, {len(syncs)} syncs {sum(syncs):.3f} s,"
                        f" cpu {found['cpu']}",
                        flush=True,
                    )
                    shutil.rmtree(out)
    for name, found_rows in rows.items():
        summary = ", ".join(
            f"{key} {statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"
            for key in ("wall", "hash waited", "writes held")
            for values in [[row[key] for row in found_rows]]
        )
        print(f"{name}: {summary}; syncs {statistics.median(len(r['syncs']) for r in found_rows)}")


if __name__ == "__main__":
    main()
