"""The import check on a host without the NVIDIA driver, with a real torch extension.

A tiny Python extension (``tiny-ext``) calls ``c10::utils::unset_env`` (in libc10 since
torch 2.11; torch 2.10.0's libc10 lacks it) and the driver's ``cuInit``.  It is built by the
CUDA 13.0 nvcc (``pypi_toolkit``) against the headers of PyPI's torch 2.14.1 and linked
against its ``libc10.so`` and a ``libcuda.so.1``, then installed beside torch 2.14.1 (the
right pairing) and beside torch 2.10.0 (a wrong one) in two environments built by uv
(torch ``--no-deps``: libc10 needs nothing else).  This host has no ``libcuda.so.1``, so
importing the extension fails in both; the check must still tell the two apart:

* with no stub driver library at hand, by binding the extension's symbols to the libraries
  it needs (torch's libc10 via its RUNPATH): the right one passes, only ``cuInit`` left to
  the driver; the wrong one fails naming ``_ZN3c105utils9unset_envEPKc``;
* with a stub: loaded for real against it, offered as ``libcuda.so.1`` from a private
  directory.  NVIDIA's stub comes in the redist ``cuda_cudart`` archive
  (``targets/x86_64-linux/lib/stubs/libcuda.so``), whose servers tests cannot reach, so a
  stub built here by gcc (every entry point answering CUDA_ERROR_STUB_LIBRARY, 34) stands
  for it in a redist-shaped toolkit tree.
"""

from __future__ import annotations

import base64
import ctypes
import hashlib
import io
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from cudaup.core.driver import DriverInfo
from cudaup.errors import VerificationFailedError
from cudaup.plan.uv import find_uv
from cudaup.upgrade.changes import Change
from cudaup.upgrade.environment import read_environment
from cudaup.upgrade.verify import Verifier
from tests.helpers import require_tool

pytestmark = pytest.mark.pypi
RIGHT, WRONG = "2.14.1", "2.10.0"
MISSING = "_ZN3c105utils9unset_envEPKc"  # c10::utils::unset_env(char const*)
NO_DRIVER = DriverInfo(None, None, (), "none", ("no driver on this host",))
ADDED = [Change("add", None, None, "tiny-ext", "1.0", None, None, "the test's extension")]
SOURCE = r"""
#include <Python.h>
#include <c10/util/env.h>
extern "C" int cuInit(unsigned int flags);
static PyObject* probe(PyObject*, PyObject*) {
  c10::utils::unset_env("CUDAUP_TINY");
  return PyLong_FromLong(static_cast<long>(cuInit(0)));
}
static PyMethodDef methods[] = {{"probe", probe, METH_NOARGS, nullptr}, {nullptr, nullptr, 0, nullptr}};
static PyModuleDef module = {PyModuleDef_HEAD_INIT, "_tiny", nullptr, -1, methods};
PyMODINIT_FUNC PyInit__tiny(void) { return PyModule_Create(&module); }
"""
STUB = "int cuInit(unsigned int flags) { (void)flags; return 34; }\n"


def _wheel(directory: Path, extension: bytes) -> Path:
    """tiny-ext 1.0: ``tiny/__init__.py`` importing ``tiny/_tiny<suffix>``; requires torch."""
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    info = "tiny_ext-1.0.dist-info"
    members: dict[str, bytes] = {
        "tiny/__init__.py": b"from tiny._tiny import probe\n",
        f"tiny/_tiny{suffix}": extension,
        f"{info}/METADATA": b"Metadata-Version: 2.1\nName: tiny-ext\nVersion: 1.0\nRequires-Dist: torch\n",
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: false\nTag: cp311-cp311-linux_x86_64\n",
        f"{info}/top_level.txt": b"tiny\n",
    }  # fmt: skip
    record = []
    for path, data in members.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    members[f"{info}/RECORD"] = ("\n".join([*record, f"{info}/RECORD,,"]) + "\n").encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, data in members.items():
            archive.writestr(path, data)
    wheel = directory / "tiny_ext-1.0-cp311-cp311-linux_x86_64.whl"
    wheel.write_bytes(buffer.getvalue())
    return wheel


def _uv(*arguments: str) -> None:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("UV_")}
    subprocess.run([find_uv(), "pip", "install", "--no-config", "--quiet", *arguments],
                   check=True, env=environment)  # fmt: skip


def _has_driver() -> bool:
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


