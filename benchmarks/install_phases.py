"""Where one cold ``cudaup install --channel pypi`` spends its time: per-phase timestamps,
thread CPU, and how much of the two cores the process kept busy (live PyPI).

Runs the install in this process with wrappers around its steps (resolve, each
download and extraction, each big member's write, the tree checks, the merge), then
prints each step's start, end and thread CPU, and the process's CPU over its wall
time.  With ``--profile FILE`` every thread also runs under cProfile, timed by thread
CPU (waiting counts for nothing), merged into one pstats file.  A diagnosis, not a
benchmark: the wrappers cost a little; ``benchmarks/install.py`` measures.

    .venv/bin/python benchmarks/install_phases.py [--profile /tmp/install.prof] [--requests]

With ``--requests`` each HTTP request is a row too (sent, its headers answered, the range
it asked for), and so is each change of a download's connection count.

With ``--runs N`` (and ``--baseline DIR``, the ``src/`` of another cudaup) each run is a
fresh process, the two trees taking turns; one line per run, then medians and this
tree's ratios to the baseline within each run: the wall, the CPU, the cores kept busy,
the staging, the downloads (the staging's start to the last download's end), how long
the last extraction ran after its download ended (what the pipeline, not the network,
adds), and from the request rows: ``usable``, the latest over the wheels of the time
from a download's start to the answer of its first request beyond ``bytes=0-0`` (what
its extraction waits for first), and ``widened``, the time from the longest download's
start to its second connection's first request.

    .venv/bin/python benchmarks/install_phases.py --runs 5 --baseline /tmp/before/src

Each run also reports ``resolve``: from the resolver's start to the staging's.  With
``--rtt-ms MS`` the install reads a loopback mirror behind a relay that delays every
request by ``MS`` (as ``benchmarks/install.py --rtt-ms`` does), set up once for all runs.

    .venv/bin/python benchmarks/install_phases.py --runs 5 --rtt-ms 30 --baseline /tmp/before/src
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import functools
import importlib
import json
import os
import pstats
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: (module, function): the steps timed; a member write shows only for members >= 1 MiB.
STEPS = [
    ("cudaup.install.installer", "Resolver"),
    ("cudaup.install.installer", "check_driver"),
    ("cudaup.install.installer", "stage_all"),
    ("cudaup.install.unpack_cache", "download"),
    ("cudaup.install.unpack_cache", "extract_archive"),
    ("cudaup.install.extract.write", "write_file"),
    ("cudaup.install.unpack_cache", "scan"),
    ("cudaup.install.unpack_cache", "describe"),
    ("cudaup.install.unpack_cache", "materialize"),
    ("cudaup.install.installer", "_merge_trees"),
    ("cudaup.install.installer", "finish_layout"),
]
BIG_MEMBER = 1024 * 1024

Row = tuple[float, float, float, str, str]


def label_of(name: str, args: tuple[Any, ...]) -> str | None:
    """What one call is about (an archive's name, a member's), or None to leave it out."""
    if name == "write_file":
        member = args[2]
        return f"{name} {member.name}" if member.size >= BIG_MEMBER else None
    first = args[0] if args else None
    shown = getattr(first, "filename", None) or getattr(first, "name", None)
    return f"{name} {shown}" if isinstance(shown, str) else name


def timed(started: float, rows: list[Row]) -> None:
    for module_name, name in STEPS:
        module = importlib.import_module(module_name)
        function: Callable[..., Any] = getattr(module, name)

        def wrapper(
            *args: Any, _f: Callable[..., Any] = function, _n: str = name, **kw: Any
        ) -> Any:
            begin, cpu = time.perf_counter(), time.thread_time()
            try:
                return _f(*args, **kw)
            finally:
                label = label_of(_n, args)
                if label is not None:
                    thread = threading.current_thread().name
                    end = time.perf_counter()
                    rows.append(
                        (begin - started, end - started, time.thread_time() - cpu, thread, label)
                    )

        setattr(module, name, functools.wraps(function)(wrapper))


def requests_logged(started: float, rows: list[Row]) -> None:
    """Each HTTP request as a row (sent, headers answered, what it asked for), and each
    change of a download's connection count (the ramp's steps)."""
    from cudaup.download.ramp import ConnectionRamp
    from cudaup.net.http import HttpClient

    open_request = HttpClient.open

    def logged_open(self: HttpClient, method: str, url: str, *args: Any, **kw: Any) -> Any:
        begin = time.perf_counter()
        headers = args[0] if args and isinstance(args[0], dict) else kw.get("headers") or {}
        response = open_request(self, method, url, *args, **kw)
        end = time.perf_counter()
        what = f"{method} {url.rsplit('/', 1)[-1][:40]} {headers.get('Range', '')}"
        rows.append((begin - started, end - started, 0.0, threading.current_thread().name, what))
        return response

    observe = ConnectionRamp.observe

    def logged_observe(self: ConnectionRamp, now: float, completed: int, *args: Any) -> int:
        before = self.count
        count = observe(self, now, completed, *args)
        if count != before:
            at = time.perf_counter() - started
            change = f"ramp {before} -> {count} connections at {completed / 2**20:.1f} MiB"
            rows.append((at, at, 0.0, threading.current_thread().name, change))
        return count

    HttpClient.open = logged_open  # type: ignore[method-assign]
    ConnectionRamp.observe = logged_observe  # type: ignore[method-assign, assignment]


def profiled(profiles: list[cProfile.Profile]) -> None:
    """Every thread started from now on runs under a profiler of its own."""
    run = threading.Thread.run

    def run_profiled(self: threading.Thread) -> None:
        profile = cProfile.Profile(time.thread_time)
        profiles.append(profile)
        profile.runcall(run, self)

    threading.Thread.run = run_profiled  # type: ignore[method-assign]


def summary(code: int, wall: float, cpu: float, rows: list[Row]) -> dict[str, Any]:
    """One run in figures: wall, CPU, cores busy, staging, the downloads (from the
    staging's start to the last download's end: the network's side of the critical
    path), and the last extraction's time after its own download ended."""
    ends: dict[str, float] = {}
    extracted: dict[str, float] = {}
    staging = staged_at = 0.0
    resolving = min((begin for begin, *_, label in rows if label == "Resolver"), default=0.0)
    for begin, end, _cpu, _thread, label in rows:
        step, _, archive = label.partition(" ")
        if step == "download":
            ends[archive] = end
        elif step == "extract_archive":
            extracted[archive] = max(end, extracted.get(archive, 0.0))
        elif step == "stage_all":
            staging, staged_at = end - begin, begin
    last = max(extracted, key=lambda archive: extracted[archive])
    downloads = max(ends.values(), default=staged_at) - staged_at
    return {"exit": code, "wall": wall, "cpu": cpu, "cores": cpu / wall,
            "resolve": staged_at - resolving, "staging": staging,
            "downloads": downloads, "tail": extracted[last] - ends.get(last, extracted[last]),
            "last": last.split("-")[0], **first_bytes(rows)}  # fmt: skip


