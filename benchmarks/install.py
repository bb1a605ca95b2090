"""Benchmark ``cudaup install --channel pypi`` against ``pip install --target`` and
``uv pip install --target`` of the same wheels, cold and warm cache (live PyPI).

The wheels: the ones ``cudaup install 13.0.1 --channel pypi --components
nvcc,cudart`` installs (nvcc, nvvm, crt, cudart and the CCCL headers nvcc's
closure brings: ~100 MB, ~1,900 files), read from the record of cudaup's first
install; pip and uv get exactly those, pinned (``name==version``, ``--no-deps``),
so all three resolve from the index and unpack the same files.  (Left to
itself, ``cuda-toolkit[nvcc,cudart]==13.0.1`` gives uv newer crt and nvvm
wheels and no CCCL: 168 files.)  Cold: an empty cache for each tool; warm: the
same cache again, into a fresh target (the cold one kept until then).  pip runs with its configuration file
disabled and PyPI as its only index, so no local mirror helps it.  The tools
take turns within each run, so a change in the network's speed over the
minutes of a run falls on all of them alike, each run starting one tool later, and each
starts from settled free memory (see ``benchmarks/report.py``).

cudaup's bytecode is compiled first, as pip does when it installs cudaup's
wheel: an editable checkout under ``PYTHONDONTWRITEBYTECODE`` (set on some CI
machines) would otherwise recompile every module on every start.

    .venv/bin/python benchmarks/install.py --output docs/performance.md

With ``--baseline DIR`` (the ``src/`` of another cudaup, for instance ``git archive
COMMIT src | tar -x -C /tmp/before``) a "cudaup, baseline" row runs that cudaup too,
first on ``PYTHONPATH``, taking its turn within every run: before and after under the
same load, as ``benchmarks/download.py --baseline`` does.

With ``--scratch DIR`` the caches and targets go under ``DIR``.  Each install creates
~1,900 files, and what a file's creation costs is the file system's: this project's
machines' root file system (ext4 without a journal, after the churn of tests and
benchmarks) spends 100-600 µs of kernel time on each, a fresh journaled ext4 about 20,
and that cost, the same for every tool, hides the tools' own.  A fresh one, for instance::

    truncate -s 30G /tmp/fs.img && mkfs.ext4 -q /tmp/fs.img && mkdir -p /mnt/fs
    mount -o loop /tmp/fs.img /mnt/fs
    .venv/bin/python benchmarks/install.py --scratch /mnt/fs

With ``--rtt-ms MS`` the three install from a loopback mirror instead of PyPI, shaped as
PyPI is: ``cudaup lock`` and ``cudaup mirror`` copy the wheels (and ``cuda-toolkit``'s),
each project's page is written as PEP 691 JSON (each file's size and sha256) on one host
and the files are served from another, both by nginx over TLS (a certificate of a CA made
for the run, which every tool is told to trust), each host behind a relay of
``benchmarks/latency.py``: each request reaches nginx ``MS`` after it is sent, a new
connection waits one round trip more (and TLS's handshake one more), and nothing caps
the speed.  This machine's PyPI answers within a millisecond or two (an intercepting
proxy nearby); PyPI's CDN answered in 50-65 ms where the download ramp was tuned
(``download/ramp.py``).  What each tool pays per round trip, its requests and
connections in sequence, shows here and not on live PyPI.  Its table has its own
section; ``--rtt-ms 0`` is the same mirror without the delay.

    .venv/bin/python benchmarks/install.py --scratch /mnt/fs --rtt-ms 30
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from latency import LinkRelay  # noqa: E402
from packaging.utils import parse_wheel_filename  # noqa: E402
from report import parser_for, publish, settle_memory  # noqa: E402
from tests.faultserver import signed_by_a_new_ca  # noqa: E402
from tests.nginx import Nginx  # noqa: E402

import cudaup as package_under_test  # noqa: E402

BEGIN, END = "<!-- BEGIN install benchmark -->", "<!-- END install benchmark -->"
#: The section of the runs from a loopback mirror behind a round trip (``--rtt-ms``).
RTT_BEGIN = "<!-- BEGIN install benchmark, round trip -->"
RTT_END = "<!-- END install benchmark, round trip -->"
PYPI = "https://pypi.org/simple"
#: What cudaup installs, and what the mirror holds.
INSTALL = ["install", "13.0.1", "--channel", "pypi", "--components", "nvcc,cudart"]


def timed(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system, the process's children included)."""
    started = time.perf_counter()
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    _pid, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    stderr = process.stderr.read() if process.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{command[0]} failed: {stderr[-2000:]}")
    return seconds, usage.ru_utime + usage.ru_stime


