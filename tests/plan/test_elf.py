"""Which libraries a shared object links, from a prefix of its bytes."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from cudaup.plan.elf import NotElfError, scan
from tests.helpers import require_tool
from tests.plan.builders import shared_object


def _grow(data: bytes, start: int = 64) -> tuple[tuple[str, ...], int]:
    """Scan as a range reader would: a little first, then as much as the scan asks for."""
    size = start
    while True:
        result = scan(data[:size])
        if result.complete or size >= len(data):
            return result.libraries, size
        size = max(size + 1, result.needed)


def test_the_string_table_comes_from_the_first_segment() -> None:
    library = shared_object(["libcudart.so.12", "libc.so.6"], "common_ops.so", code=2 * 1024 * 1024)
    libraries, read = _grow(library)
    assert "libcudart.so.12" in libraries and "libc.so.6" in libraries
    assert read < 4096  # the string table, not the 2 MiB of code before .dynamic


def test_dt_needed_exactly_when_dynamic_is_inside() -> None:
    library = shared_object(["libnvrtc.so.13"], "libsmall.so", code=64)
    result = scan(library)
    assert result.complete and result.libraries == ("libnvrtc.so.13",)  # the soname is no need


def test_what_a_real_linker_wrote(tmp_path: Path) -> None:
    require_tool("gcc", "gcc")
    stub, user = tmp_path / "stub.c", tmp_path / "user.c"
    stub.write_text("int cudaStub(void) { return 12; }\n")
    user.write_text("int cudaStub(void);\nint call(void) { return cudaStub(); }\n")
    subprocess.run(
        ["/usr/bin/gcc", "-shared", "-fPIC", "-Wl,-soname,libcudart.so.12", "-o",
         str(tmp_path / "libcudart.so.12"), str(stub)],
        check=True,
    )  # fmt: skip
    subprocess.run(
        ["/usr/bin/gcc", "-shared", "-fPIC", "-o", str(tmp_path / "ops.so"), str(user),
         str(tmp_path / "libcudart.so.12")],
        check=True,
    )  # fmt: skip
    libraries, _read = _grow((tmp_path / "ops.so").read_bytes())
    assert "libcudart.so.12" in libraries


@pytest.mark.parametrize(
    "data",
    [b"", b"\x7fELF", b"MZ" + bytes(100), b"\x7fELF" + bytes([3, 1]) + bytes(70), bytes(64)],
)
def test_what_is_not_an_elf_object(data: bytes) -> None:
    with pytest.raises(NotElfError):
        scan(data)
