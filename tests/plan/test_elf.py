"""Which libraries a shared object links, from a prefix of its bytes."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from cudaup.plan.elf import (
    NeededStream,
    NotElfError,
    headers_needed,
    layout,
    loaded_by_name,
    loaded_in,
    scan,
)
from cudaup.plan.wheels import PREFIX_LIMIT
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


def _stream(data: bytes, chunk: int = 1024 * 1024) -> tuple[tuple[str, ...] | None, int]:
    """Feed ``data`` in order as a reader inflating a zip member would; stop at the answer."""
    stream = NeededStream(layout(data[:4096]))
    for start in range(0, len(data), chunk):
        stream.feed(data[start : start + chunk])
        if (names := stream.names()) is not None:
            return names, stream.position
    return stream.names(), stream.position


def test_a_dynamic_section_past_any_prefix() -> None:
    """libmxnet.so's layout: code in the first segment, a symbol table bigger than any
    prefix a reader would take, then the strings, and .dynamic at the very end."""
    needed = ["libcudart.so.11.0", "libnvrtc.so.11.2", "libcudnn.so.8"]
    library = shared_object(
        needed, "libmxnet.so", code=4 * 1024 * 1024, symbols=PREFIX_LIMIT + 1024, old_layout=True
    )
    start = scan(library[:4096])
    assert not start.complete  # neither the strings nor .dynamic are in the prefix
    shape = layout(library[:4096])
    assert shape.dynamic is not None and shape.dynamic[0] > PREFIX_LIMIT + 4 * 1024 * 1024
    names, read = _stream(library)
    # Exactly the needed names: the decoy soname in the same string table is not one.
    assert names == tuple(sorted(needed)) and read == len(library)


def test_a_real_linker_with_code_in_the_first_segment(tmp_path: Path) -> None:
    require_tool("/usr/bin/gcc", "gcc")
    readelf_path = "/usr/bin/readelf"
    require_tool(readelf_path, "binutils")
    stub, user = tmp_path / "stub.c", tmp_path / "user.c"
    stub.write_text("int cudaStub(void) { return 11; }\n")
    # 20 MiB of read-only data ahead of .dynamic, in the code segment (-z noseparate-code).
    user.write_text(
        "int cudaStub(void);\n"
        "__attribute__((used)) static const char pad[20 << 20] = {1};\n"
        "int call(void) { return cudaStub() + pad[7]; }\n"
    )
    subprocess.run(
        ["/usr/bin/gcc", "-shared", "-fPIC", "-Wl,-soname,libcudart.so.11.0", "-o",
         str(tmp_path / "libcudart.so.11.0"), str(stub)],
        check=True,
    )  # fmt: skip
    subprocess.run(
        ["/usr/bin/gcc", "-shared", "-fPIC", "-Wl,-z,noseparate-code", "-o",
         str(tmp_path / "ops.so"), str(user), str(tmp_path / "libcudart.so.11.0")],
        check=True,
    )  # fmt: skip
    data = (tmp_path / "ops.so").read_bytes()
    shape = layout(data[: headers_needed(data[:64])])
    assert shape.dynamic is not None and shape.dynamic[0] > 20 << 20
    names, _read = _stream(data, chunk=65536)
    assert names is not None and "libcudart.so.11.0" in names
    # What readelf reads from the section headers is the same list.
    readelf = subprocess.run(
        [readelf_path, "-d", str(tmp_path / "ops.so")], check=True, capture_output=True, text=True
    ).stdout
    shown = {
        line.split("[", 1)[1].split("]", 1)[0]
        for line in readelf.splitlines()
        if "(NEEDED)" in line
    }
    assert set(names) == shown


def test_libraries_loaded_by_name() -> None:
    rodata = b"\x00libnvrtc.so.12\x00libcudart.so.12\x00libfoo.so.1\x00"
    assert loaded_by_name(b"junk" + rodata) == ("libcudart.so.12", "libnvrtc.so.12")
    assert loaded_by_name(b"libnvrtc.so") == ()
    assert loaded_by_name(b"\x00libcublasLt.so.13\x00") == ("libcublasLt.so.13",)


def test_a_name_cut_between_two_pieces_is_found() -> None:
    """Read in pieces, as a deflated member is: a name across a boundary is found, and so
    is every other name (an object that loads either major names both)."""
    data = bytes(5000) + b"libcublas.so.12\x00" + bytes(5000) + b"\x00libcudart.so.13\x00"
    cut = 5000 + 6  # inside "libcublas"
    pieces = [data[:cut], data[cut : cut + 100], data[cut + 100 :]]
    assert loaded_in(pieces) == ("libcublas.so.12", "libcudart.so.13")
    assert loaded_in([b"libcudart", b".so.12\x00"]) == ("libcudart.so.12",)
    assert loaded_in([bytes(100), b"libnvrtc.so"]) == ()