def installed_wheels(target: Path) -> list[tuple[str, str, int]]:
    """The wheels a cudaup install took, as its record lists them: (url, filename, size)."""
    record = json.loads((target / "cudaup-record.json").read_text())
    return [(a["url"], a["filename"], a["size"]) for a in record["artifacts"]]


def pins(wheels: list[tuple[str, str, int]]) -> list[str]:
    """``name==version`` for each wheel: what pip and uv are asked for."""
    pinned = []
    for _url, filename, _size in wheels:
        name, version, _build, _tags = parse_wheel_filename(filename)
        pinned.append(f"{name}=={version}")
    return pinned


def curl_all(wheels: list[tuple[str, str, int]], directory: Path) -> list[str]:
    directory.mkdir(parents=True)
    command = ["curl", "-sS", "--fail", "--parallel", "--parallel-max", str(len(wheels))]
    for index, (url, _filename, _size) in enumerate(wheels):
        command += ["-o", str(directory / f"{index}.whl"), url]
    return command


def file_system(directory: Path) -> str:
    """The file system ``directory`` is on, in words: its device, type, and whether ext4
    keeps a journal there (without one, ext4 checks every inode it considers for a new
    file against the ones freed in the last minutes: see docs/performance.md)."""
    best: tuple[str, str, str] = ("?", "?", "")
    resolved = str(directory.resolve())
    for line in Path("/proc/mounts").read_text().splitlines():
        device, mount, kind = line.split()[:3]
        inside = resolved == mount or resolved.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) >= len(best[1]):
            best = (device, mount, kind)
    device, mount, kind = best
    words = f"{kind} on {device} (mounted at {mount})"
    if kind == "ext4":
        name = Path(device).name
        journaled = any(Path("/proc/fs/jbd2").glob(f"{name}-*"))
        words += ", with a journal" if journaled else ", without a journal"
    return words


#: What nginx adds to the mirror's servers: each project's page as PEP 691 JSON.
JSON_PAGES = "index index.json; types { application/vnd.pypi.simple.v1+json json; }"


@contextlib.contextmanager
def index_for(
    work: Path, rtt_ms: float | None, env: dict[str, str]
) -> Iterator[tuple[str, dict[str, str]]]:
    """The index every tool installs from, and the environment each needs to trust it:
    PyPI, or (``rtt_ms``) a mirror of the wheels cudaup installs, shaped as PyPI is: the
    pages (PEP 691 JSON, with each file's size and sha256) on one host, the files on
    another, both over TLS with a certificate of a CA made here (``SSL_CERT_FILE``;
    ``PIP_CERT`` for pip, ``CURL_CA_BUNDLE`` for curl), served by nginx behind a relay each that delays every request."""
    if rtt_ms is None:
        yield PYPI, {}
        return
    python, lock, mirror = sys.executable, work / "cuda.lock.toml", work / "mirror"
    setup = {**env, "CUDAUP_CACHE_DIR": str(work / "mirror-cache")}
    for command in (
        ["lock", *INSTALL[1:], "--platform", "linux-x86_64", "-o", str(lock)],
        ["mirror", str(lock), str(mirror)],
    ):
        subprocess.run([python, "-m", "cudaup", "-q", *command], env=setup, check=True)
    shutil.rmtree(work / "mirror-cache")
    ca, certificate, key = signed_by_a_new_ca(work / "tls")
    hosts: dict[str, str | None] = {"pages": None, "files": None}
    with (
        Nginx(mirror, hosts, tls=(certificate, key), directives=JSON_PAGES) as server,
        LinkRelay(("127.0.0.1", server.ports["pages"]), rtt=rtt_ms / 1000, rate=None) as pages,
        LinkRelay(("127.0.0.1", server.ports["files"]), rtt=rtt_ms / 1000, rate=None) as files,
    ):
        json_pages(mirror / "simple", f"https://127.0.0.1:{files.port}")
        yield (
            f"https://127.0.0.1:{pages.port}/simple",
            {
                "SSL_CERT_FILE": str(ca),
                "PIP_CERT": str(ca),
                "CURL_CA_BUNDLE": str(ca),
            },
        )


