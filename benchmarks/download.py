"""Benchmark ``cudaup download`` against aria2c, curl and wget on loopback nginx.

Five cases, each a random file served by nginx (Debian's package, ``sendfile on``):

- ``capped``: 6 MiB/s per TCP connection, the way CDNs cap each connection, enforced
  by a relay in front of nginx (``benchmarks/latency.py``: nginx's ``limit_rate`` is
  per request with a one-second burst, which a client asking for pieces of a few MiB
  never reaches); cudaup and aria2c with the same 8 connections (``-x8 -s8 -k1M``);
- ``latency``: the same cap and a round trip per request added by the relay (``tc
  netem`` needs a kernel module this machine lacks), so that a downloader asking for
  many small pieces pays for it as on a real link;
- ``limit-rate``: nginx's own ``limit_rate`` (4 MiB/s per request, after a first second's
  worth at once): a server that bursts, then caps; a download whose pieces grow past the
  burst meets the cap (the adapting count once read such a first burst, then a window in
  which no read ended, as a rate of zero, and kept one connection);
- ``far``: no cap, and the relay's round trip (a fast link to a far server: a wheel of
  PyPI's size, 64 MiB by default); the reference is one curl stream, which asks once,
  where a downloader that asks piece by piece waits a round trip per piece;
- ``uncapped``: nginx straight, at full loopback speed, where the two CPUs are the
  limit; the reference is the slower of one curl stream and hashing the bytes alone
  (``sha256 alone``: hashlib over the served file, from the page cache), since a
  verified download can end before neither.

cudaup verifies (md5 and sha256 rows; once without a checksum on the uncapped
case); aria2c, curl and wget do not, except the rows that say so (aria2c
``--checksum``, ``curl && sha256sum``).  Every output's SHA-256 is checked after
each run, outside the timing.  Before each run the machine's free memory settles
(``report.settle_memory``): where the kernel hands freed memory back to its host, as
this machine's does, writing 1 GiB into memory freed a moment before took 0.22 s of
system time and into memory already handed back 2.3-2.8 s, so without the wait a tool
ran fast or slow by how soon it started after the last one deleted its output.  The
tools take turns within each run, each run starting one tool later than the last, so
a change in the machine's load falls on all of them alike; the speed ratio against
the reference is taken within each run, and the table gives the median and the range
across runs.  cudaup runs from compiled bytecode, as installed from its wheel.
CPU is the process's user+system time (its children's included), not nginx's nor
the relay's.

    .venv/bin/python benchmarks/download.py --output docs/performance.md

With ``--baseline DIR`` (the ``src/`` of another cudaup, for instance ``git archive
COMMIT src | tar -x -C /tmp/before``) every cudaup row runs twice, this checkout's and
that one's, taking turns within each run: before and after under the same load.

Needs nginx, curl, wget and aria2c (``apt-get install nginx-light curl wget aria2``).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from latency import LinkRelay  # noqa: E402
from report import parser_for, publish, settle_memory  # noqa: E402
from tests.nginx import Nginx  # noqa: E402

import cudaup as package_under_test  # noqa: E402

BEGIN, END = "<!-- BEGIN download benchmark -->", "<!-- END download benchmark -->"


@dataclass(frozen=True)
class File:
    url: str
    out: Path
    sha256: str
    md5: str
    #: the file nginx serves (what the hash-alone row reads)
    served: Path


Command = Callable[[File], list[str]]


@dataclass
class Case:
    name: str
    title: str
    size_mib: int
    #: bytes per second per connection (the relay's cap), or None
    rate: float | None
    rtt: float
    #: the row the others' speed is compared with; with several, the slowest of them in
    #: each run (a verified download cannot end before the transfer nor before the hash)
    reference: tuple[str, ...]
    tools: dict[str, Command]
    #: nginx's own ``limit_rate`` (per request, after a second's worth at once), or None
    nginx_limit: str | None = None


@dataclass
class Samples:
    seconds: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    ratio: list[float] = field(default_factory=list)


def cudaup(connections: int | None, *checksum: str) -> Command:
    """``cudaup download``; ``connections`` None: the default (adapting), else that many."""

    def command(file: File) -> list[str]:
        flags = {"--md5": ["--md5", file.md5], "--sha256": ["--sha256", file.sha256]}
        chosen = [part for name in checksum for part in flags.get(name, [name])]
        count = [] if connections is None else ["--connections", str(connections)]
        return [
            sys.executable, "-m", "cudaup", "download", file.url, *chosen, "-o", str(file.out),
            "--quiet", *count,
        ]  # fmt: skip

    return command


#: Reads the served file (in the page cache: it was just written) and hashes it, as
#: cudaup's hasher does: the least a verified download takes once the bytes are here.
HASH_ALONE = """
import hashlib, os, sys
digest, view = hashlib.sha256(), memoryview(bytearray(4 << 20))
with open(sys.argv[1], "rb", buffering=0) as handle:
    while count := handle.readinto(view):
        digest.update(view[:count])
