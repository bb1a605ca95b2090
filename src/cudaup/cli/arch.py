"""``cudaup arch PATH|URL…``: the SASS and PTX targets in CUDA binaries and wheels."""

from __future__ import annotations

import argparse
from pathlib import Path
from urllib.parse import urlsplit

from cudaup.binaries.coverage import ArchReport, Gpu, check_coverage
from cudaup.binaries.read import Package, read_local
from cudaup.cli.common import human_size, settings_of
from cudaup.cli.output import emit_json
from cudaup.core.fatbin import FatbinTarget
from cudaup.core.gpus import parse_gpu
from cudaup.errors import GpuUnsupportedError, UsageError

#: the driver ``--gpu`` assumes: one that runs every PTX ISA
ANY_DRIVER = (99, 9)


def add_arch(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths",
        nargs="+",
        metavar="PATH|URL",
        help="shared objects, executables, .o, .cubin, .fatbin, .ptx, wheels (a path or an "
        "https:// URL, read by range requests), or directories (every file below)",
    )
    parser.add_argument(
        "--gpu",
        help="GPUs to check the binaries against (sm_70,sm_90 or 7.0,9.0): exit 20 when one "
        "of them is left without kernels",
    )
    parser.set_defaults(handler=cmd_arch)


def _package(text: str, args: argparse.Namespace) -> Package:
    if not text.strip():
        raise UsageError("arch takes paths and wheel URLs, not an empty string")
    parts = urlsplit(text)
    if parts.scheme in {"http", "https"}:
        if not parts.path.endswith(".whl"):
            raise UsageError(f"arch reads URLs of wheels (…/name.whl), not {text!r}")
        # Imported here, not at the top: the HTTP client's imports (~0.4 s) would make
        # every local read slower than cuobjdump, and only a URL needs them.
        from cudaup.binaries.remote import read_remote_wheel  # noqa: PLC0415
        from cudaup.net.http import HttpClient  # noqa: PLC0415

        return read_remote_wheel(HttpClient(settings_of(args)), text)
    return read_local(Path(text))


def _describe(targets: list[FatbinTarget]) -> tuple[str, str]:
    sass = " ".join(t.name for t in targets if t.kind == "sass") or "none"
    isas: dict[str, set[str]] = {}
    for t in targets:
        if t.kind == "ptx" and t.ptx_isa:
            isas.setdefault(t.name, set()).add("{}.{}".format(*t.ptx_isa))
    ptx = " ".join(f"{name} (PTX {', '.join(sorted(v))})" for name, v in isas.items()) or "none"
    return sass, ptx


def _print_package(package: Package) -> None:
    read = (
        f", read {human_size(package.read)} of {human_size(package.size)}"
        if package.read is not None
        else ""
    )
    print(f"{package.name}: {len(package.files)} file(s) with GPU code{read}")
    sass, ptx = _describe(package.targets)
    print(f"  sass  {sass}\n  ptx   {ptx}")
    for found in package.files:
        embedded = sum(1 for e in found.entries if e.origin == "embedded")
        compressed = sum(1 for e in found.entries if e.compression)
        print(f"  {found.name}: {len(found.entries)} entries "
              f"({compressed} compressed, {embedded} outside .nv_fatbin)")  # fmt: skip
        if len(package.files) > 1:
            sass, ptx = _describe(found.targets)
            print(f"    sass  {sass}\n    ptx   {ptx}")


def cmd_arch(args: argparse.Namespace) -> int:
    packages = [_package(text, args) for text in args.paths]
    gpus = [Gpu(g.strip(), parse_gpu(g)) for g in args.gpu.split(",")] if args.gpu else []
    # --gpu asks whether the binaries carry kernels, not whether some driver is new
    # enough: PTX counts as it would under a driver that runs its ISA (said below).
    coverage = check_coverage(packages, gpus, driver_cuda=ANY_DRIVER)
    if args.json:
        emit_json(ArchReport(packages, coverage).to_json())
    else:
        for package in packages:
            _print_package(package)
        for result in coverage:
            for name, reason in result.missing:
                print(f"{result.gpu.label}: {name} has no kernels for it ({reason})")
            if not result.missing:
                print(
                    f"{result.gpu.label}: every package carries kernels for it "
                    "(PTX counted as a driver new enough for its ISA JIT-compiles it)"
                )
    return GpuUnsupportedError.exit_code if any(c.missing for c in coverage) else 0