@pytest.fixture(scope="module")
def paired(
    tmp_path_factory: pytest.TempPathFactory, pypi_toolkit: Path
) -> Iterator[dict[str, Path]]:
    """version → the python of an environment holding that torch and tiny-ext; and "stubs"
    → a gcc-built stub driver library in a redist-shaped toolkit tree.  Its 3 GB are removed
    when the module is done: the suite's later tests need the disk."""
    if _has_driver():
        pytest.skip("this host has the NVIDIA driver: what is checked here is a host without one")
    if sys.version_info[:2] != (3, 11):
        pytest.fail("the extension is built for CPython 3.11, the interpreter the suite runs on")
    require_tool("/usr/bin/gcc", "gcc")
    base = tmp_path_factory.mktemp("driverless")
    cache = base / "uv-cache"
    pythons: dict[str, Path] = {}
    for version in (RIGHT, WRONG):
        root = base / f"torch-{version}"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
        pythons[version] = root / "bin" / "python"
        _uv("--python", str(pythons[version]), "--cache-dir", str(cache), "--no-deps",
            f"torch=={version}")  # fmt: skip
    toolkit = base / "toolkit"
    stubs = toolkit / "targets" / "x86_64-linux" / "lib" / "stubs"
    stubs.mkdir(parents=True)
    (base / "stub.c").write_text(STUB)
    subprocess.run(["/usr/bin/gcc", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o",
                    str(stubs / "libcuda.so"), str(base / "stub.c")], check=True)  # fmt: skip
    site = Path(str(pythons[RIGHT].parent.parent / "lib" / "python3.11" / "site-packages"))
    torch = site / "torch"
    (base / "tiny.cu").write_text(SOURCE)
    built = base / "_tiny.so"
    done = subprocess.run(
        [str(pypi_toolkit / "bin" / "nvcc"), "-shared", "-Xcompiler", "-fPIC", "-std=c++17",
         f"-I{torch / 'include'}", f"-I{sysconfig.get_paths()['include']}", "-o", str(built),
         str(base / "tiny.cu"), f"-L{torch / 'lib'}", "-lc10", f"-L{stubs}", "-lcuda",
         "-Xlinker", "-rpath,$ORIGIN/../torch/lib"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        pytest.fail(f"nvcc could not build the extension: {done.stderr[-2000:]}")
    wheel = _wheel(base, built.read_bytes())
    for python in pythons.values():
        _uv("--python", str(python), "--no-deps", "--no-index", str(wheel))
    yield {**pythons, "stubs": toolkit}
    shutil.rmtree(base)


def _check(python: Path, stubs: list[Path]) -> str:
    environment = read_environment(str(python))
    check, _facts, _kept = Verifier(NO_DRIVER, stubs=stubs).imports(
        python, environment, ADDED, environment
    )
    assert check.status == "ok"
    return check.detail


def _refused(python: Path, stubs: list[Path], original: Path) -> VerificationFailedError:
    environment = read_environment(str(python))
    with pytest.raises(VerificationFailedError) as caught:
        Verifier(NO_DRIVER, stubs=stubs).imports(
            python, environment, ADDED, read_environment(str(original))
        )
    assert caught.value.step == "import" and caught.value.package == "tiny-ext"
    return caught.value


def test_this_host_cannot_import_it_at_all(paired: dict[str, Path]) -> None:
    done = subprocess.run(
        [str(paired[RIGHT]), "-c", "import tiny"], capture_output=True, text=True, check=False
    )
    assert "libcuda.so.1: cannot open shared object file" in done.stderr


def test_without_a_stub_the_right_torch_passes_by_its_symbols(paired: dict[str, Path]) -> None:
    detail = _check(paired[RIGHT], [])
    assert "tiny: 1 shared object bound by symbol" in detail
    assert "only 1 driver entry point is left to the driver" in detail


def test_without_a_stub_the_wrong_torch_fails_naming_the_symbol(paired: dict[str, Path]) -> None:
    error = _refused(paired[WRONG], [], paired[RIGHT])
    assert f"_tiny.cpython-311-x86_64-linux-gnu.so: undefined symbol: {MISSING}" in str(error)
    # The tree checked stands for a work tree: it is named as the environment it replaces.
    assert str(paired[RIGHT].parent.parent) in str(error)
    assert str(paired[WRONG].parent.parent) not in str(error)


def test_with_a_stub_the_right_torch_loads_for_real(paired: dict[str, Path]) -> None:
    detail = _check(paired[RIGHT], [paired["stubs"]])
    assert f"tiny loaded against the stub driver library of {paired['stubs']}" in detail


def test_with_a_stub_the_wrong_torch_fails_in_the_loaders_words(paired: dict[str, Path]) -> None:
    error = _refused(paired[WRONG], [paired["stubs"]], paired[RIGHT])
    assert f"import tiny: ImportError: {paired[RIGHT].parent.parent}/lib/" in str(error)
    assert str(error).endswith(
        f"_tiny.cpython-311-x86_64-linux-gnu.so: undefined symbol: {MISSING}"
    )
    assert "cudaup-stub-" not in str(error)


def test_the_same_failure_before_the_upgrade_is_reported_not_fatal(paired: dict[str, Path]) -> None:
    environment = read_environment(str(paired[WRONG]))
    check, _facts, _kept = Verifier(NO_DRIVER, stubs=[]).imports(
        paired[WRONG], environment, ADDED, environment
    )
    assert check.status == "ok"
    assert "import tiny failed before the upgrade too, for the same cause" in check.detail
    assert MISSING in check.detail