def json_pages(simple: Path, files_url: str) -> None:
    """Each project's page of ``cudaup mirror``'s index (HTML, relative links) written again
    as PyPI's JSON: each file's URL on the files' host, its sha256 and its size."""
    link = re.compile(r'href="\.\./\.\./(packages/[^"#]+)#sha256=([0-9a-f]{64})"')
    for page in simple.glob("*/index.html"):
        files = []
        for relative, sha256 in link.findall(page.read_text()):
            path = simple.parent / relative
            files.append({"filename": path.name, "url": f"{files_url}/{relative}",
                          "hashes": {"sha256": sha256}, "size": path.stat().st_size})  # fmt: skip
        document = {"meta": {"api-version": "1.1"}, "name": page.parent.name, "files": files}
        (page.parent / "index.json").write_text(json.dumps(document))
        page.unlink()


def spread(values: list[float], digits: int = 2) -> str:
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def main() -> None:
    parser = parser_for(__doc__, runs=3)
    parser.add_argument(
        "--baseline",
        type=Path,
        help="the src/ directory of another cudaup (e.g. an older commit's, from git archive): "
        "it runs too, taking turns with this one",
    )
    parser.add_argument(
        "--scratch",
        type=Path,
        help="where the caches and targets go (default: the system's temporary directory): "
        "each install creates ~1,900 files, whose cost is the file system's",
    )
    parser.add_argument(
        "--rtt-ms",
        type=float,
        help="install from a loopback mirror whose every request takes this round trip "
        "(default: live PyPI)",
    )
    args = parser.parse_args()
    python = sys.executable
    uv = shutil.which("uv", path=str(Path(python).parent)) or shutil.which("uv")
    base_env = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    package = Path(package_under_test.__file__).parent
    subprocess.run([python, "-m", "compileall", "-q", str(package)], check=True)
    if args.baseline:
        subprocess.run(
            [python, "-m", "compileall", "-q", str(args.baseline / "cudaup")], check=True
        )
    with contextlib.ExitStack() as stack:
        work = Path(
            stack.enter_context(
                tempfile.TemporaryDirectory(prefix="cudaup-install-bench-", dir=args.scratch)
            )
        )
        where = file_system(work)
        index, trust = stack.enter_context(index_for(work, args.rtt_ms, base_env))
        base_env.update(trust)

        def cudaup(cache: Path, target: Path) -> list[str]:
            return [python, "-m", "cudaup", "--pypi-url", index, *INSTALL,
                    "--prefix", str(target), "-q", "--platform", "linux-x86_64"]  # fmt: skip

        wheels: list[tuple[str, str, int]] = []

        def pip(cache: Path, target: Path) -> list[str]:
            return [python, "-m", "pip", "install", "-q", "--index-url", index,
                    "--cache-dir", str(cache), "--target", str(target), "--no-deps", *pins(wheels)]  # fmt: skip

        def uv_install(cache: Path, target: Path) -> list[str]:
            assert uv is not None
            return [uv, "pip", "install", "-q", "--python", python, "--index-url", index,
                    "--cache-dir", str(cache), "--target", str(target), "--no-deps", *pins(wheels)]  # fmt: skip

        def baseline(cache: Path, target: Path) -> list[str]:
            return ["env", f"PYTHONPATH={args.baseline}", *cudaup(cache, target)]

        tools = {"cudaup": cudaup, **({"cudaup, baseline": baseline} if args.baseline else {}),
                 "pip": pip}  # fmt: skip
        if uv:
            tools["uv"] = uv_install
        network: list[float] = []
        fetched_bytes = 0  # what curl fetched: a mirror's index gives no sizes
        wall: dict[tuple[str, str], list[float]] = {}
        cpu: dict[tuple[str, str], list[float]] = {}
        for run in range(args.runs):
            # Each run starts one tool later: a tool's cleanup frees thousands of inodes,
            # which the next tool's file creation pays for on a file system without a
            # journal (see --scratch); the first run starts with cudaup (its record names
            # the wheels).
            names = list(tools)
            for name in names[run % len(names) :] + names[: run % len(names)]:
                command = tools[name]
                slug = name.replace(", ", "-")
                cache = work / f"cache-{slug}-{run}"
                env = {
                    **base_env,
                    "CUDAUP_CACHE_DIR": str(cache),
                    "CUDAUP_HOME": str(work / f"home-{slug}-{run}"),
                }
                targets = []
                for phase in ("cold", "warm"):
                    target = work / f"target-{slug}-{run}-{phase}"
                    targets.append(target)
                    settle_memory()
                    seconds, used = timed(command(cache, target), env)
                    wall.setdefault((name, phase), []).append(seconds)
                    cpu.setdefault((name, phase), []).append(used)
                    if not wheels:  # cudaup goes first: the others get what it installed
                        wheels = installed_wheels(target)
                        print("wheels:", " ".join(pins(wheels)), flush=True)
                    print(
                        f"run {run + 1} {name:<8} {phase} {seconds:.2f} s  cpu {used:.2f} s",
                        flush=True,
                    )
                # The cold target stays through the warm install: deleting its hard links
                # first would move the ctime of every cached file, and cudaup's warm
                # install would hash them all again (a reinstall after `rm -rf`, not the
                # cache reuse this measures; `cudaup uninstall` keeps the stamps).
                for target in targets:
                    shutil.rmtree(target, ignore_errors=True)
                shutil.rmtree(cache, ignore_errors=True)
            if shutil.which("curl"):
                fetched = work / f"curl-{run}"
                seconds, used = timed(curl_all(wheels, fetched), base_env)
                network.append(seconds)
                fetched_bytes = sum(path.stat().st_size for path in fetched.iterdir())
                shutil.rmtree(fetched, ignore_errors=True)
                print(f"run {run + 1} curl     wheels only {seconds:.2f} s", flush=True)
    rtt = args.rtt_ms
    source = (
        "live PyPI"
        if rtt is None
        else f"a loopback mirror of these wheels shaped as PyPI (`cudaup mirror`, its pages "
        "as PEP 691 JSON with sizes on one host, the files on another, both nginx over TLS) "
        f"behind a relay each that delays each request by {rtt:g} ms and a new connection by "
        f"{rtt:g} ms more (`benchmarks/latency.py`; TLS's handshake is one round trip more), "
        "no speed cap"
    )
    begin, end = (BEGIN, END) if rtt is None else (RTT_BEGIN, RTT_END)
    lines = [
        begin,
        "## Install (pypi channel)" if rtt is None else "## Install (pypi channel), round trips",
        "",
        "Command: `.venv/bin/python benchmarks/install.py"
        + (f" --runs {args.runs}" if args.runs != 3 else "")
        + (f" --baseline {args.baseline}" if args.baseline else "")
        + (f" --scratch {args.scratch}" if args.scratch else "")
        + (f" --rtt-ms {rtt:g}" if rtt is not None else "")
        + " --output docs/performance.md`",
        "",
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on this 2-core machine, "
        f"shared with other work (load varies run to run: read the ratios), {source}, "
        f"the wheels cudaup installs for nvcc and cudart, pinned for pip and uv "
        f"(`{' '.join(pins(wheels))}`, `--no-deps`); whole-process wall time, median (range) of {args.runs} runs, "
        "the tools taking turns within each run, each run starting one tool later (cold: an empty cache; warm: the same command "
        "again into a fresh target, the cold one kept until then). CPU is user + system time of the process and its children. "
        "cudaup also lays the wheels out as a CUDA_HOME (lib64, unversioned .so links, "
        "version.json); pip and uv only unpack them. cudaup runs from compiled bytecode, as "
        f"installed from its wheel. Caches and targets: {where}."
        + (f" The baseline row runs the cudaup in `{args.baseline}`." if args.baseline else ""),
        "",
        "| tool | cold s | cold CPU s | warm s | cold x uv | warm x uv |",
        "|---|---|---|---|---|---|",
    ]
    for name in tools:
        cells = []
        for phase in ("cold", "warm"):
            reference = wall.get(("uv", phase))
            ratios = (
                [a / b for a, b in zip(wall[(name, phase)], reference, strict=True)]
                if reference
                else []
            )
            cells.append(spread(ratios) if ratios else "-")
        lines.append(
            f"| {name} | {spread(wall[(name, 'cold')])} | {spread(cpu[(name, 'cold')])} "
            f"| {spread(wall[(name, 'warm')])} | {cells[0]} | {cells[1]} |"
        )
    if args.baseline:
        within = {
            f"{phase} {what}": spread(
                [a / b for a, b in zip(values[("cudaup", phase)], values[("cudaup, baseline", phase)], strict=True)]
            )
            for phase in ("cold", "warm")
            for what, values in (("wall", wall), ("CPU", cpu))
        }  # fmt: skip
        lines += [
            "",
            "This cudaup against the baseline, as time ratios within each run: "
            + "; ".join(f"{key} {value}" for key, value in within.items())
            + ".",
        ]
    if network:
        size = fetched_bytes / 1e6
        lines += [
            "",
            f"The network alone: curl fetching the same {len(wheels)} wheels ({size:.0f} MB) side "
            f"by side, one connection each, nothing else: {spread(network)} s.",
        ]
    lines += [
        "",
        "Ratios are time ratios taken within each run: below 1 means faster than uv.",
        end,
    ]
    publish(lines, args.output, begin, end)


if __name__ == "__main__":
    main()