"""


def sha256_alone(file: File) -> list[str]:
    return [sys.executable, "-c", HASH_ALONE, str(file.served)]


def aria2c(connections: int, verify: bool = False) -> Command:
    def command(file: File) -> list[str]:
        check = [f"--checksum=md5={file.md5}"] if verify else []
        return [
            "aria2c", f"-x{connections}", f"-s{connections}", "-k1M", "--file-allocation=none",
            "-q", "--allow-overwrite=true", *check, "-d", str(file.out), "-o", "file.bin", file.url,
        ]  # fmt: skip

    return command


def curl(file: File) -> list[str]:
    return ["curl", "-sS", "-o", str(file.out / "file.bin"), file.url]


def curl_then_sha256sum(file: File) -> list[str]:
    path = file.out / "file.bin"
    return ["sh", "-c", f"curl -sS -o {path} {file.url} && sha256sum {path} >/dev/null"]


def wget(file: File) -> list[str]:
    return ["wget", "-q", "-O", str(file.out / "file.bin"), file.url]


def cases(args: argparse.Namespace) -> list[Case]:
    n: int = args.connections
    aria = f"aria2c -x{n} -s{n} -k1M"
    capped_tools: dict[str, Command] = {
        "cudaup, default, sha256": cudaup(None, "--sha256"),
        f"cudaup, {n} conn, md5": cudaup(n, "--md5"),
        f"cudaup, {n} conn, sha256": cudaup(n, "--sha256"),
        aria: aria2c(n),
        f"{aria} --checksum=md5": aria2c(n, verify=True),
    }
    rtt_ms: float = args.rtt_ms
    capped_mib: int = args.capped_size_mib
    return [
        Case(
            "capped",
            f"CDN-like cap: 6 MiB/s per connection, {capped_mib} MiB",
            capped_mib, 6 * 2**20, 0.0, (aria,), capped_tools,
        ),
        Case(
            "latency",
            f"the same cap and a {rtt_ms:g} ms round trip, {capped_mib} MiB",
            capped_mib, 6 * 2**20, rtt_ms / 1000, (aria,), capped_tools,
        ),
        Case(
            "limit-rate",
            f"nginx's limit_rate: 4 MiB/s per request after a second's burst, {args.limit_size_mib} MiB",
            args.limit_size_mib, None, 0.0, (aria,),
            {
                "cudaup, default, sha256": cudaup(None, "--sha256"),
                f"cudaup, {n} conn, sha256": cudaup(n, "--sha256"),
                aria: aria2c(n),
            },
            nginx_limit="4m",
        ),
        Case(
            "far",
            f"no cap, a {rtt_ms:g} ms round trip, {args.far_size_mib} MiB",
            args.far_size_mib, None, rtt_ms / 1000, ("curl",),
            {
                "cudaup, default, sha256": cudaup(None, "--sha256"),
                f"cudaup, {n} conn, sha256": cudaup(n, "--sha256"),
                "curl": curl,
                aria: aria2c(n),
            },
        ),
        Case(
            "uncapped",
            f"uncapped loopback, {args.size_mib} MiB",
            args.size_mib, None, 0.0, ("curl", "sha256 alone"),
            {
                "cudaup, default, sha256": cudaup(None, "--sha256"),
                "cudaup, default, md5": cudaup(None, "--md5"),
                "cudaup, 1 conn, sha256": cudaup(1, "--sha256"),
                f"cudaup, {n} conn, sha256": cudaup(n, "--sha256"),
                f"cudaup, {n} conn, md5": cudaup(n, "--md5"),
                f"cudaup, {n} conn, no checksum": cudaup(n, "--allow-unverified"),
                "curl": curl,
                "sha256 alone": sha256_alone,
                "curl && sha256sum": curl_then_sha256sum,
                "wget": wget,
                aria: aria2c(n),
            },
        ),
    ]  # fmt: skip


def with_baseline(tools: dict[str, Command], source: Path) -> dict[str, Command]:
    """Each cudaup row twice: this checkout's, then the one in ``source`` (first on
    ``PYTHONPATH``), so that before and after take turns within every run."""

    def baseline(command: Command) -> Command:
        return lambda file: ["env", f"PYTHONPATH={source}", *command(file)]

    doubled: dict[str, Command] = {}
    for name, command in tools.items():
        doubled[name] = command
        if name.startswith("cudaup"):
            doubled[f"{name}, baseline"] = baseline(command)
    return doubled


@contextlib.contextmanager
def reachable(port: int, case: Case) -> Iterator[int]:
    """The port to ask: nginx's own, or a :class:`LinkRelay`'s in front of it."""
    if not case.rtt and not case.rate:
        yield port
        return
    with LinkRelay(("127.0.0.1", port), case.rtt, case.rate) as relay:
        yield relay.port


def run_once(command: list[str], file: File, env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one download; its output's SHA-256 is checked afterwards."""
    shutil.rmtree(file.out, ignore_errors=True)
    file.out.mkdir(parents=True)
    settle_memory()
    started = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)
    _pid, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"{command} failed with exit code {process.returncode}")
    if command[:3] == [sys.executable, "-c", HASH_ALONE]:
        return seconds, usage.ru_utime + usage.ru_stime  # it writes nothing
    [produced] = [p for p in file.out.iterdir() if p.is_file() and not p.name.endswith(".aria2")]
    digest = hashlib.sha256()
    with produced.open("rb") as handle:
        while block := handle.read(1 << 22):
            digest.update(block)
    if digest.hexdigest() != file.sha256:
        raise SystemExit(f"{command[0]} produced a wrong file")
    shutil.rmtree(file.out, ignore_errors=True)
    return seconds, usage.ru_utime + usage.ru_stime


