"""The dynamic section and the versioned dynamic symbols of whole objects, checked against
what binutils' ``nm -D`` and ``readelf -d`` say about objects a real linker wrote."""

from __future__ import annotations

import mmap
import subprocess
from pathlib import Path

import pytest

from cudaup.plan.elf import (
    Dynamic,
    DynamicSymbols,
    NotElfError,
    UndefinedSymbol,
    dynamic_symbols,
    read_dynamic,
)
from tests.helpers import require_tool

GCC = "/usr/bin/gcc"


def _mapped(path: Path) -> tuple[DynamicSymbols, Dynamic]:
    with path.open("rb") as handle, mmap.mmap(handle.fileno(), 0, prot=mmap.PROT_READ) as data:
        return dynamic_symbols(data), read_dynamic(data)


def _nm(path: Path, *flags: str) -> set[str]:
    done = subprocess.run(
        ["nm", "-D", *flags, str(path)], capture_output=True, text=True, check=True
    )
    return {line.split()[-1] for line in done.stdout.splitlines() if line.strip()}


def _build(tmp_path: Path, name: str, source: str, *extra: str) -> Path:
    require_tool(GCC, "gcc")
    (tmp_path / f"{name}.c").write_text(source)
    out = tmp_path / name
    subprocess.run(
        [GCC, "-shared", "-fPIC", "-o", str(out), str(tmp_path / f"{name}.c"), *extra], check=True
    )
    return out


def test_versioned_definitions_and_references(tmp_path: Path) -> None:
    script = tmp_path / "versions.map"
    script.write_text(
        "CUDA_1.0 { global: cuOld; local: *; };\nCUDA_2.0 { global: cuNew; } CUDA_1.0;\n"
    )
    library = _build(
        tmp_path,
        "libversioned.so.1",
        "int cuOld(void) { return 1; }\nint cuNew(void) { return 2; }\nstatic int hidden(void) { return 3; }\n",
        "-Wl,-soname,libversioned.so.1",
        f"-Wl,--version-script={script}",
    )
    user = _build(
        tmp_path,
        "user.so",
        "#include <stdio.h>\nint cuNew(void);\nextern int maybe(void) __attribute__((weak));\n"
        "int call(const char *s) { return puts(s) + cuNew() + (maybe ? maybe() : 0); }\n",
        str(library),
        "-Wl,-rpath,$ORIGIN/lib:/opt/x",
    )
    symbols, _dynamic = _mapped(library)
    assert ("cuOld", "CUDA_1.0") in symbols.defined and ("cuNew", "CUDA_2.0") in symbols.defined
    assert symbols.versioned and not any(name == "hidden" for name, _ in symbols.defined)
    used, dynamic = _mapped(user)
    assert dynamic.needed[0] == "libversioned.so.1"
    assert dynamic.runpath == ("$ORIGIN/lib", "/opt/x")
    by_name = {s.name: s for s in used.undefined}
    assert by_name["cuNew"] == UndefinedSymbol("cuNew", "CUDA_2.0", "libversioned.so.1", False)
    assert by_name["maybe"].weak and by_name["puts"].library == "libc.so.6"
    assert symbols.defines(by_name["cuNew"])
    assert not symbols.defines(UndefinedSymbol("cuNew", "CUDA_9.0", None, False))
    assert {f"{s.name}@{s.version}" if s.version else s.name for s in used.undefined} == _nm(
        user, "--undefined-only"
    )


def test_a_system_library_reads_as_nm_reads_it() -> None:
    libc = Path("/lib/x86_64-linux-gnu/libc.so.6")
    if not libc.is_file():
        pytest.fail(f"{libc} is this image's C library; the test reads it")
    symbols, dynamic = _mapped(libc)
    assert dynamic.soname == "libc.so.6"
    assert {name for name, _version in symbols.defined} == {
        name.split("@")[0] for name in _nm(libc, "--defined-only")
    }
    assert ("memcpy", "GLIBC_2.14") in symbols.defined


@pytest.mark.parametrize("data", [b"", b"\x7fELF" + bytes(60), bytes(64)])
def test_what_is_not_a_whole_object(data: bytes) -> None:
    with pytest.raises(NotElfError):
        dynamic_symbols(data)


def test_section_headers_past_the_end_are_refused(tmp_path: Path) -> None:
    library = _build(tmp_path, "libcut.so", "int f(void) { return 1; }\n")
    data = library.read_bytes()
    with pytest.raises(NotElfError):
        dynamic_symbols(data[: len(data) // 2])
