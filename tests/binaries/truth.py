"""NVIDIA's answer, for the tests to hold cudaup's to: cuobjdump, and objects nvcc builds."""

from __future__ import annotations

import importlib.util
import re
import subprocess
from pathlib import Path

import pytest

from cudaup.core.fatbin import Entry

_LISTED = re.compile(r"^(ELF|PTX) file\s+\d+: .*\.(sm_\d+[af]?)\.(?:cubin|ptx)$")


def cuobjdump() -> Path:
    """cuobjdump from the PyPI wheel nvidia-cuda-cuobjdump (a test dependency)."""
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        for found in Path(root).glob("cu*/bin/cuobjdump"):
            return found
    pytest.fail("cuobjdump is needed: pip install -e '.[test]' (nvidia-cuda-cuobjdump)")


def listed(path: Path) -> set[str]:
    """``cuobjdump -all --list-elf --list-ptx``'s targets: ``sm_90a`` for an ELF,
    ``compute_90a`` for a PTX (as cudaup names them)."""
    done = subprocess.run(
        [str(cuobjdump()), "-all", "--list-elf", "--list-ptx", str(path)],
        capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    found = set()
    for line in done.stdout.splitlines():
        if match := _LISTED.match(line.strip()):
            kind, arch = match.groups()
            found.add(arch if kind == "ELF" else "compute_" + arch[3:])
    return found


def as_cuobjdump_names(entries: list[Entry]) -> set[str]:
    """cudaup's targets as cuobjdump 13.5 spells them: it names a family cubin by its base
    architecture (an sm_100f cubin is ``sm_100``), though the fatbin entry's flags and the
    cubin's own -arch note say sm_100f; PTX keeps the f."""
    return {
        e.target.name[:-1] if e.target.kind == "sass" and e.target.variant == "f" else e.target.name
        for e in entries
    }


def nvcc(toolkit: Path, *arguments: str) -> None:
    subprocess.run([str(toolkit / "bin" / "nvcc"), *arguments], check=True, timeout=600,
                   capture_output=True)  # fmt: skip
