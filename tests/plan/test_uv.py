"""How plan calls uv: found and checked, pages written safely, answers read and kept."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from cudaup.errors import InsufficientSpaceError, NetworkError, SourceFormatError, UsageError
from cudaup.plan import uv
from cudaup.plan.attempt import LineResolver
from cudaup.plan.indexes import load_indexes
from cudaup.plan.uv import CompileJob, UvRunner, find_uv, uv_environment, write_local_index
from cudaup.resolve.pypi import DistFile
from tests.helpers import lingering_wrapper, started_child, wait_until_ended
from tests.osfaults import ROOT_ONLY, tmpfs
from tests.plan.builders import PURE, wheel
from tests.plan.pyindex import IndexServer


def _file(name: str, url: str, sha: str | None = "a" * 64) -> DistFile:
    return DistFile(name, url, sha, None, ">=3.10", False, True)


def test_local_index_pages(tmp_path: Path) -> None:
    url = write_local_index(
        tmp_path / "cu130",
        {
            "Torch": [
                _file(
                    "torch-2.11.0+cu130-cp312-cp312-manylinux_2_28_x86_64.whl",
                    "https://h/t.whl#frag",
                )
            ]
        },
        "test",
    )
    assert url.startswith("file://")
    page = (tmp_path / "cu130" / "torch" / "index.html").read_text()
    assert f'href="https://h/t.whl#sha256={"a" * 64}"' in page
    assert 'data-requires-python="&gt;=3.10"' in page and 'data-core-metadata="true"' in page


@pytest.mark.parametrize(
    ("project", "file_url", "message"),
    [
        ("../../etc", "https://h/x.whl", "names a project"),
        ("a/b", "https://h/x.whl", "names a project"),
        ("torch", "file:///etc/shadow", "not HTTP"),
        ("torch", "ftp://h/x.whl", "not HTTP"),
    ],
)
def test_local_index_refuses_what_could_steer_it(
    tmp_path: Path, project: str, file_url: str, message: str
) -> None:
    with pytest.raises(SourceFormatError, match=message):
        write_local_index(
            tmp_path / "i", {project: [_file("x-1.0-py3-none-any.whl", file_url)]}, "test"
        )
    assert not any((tmp_path.parent).glob("etc*"))


def test_answers_uv_can_give() -> None:
    unsat = uv._answer(
        1,
        "",
        "error: No solution found when resolving dependencies:\n  cause: Because a==1 depends on b<0, we can conclude that a==1 cannot be used.\n\nhint: more",
    )
    assert (
        not unsat.ok
        and unsat.reason == "Because a==1 depends on b<0, we can conclude that a==1 cannot be used."
    )
    missed = uv._answer(
        1,
        "",
        "error: No solution found when resolving dependencies:\n  cause: x\n\nhint: Packages were unavailable because the network was disabled.",
    )
    assert not missed.ok and missed.reason == "x"  # an offline miss is no resolution, hint dropped
    with pytest.raises(NetworkError, match="uv could not fetch http://127.0.0.1:9/simple/torch/"):
        uv._answer(
            2,
            "",
            "error: Request failed after 3 retries\n  cause: Failed to fetch: `http://127.0.0.1:9/simple/torch/`\n  cause: tcp connect error",
        )
    with pytest.raises(SourceFormatError, match="uv could not resolve the plan"):
        uv._answer(2, "", "error: Failed to parse metadata from built wheel")
    with pytest.raises(SourceFormatError):
        uv._answer(0, "this is not a requirements file\n", "")


def test_the_environment_keeps_nothing_of_uvs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UV_INDEX_STRATEGY", "unsafe-best-match")
    monkeypatch.setenv("UV_NO_CONFIG", "0")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy:3128")
    environment = uv_environment(30.0)
    assert "UV_INDEX_STRATEGY" not in environment and "UV_NO_CONFIG" not in environment
    assert environment["HTTPS_PROXY"] == "http://proxy:3128"  # the network settings stay
    assert environment["UV_PYTHON_DOWNLOADS"] == "never"


def test_kept_answers(index_server: IndexServer, tmp_path: Path) -> None:
    index_server.add("pypi", *wheel("six", "1.17.0", tag=PURE))
    runner = UvRunner(tmp_path / "uv", tmp_path, 30.0, answers=tmp_path / "answers")
    job = CompileJob(("six",), (), (3, 12), "x86_64-manylinux_2_39", (), index_server.url("pypi"))
    first = runner.compile(job)
    assert first.ok and first.closure is not None and first.closure.get("six") is not None
    asked = len(index_server.requests())
    assert runner.compile(job).ok and len(index_server.requests()) == asked  # kept
    (entry,) = (tmp_path / "answers").rglob("*.json")
    document = json.loads(entry.read_text())
    document["time"] -= 3600  # older than the index TTL: asked again
    entry.write_text(json.dumps(document))
    assert runner.compile(job).ok and len(index_server.requests()) > asked
    entry.write_text("{not json")
    asked = len(index_server.requests())
    assert runner.compile(job).ok and len(index_server.requests()) > asked


def test_an_offline_failure_is_asked_again_online(
    index_server: IndexServer, tmp_path: Path
) -> None:
    """Offline, uv answers from the pages it cached without a word of what was published
    since: a resolution it finds is a true witness, a failure is asked of the index."""
    index_server.add("pypi", *wheel("six", "1.16.0", tag=PURE))
    runner = UvRunner(tmp_path / "uv", tmp_path, 30.0)
    job = CompileJob(("six",), (), (3, 12), "x86_64-manylinux_2_39", (), index_server.url("pypi"))
    assert runner.compile(job).ok  # uv's cache holds six's page now: 1.16.0 alone
    index_server.add("pypi", *wheel("six", "1.17.0", tag=PURE))
    newer = replace(job, requirements=("six>=1.17",))
    stale = runner.compile(replace(newer, offline=True))
    # What uv does: no word that it missed 1.17.0 (no "network was disabled" hint).
    assert not stale.ok and stale.reason is not None and "network" not in stale.reason
    resolver: Any = SimpleNamespace(runner=runner)
    answer = LineResolver._compile(resolver, newer, True, "")
    assert answer.closure is not None
    six = answer.closure.get("six")
    assert six is not None and str(six.version) == "1.17.0"


def test_finding_uv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert Path(find_uv()).name == "uv"
    old = tmp_path / "uv"
    old.write_text("#!/bin/sh\necho 'uv 0.1.0 (0000000 2024-01-01)'\n")
    old.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path) + os.pathsep + os.environ.get("PATH", ""))
    uv._located.cache_clear()
    try:
        with pytest.raises(UsageError, match=r"is uv 0.1.0; plan needs uv ≥ 0.13.9"):
            find_uv()
    finally:
        uv._located.cache_clear()


def test_uv_is_asked_its_version_once_by_concurrent_callers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plan's first lines find uv at once: one ``uv --version`` between them."""
    calls = tmp_path / "calls"
    fake = tmp_path / "uv"
    # Slow to answer, so that every caller arrives while the first one waits for it.
    fake.write_text(f"#!/bin/sh\necho . >> {calls}\nsleep 0.3\necho 'uv 0.13.9 (0 2025-01-01)'\n")
    fake.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path) + os.pathsep + os.environ.get("PATH", ""))
    together = threading.Barrier(6)

    def locate() -> str:
        together.wait()
        return find_uv()

    uv._located.cache_clear()
    try:
        with ThreadPoolExecutor(6) as pool:
            found = list(pool.map(lambda _: locate(), range(6)))
        assert found == [str(fake)] * 6
        assert calls.read_text().count(".") == 1
    finally:
        uv._located.cache_clear()


