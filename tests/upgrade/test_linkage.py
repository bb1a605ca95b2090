"""Binding an object's symbols as ``ld.so`` would, without the driver: objects built by gcc,
and the real loader's answer for the same objects as the reference."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from cudaup.upgrade.linkage import Linker
from tests.helpers import require_tool

GCC = "/usr/bin/gcc"
PYTHON = Path(os.path.realpath(sys.executable))


def _cc(out: Path, source: str, *extra: str) -> Path:
    require_tool(GCC, "gcc")
    out.parent.mkdir(parents=True, exist_ok=True)
    code = out.with_suffix(".c")
    code.write_text(source)
    subprocess.run([GCC, "-shared", "-fPIC", "-o", str(out), str(code), *extra], check=True)
    return out


def _world(tmp_path: Path, dep_source: str = "int dep_f(void) { return 7; }\n") -> Path:
    """site/pkg/ext.so needing site/pkg/deps/libdep.so ($ORIGIN) and libcuda.so.1, whose
    stub (linked against at build time) is then taken away, as on a host with no driver."""
    stubs = tmp_path / "stubs"
    _cc(stubs / "libcuda.so", "int cuInit(unsigned f) { return 34 + (int)f; }\nint gpuMagic(void) { return 1; }\n",
        "-Wl,-soname,libcuda.so.1")  # fmt: skip
    deps = tmp_path / "site" / "pkg" / "deps"
    _cc(deps / "libdep.so", "int dep_f(void) { return 7; }\n", "-Wl,-soname,libdep.so")
    ext = _cc(
        tmp_path / "site" / "pkg" / "ext.so",
        "int dep_f(void);\nint cuInit(unsigned);\nint use(void) { return dep_f() + cuInit(0); }\n",
        f"-L{deps}", "-ldep", f"-L{stubs}", "-lcuda", "-Wl,-rpath,$ORIGIN/deps",
    )  # fmt: skip
    _cc(deps / "libdep.so", dep_source, "-Wl,-soname,libdep.so")  # what is there now
    return ext


def _loader_says(path: Path, library_path: Path) -> str:
    """The real loader's answer, with a libcuda.so.1 it can find."""
    done = subprocess.run(
        [sys.executable, "-c", f"import ctypes\ntry:\n ctypes.CDLL({str(path)!r})\nexcept OSError as e:\n print(e)"],
        capture_output=True, text=True, env={**os.environ, "LD_LIBRARY_PATH": str(library_path)},
        check=True,
    )  # fmt: skip
    return done.stdout.strip()


def _driver_dir(tmp_path: Path) -> Path:
    found = tmp_path / "driver"
    found.mkdir(exist_ok=True)
    if not (found / "libcuda.so.1").exists():
        (found / "libcuda.so.1").symlink_to(tmp_path / "stubs" / "libcuda.so")
    return found


def test_only_the_drivers_entry_points_stay_unbound(tmp_path: Path) -> None:
    ext = _world(tmp_path)
    answer = Linker([tmp_path / "site"], PYTHON).check(ext)
    assert answer.problem is None
    assert answer.missing_driver == ("libcuda.so.1",) and answer.driver_symbols == 1
    assert answer.bound >= 1  # dep_f, from $ORIGIN/deps
    assert _loader_says(ext, _driver_dir(tmp_path)) == ""  # the loader agrees: it loads


def test_a_symbol_the_library_beside_it_lacks_is_the_loaders_line(tmp_path: Path) -> None:
    ext = _world(tmp_path, dep_source="int other_f(void) { return 1; }\n")
    answer = Linker([tmp_path / "site"], PYTHON).check(ext)
    assert answer.problem == f"{ext}: undefined symbol: dep_f"
    assert answer.missing_driver == ("libcuda.so.1",)
    assert answer.problem == _loader_says(ext, _driver_dir(tmp_path))


def test_a_missing_library_is_the_loaders_line(tmp_path: Path) -> None:
    ext = _world(tmp_path)
    (tmp_path / "site" / "pkg" / "deps" / "libdep.so").unlink()
    answer = Linker([tmp_path / "site"], PYTHON).check(ext)
    assert answer.problem == "libdep.so: cannot open shared object file: No such file or directory"
    assert answer.problem == _loader_says(ext, _driver_dir(tmp_path))
    assert answer.missing_driver == ("libcuda.so.1",)  # it needs the driver too: it is checked


def test_a_name_only_the_driver_library_defines_but_no_entry_point_is_not_excused(
    tmp_path: Path,
) -> None:
    _world(tmp_path)
    stubs = tmp_path / "stubs"
    ext = _cc(tmp_path / "site" / "other" / "magic.so", "int gpuMagic(void);\nint g(void) { return gpuMagic(); }\n",
              f"-L{stubs}", "-lcuda")  # fmt: skip
    answer = Linker([tmp_path / "site"], PYTHON).check(ext)
    assert answer.problem == f"{ext}: undefined symbol: gpuMagic"


def test_a_library_found_by_name_in_site_packages_and_already_loaded(tmp_path: Path) -> None:
    """No RUNPATH: as after ``import torch``, the library is the one already loaded."""
    site = tmp_path / "site"
    base = _cc(site / "torch" / "lib" / "libbase.so", "int base_f(void) { return 1; }\n",
               "-Wl,-soname,libbase.so")  # fmt: skip
    ext = _cc(site / "ext" / "ext.so", "int base_f(void);\nint h(void) { return base_f(); }\n",
              f"-L{base.parent}", "-lbase")  # fmt: skip
    assert Linker([site], PYTHON).check(ext).problem is None
    assert Linker([site], PYTHON).check(ext, [base]).problem is None
    base.unlink()
    answer = Linker([site], PYTHON).check(ext)
    assert answer.problem == "libbase.so: cannot open shared object file: No such file or directory"


def test_what_is_not_a_shared_object(tmp_path: Path) -> None:
    text = tmp_path / "notes.so"
    text.write_text("not an object")
    assert (
        Linker([tmp_path], PYTHON).check(text).problem
        == f"{text}: cannot read it as a shared object"
    )
