"""Benchmark resolution: requests sent and wall time, cold and warm, per channel.

Starts the test suite's fake NVIDIA server on loopback (NVIDIA's real formats,
see ``tests/fakenvidia``), resolves with a fresh cache (cold) and again with the
cache it left (warm), and counts the requests that reached the server.  The
``pypi`` rows ask the live PyPI and count the requests cudaup's client sent.
Start-up and ``cudaup probe`` are timed by ``benchmarks/startup.py``.

    .venv/bin/python benchmarks/resolve.py [--no-pypi] [--output docs/performance.md]

With ``--output`` the results replace the ``resolve`` section of that file.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from report import replace_section  # noqa: E402
from tests.fakenvidia import FakeNvidiaServer, build_site  # noqa: E402

from cudaup.config import Settings  # noqa: E402
from cudaup.core.model import Channel  # noqa: E402
from cudaup.core.platforms import Platform  # noqa: E402
from cudaup.net.http import HttpClient  # noqa: E402
from cudaup.resolve.resolver import Resolver  # noqa: E402

BEGIN, END = "<!-- BEGIN resolve benchmark -->", "<!-- END resolve benchmark -->"

SCENARIOS: list[tuple[str, str, Platform, Channel, tuple[str, ...] | None]] = [
    ("installer, exact", "13.0.1", "linux-x86_64", "installer", None),
    ("installer, `13.0`", "13.0", "linux-x86_64", "installer", None),
    ("installer, `cu130`", "cu130", "linux-sbsa", "installer", None),
    ("installer, `latest`", "latest", "windows-arm64", "installer", None),
    ("installer, `13.0 Update 1`", "13.0 Update 1", "linux-x86_64", "installer", None),
    ("redist, exact, nvcc+cudart", "13.0.1", "linux-x86_64", "redist", ("nvcc", "cudart")),
    ("redist, `13.0`, nvcc+cudart", "13.0", "linux-x86_64", "redist", ("nvcc", "cudart")),
    ("redist, exact, all components", "13.0.0", "linux-x86_64", "redist", None),
    ("pypi, exact, nvcc+cudart", "13.0.1", "linux-x86_64", "pypi", ("nvcc", "cudart")),
    ("pypi, `13.0`, nvcc+cudart", "13.0", "linux-x86_64", "pypi", ("nvcc", "cudart")),
]


def resolve_once(
    settings: Settings, scenario: tuple[str, str, Platform, Channel, tuple[str, ...] | None]
) -> tuple[int, float]:
    _name, request, platform, channel, components = scenario
    http = HttpClient(settings)
    start = time.perf_counter()
    Resolver(settings, http).resolve(
        request, platform=platform, channel=channel, components=components
    )
    return http.requests_sent, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--no-pypi", action="store_true", help="skip the live-PyPI rows")
    parser.add_argument("--runs", type=int, default=5, help="repetitions per measurement")
    parser.add_argument(
        "--output", type=Path, help="markdown file whose resolve section to replace"
    )
    args = parser.parse_args()
    lines = [
        BEGIN,
        "## Resolve",
        "",
        "Command: `.venv/bin/python benchmarks/resolve.py --output docs/performance.md`",
        "",
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {sys.platform}, Python {sys.version.split()[0]}. "
        "NVIDIA rows: the fake NVIDIA server on loopback (so times are cudaup's own cost, not the network's); "
        "pypi rows: live PyPI. Requests are everything sent, probes included; wall time is the median of "
        f"{args.runs} runs.",
        "",
        "| scenario | cold requests | warm requests | cold ms | warm ms |",
        "|---|---|---|---|---|",
    ]
    with FakeNvidiaServer(build_site()) as server:
        for scenario in SCENARIOS:
            if scenario[3] == "pypi" and args.no_pypi:
                continue
            colds, warms, cold_counts, warm_counts = [], [], set(), set()
            for _ in range(args.runs):
                with tempfile.TemporaryDirectory() as cache:
                    settings = Settings.from_env(
                        download_url=server.download_url,
                        archive_url=server.archive_url,
                        prerelease_url=server.prerelease_url,
                        cache_dir=Path(cache),
                    )
                    count, seconds = resolve_once(settings, scenario)
                    cold_counts.add(count)
                    colds.append(seconds)
                    count, seconds = resolve_once(settings, scenario)
                    warm_counts.add(count)
                    warms.append(seconds)
            lines.append(
                f"| {scenario[0]} | {'/'.join(map(str, sorted(cold_counts)))} | {'/'.join(map(str, sorted(warm_counts)))} "
                f"| {statistics.median(colds) * 1000:.1f} | {statistics.median(warms) * 1000:.1f} |"
            )
            print(lines[-1], flush=True)

    lines.append(END)
    text = "\n".join(lines) + "\n"
    if args.output:
        replace_section(args.output, BEGIN, END, text)
    else:
        print(text)


if __name__ == "__main__":
    main()
