"""The import check's small parts: which failures are the host's, and where a stub driver
library is taken from."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from cudaup.install.store import Store
from cudaup.upgrade.verify import find_stub, host_reason
from tests.helpers import require_tool


@pytest.mark.parametrize(
    ("error", "host"),
    [
        (
            "ImportError: libcuda.so.1: cannot open shared object file: No such file or directory",
            True,
        ),
        (
            "OSError: libnvidia-ml.so.1: cannot open shared object file: No such file or directory",
            True,
        ),
        ("RuntimeError: Found no NVIDIA driver on your system.", True),
        ("RuntimeError: CUDA driver initialization failed: CUDA_ERROR_STUB_LIBRARY", True),
        (
            "ImportError: libcudart.so.13: cannot open shared object file: No such file or directory",
            False,
        ),
        ("ImportError: /e/lib/x.so: undefined symbol: _ZN3c105utils9unset_envEPKc", False),
        ("ModuleNotFoundError: No module named 'cupy'", False),
    ],
)
def test_host_reasons(error: str, host: bool) -> None:
    assert host_reason(error) is host


def _stub(toolkit: Path, place: str) -> Path:
    """A stub driver library built by gcc (NVIDIA's servers are out of reach here)."""
    require_tool("/usr/bin/gcc", "gcc")
    path = toolkit / place
    path.parent.mkdir(parents=True)
    source = toolkit / "stub.c"
    source.write_text("int cuInit(unsigned int flags) { (void)flags; return 34; }\n")
    subprocess.run(["/usr/bin/gcc", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o",
                    str(path), str(source)], check=True)  # fmt: skip
    return path


def test_the_stub_comes_from_the_newest_toolkit_cudaup_installed_that_has_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDAUP_HOME", str(tmp_path / "home"))
    store = Store.from_env()
    assert find_stub() is None  # an empty store; PyPI's toolkits ship none either
    for version in ("12.8.1", "13.0.2", "13.1.0"):
        (store.toolkits_dir / version / "bin").mkdir(parents=True)
        store.write_record(store.toolkits_dir / version, {"version": version, "components": []})
    assert find_stub() is None
    (store.toolkits_dir / "13.1.0" / "lib" / "stubs").mkdir(parents=True)
    (store.toolkits_dir / "13.1.0" / "lib" / "stubs" / "libcuda.so").write_bytes(b"\x7fELF")
    assert find_stub() is None  # not an object the loader could use
    older = _stub(store.toolkits_dir / "12.8.1", "lib64/stubs/libcuda.so")
    newer = _stub(store.toolkits_dir / "13.0.2", "targets/x86_64-linux/lib/stubs/libcuda.so")
    found = find_stub()
    assert found is not None and (found.path, found.label) == (newer, "CUDA 13.0.2")
    newer.chmod(0o666)  # a library anyone may write is code anyone may run: not loaded
    found = find_stub()
    assert found is not None and found.path == older


def test_a_long_import_error_keeps_the_loaders_line(tmp_path: Path) -> None:
    """sglang-kernel's error names its directory three times before the loader's line: in an
    environment with a long path the line sat past the first 1000 characters, and "this host
    has no driver" read as a real failure.  The check reads the whole error; a message shows
    its start and its end."""
    import json
    import sys

    from cudaup.upgrade.verify import IMPORTS, SHOWN_CHARACTERS, shown

    where = "/very/long/environment/" + "x" * 400 + "/site-packages/sgl_kernel/common_ops.so"
    (tmp_path / "deep_extension.py").write_text(
        f"raise ImportError({where!r} * 3 + ': libcuda.so.1: cannot open shared object file: "
        "No such file or directory')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", IMPORTS, json.dumps(["deep_extension"])],
        capture_output=True, text=True, check=True, cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    error = json.loads(done.stdout)["failures"]["deep_extension"]
    assert len(error) > SHOWN_CHARACTERS and host_reason(error)
    message = shown(error)
    assert len(message) <= SHOWN_CHARACTERS + 3
    assert message.startswith("ImportError: /very/long/environment/")
    assert message.endswith(
        "libcuda.so.1: cannot open shared object file: No such file or directory"
    )
