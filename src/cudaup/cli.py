"""The ``cudaup`` command line: argument parsing, output, and exit codes.

Thin by design: each command builds :class:`~cudaup.config.Settings`, calls
the library, and prints either short human output or (``--json``) one JSON
object.  Any :class:`~cudaup.errors.CudaupError` becomes one sentence on
stderr and its exit code; a traceback appears only with ``--debug``.  Heavy
imports happen inside the commands so that ``cudaup --version`` stays fast.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from cudaup import __version__
from cudaup.cli_common import emit_json
from cudaup.cli_machine import cmd_compat, cmd_doctor, cmd_plan
from cudaup.cli_resolve import cmd_probe, cmd_resolve, cmd_versions
from cudaup.cli_transfer import (
    cmd_cache,
    cmd_download,
    cmd_install,
    cmd_list,
    cmd_lock,
    cmd_mirror,
    cmd_uninstall,
)
from cudaup.errors import CudaupError


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print one JSON object")
    common.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    common.add_argument("--refresh", action="store_true", help="bypass the HTTP cache")
    common.add_argument("--offline", action="store_true", help="answer from the shipped snapshot")
    common.add_argument("--no-probe", action="store_true", help="skip the HEAD probe of each file")
    hosts = common.add_argument_group("hosts (also CUDAUP_NVIDIA_*_URL and CUDAUP_PYPI_URL)")
    hosts.add_argument("--download-url", metavar="URL", help="NVIDIA file host or mirror")
    hosts.add_argument("--archive-url", metavar="URL", help="NVIDIA archive-page host")
    hosts.add_argument("--prerelease-url", metavar="URL", help="NVIDIA preview host")
    hosts.add_argument("--pypi-url", metavar="URL", help="simple index (default PyPI)")
    hosts.add_argument(
        "--mirror", metavar="URL", help="a cudaup mirror: every host and the PyPI index at one root"
    )

    parser = argparse.ArgumentParser(
        prog="cudaup",
        description="Find, verify, install and switch NVIDIA CUDA toolkits.",
        parents=[common],
    )
    parser.add_argument("--version", action="version", version=f"cudaup {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    resolve = commands.add_parser(
        "resolve", parents=[common], help="a release to exact, verified artifacts"
    )
    resolve.add_argument("version", help="13.0.1, 13.0, 13, cu130, '13.0 Update 1' or latest")
    resolve.add_argument(
        "--platform",
        help="linux-x86_64, linux-sbsa, linux-aarch64, windows-x86_64, windows-arm64 (default: this host)",
    )
    resolve.add_argument("--channel", choices=("installer", "redist", "pypi"), default="installer")
    resolve.add_argument("--components", help="comma-separated, e.g. nvcc,cudart (redist, pypi)")
    resolve.set_defaults(handler=cmd_resolve)

    versions = commands.add_parser(
        "versions", parents=[common], help="every release: date, bundled driver, platforms"
    )
    versions.set_defaults(handler=cmd_versions)

    probe = commands.add_parser(
        "probe", parents=[common], help="check a URL cheaply and explain a failure"
    )
    probe.add_argument("url")
    probe.set_defaults(handler=cmd_probe)

    download = commands.add_parser(
        "download",
        parents=[common],
        help="fetch a release's files (or a URL), verified and resumable",
    )
    download.add_argument("target", help="a version request (13.0.1, cu130, latest) or a URL")
    download.add_argument(
        "-o", "--output", default=".", help="directory to write into (default: .)"
    )
    download.add_argument("--platform", help="as for resolve (default: this host)")
    download.add_argument("--channel", choices=("installer", "redist", "pypi"), default="installer")
    download.add_argument("--components", help="comma-separated, e.g. nvcc,cudart (redist, pypi)")
    download.add_argument(
        "--connections", type=int, default=8, help="parallel connections per file (1-16, default 8)"
    )
    download.add_argument("--sha256", help="expected SHA-256 of a bare URL")
    download.add_argument("--md5", help="expected MD5 of a bare URL")
    download.add_argument(
        "--allow-unverified", action="store_true", help="download files with no known checksum"
    )
    download.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    download.set_defaults(handler=cmd_download)

    install = commands.add_parser(
        "install", parents=[common], help="install a toolkit side by side (no root needed)"
    )
    install.add_argument("version", nargs="?", help="13.0.1, 13.0, cu130, latest (or --lock)")
    install.add_argument(
        "--lock", metavar="FILE", help="install exactly what a cuda.lock.toml names"
    )
    install.add_argument(
        "--channel", choices=("auto", "installer", "redist", "pypi"), default="auto"
    )
    install.add_argument(
        "--components", help="comma-separated, e.g. nvcc,cudart (nvcc brings crt, nvvm, cudart)"
    )
    install.add_argument("--all", action="store_true", help="the whole toolkit")
    install.add_argument("--prefix", help="install there instead of the cudaup store")
    install.add_argument("--platform", help="a Linux platform (default: this host)")
    install.add_argument("--driver", help="check against this driver instead of the detected one")
    install.add_argument(
        "--force", action="store_true", help="install even if the driver cannot run it"
    )
    install.add_argument(
        "--allow-unverified", action="store_true", help="install files with no published checksum"
    )
    install.add_argument("--connections", type=int, default=8, help="parallel connections per file")
    install.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    install.set_defaults(handler=cmd_install)

    lock = commands.add_parser(
        "lock", parents=[common], help="decide every byte of a toolkit, with hashes"
    )
    lock.add_argument("version", nargs="?", help="13.0.1, 13.0, cu130")
    lock.add_argument(
        "--check", metavar="FILE", help="do the origins still serve exactly what FILE names?"
    )
    lock.add_argument("--components", help="comma-separated, e.g. nvcc,cudart")
    lock.add_argument("--all", action="store_true", help="the whole toolkit")
    lock.add_argument("--channel", choices=("auto", "installer", "redist", "pypi"), default="auto")
    lock.add_argument("--platform", action="append", help="repeatable (default: this host)")
    lock.add_argument(
        "--with",
        dest="with_packages",
        metavar="PKGS",
        help="comma-separated wheels to lock beside it (PEP 751)",
    )
    lock.add_argument("--index", action="append", help="as for plan, for --with")
    lock.add_argument("--python", help="X.Y or an interpreter, for --with")
    lock.add_argument("-o", "--output", default="cuda.lock.toml")
    lock.set_defaults(handler=cmd_lock)

    mirror = commands.add_parser(
        "mirror", parents=[common], help="write a lock's files as a static mirror"
    )
    mirror.add_argument("lock", help="a cuda.lock.toml")
    mirror.add_argument("directory")
    mirror.add_argument("-q", "--quiet", action="store_true")
    mirror.set_defaults(handler=cmd_mirror)

    uninstall = commands.add_parser(
        "uninstall", parents=[common], help="remove a toolkit cudaup installed"
    )
    uninstall.add_argument("version")
    uninstall.set_defaults(handler=cmd_uninstall)

    listing = commands.add_parser(
        "list", parents=[common], help="toolkits cudaup installed, and every other one found"
    )
    listing.set_defaults(handler=cmd_list)

    cache = commands.add_parser(
        "cache",
        parents=[common],
        help="cudaup's cache: where it is, what it holds, making room",
        description="dir: print its path. info: sizes by area. prune: remove what no "
        "installed toolkit uses (unpacked archives, finished downloads; partial downloads "
        "stay, to resume). clean: remove everything but lock files.",
    )
    cache.add_argument("action", choices=("dir", "info", "prune", "clean"))
    cache.set_defaults(handler=cmd_cache)

    plan = commands.add_parser(
        "plan",
        parents=[common],
        help="the newest CUDA line the driver and the ML packages agree on",
    )
    plan.add_argument(
        "packages", nargs="+", help='requirements, e.g. torch "vllm>=0.11" sgl-kernel'
    )
    plan.add_argument("--driver", help="plan for this driver (default: this machine's)")
    plan.add_argument("--python", help="X.Y or an interpreter path (default: python3 on PATH)")
    plan.add_argument("--platform", help="as for resolve (default: this host)")
    plan.add_argument(
        "--index",
        action="append",
        help="pypi, pytorch, flashinfer, sglang, vllm or a URL (repeatable)",
    )
    plan.add_argument("--export", metavar="FILE", help="write a PEP 751 pylock.toml (needs uv)")
    plan.set_defaults(handler=cmd_plan)

    doctor = commands.add_parser(
        "doctor", parents=[common], help="driver, GPUs, every toolkit, and problems with fixes"
    )
    doctor.add_argument("--driver", help="assume this driver version (also CUDAUP_DRIVER_VERSION)")
    doctor.add_argument(
        "--python", help="the Python whose wheels and torch to inspect (default: python3 on PATH)"
    )
    doctor.set_defaults(handler=cmd_doctor)

    compat = commands.add_parser(
        "compat",
        parents=[common],
        help="which releases a driver runs, or which drivers run a release",
    )
    compat.add_argument("release", nargs="?", help="a release (13.0.1, 13.0, cu130)")
    compat.add_argument("--driver", help="a driver version (default: this machine's)")
    compat.add_argument("--os", choices=("linux", "windows"), default="linux")
    compat.set_defaults(handler=cmd_compat)

    from cudaup import cli_switch  # noqa: PLC0415 - default, pin, env, run, which, show, undo

    cli_switch.register(commands, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result: int = args.handler(args)
    except CudaupError as exc:
        if args.debug:
            raise
        if args.json:
            emit_json(
                {
                    "schema": 1,
                    "error": {"kind": exc.kind, "message": str(exc), "exit_code": exc.exit_code},
                }
            )
        hint = ""
        if exc.kind == "network" and not getattr(args, "offline", False):
            hint = " (without network access: --mirror URL, or --offline for resolve)"
        sys.stderr.write(f"cudaup: error: {exc}{hint}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("cudaup: interrupted; run the same command again to resume\n")
        return 130
    except Exception as exc:
        if args.debug:
            raise
        sys.stderr.write(f"cudaup: internal error: {exc!r} (rerun with --debug for a traceback)\n")
        return 1
    return result