def first_bytes(rows: list[Row]) -> dict[str, float]:
    """From the request rows: ``usable``, the latest over the wheels of the time from a
    download's start to the answer of its first request beyond ``bytes=0-0`` (the zip's
    tail, or the whole of a small wheel: what its extraction waits for first); and
    ``widened``, the time from the longest download's start to the request of its second
    connection."""
    started: dict[str, float] = {}
    lasted: dict[str, float] = {}
    usable: dict[str, float] = {}
    widened: dict[str, float] = {}
    for begin, end, _cpu, thread, label in sorted(rows):
        step, _, rest = label.partition(" ")
        if step == "download":
            wheel = rest.split("-")[0]
            started[wheel], lasted[wheel] = begin, end - begin
        elif step == "GET" and rest.startswith("nvidia"):
            name, _, wanted = rest.partition(" ")
            wheel = name.split("-")[0]
            if wanted != "bytes=0-0":
                usable.setdefault(wheel, end)
            if thread not in {"cudaup-probe", "cudaup-dl-1"}:
                widened.setdefault(wheel, begin)
    found: dict[str, float] = {}
    if usable:
        found["usable"] = max(usable[w] - started[w] for w in usable if w in started)
    longest = max(lasted, key=lambda wheel: lasted[wheel], default=None)
    if longest in widened:
        found["widened"] = widened[longest] - started[longest]
    return found


