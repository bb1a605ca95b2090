"""What ``cudaup upgrade``'s import check says, through the CLI, on the loopback world: a
failure the environment already had is reported, not fatal; a new one names the environment,
never the work tree it was found in."""

from __future__ import annotations

import pytest

from cudaup.errors import EXIT_CODES
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
