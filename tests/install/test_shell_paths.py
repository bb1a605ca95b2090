"""Paths cudaup prints into shell lines hold no control characters.

``cudaup env`` prints ``export PATH=…`` lines and the shims embed the home: a newline in
``CUDAUP_HOME`` or in a ``--prefix`` would start a command of its own in whatever shell
evaluates them (issue #20).  Each is refused with exit 2 before anything is written,
through the CLI, in a sandboxed filesystem snapshotted before and after.
"""

from __future__ import annotations

import pytest

from cudaup.errors import EXIT_CODES
from tests.fakenvidia.server import FakeNvidiaServer
from tests.helpers import point_env_at, run_cli
from tests.sandbox import Sandbox, sandbox  # noqa: F401 - fixture

INSTALL = ("install", "13.0.1", "--channel", "redist", "--components", "nvcc",
           "--platform", "linux-x86_64", "--json")  # fmt: skip
HOSTILE = ["home\ntouch /tmp/owned", "home\r", "home\x1b]0;x\x07", "home\tx", "home\u2028x"]


@pytest.mark.parametrize("name", HOSTILE, ids=["newline", "cr", "escape", "tab", "line-sep"])
@pytest.mark.parametrize(
    "argv", [INSTALL, ("env",), ("list",), ("which", "nvcc")], ids=lambda a: a[0]
)
def test_a_control_character_in_the_home_is_exit_2(
    sandbox: Sandbox,  # noqa: F811 - fixture
    fake_nvidia: FakeNvidiaServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    name: str,
    argv: tuple[str, ...],
) -> None:
    point_env_at(monkeypatch, fake_nvidia)
    monkeypatch.setenv("CUDAUP_HOME", str(sandbox.root / "opt" / name))
    before = sandbox.snapshot()
    result = run_cli(capsys, *argv, *(() if "--json" in argv else ("--json",)))
    assert result.code == EXIT_CODES["usage"], result.err
    assert "CUDAUP_HOME=" in result.err and "holds a control character" in result.err
    assert result.err.count("\n") == 1 and "internal error" not in result.err
    assert result.json()["error"]["kind"] == "usage"
    assert sandbox.changed(before, sandbox.snapshot()) == set()


def test_a_control_character_in_a_prefix_is_exit_2(
    sandbox: Sandbox,  # noqa: F811 - fixture
    fake_nvidia: FakeNvidiaServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    point_env_at(monkeypatch, fake_nvidia)
    prefix = sandbox.prefix / "cuda\nexport PATH=/tmp/evil"
    before = sandbox.snapshot()
    result = run_cli(capsys, *INSTALL, "--prefix", str(prefix))
    assert result.code == EXIT_CODES["usage"], result.err
    assert "--prefix" in result.err and "holds a control character" in result.err
    assert sandbox.changed(before, sandbox.snapshot()) == set()
    # The control: a prefix with a space and non-ASCII letters is a name like any other.
    fine = sandbox.prefix / "CUDA Toolkit é"
    assert (result := run_cli(capsys, *INSTALL, "--prefix", str(fine))).code == 0, result.err
    assert (fine / "bin" / "nvcc").is_file()