def compare(
    runs: int, baseline: Path | None, passed: list[str], environment: dict[str, str]
) -> None:
    """Each run a fresh process, this tree and ``baseline`` taking turns."""
    trees = {"cudaup": None, **({"baseline": baseline} if baseline else {})}
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    for run in range(runs):
        for name, src in trees.items():
            env = {**os.environ, **environment}
            if src is not None:
                env["PYTHONPATH"] = str(src)
            done = subprocess.run(
                [sys.executable, __file__, *passed, "--summary"],
                env=env, capture_output=True, text=True, check=True,
            )  # fmt: skip
            result = json.loads(done.stdout.strip().splitlines()[-1])
            results[name].append(result)
            print(f"run {run + 1} {name:<8} wall {result['wall']:.2f} s  CPU {result['cpu']:.2f} s  "
                  f"cores {result['cores']:.2f}  resolve {result['resolve']:.3f} s  "
                  f"staging {result['staging']:.2f} s  downloads "
                  f"{result['downloads']:.2f} s  last extraction "
                  f"{result['tail']:.2f} s after its download ({result['last']})  usable "
                  f"{result.get('usable', 0):.3f} s  widened {result.get('widened', 0):.3f} s  "
                  f"load {os.getloadavg()[0]:.1f}")  # fmt: skip
    keys = ("wall", "cpu", "cores", "resolve", "staging", "downloads", "tail", "usable", "widened")
    for name, rows in results.items():
        print(
            f"{name}: "
            + "; ".join(
                f"{key} {spread([row[key] for row in rows if key in row])}"
                for key in keys
                if any(key in row for row in rows)
            )
        )
    if baseline:
        ratios = {
            key: spread([a[key] / b[key] for a, b in zip(results["cudaup"], results["baseline"], strict=True) if b[key]])
            for key in ("wall", "cpu", "resolve", "staging", "downloads")
        }  # fmt: skip
        print(
            "this tree / baseline, within each run: "
            + "; ".join(f"{k} {v}" for k, v in ratios.items())
        )


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--profile", type=Path, help="write every thread's merged cProfile here")
    parser.add_argument("--release", default="13.0.1")
    parser.add_argument("--components", default="nvcc,cudart")
    parser.add_argument(
        "--requests", action="store_true", help="a row for each HTTP request and ramp step"
    )
    parser.add_argument("--runs", type=int, default=0, help="runs, each a fresh process")
    parser.add_argument("--baseline", type=Path, help="another cudaup's src/, taking turns")
    parser.add_argument(
        "--rtt-ms", type=float, help="read a loopback mirror behind this round trip (default: PyPI)"
    )
    parser.add_argument("--summary", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        environment: dict[str, str] = {}
        if args.rtt_ms is not None:
            # A wider install's mirror than nvcc,cudart's would need --release and
            # --components there too: benchmarks/install.py mirrors exactly that one.
            from install import index_for  # its mirror, nginx and relay: only when asked

            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="cudaup-phases-")))
            index, trust = stack.enter_context(index_for(work, args.rtt_ms, dict(os.environ)))
            environment.update(trust, CUDAUP_PYPI_URL=index)
        if args.runs or args.baseline:
            compare(
                args.runs or 3,
                args.baseline,
                ["--release", args.release, "--components", args.components],
                environment,
            )
            return
        os.environ.update(environment)
        one_run(args)


def one_run(args: argparse.Namespace) -> None:
    started = time.perf_counter()
    import cudaup.cli.toolkits  # noqa: F401 - the install command's imports, timed as one step
    from cudaup.cli.main import main as cudaup_main

    imported = time.perf_counter() - started
    rows: list[Row] = []
    timed(started, rows)
    if args.requests or args.summary:
        requests_logged(started, rows)
    profiles: list[cProfile.Profile] = []
    main_thread = cProfile.Profile(time.thread_time)
    if args.profile:
        profiled(profiles)
        main_thread.enable()
    with tempfile.TemporaryDirectory(prefix="cudaup-phases-") as tmp:
        work = Path(tmp)
        (work / "root").mkdir()
        os.environ.update(
            CUDAUP_CACHE_DIR=str(work / "cache"),
            CUDAUP_HOME=str(work / "home"),
            CUDAUP_SYSTEM_ROOT=str(work / "root"),
        )
        code = cudaup_main(["install", args.release, "--channel", "pypi", "--components", args.components,
                            "--prefix", str(work / "cuda"), "-q", "--platform", "linux-x86_64"])  # fmt: skip
    main_thread.disable()
    wall = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = usage.ru_utime + usage.ru_stime
    if args.summary:
        print(json.dumps(summary(code, wall, cpu, rows)))
        return
    print(f"exit {code}; imports {imported:.3f} s; wall {wall:.2f} s; CPU {cpu:.2f} s "
          f"(user {usage.ru_utime:.2f}, system {usage.ru_stime:.2f}): {cpu / wall:.2f} of "
          f"{len(os.sched_getaffinity(0))} cores; load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    print(" start    end   wall    cpu  thread        step")
    for begin, end, thread_cpu, thread, label in sorted(rows):
        print(
            f"{begin:6.3f} {end:6.3f} {end - begin:6.3f} {thread_cpu:6.3f}  {thread[:12]:<12}  {label}"
        )
    if args.profile:
        stats = pstats.Stats(main_thread)
        for profile in profiles:
            stats.add(profile)
        stats.dump_stats(args.profile)
        print(f"profile (thread CPU, every thread): {args.profile}", file=sys.stderr)


if __name__ == "__main__":
    main()