def measure(
    case: Case, file: File, runs: int, env: dict[str, str], only: list[str]
) -> dict[str, Samples]:
    available = {
        name: command
        for name, command in case.tools.items()
        if (command(file)[0] in {sys.executable, "sh", "env"} or shutil.which(command(file)[0]))
        and (not only or any(name == part or name.startswith(part + ",") for part in only))
    }
    samples = {name: Samples() for name in available}
    names = list(available)
    for run in range(runs):
        times: dict[str, float] = {}
        # Each run starts one tool later, so that no tool always runs first (the first
        # after the previous run's last) or always after the same one.
        shift = run % len(names) if names else 0
        for name in names[shift:] + names[:shift]:
            command = available[name]
            seconds, cpu = run_once(command(file), file, env)
            times[name] = seconds
            samples[name].seconds.append(seconds)
            samples[name].cpu.append(cpu)
            print(f"  run {run + 1} {name:<40} {seconds:6.2f} s  cpu {cpu:5.2f} s", flush=True)
        reference = max((times[name] for name in case.reference if name in times), default=None)
        for name, seconds in times.items():
            if reference is not None:
                samples[name].ratio.append(reference / seconds)
    return samples


def reference_name(case: Case) -> str:
    return case.reference[0] if len(case.reference) == 1 else f"max({', '.join(case.reference)})"