def test_the_index_table_is_checked(tmp_path: Path) -> None:
    bad = tmp_path / "indexes.toml"
    bad.write_text('[indexes.mine]\n[indexes.mine.urls]\ncu13x = "https://m/cu13x"\n')
    with pytest.raises(UsageError, match="'cu13x' is not a CUDA tag"):
        load_indexes(bad)
    bad.write_text('[indexes.mine]\n[indexes.mine.urls]\ncu130 = "file:///srv/cu130"\n')
    with pytest.raises(UsageError, match="is not an HTTP"):
        load_indexes(bad)
    table = load_indexes()
    assert table["flashinfer"].publishes_alone("flashinfer_jit_cache")
    assert not table["pytorch"].publishes_alone("torch")


@ROOT_ONLY
def test_uv_on_a_full_disk_is_exit_10_not_a_resolution_that_failed(tmp_path: Path) -> None:
    """uv's own words on a cache it cannot write (a real uv, a real full tmpfs): a full
    disk (exit 10, with the way out), where it was "uv could not resolve" (exit 8)."""
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("packaging\n")
    with tmpfs(tmp_path / "disk", size="64k") as disk:
        (disk / "fill").write_bytes(b"\0" * 60 * 1024)
        done = subprocess.run(
            [find_uv(), "pip", "compile", str(requirements), "--cache-dir", str(disk / "uv"),
             "--offline", "--no-config", "--quiet"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
    assert "No space left on device" in done.stderr, done.stderr
    with pytest.raises(InsufficientSpaceError) as caught:
        uv._answer(done.returncode, done.stdout, done.stderr)
    assert caught.value.exit_code == 10
    assert "free space in cudaup's cache, or set CUDAUP_CACHE_DIR" in str(caught.value)


@pytest.mark.parametrize("how", ["the runner is cancelled", "the run is stopped"])
def test_stopping_a_run_stops_the_uv_a_wrapper_started(
    how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ``uv`` found may be a script that runs the real one without ``exec``: a
    cancelled plan, or a round it no longer needs, stops that one too, and does not wait
    for its answer."""
    fake = tmp_path / "bin" / "uv"
    fake.parent.mkdir()
    child_pid = lingering_wrapper(
        fake, 'case "$1" in --version) echo "uv 0.13.9 (0 2025-01-01)"; exit 0;; esac\n'
    )
    monkeypatch.setattr(sys, "executable", str(fake.parent / "python"))
    monkeypatch.setenv("PATH", str(fake.parent) + os.pathsep + os.environ.get("PATH", ""))
    runner = UvRunner(tmp_path / "uv", tmp_path, 30.0)
    stoppable = uv.Stoppable()
    job = CompileJob(("six",), (), (3, 12), "x86_64-manylinux_2_39", (), "http://127.0.0.1:9/")
    ended: list[BaseException | None] = []

    def compile_job() -> None:
        try:
            runner.compile(job, stoppable=stoppable)
        except BaseException as exc:  # what a killed uv answers: asserted below
            ended.append(exc)
        else:
            ended.append(None)

    uv._located.cache_clear()
    try:
        thread = threading.Thread(target=compile_job, daemon=True)
        thread.start()
        child = started_child(child_pid)
        if how == "the runner is cancelled":
            runner.cancel()
        else:
            stoppable.stop()
        thread.join(30)  # the old kill left uv holding the pipes for LINGER seconds
        assert not thread.is_alive(), "the plan still waits for the wrapper's uv"
        wait_until_ended(child)
        assert ended and ended[0] is not None  # a killed run is no answer
    finally:
        uv._located.cache_clear()
