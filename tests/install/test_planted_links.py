"""Symbolic links planted below cudaup's home, its cache and a prefix, end to end.

Issue #20: with ``$CUDAUP_HOME/toolkits`` or ``$CUDAUP_HOME/bin`` replaced by a link to
another directory, ``cudaup install`` wrote into that directory.  Each case runs the real
CLI in a sandboxed filesystem (:mod:`tests.sandbox`), snapshotted before and after: the
install is refused with exit 22 naming the link, and nothing changed anywhere but the
cache (and the home, for the links that are not in the home).  The home, the cache and
the prefix themselves may be links: the user made those.
"""

from __future__ import annotations

import shutil

import pytest

from cudaup.errors import EXIT_CODES
from tests.fakenvidia.server import FakeNvidiaServer
from tests.helpers import CliResult, point_env_at, run_cli
from tests.sandbox import Sandbox, sandbox  # noqa: F401 - fixture

RELEASE = "13.0.1"


def install(capsys: pytest.CaptureFixture[str], *extra: str) -> CliResult:
    return run_cli(
        capsys, "install", RELEASE, "--channel", "redist", "--components", "nvcc",
        "--platform", "linux-x86_64", "--json", *extra,
    )  # fmt: skip


@pytest.fixture
def box(
    sandbox: Sandbox,  # noqa: F811 - fixture
    fake_nvidia: FakeNvidiaServer,
    monkeypatch: pytest.MonkeyPatch,
) -> Sandbox:
    point_env_at(monkeypatch, fake_nvidia)
    (sandbox.root / "elsewhere").mkdir()  # where a planted link points
    (sandbox.root / "elsewhere" / "kept").write_text("someone's file\n")
    return sandbox


#: (id, the directory a link replaces, relative to the sandbox's root)
PLANTED = [
    ("home-toolkits", "opt/cudaup/home/toolkits"),
    ("home-bin", "opt/cudaup/home/bin"),
    ("home-locks", "opt/cudaup/home/locks"),
    ("cache-downloads", "var/cache/cudaup/downloads"),
    ("cache-unpacked", "var/cache/cudaup/unpacked"),
    ("cache-locks", "var/cache/cudaup/locks"),
]


@pytest.mark.parametrize("planted", [p[1] for p in PLANTED], ids=[p[0] for p in PLANTED])
def test_a_link_planted_below_the_home_or_the_cache_is_refused(
    box: Sandbox, capsys: pytest.CaptureFixture[str], planted: str
) -> None:
    link = box.root / planted
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(box.root / "elsewhere")
    before = box.snapshot()
    result = install(capsys)
    assert result.code == EXIT_CODES["untrusted-path"], result.err
    assert f"{link} is a symbolic link" in result.err and "internal error" not in result.err
    assert result.err.count("\n") == 1
    assert result.json()["error"]["kind"] == "untrusted-path"
    after = box.snapshot()
    assert list((box.root / "elsewhere").iterdir()) == [box.root / "elsewhere" / "kept"]
    assert box.changed_outside(before, after, [box.cache, box.home]) == set()
    assert not (box.home / "toolkits" / RELEASE).exists()


def test_the_same_install_without_the_link_writes_only_below_home_and_cache(
    box: Sandbox, capsys: pytest.CaptureFixture[str]
) -> None:
    """The control: the harness sees the writes, and they are all where they belong."""
    before = box.snapshot()
    result = install(capsys)
    assert result.code == 0, result.err
    after = box.snapshot()
    assert "opt/cudaup/home/toolkits/13.0.1/bin/nvcc" in after
    assert "opt/cudaup/home/bin/nvcc" in after  # the shim
    assert box.changed_outside(before, after, [box.cache, box.home]) == set()


def test_the_home_the_cache_and_the_prefix_may_be_links_the_user_made(
    box: Sandbox, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    real = box.root / "real"
    for name in ("home", "cache", "prefix"):
        (real / name).mkdir(parents=True)
        (box.root / f"link-{name}").symlink_to(real / name)
    monkeypatch.setenv("CUDAUP_HOME", str(box.root / "link-home"))
    monkeypatch.setenv("CUDAUP_CACHE_DIR", str(box.root / "link-cache"))
    assert (result := install(capsys)).code == 0, result.err
    assert (real / "home" / "toolkits" / RELEASE / "bin" / "nvcc").is_file()
    prefix = box.root / "link-prefix" / "cuda"
    assert (result := install(capsys, "--prefix", str(prefix))).code == 0, result.err
    assert (real / "prefix" / "cuda" / "bin" / "nvcc").is_file()


def test_a_link_planted_in_a_prefix_is_swapped_out_not_written_through(
    box: Sandbox, capsys: pytest.CaptureFixture[str]
) -> None:
    """Adding a component to a prefix whose ``include/`` became a link to someone's
    directory: the old tree is renamed aside and deleted, the link with it, never what
    it points to."""
    prefix = box.prefix / "cuda"
    first = install(capsys, "--prefix", str(prefix), "--components", "cudart")
    assert first.code == 0, first.err
    shutil.rmtree(prefix / "include")
    (prefix / "include").symlink_to(box.root / "elsewhere")
    before = box.snapshot()
    assert (result := install(capsys, "--prefix", str(prefix))).code == 0, result.err
    after = box.snapshot()
    assert not (prefix / "include").is_symlink() and (prefix / "bin" / "nvcc").is_file()
    assert list((box.root / "elsewhere").iterdir()) == [box.root / "elsewhere" / "kept"]
    assert box.changed_outside(before, after, [box.cache, box.home, box.prefix]) == set()
