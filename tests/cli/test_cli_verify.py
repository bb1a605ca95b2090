"""What ``cudaup upgrade``'s import check says, through the CLI, on the loopback world: a
failure the environment already had is reported, not fatal; a new one names the environment,
never the work tree it was found in."""

from __future__ import annotations

import subprocess
import sysconfig
from pathlib import Path

import pytest

from cudaup.errors import EXIT_CODES
from cudaup.install.store import Store
from tests.helpers import require_tool
from tests.plan.pyindex import IndexServer
from tests.upgrade.conftest import MakeEnv
from tests.upgrade.world import tree_state, upgrade, wheel

NO_TOOLKIT = ("--no-toolkit",)


def _bindings(server: IndexServer, version: str, init: str) -> None:
    """Replace cuda-bindings ``version`` by a build whose ``cuda/__init__.py`` is ``init``."""
    server.root("pypi").pages.pop("cuda-bindings", None)
    for other in ("12.8.0", "12.9.0", "13.0.3", "13.2.0"):
        files = {"cuda/bindings/__init__.py": f"__version__ = '{other}'\n"}
        if other == version:
            files["cuda/__init__.py"] = init
        server.add("pypi", *wheel("cuda-bindings", other, files=files))


def test_a_failure_the_environment_already_had_is_reported_not_fatal(
    index_server: IndexServer, make_env: MakeEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = "raise ImportError('cuda needs the libcuda of a driver this box never had')\n"
    _bindings(index_server, "12.8.0", broken)
    python = make_env()
    _bindings(index_server, "13.0.3", broken)  # the 13.0 build fails the same way
    result = upgrade(capsys, python, "13.0", "--yes", "--json", *NO_TOOLKIT)
    assert result.code == 0, result.err
    imported = next(c for c in result.json()["verification"] if c["step"] == "import")
    assert imported["status"] == "ok"
    assert (
        "import cuda failed before the upgrade too, for the same cause "
        "(ImportError: cuda needs the libcuda of a driver this box never had)"
    ) in imported["detail"]


def test_a_new_failure_names_the_environment_not_the_work_tree(
    index_server: IndexServer, make_env: MakeEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    python = make_env()
    root = python.parent.parent
    state = tree_state(root)
    _bindings(index_server, "13.0.3", "raise ImportError('cannot load ' + __file__)\n")
    result = upgrade(capsys, python, "13.0", "--yes", "--json", *NO_TOOLKIT)
    assert result.code == EXIT_CODES["verification-failed"]
    error = result.json()["error"]
    assert error["details"] == {"step": "import", "package": "cuda-bindings"}
    assert f"import cuda: ImportError: cannot load {root}/lib/" in error["message"]
    assert "/site-packages/cuda/__init__.py; it was rolled back" in error["message"]
    assert "work-" not in error["message"] and ".cudaup-snapshots" not in error["message"]
    assert tree_state(root) == state


# -- an extension that links the driver, on a host without one -------------------------------
EXTENSION = r"""
#include <Python.h>
int cuInit(unsigned int flags);
int cudaRuntimeGetVersion(int *version);
int cudaLaunchHostFuncV2(void);
static PyObject* probe(PyObject* self, PyObject* args) {
  int version = 0;
  cudaRuntimeGetVersion(&version);
  return PyLong_FromLong(version + cuInit(0) + cudaLaunchHostFuncV2());
}
static PyMethodDef methods[] = {{"probe", probe, METH_NOARGS, 0}, {0, 0, 0, 0}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_driver", 0, -1, methods};
PyMODINIT_FUNC PyInit__driver(void) { return PyModule_Create(&module); }
"""


def _gcc(out: Path, source: str, *extra: str) -> bytes:
    require_tool("/usr/bin/gcc", "gcc")
    code = out.with_suffix(".c")
    code.write_text(source)
    subprocess.run(
        ["/usr/bin/gcc", "-shared", "-fPIC", "-o", str(out), str(code), *extra], check=True
    )
    return out.read_bytes()


def _driver_world(server: IndexServer, build: Path, *, runtime_has_it: bool) -> None:
    """cuda-bindings 13.0.3 becomes a build whose ``cuda.bindings._driver`` links
    ``libcuda.so.1`` (a gcc stub at link time, absent here as on any host without the
    driver) and ``libcudart.so.13`` from nvidia-cuda-runtime 13.0.96 (``$ORIGIN``), calling
    ``cudaLaunchHostFuncV2``; that runtime defines it (the right pairing) or not."""
    build.mkdir()
    _gcc(build / "libcuda.so", "int cuInit(unsigned int f) { return 34 + (int)f; }\n",
         "-Wl,-soname,libcuda.so.1")  # fmt: skip
    base = "int cudaRuntimeGetVersion(int *v) { *v = 13000; return 0; }\n"
    full = base + "int cudaLaunchHostFuncV2(void) { return 0; }\n"
    # Linked against a runtime that has it; installed with the one the pairing has.
    linked = _gcc(build / "libcudart.so.13", full, "-Wl,-soname,libcudart.so.13")
    (build / "shipped").mkdir()
    shipped = (
        linked
        if runtime_has_it
        else _gcc(build / "shipped" / "libcudart.so.13", base, "-Wl,-soname,libcudart.so.13")
    )
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    extension = _gcc(
        build / f"_driver{suffix}", EXTENSION, f"-I{sysconfig.get_paths()['include']}",
        f"-L{build}", "-l:libcudart.so.13", "-lcuda",
        "-Wl,-rpath,$ORIGIN/../../nvidia/cu13/lib",
    )  # fmt: skip
    pages = server.root("pypi").pages
    pages.pop("nvidia-cuda-runtime", None)
    for version in ("13.0.96", "13.2.51"):
        files: dict[str, bytes] = {
            "nvidia/cu13/__init__.py": f"version = '{version}'\n".encode(),
            "nvidia/cu13/lib/libcudart.so.13": shipped,
        }
        server.add("pypi", *wheel("nvidia-cuda-runtime", version, files=files))
    pages.pop("cuda-bindings", None)
    for version in ("12.8.0", "12.9.0", "13.0.3", "13.2.0"):
        files = {"cuda/bindings/__init__.py": f"__version__ = '{version}'\n".encode()}
        if version == "13.0.3":
            files["cuda/bindings/__init__.py"] += b"from cuda.bindings import _driver\n"
            files[f"cuda/bindings/_driver{suffix}"] = extension
        server.add("pypi", *wheel("cuda-bindings", version, files=files))


def test_an_extension_that_links_the_driver_is_checked_by_its_symbols(
    index_server: IndexServer,
    make_env: MakeEnv,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The issue's sglang-kernel case: this host has no libcuda.so.1, so the new build cannot
    be imported; it used to roll back (exit 19) for that alone.  Now its symbols are bound
    to the libraries it needs, and only the driver's entry point is left to the driver."""
    python = make_env()
    _driver_world(index_server, tmp_path / "build", runtime_has_it=True)
    result = upgrade(capsys, python, "13.0", "--yes", "--json", *NO_TOOLKIT)
    assert result.code == 0, result.err
    imported = next(c for c in result.json()["verification"] if c["step"] == "import")
    assert (
        "cuda.bindings: 1 shared object bound by symbol to the libraries it needs"
        in imported["detail"]
    )
    assert "only 1 driver entry point is left to the driver" in imported["detail"]


def test_an_extension_paired_with_the_wrong_runtime_fails_naming_the_symbol(
    index_server: IndexServer,
    make_env: MakeEnv,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    python = make_env()
    root = python.parent.parent
    state = tree_state(root)
    _driver_world(index_server, tmp_path / "build", runtime_has_it=False)
    result = upgrade(capsys, python, "13.0", "--yes", "--json", *NO_TOOLKIT)
    assert result.code == EXIT_CODES["verification-failed"], result.err
    error = result.json()["error"]
    assert error["details"] == {"step": "import", "package": "cuda-bindings"}
    assert f"import cuda.bindings: {root}/lib/" in error["message"]  # the loader's line
    assert "/cuda/bindings/_driver" in error["message"]
    assert ": undefined symbol: cudaLaunchHostFuncV2; it was rolled back" in error["message"]
    assert tree_state(root) == state


def test_with_a_stub_in_a_toolkit_cudaup_installed_the_extension_is_loaded_for_real(
    index_server: IndexServer,
    make_env: MakeEnv,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A redist-shaped toolkit in the store has ``targets/x86_64-linux/lib/stubs/libcuda.so``
    (built by gcc here: NVIDIA's servers are out of reach); the check offers it to the work
    tree's interpreter as libcuda.so.1, and the real loader binds the rest."""
    python = make_env()
    _driver_world(index_server, tmp_path / "build", runtime_has_it=True)
    store = Store.from_env()
    toolkit = store.toolkits_dir / "13.0.2"
    stubs = toolkit / "targets" / "x86_64-linux" / "lib" / "stubs"
    stubs.mkdir(parents=True)
    _gcc(stubs / "libcuda.so", "int cuInit(unsigned int f) { return 34 + (int)f; }\n",
         "-Wl,-soname,libcuda.so.1")  # fmt: skip
    store.write_record(toolkit, {"version": "13.0.2", "components": ["cuda_cudart"]})
    result = upgrade(capsys, python, "13.0", "--yes", "--json", *NO_TOOLKIT)
    assert result.code == 0, result.err
    imported = next(c for c in result.json()["verification"] if c["step"] == "import")
    assert (
        "cuda.bindings loaded against the stub driver library of CUDA 13.0.2" in imported["detail"]
    )
    assert "bound by symbol" not in imported["detail"]
