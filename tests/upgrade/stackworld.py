"""The loopback world (tests/upgrade/world.py) with an ML stack's pairings added to its
``pypi`` index: real ELF objects built by gcc, so what links libtorch is read as it is in
a real wheel.

torch (replacing the world's, same versions and requirements) ships ``torch/lib/libtorch.so``:
  2.9.1 (CUDA 12.8) exports ``c10::impl::old_api()`` and ``at::common()``;
  2.11.0 (CUDA 13.0) exports ``c10::impl::new_api()`` and ``at::common()``.
Extensions link ``libtorch.so`` (DT_NEEDED) and need one of those symbols:
  kernelish   1.0 (torch, old_api) · 1.1 (torch==2.11.0, new_api) · 1.2 (torch, new_api):
              the newest pins no torch; 1.1 is the build made for 2.11.0;
  symkernel   1.0 (torch, old_api) · 2.0 (torch, new_api): no version pins; 2.0's symbols
              are all in torch 2.11.0;
  badkernel   1.0 (torch, old_api) · 2.0 (torch, old_api): 2.0 was built against 2.9.1.
flashinfer-python 0.6.8 (torch<2.10) and 0.7.0 (torch), extras cu12 (oldkernels) and cu13
(newkernels); flashinfer-cubin 0.6.8, 0.7.0 and 0.7.1 (its companion); oldkernels 1.0,
newkernels 1.0 (pure, no line); bindingsuser 1.0 (requires cuda-bindings, unbounded).
"""

from __future__ import annotations

import subprocess
from functools import cache
from pathlib import Path
from tempfile import TemporaryDirectory

from tests.helpers import require_tool
from tests.plan.pyindex import IndexServer
from tests.upgrade.world import torch, wheel

GCC = "/usr/bin/gcc"
OLD = "_ZN3c104impl7old_apiEv"
NEW = "_ZN3c104impl7new_apiEv"
COMMON = "_ZN2at6commonEv"


@cache
def _objects() -> dict[str, bytes]:
    """libtorch for each torch, and an extension needing each API (built once)."""
    require_tool(GCC, "gcc")
    sources = {
        "libtorch-old.so": f'void a(void) __asm__("{OLD}"); void a(void) {{}}\n'
        f'void c(void) __asm__("{COMMON}"); void c(void) {{}}\n',
        "libtorch-new.so": f'void a(void) __asm__("{NEW}"); void a(void) {{}}\n'
        f'void c(void) __asm__("{COMMON}"); void c(void) {{}}\n',
        "ext-old.so": f'extern void a(void) __asm__("{OLD}");\n'
        f'extern void c(void) __asm__("{COMMON}");\nvoid run(void) {{ a(); c(); }}\n',
        "ext-new.so": f'extern void a(void) __asm__("{NEW}");\n'
        f'extern void c(void) __asm__("{COMMON}");\nvoid run(void) {{ a(); c(); }}\n',
    }
    built: dict[str, bytes] = {}
    with TemporaryDirectory() as work:
        root = Path(work)
        (root / "stub").mkdir()
        for name, source in sources.items():
            (root / f"{name}.c").write_text(source)
            argv = [GCC, "-shared", "-fPIC", "-o", str(root / name), str(root / f"{name}.c")]
            if name.startswith("lib"):
                argv.insert(3, "-Wl,-soname,libtorch.so")
            else:
                argv += ["-Wl,--no-as-needed", "-L", str(root / "stub"), "-ltorch"]
            subprocess.run(argv, check=True, capture_output=True)
            built[name] = (root / name).read_bytes()
            if name == "libtorch-old.so":  # what the extensions link against
                (root / "stub" / "libtorch.so").write_bytes(built[name])
    return built


def extension(name: str, version: str, requires: tuple[str, ...], api: str) -> tuple[str, bytes]:
    files: dict[str, str | bytes] = {
        f"{name}/__init__.py": "",
        f"{name}/_ops.abi3.so": _objects()[f"ext-{api}.so"],
    }
    return wheel(name, version, requires, files=files)


def add_stack(server: IndexServer) -> IndexServer:
    """The pairings above, on the world's ``pypi`` index (torch replaced by builds with
    their libraries)."""
    pypi = "pypi"
    server.root(pypi).pages.pop("torch", None)
    for version, cuda, runtime, api in (
        ("2.9.1", "12.8", "nvidia-cuda-runtime-cu12==12.8.90", "old"),
        ("2.11.0", "13.0", "nvidia-cuda-runtime==13.0.96", "new"),
    ):
        name, body = torch(version, cuda, (runtime,), libtorch=_objects()[f"libtorch-{api}.so"])
        server.add(pypi, name, body)
    for version, requires, api in (
        ("1.0", ("torch",), "old"),
        ("1.1", ("torch==2.11.0",), "new"),
        ("1.2", ("torch",), "new"),
    ):
        server.add(pypi, *extension("kernelish", version, requires, api))
    server.add(pypi, *extension("symkernel", "1.0", ("torch",), "old"))
    server.add(pypi, *extension("symkernel", "2.0", ("torch",), "new"))
    server.add(pypi, *extension("badkernel", "1.0", ("torch",), "old"))
    server.add(pypi, *extension("badkernel", "2.0", ("torch",), "old"))
    extras = ('oldkernels==1.0; extra == "cu12"', 'newkernels==1.0; extra == "cu13"')
    server.add(pypi, *_with_extras("0.6.8", ("torch<2.10", *extras)))
    server.add(pypi, *_with_extras("0.7.0", ("torch", *extras)))
    for version in ("0.6.8", "0.7.0", "0.7.1"):
        server.add(pypi, *wheel("flashinfer-cubin", version))
    server.add(pypi, *wheel("bindingsuser", "1.0", ("cuda-bindings",)))
    server.add(pypi, *wheel("oldkernels", "1.0"))
    server.add(pypi, *wheel("newkernels", "1.0"))
    return server


def _with_extras(version: str, requires: tuple[str, ...]) -> tuple[str, bytes]:
    return wheel("flashinfer-python", version, requires, extras=("cu12", "cu13"))
