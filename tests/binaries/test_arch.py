"""``cudaup arch`` on what nvcc builds and NVIDIA ships, held to cuobjdump's answer."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from cudaup.binaries.read import read_file, read_wheel
from cudaup.core.fatbin import read_entries
from cudaup.errors import EXIT_CODES
from tests.binaries.truth import as_cuobjdump_names, listed, nvcc
from tests.faultserver import Fault, FaultServer
from tests.helpers import run_cli

KERNEL = "__global__ void scale(float *x) { x[threadIdx.x] *= 2.0f; }\n"
#: PyPI's nvidia-curand for CUDA 13: libcurand.so.10 (104 MB, 2,000 fatbins)
CURAND = "nvidia-curand==10.4.5.25"

#: what each object is built with, and the targets nvcc puts in it
BUILDS: dict[str, tuple[list[str], set[str]]] = {
    "several.o": (
        ["-c", "-gencode", "arch=compute_75,code=sm_75", "-gencode", "arch=compute_80,code=sm_80",
         "-gencode", "arch=compute_90a,code=sm_90a", "-gencode", "arch=compute_100f,code=sm_100f",
         "-gencode", "arch=compute_100a,code=sm_100a", "-gencode", "arch=compute_100,code=sm_103",
         "-gencode", "arch=compute_120,code=compute_120"],
        {"sm_75", "sm_80", "sm_90a", "sm_100f", "sm_100a", "sm_103", "compute_120"},
    ),
    "ptx-only.o": (
        ["-c", "-gencode", "arch=compute_90a,code=compute_90a",
         "-gencode", "arch=compute_100f,code=compute_100f"],
        {"compute_90a", "compute_100f"},
    ),
    "libscale.so": (
        ["-shared", "-Xcompiler", "-fPIC", "-gencode", "arch=compute_86,code=[sm_86,compute_86]",
         "-gencode", "arch=compute_120f,code=sm_120f"],
        {"sm_86", "compute_86", "sm_120f"},
    ),
    "scale.cubin": (["-cubin", "-arch=sm_90a"], {"sm_90a"}),
    "scale.fatbin": (["-fatbin", "-gencode", "arch=compute_89,code=[sm_89,compute_89]"],
                     {"sm_89", "compute_89"}),
    "scale.ptx": (["-ptx", "-arch=compute_89"], {"compute_89"}),
}  # fmt: skip


@pytest.fixture(scope="session")
def objects(pypi_toolkit: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("objects")
    source = out / "scale.cu"
    source.write_text(KERNEL)
    for name, (flags, _expected) in BUILDS.items():
        nvcc(pypi_toolkit, *flags, str(source), "-o", str(out / name))
    return out


@pytest.fixture(scope="session")
def curand_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("curand")
    env = {**os.environ, "PIP_CONFIG_FILE": os.devnull}
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", CURAND, "-d", str(out)],
        check=True, timeout=900, env=env,
    )  # fmt: skip
    (wheel,) = out.glob("*.whl")
    return wheel


@pytest.mark.pypi
@pytest.mark.parametrize("name", sorted(BUILDS))
def test_objects_nvcc_builds_match_cuobjdump(objects: Path, name: str) -> None:
    found = read_file(objects / name)
    assert found is not None
    names = {e.target.name for e in found.entries}
    assert names == BUILDS[name][1]
    if name.endswith(".ptx"):
        return  # cuobjdump reads no PTX text ("does not contain device code")
    assert as_cuobjdump_names(list(found.entries)) == listed(objects / name)


@pytest.mark.pypi
def test_the_cli_per_file_and_json(objects: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = run_cli(
        capsys, "--json", "arch", str(objects / "several.o"), str(objects / "scale.ptx")
    )
    assert result.code == 0, result.err
    document = json.loads(result.out)
    several, ptx = document["packages"]
    assert several["sass"] == ["sm_100a", "sm_100f", "sm_103", "sm_75", "sm_80", "sm_90a"]
    assert several["ptx"] == ["compute_120"]
    (entry,) = [t for t in several["targets"] if t["kind"] == "ptx"]
    assert entry == {"name": "compute_120", "kind": "ptx", "compute_capability": "12.0",
                     "variant": None, "ptx_isa": "9.0"}  # fmt: skip
    assert several["files"][0]["compressed"] == {"zstd": 1}  # nvcc compresses the PTX
    assert ptx["ptx"] == ["compute_89"]
    text = run_cli(capsys, "arch", str(objects / "libscale.so"), "--gpu", "sm_70,sm_86,sm_121")
    assert text.code == 20
    assert f"sm_70: {objects / 'libscale.so'} has no kernels for it" in text.out
    assert "sm_86: every package carries kernels" in text.out
    assert "sm_121: every package carries kernels" in text.out  # sm_120f covers 12.1


@pytest.mark.pypi
def test_curand_library_and_its_wheel(curand_wheel: Path, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    with zipfile.ZipFile(curand_wheel) as archive:
        (member,) = [n for n in archive.namelist() if "/libcurand.so" in n]
        archive.extract(member, tmp_path)
    library = tmp_path / member
    found = read_file(library)
    assert found is not None
    in_sections = [e for e in found.entries if e.origin == "section"]
    assert as_cuobjdump_names(in_sections) == listed(library)
    assert len(in_sections) == 186  # cuobjdump -all lists 93 ELF + 93 PTX
    # the fatbins libcurand keeps in .data for the driver API: cuobjdump does not list them
    embedded = [e for e in found.entries if e.origin == "embedded"]
    assert len(embedded) > 1000
    assert {e.target.name for e in embedded} <= {e.target.name for e in in_sections}
    assert all(e.compression == "zstd" for e in in_sections)
    # the wheel read whole, from the zip, gives the same answer
    package = read_wheel(curand_wheel)
    (inside,) = package.files
    assert inside.name == member and inside.entries == found.entries
    result = run_cli(capsys, "arch", str(curand_wheel))
    assert result.code == 0, result.err
    assert "sass  sm_75 sm_80 sm_86 sm_87 sm_89 sm_90 sm_100 sm_110 sm_120" in result.out


def _wheel_with(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, body in members.items():
            archive.writestr(name, body, compress_type=zipfile.ZIP_STORED)
    return buffer.getvalue()


@pytest.mark.pypi
def test_a_remote_wheel_is_read_by_ranges(
    objects: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blob = _wheel_with({
        "pkg/__init__.py": b"x = 1\n" * 100_000,
        "pkg/data.bin": os.urandom(4 << 20),
        "pkg/libscale.so": (objects / "libscale.so").read_bytes(),
        "pkg-1.0.dist-info/RECORD": b"",
    })  # fmt: skip
    with FaultServer() as server:
        server.add("/pkg-1.0-py3-none-any.whl", blob)
        result = run_cli(capsys, "--json", "arch", f"{server.url}/pkg-1.0-py3-none-any.whl")
    assert result.code == 0, result.err
    (package,) = json.loads(result.out)["packages"]
    assert package["sass"] == ["sm_120f", "sm_86"] and package["ptx"] == ["compute_86"]
    assert package["size"] == len(blob)
    # the directory, the library and the first bytes of data.bin: not the 4.6 MB of the rest
    assert package["bytes_read"] < len(blob) // 4


def test_a_malformed_binary_is_exit_8_naming_it(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    broken = tmp_path / "libbroken.so"
    broken.write_bytes(b"\x7fELF\x02\x01\x01" + b"\x00" * 9 + b"\x03\x00>\x00" + b"\xff" * 60)
    result = run_cli(capsys, "arch", str(broken))
    assert result.code == 8
    assert f"{broken}: " in result.err and "ELF section headers" in result.err
    wheel = tmp_path / "bad-1.0-py3-none-any.whl"
    wheel.write_bytes(_wheel_with({"bad/lib.so": broken.read_bytes()}))
    result = run_cli(capsys, "--json", "arch", str(wheel))
    assert result.code == 8
    assert json.loads(result.out)["error"]["kind"] == "source-format"
    assert "bad-1.0-py3-none-any.whl!bad/lib.so" in json.loads(result.out)["error"]["message"]


def test_files_without_device_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("no kernels here\n")
    host = Path(shutil.which("true") or "/bin/true").resolve()
    assert read_entries(host.read_bytes(), str(host)) == []
    result = run_cli(capsys, "arch", str(text), str(host))
    assert result.code == 0
    assert f"{text}: 0 file(s) with GPU code" in result.out
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)  # reading it would block: refused before it is opened
    refused = run_cli(capsys, "arch", str(fifo))
    assert refused.code == 2 and "is neither a file nor a directory" in refused.err
    assert run_cli(capsys, "arch", str(tmp_path / "missing.so")).code == 2


def test_a_server_that_ignores_ranges_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    cubin = Path(__file__).parent.parent / "data" / "binaries" / "ptxas-12.9.86-sm_90a.cubin"
    blob = _wheel_with({"pkg/k.cubin": cubin.read_bytes()})
    with FaultServer() as server:
        server.add("/pkg-1.0-py3-none-any.whl", blob, Fault(ignore_range=True))
        url = f"{server.url}/pkg-1.0-py3-none-any.whl"
        result = run_cli(capsys, "arch", url)
        assert result.code == EXIT_CODES["source-format"]
        assert f"{url} does not honour Range requests" in result.err
        server.resources["/pkg-1.0-py3-none-any.whl"].faults.clear()
        assert "sass  sm_90a" in run_cli(capsys, "arch", url).out