def table(case: Case, samples: dict[str, Samples]) -> list[str]:
    size = case.size_mib * 2**20
    lines = [
        f"### {case.title}",
        "",
        f"| tool | seconds, median (range) | MiB/s | CPU s | speed x {reference_name(case)}, median (range) |",
        "|---|---|---|---|---|",
    ]
    for name, sample in samples.items():
        median = statistics.median(sample.seconds)
        ratio = (
            f"{statistics.median(sample.ratio):.2f} ({min(sample.ratio):.2f}-{max(sample.ratio):.2f})"
            if sample.ratio
            else "-"
        )
        lines.append(
            f"| {name} | {median:.2f} ({min(sample.seconds):.2f}-{max(sample.seconds):.2f}) "
            f"| {size / median / 2**20:.0f} | {statistics.median(sample.cpu):.2f} | {ratio} |"
        )
    return [*lines, ""]


def main() -> None:
    parser = parser_for(__doc__, runs=5)
    parser.add_argument("--size-mib", type=int, default=1024, help="uncapped file (default 1024)")
    parser.add_argument(
        "--capped-size-mib", type=int, default=384, help="capped file (default 384)"
    )
    parser.add_argument(
        "--rtt-ms", type=float, default=50.0, help="latency and far cases (default 50)"
    )
    parser.add_argument(
        "--limit-size-mib", type=int, default=128, help="limit-rate file (default 128)"
    )
    parser.add_argument("--far-size-mib", type=int, default=64, help="far file (default 64)")
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument(
        "--cases",
        default="capped,latency,limit-rate,far,uncapped",
        help="comma-separated subset to run",
    )
    parser.add_argument(
        "--tools",
        default="",
        help="only these tools (;-separated names, or their first comma-separated parts: "
        "'cudaup, 8 conn' is every cudaup row with 8 connections)",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        help="the src/ directory of another cudaup (e.g. an older commit's, from git archive): "
        "its cudaup rows run too, taking turns with this one's",
    )
    args = parser.parse_args()
    wanted = set(args.cases.split(","))
    package = Path(package_under_test.__file__).parent
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(package)], check=True)
    if args.baseline:
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", str(args.baseline / "cudaup")], check=True
        )
    load_before = os.getloadavg()[0]
    results: list[str] = []
    with tempfile.TemporaryDirectory(prefix="cudaup-bench-") as tmp:
        work = Path(tmp)
        env = {**os.environ, "CUDAUP_CACHE_DIR": str(work / "cache")}
        site = work / "site"
        site.mkdir()
        for case in cases(args):
            if case.name not in wanted:
                continue
            if args.baseline:
                case.tools = with_baseline(case.tools, args.baseline)
            data = os.urandom(case.size_mib * 2**20)
            (site / "file.bin").write_bytes(data)
            sha256, md5 = hashlib.sha256(data).hexdigest(), hashlib.md5(data).hexdigest()
            del data
            print(case.title, flush=True)
            limits = {"plain": case.nginx_limit}
            with Nginx(site, limits) as nginx, reachable(nginx.ports["plain"], case) as port:
                url = f"http://127.0.0.1:{port}/file.bin"
                file = File(url, work / "out", sha256, md5, site / "file.bin")
                samples = measure(
                    case, file, args.runs, env, [t for t in args.tools.split(";") if t]
                )
            results += table(case, samples)
    load_after = os.getloadavg()[0]
    lines = [
        BEGIN,
        "## Download",
        "",
        f"Command: `.venv/bin/python benchmarks/download.py {' '.join(sys.argv[1:])}` (how it "
        "measures: its docstring)"
        + (f"; the baseline rows run the cudaup in `{args.baseline}`." if args.baseline else "."),
        "",
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {os.cpu_count()} CPUs "
        f"(load average {load_before:.1f} before, {load_after:.1f} after), Python "
        f"{sys.version.split()[0]}: whole-process wall time, {args.runs} runs, the tools taking "
        "turns within each run (each run starting one tool later), each from settled free memory; "
        "speed ratios are taken within each run (above 1: faster than the reference).",
        "",
        *results,
        END,
    ]
    publish(lines, args.output, BEGIN, END)


if __name__ == "__main__":
    main()
