"""``plan`` against package indexes on loopback (tests/plan/world.py), resolved by uv."""

from __future__ import annotations

import dataclasses
import http.server
import logging
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from cudaup.core.driver import GpuInfo
from cudaup.errors import (
    NetworkError,
    NoCommonLineError,
    OfflineError,
    PackageNotFoundError,
    ReleaseNotFoundError,
    SourceFormatError,
    UsageError,
)
from cudaup.plan import uv
from cudaup.plan.attempt import Attempt, LineResolver
from cudaup.plan.lines import Line
from cudaup.plan.planner import _Run
from cudaup.plan.read_ahead import AHEAD
from tests.plan.builders import shared_object, wheel
from tests.plan.installcheck import printed_resolution
from tests.plan.pyindex import IndexServer
from tests.plan.world import build, plan


@pytest.fixture
def world(index_server: IndexServer) -> IndexServer:
    return build(index_server)


def test_the_upgrade_stack(world: IndexServer, tmp_path: Path) -> None:
    """torch has cu132, flashinfer-jit-cache does not: 13.2 is out before anything resolves,
    and 13.0 takes every package from its own per-line index."""
    result = plan(world, tmp_path, ["torch", "flashinfer-jit-cache", "sgl-kernel"])
    assert result.line == (13, 0) and result.release == "13.0.2"
    assert result.release_reason == "torch 2.11.0+cu130 → cuda-toolkit 13.0.2 pins it"
    assert [str(e) for e in result.excluded] == [
        "13.2: flashinfer-jit-cache: flashinfer publishes no cu132 build"
    ]
    picks = {p.name: p for p in result.packages}
    assert picks["torch"].version == "2.11.0+cu130"
    assert picks["sgl-kernel"].version == "0.3.21+cu130"
    assert picks["sgl-kernel"].evidence == f"from {world.url('sgl-cu130')}"
    assert result.pins() == [
        "torch==2.11.0+cu130",
        "flashinfer-jit-cache==0.6.4+cu130",
        "sgl-kernel==0.3.21+cu130",
    ]
    assert result.extra_index_urls() == sorted(
        world.url(r) for r in ("fi-cu130", "sgl-cu130", "torch-cu130")
    )
    assert any("minor-version" in n for n in result.notes) is False  # 590 runs 13.0 fully
    assert "the versions of cuda-toolkit on" in result.releases.described
    # The pages read are reported, each with its status.
    statuses = {
        (p["index"], p["tag"], p["project"]): p["status"] for p in result.to_json()["indexes"]
    }
    assert statuses[("pytorch", "cu130", "torch")] == "ok"


def test_the_line_comes_through_a_dependency(world: IndexServer, tmp_path: Path) -> None:
    """servellm is pure Python and pins torch==2.11.0, whose cu130 build pins cuda-toolkit."""
    result = plan(world, tmp_path, ["servellm"])
    assert result.line == (13, 0) and result.release == "13.0.2"
    (pick,) = result.packages
    assert pick.chain == ("servellm 1.0", "torch 2.11.0+cu130", "cuda-toolkit 13.0.2")
    assert result.pins() == ["servellm==1.0", "torch==2.11.0+cu130"]  # the build, pinned
    assert "13.2" in {f"{e.line[0]}.{e.line[1]}" for e in result.excluded}


def test_an_index_that_is_down_stops_the_plan(world: IndexServer, tmp_path: Path) -> None:
    world.root("torch-cu130").down = True
    with pytest.raises(NetworkError, match=r"could not reach pytorch .*torch-cu130"):
        plan(world, tmp_path, ["torch"])
    # Restricted to PyPI, the index that is down cannot change the answer.
    result = plan(world, tmp_path, ["torch"], only=("pypi",))
    assert result.line == (13, 0) and result.packages[0].version == "2.11.0"
    assert [c["index"] for c in result.to_json()["indexes"]] == ["pypi"]


def test_a_silent_wheel_is_read_deeper(world: IndexServer, tmp_path: Path) -> None:
    """sgl-kernel's PyPI wheels name no dependency but link libcudart.so.12."""
    result = plan(world, tmp_path, ["sgl-kernel"], only=("pypi",))
    assert result.line == (12, 9)
    (pick,) = result.packages
    assert pick.cuda == "CUDA 12.x" and pick.evidence == "its shared objects link libcudart.so.12"
    excluded = {f"{e.line[0]}.{e.line[1]}": e for e in result.excluded}
    assert excluded["13.0"].kind == "inconsistent"
    assert "sgl-kernel 0.3.21, 0.3.20: CUDA 12.x" in excluded["13.0"].message
    with pytest.raises(NoCommonLineError) as failed:
        plan(world, tmp_path, ["torch==2.11.0", "sgl-kernel"], only=("pypi",))
    assert "torch==2.11.0 resolves on 13.0 only" in str(failed.value)
    assert "sgl-kernel resolves on 12.8-12.9" in str(failed.value)
    # The project's new name, from the family table's [renamed].
    assert str(failed.value).endswith(
        "; sgl-kernel is published as sglang-kernel since 0.4.0: ask for sglang-kernel"
    )
    details = failed.value.details
    assert details["packages"] == [
        {"requirement": "torch==2.11.0", "lines": ["13.0"], "reason": None},
        {"requirement": "sgl-kernel", "lines": ["12.9", "12.8"], "reason": None},
    ]


def test_the_last_round_reads_no_older_build_of_what_gives_the_line_up(
    world: IndexServer, tmp_path: Path
) -> None:
    """As ``torch flashinfer-python sgl-kernel`` on PyPI (2026-12-07): sgl-kernel's 0.3.21
    and the two builds before it link libnvrtc.so.12, and no newer build exists, so 13.0's
    next round excluded those three alone and took 0.3.18.post3, a CUDA 12 build too: a
    fourth build, which gives 13.0 up whatever else is read.  The two builds before it,
    read only for a round that would not come, cost that plan's last read-back one more
    chain of range requests (0.4 s there, 0.34 s without them)."""
    from tests.plan.world import _kernel

    versions = ("1.0", "1.1", "1.2", "1.3", "1.4", "1.5", "1.6")
    for version in versions:
        world.add("pypi", *_kernel("kernx", version, 12))
    result = plan(world, tmp_path, ["kernx"], only=("pypi",))
    assert result.line == (12, 9)
    (given_up,) = [e for e in result.excluded if e.line == (13, 0)]
    assert given_up.kind == "inconsistent"
    assert "kernx 1.6, 1.5, 1.4, 1.3: CUDA 12.x" in given_up.message
    wheels_read = {
        version
        for version in versions
        for request in world.requests(f"/pypi/files/kernx-{version}-")
        if request.path.endswith(".whl")  # its shared objects, not its metadata
    }
    assert wheels_read == {"1.6", "1.5", "1.4", "1.3"}


def test_a_cpu_only_build_of_a_cuda_project(world: IndexServer, tmp_path: Path) -> None:
    with pytest.raises(NoCommonLineError, match="a CPU-only build") as failed:
        plan(world, tmp_path, ["torch==2.9.1"], only=("pypi",), platform="linux-sbsa")
    assert "torch-2.9.1-cp312-cp312-manylinux_2_28_aarch64.whl" in str(failed.value)
    # The same version on x86_64 is a CUDA 12.8 build.
    assert plan(world, tmp_path, ["torch==2.9.1"], only=("pypi",)).line == (12, 8)


@pytest.mark.parametrize(
    ("packages", "python", "message"),
    [
        (["no-such-project"], (3, 12), r"no index consulted has a project named 'no-such-project'"),
        (["torch==9.9.9"], (3, 12), r"torch==9.9.9 matches no version .*\(newest: 2.11.0\)"),
        (["torch"], (3, 99), r"torch has no wheel for CPython 3.99 on Linux x86_64"),
    ],
)
def test_what_does_not_exist_is_an_error(
    world: IndexServer, tmp_path: Path, packages: list[str], python: tuple[int, int], message: str
) -> None:
    with pytest.raises(PackageNotFoundError, match=message):
        plan(world, tmp_path, packages, only=("pypi",), python=python)


def test_extras_ranges_and_names(world: IndexServer, tmp_path: Path) -> None:
    # 590.48.01 runs 13.0 fully and 13.2 only under minor-version compatibility: 13.0 wins,
    # and the plan says why 13.2 was passed over.
    thirteen = plan(world, tmp_path, ["jaxish[cuda13]"], only=("pypi",))
    # The printed line carries the runtime the plan chose: unconstrained, uv would take 13.2's.
    assert thirteen.line == (13, 0)
    assert thirteen.pins() == ["jaxish[cuda13]==1.0", "nvidia-cuda-runtime==13.0.96"]
    assert thirteen.packages[0].chain[1] == "jaxish-cuda13-plugin 1.0"
    assert [str(e) for e in thirteen.excluded] == [
        "13.2: driver 590.48.01 runs it only under minor-version compatibility, and it runs "
        "13.0 fully (--allow-minor-compat takes the newer line)"
    ]
    assert not any("minor-version" in n for n in thirteen.notes)
    allowed = plan(world, tmp_path, ["jaxish[cuda13]"], only=("pypi",), allow_minor_compat=True)
    assert allowed.line == (13, 2) and allowed.excluded == []
    assert allowed.notes[0].startswith(
        "CUDA 13.2 is taken under minor-version compatibility (--allow-minor-compat): driver "
        "590.48.01 runs it"
    )
    assert any("590.48.01 runs CUDA 13.2.0 under minor-version" in n for n in allowed.notes)
    assert plan(world, tmp_path, ["jaxish[cuda12]"], only=("pypi",)).line == (12, 9)
    plain = plan(world, tmp_path, ["jaxish"], only=("pypi",), allow_minor_compat=True)
    assert plain.line == (13, 2) and plain.packages[0].note is not None
    assert any("nothing in the resolution names a CUDA line" in n for n in plain.notes)
    assert plan(world, tmp_path, ["cupy-cuda12x"], only=("pypi",)).line == (12, 9)
    with pytest.raises(
        NoCommonLineError, match=r"onnxish-gpu\[cuda\] resolves on 13.0-13.2, and driver 570"
    ):
        plan(world, tmp_path, ["onnxish-gpu[cuda]"], only=("pypi",), driver="570.124.06")
    asked = plan(world, tmp_path, ['jaxish[cuda13]; sys_platform == "linux"'], only=("pypi",))
    assert asked.pins() == [
        'jaxish[cuda13]==1.0; sys_platform == "linux"',
        "nvidia-cuda-runtime==13.0.96",
    ]


def test_the_driver_and_the_gpus(world: IndexServer, tmp_path: Path) -> None:
    old = plan(world, tmp_path, ["torch"], only=("pypi", "pytorch"), driver="570.124.06")
    assert old.line == (12, 8) and old.packages[0].version == "2.11.0+cu128"
    driver = {f"{e.line[0]}.{e.line[1]}": e.message for e in old.excluded if e.kind == "driver"}
    assert driver["13.0"].startswith(
        "driver 570.124.06 cannot run CUDA 13.0.2: needs a driver ≥ 580.65.06"
    )
    volta = (GpuInfo(0, "Tesla V100-SXM2-32GB", "7.0", 32768),)
    result = plan(world, tmp_path, ["torch"], only=("pypi", "pytorch"), gpus=volta)
    assert result.line == (12, 8)
    assert any(e.kind == "gpu" and "Tesla V100" in e.message for e in result.excluded)
    blind = plan(world, tmp_path, ["torch"], only=("pypi", "pytorch"), driver=None)
    assert blind.line == (13, 2) and any("planned by the packages alone" in n for n in blind.notes)
    chosen = plan(world, tmp_path, ["torch"], only=("pypi", "pytorch"), line=(12, 8))
    assert chosen.line == (12, 8) and chosen.excluded == []
    with pytest.raises(ReleaseNotFoundError, match="no CUDA 13.1 release is known"):
        plan(world, tmp_path, ["torch"], line=(13, 1))


def test_a_warm_plan_asks_nothing(
    world: IndexServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Not even NVIDIA's release listing, whose failure (HTTP 503) is remembered."""
    first = plan(world, tmp_path, ["torch", "sgl-kernel"], only=("pypi", "pytorch", "sglang"))
    assert world.requests("/nvidia/compute/cuda/redist") and first.releases.source == "pypi"
    asked = len(world.requests())
    with caplog.at_level(logging.INFO, logger="cudaup.http"):
        again = plan(world, tmp_path, ["torch", "sgl-kernel"], only=("pypi", "pytorch", "sglang"))
    assert len(world.requests()) == asked
    assert again.to_json() == first.to_json()
    assert "the release list of" in caplog.text and "HTTP 503" in caplog.text
    # The warm plan read its pages' digests; without them, parsed again, the same plan.
    digests = list((tmp_path / "cache" / "http").rglob("*.files"))
    assert len(digests) >= 3
    for digest in digests:
        digest.unlink()
    parsed = plan(world, tmp_path, ["torch", "sgl-kernel"], only=("pypi", "pytorch", "sglang"))
    assert parsed.to_json() == first.to_json() and len(world.requests()) == asked
    fresh = plan(
        world, tmp_path, ["torch", "sgl-kernel"], only=("pypi", "pytorch", "sglang"), refresh=True
    )
    assert len(world.requests()) > asked and fresh.line == first.line
    with pytest.raises(OfflineError, match="--offline cannot answer"):
        plan(world, tmp_path, ["torch"], only=("pypi",), offline=True)


def test_uv_hears_nothing_from_the_environment(
    world: IndexServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user's UV_* settings (the unsafe strategy, an extra index) never reach the plan."""
    world.root("evil")
    monkeypatch.setenv("UV_INDEX_STRATEGY", "unsafe-best-match")
    monkeypatch.setenv("UV_EXTRA_INDEX_URL", world.url("evil"))
    monkeypatch.setenv("UV_INDEX_URL", world.url("evil"))
    result = plan(world, tmp_path, ["servellm"], only=("pypi",))
    assert result.line == (13, 0) and world.requests("/evil") == []


def test_bad_requests(world: IndexServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(UsageError, match="direct reference"):
        plan(world, tmp_path, ["torch @ https://example.org/torch-2.11.0-cp312-none-any.whl"])
    with pytest.raises(UsageError, match="only per-line indexes"):
        plan(world, tmp_path, ["torch"], only=("pytorch",))
    from cudaup.plan import uv

    uv._located.cache_clear()
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    try:
        with pytest.raises(UsageError, match="uv, which is not installed"):
            plan(world, tmp_path, ["torch"], only=("pypi",))
    finally:
        uv._located.cache_clear()


def test_every_signal_of_a_silent_gpu_build(world: IndexServer, tmp_path: Path) -> None:
    """triton ships its own ptxas (any line, not CPU-only); bitsandbytes one object per
    runtime (exactly those lines); paddle declares its line; mxnet-cu112 names it."""
    triton = plan(world, tmp_path, ["triton==3.3.0"], only=("pypi",))
    # Any line fits: the newest the driver (590.48.01) runs fully, 13.0, wins over 13.2.
    assert triton.line == (13, 0) and triton.packages[0].cuda == "any CUDA line"
    assert any("nothing in the resolution names a CUDA line" in n for n in triton.notes)
    both = plan(world, tmp_path, ["torch==2.9.1", "triton==3.3.0"], only=("pypi",))
    assert both.line == (12, 8)
    bnb = plan(world, tmp_path, ["bitsandbytes==0.45.5"], only=("pypi",))
    assert bnb.line == (12, 8) and bnb.packages[0].cuda == "CUDA 11.7-11.8, 12.6 and 12.8"
    with pytest.raises(NoCommonLineError, match="their CUDA lines do not meet"):
        plan(world, tmp_path, ["torch==2.11.0", "bitsandbytes==0.45.5"], only=("pypi",))
    with pytest.raises(NoCommonLineError, match=r"CUDA 11\.8 \(paddle/version/__init__\.py says"):
        plan(world, tmp_path, ["paddlepaddle-gpu==2.6.2"], only=("pypi",))
    with pytest.raises(NoCommonLineError, match=r"CUDA 11\.2 \(the name mxnet-cu112\)"):
        plan(world, tmp_path, ["mxnet-cu112==1.9.1"], only=("pypi",))
    # A pure meta-package: what it pulls in is read (cuda-bindings loads libnvrtc.so.12).
    meta = plan(world, tmp_path, ["cuda-python==12.8.0"], only=("pypi",))
    assert meta.line == (12, 9) and meta.packages[0].chain == (
        "cuda-python 12.8.0",
        "cuda-bindings 12.8.0",
    )
    assert meta.packages[0].evidence == "loads libnvrtc.so.12 by name"


def test_a_yanked_version_is_taken_by_an_exact_pin_only(world: IndexServer, tmp_path: Path) -> None:
    """PEP 592: kernlib 2.0 is yanked; ``==2.0`` takes it (uv resolves it) and says so, a
    range never does."""
    pinned = plan(world, tmp_path, ["kernlib==2.0"], only=("pypi",))
    (pick,) = pinned.packages
    assert pick.version == "2.0" and pick.yanked == "broken ABI, use 2.0.1"
    assert any("kernlib 2.0 is yanked on pypi (broken ABI, use 2.0.1)" in n for n in pinned.notes)
    assert pick.cuda == "CUDA 12.x" and pinned.to_json()["packages"][0]["yanked"] == pick.yanked
    assert plan(world, tmp_path, ["kernlib"], only=("pypi",)).packages[0].version == "1.0"
    with pytest.raises(
        PackageNotFoundError, match=r"kernlib>=2.0 matches no version .*newest: 1.0"
    ):
        plan(world, tmp_path, ["kernlib>=2.0"], only=("pypi",))


def test_a_pure_python_version_of_a_compiled_project_is_named(
    world: IndexServer, tmp_path: Path
) -> None:
    """fastattn 1.1 is pure Python (its line comes through torch 2.11.0), where 1.0 links
    libcudart.so.12: the plan takes 1.1 on 13.0 and says it carries no compiled code, in
    a note and in ``--json``; 1.0, compiled, gets no such word."""
    result = plan(world, tmp_path, ["fastattn"], only=("pypi",))
    (pick,) = result.packages
    assert (pick.version, result.line) == ("1.1", (13, 0))
    assert pick.pure_wheel == "fastattn-1.1-py3-none-any.whl"
    assert pick.to_json()["pure_wheel"] == pick.pure_wheel
    assert (
        "fastattn 1.1 is a pure-Python wheel (fastattn-1.1-py3-none-any.whl), unlike the "
        "project's other versions: it carries no compiled code of its own"
    ) in result.notes
    compiled = plan(world, tmp_path, ["fastattn==1.0"], only=("pypi",))
    assert compiled.packages[0].pure_wheel is None
    assert not any("pure-Python" in note for note in compiled.notes)


def _served_before_the_round(
    world: IndexServer, monkeypatch: pytest.MonkeyPatch, wheel: str, excluding: str
) -> list[bool]:
    """For each round whose exclusions hold ``excluding``: whether the index had served
    ``wheel`` before that round's uv run, waiting for it as the round starts (at most 10 s)."""
    served = threading.Event()
    handle = world.handle

    def watched(request: http.server.BaseHTTPRequestHandler, body: bool) -> None:
        if request.path.endswith(wheel):
            served.set()
        handle(request, body)

    monkeypatch.setattr(world, "handle", watched)
    read_first: list[bool] = []
    resolve = LineResolver._round

    def round_(resolver: LineResolver, *args: Any, **kwargs: Any) -> Any:
        exclusions = args[3] if len(args) > 3 else kwargs["exclusions"]
        if excluding in exclusions:
            read_first.append(served.wait(timeout=10))
        return resolve(resolver, *args, **kwargs)

    monkeypatch.setattr(LineResolver, "_round", round_)
    return read_first


@pytest.mark.parametrize(("pre", "next_build"), [(False, "1.0"), (True, "1.2rc1")])
def test_the_build_a_next_round_takes_is_read_beside_its_uv_run(
    world: IndexServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    pre: bool,
    next_build: str,
) -> None:
    """attnkern's every version is a CUDA 12 build. On 13.0 the first round takes 1.4, its
    read-back reads 1.3 and 1.2 too, a round toward the line finds nothing, and the round
    that leaves each out alone takes 1.0 (1.2rc1 is a pre-release, 1.1 yanked), or 1.2rc1
    with --pre. That build's wheel is read as the round starts, not after its uv run: the
    round waits here until the index serves it (it never would, before). The answer is the
    same: 13.0 excluded for those four builds, 12.9 taken."""
    wheel = f"attnkern-{next_build}-cp310-abi3-manylinux2014_x86_64.whl"
    read_first = _served_before_the_round(world, monkeypatch, wheel, "attnkern!=1.2")
    result = plan(world, tmp_path, ["attnkern"], only=("pypi",), pre=pre)
    assert read_first == [True]
    assert result.line == (12, 9) and result.packages[0].version == "1.4"
    assert str(result.excluded[-1]).startswith(
        f"13.0: builds of another line: attnkern 1.4, 1.3, 1.2, {next_build}: CUDA 12.x"
    )


def test_a_next_build_that_cannot_be_read_is_read_again_by_its_read_back(
    world: IndexServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """attnkern 1.0's shared object is damaged (its zip directory and METADATA intact, so
    uv takes it): the read ahead of it fails and is dropped, the round's read-back reads it
    again and ends the plan with its own words (exit 8), as before the read ahead."""
    wheel = "attnkern-1.0-cp310-abi3-manylinux2014_x86_64.whl"
    (path,) = [p for p in world.files if p.endswith(wheel)]
    body = world.files[path]
    monkeypatch.setitem(
        world.files, path, body[:200] + bytes(len(body) - 200 - 4096) + body[-4096:]
    )
    read_first = _served_before_the_round(world, monkeypatch, wheel, "attnkern!=1.2")
    with pytest.raises(SourceFormatError, match=r"Bad CRC-32") as failed:
        plan(world, tmp_path, ["attnkern"], only=("pypi",))
    assert read_first == [True]
    assert wheel in str(failed.value) and failed.value.exit_code == 8


def test_the_one_line_reason_is_the_telling_one(world: IndexServer, tmp_path: Path) -> None:
    """xfish requires torch==2.9.1 (12.8) but links libcudart.so.13: on 13.x uv finds no
    resolution (torch's cu12 runtime is forbidden there); the reason shown is the 12.8
    one, where torch resolves and xfish is read as a CUDA 13 build."""
    with pytest.raises(NoCommonLineError) as failed:
        plan(world, tmp_path, ["xfish==1.0", "torch==2.9.1"], only=("pypi",))
    message = str(failed.value)
    assert (
        "xfish==1.0 resolves on no CUDA line (12.8: builds of another line: xfish 1.0: " in message
    )
    assert "CUDA 13.x (its shared objects link libcudart.so.13)" in message
    packages = failed.value.details["packages"]
    assert isinstance(packages, list)
    reason = packages[0]["reason"]
    assert reason["line"] == "12.8" and reason["kind"] == "inconsistent"


def test_a_requested_extra_the_version_lacks_is_no_match(
    world: IndexServer, tmp_path: Path
) -> None:
    """jaxish 0.4 and 0.5 have no ``cuda13`` extra: on 12.8 (torch 2.9.1's line) uv would
    take one of them and only warn; the plan excludes them and says why there is no line."""
    with pytest.raises(NoCommonLineError) as failed:
        plan(world, tmp_path, ["torch==2.9.1", "jaxish[cuda13]"], only=("pypi",))
    assert str(failed.value).endswith(
        "their CUDA lines do not meet; torch==2.9.1 resolves on 12.8 only; "
        "jaxish[cuda13] resolves on 13.0-13.2"
    )
    excluded = failed.value.details["excluded"]
    assert isinstance(excluded, list)
    [on_12_8] = [e for e in excluded if e["line"] == "12.8"]
    assert {"line": "12.8", "kind": "extra", "packages": ["jaxish"]}.items() <= on_12_8.items()
    assert on_12_8["message"].startswith("jaxish 0.5, 0.4 have no extra cuda13")
    alone = plan(world, tmp_path, ["jaxish[cuda13]"], only=("pypi",))
    assert alone.line == (13, 0)
    assert alone.pins() == ["jaxish[cuda13]==1.0", "nvidia-cuda-runtime==13.0.96"]
    assert plan(world, tmp_path, ["jaxish<1"], only=("pypi",)).packages[0].version == "0.5"


def test_the_printed_lines_install_the_plan(world: IndexServer, tmp_path: Path) -> None:
    """On 12.8 (torch 2.9.1) the plan excludes opsdep 2.0 (a CUDA 13 build); the printed
    line pins opsdep 1.0, and uv resolving the line as printed gives the plan's closure."""
    result = plan(world, tmp_path, ["torch==2.9.1", "opswrap==1.0"], only=("pypi",))
    assert result.line == (12, 8) and result.closure.get("opsdep") is not None
    assert "opsdep==1.0" in result.pins() and result.install_checked
    assert "opsdep==1.0" in result.uv_command() and "opsdep==1.0" in result.pip_command()
    wanted = {p.name: str(p.version) for p in result.closure}
    printed = printed_resolution(result.uv_command(), "3.12", "linux-x86_64", tmp_path / "uv")
    assert printed == wanted
    # Without the pin, uv would have taken the CUDA 13 build.
    bare = result.uv_command().replace(" opsdep==1.0", "")
    assert printed_resolution(bare, "3.12", "linux-x86_64", tmp_path / "uv")["opsdep"] == "2.0"
    # A plan whose bare line already resolves to its closure pins nothing more.
    simple = plan(world, tmp_path, ["sgl-kernel"], only=("pypi",))
    assert simple.pins() == ["sgl-kernel==0.3.21"] and simple.install_checked


def test_a_nightly_for_a_line_no_release_targets(world: IndexServer, tmp_path: Path) -> None:
    """No released torch is newer than 2.12; the cu130 nightly 2.13 is.  Without --pre the request matches
    nothing (and says --pre would); with it the plan takes the nightly and says so."""
    named = ("pypi", "pytorch", "pytorch-nightly")
    with pytest.raises(PackageNotFoundError, match="pre-releases match it: --pre takes them"):
        plan(world, tmp_path, ["torch>2.12"], only=named)  # named, so consulted
    with pytest.raises(PackageNotFoundError, match=r"torch>2.12 matches no version") as left:
        plan(world, tmp_path, ["torch>2.12"])  # the nightly index is left out without --pre
    assert "torch-nightly" not in str(left.value)
    nightly = plan(world, tmp_path, ["torch>2.12"], pre=True)
    assert nightly.line == (13, 0)
    (torch,) = nightly.packages
    assert torch.version == "2.13.0.dev20261130+cu130" and torch.index == "pytorch-nightly"
    assert any(
        n.startswith("takes pre-releases (--pre): ") and "torch 2.13.0.dev20261130+cu130" in n
        for n in nightly.notes
    )
    assert "pytorch-triton==3.6.0+git5a3c9f1" in nightly.pins()
    assert "--prerelease allow" in nightly.uv_command() and "--pre" in nightly.pip_command()
    # A stable request with --pre still plans on every line the table has.
    stable = plan(world, tmp_path, ["torch==2.11.0"], only=("pypi",), pre=True)
    assert stable.line == (13, 0) and not any("pre-releases" in n for n in stable.notes)


def test_a_dependency_backtracked_to_an_older_line_is_asked_for_newer(
    world: IndexServer, tmp_path: Path
) -> None:
    """As uv resolved ``torch flashinfer-python`` on PyPI for 13.0 (2026-12-06): flashinfer's
    dependency cuda-python came as 12.6.2.post1, a CUDA 12 build, though 13.x fits, because
    uv had settled another dependency first that cuda-python 13.x does not accept.  Excluding
    the 12.x builds one by one walked down to older 12.x builds until the line was given up;
    a dependency built for an older line than the one planned is asked for newer instead."""
    from tests.plan.builders import ABI3, PURE, shared_object, wheel
    from tests.plan.world import _kernel

    world.add("pypi", *wheel("fishhelper", "1.0", tag=PURE))
    world.add("pypi", *wheel("fishhelper", "2.0", tag=PURE))
    for version in ("12.4.0", "12.5.0", "12.6.0"):
        world.add("pypi", *_kernel("nvpy", version, 12))
    ops = shared_object(["libcudart.so.13"], "ops.so", code=4096)
    world.add(
        "pypi",
        *wheel("nvpy", "13.0.0", ["fishhelper<2"], tag=ABI3, shared={"nvpy/_ops.so": ops}),
    )
    world.add("pypi", *wheel("fishinfer", "1.0", ["fishhelper", "nvpy"], tag=PURE))
    result = plan(world, tmp_path, ["fishinfer"], only=("pypi",), line=(13, 0))
    assert result.line == (13, 0)
    assert result.closure is not None
    picked = {name: str(p.version) for name, p in result.closure.packages.items()}
    assert picked == {"fishinfer": "1.0", "nvpy": "13.0.0", "fishhelper": "1.0"}
    assert "nvpy==13.0.0" in result.install_extra  # what the printed install lines pin

    # When nothing resolves with the newer versions alone (nvq 3.0 needs what no index
    # has), each contradicting build is excluded alone, and an older build that fits is
    # found as before.
    world.add("pypi", *_kernel("nvq", "1.0", 13))
    world.add("pypi", *_kernel("nvq", "2.0", 12))
    ops = shared_object(["libcudart.so.13"], "ops.so", code=4096)
    world.add(
        "pypi",
        *wheel("nvq", "3.0", ["absent-project"], tag=ABI3, shared={"nvq/_ops.so": ops}),
    )
    world.add("pypi", *wheel("nvqwrap", "1.0", ["nvq"], tag=PURE))
    result = plan(world, tmp_path, ["nvqwrap"], only=("pypi",), line=(13, 0))
    assert result.closure is not None
    assert str(result.closure.packages["nvq"].version) == "1.0"


def test_a_line_that_holds_a_request_back_to_no_cuda_is_passed_over(
    world: IndexServer, tmp_path: Path
) -> None:
    """As ``sglang`` planned for driver 590.48.01 (2026-12-06): 13.1 resolved, with sglang
    0.5.2, which requires no torch, because sglang 0.5.23 needs torch 2.14.1 and there is
    no 13.1 torch.  Here servish 2.0 needs torch 2.11.0 (13.0) and 1.0 nothing: 13.2
    resolves only with 1.0, so the plan takes 13.0 and its servish 2.0, and says why."""
    from tests.plan.builders import PURE, wheel

    world.add("pypi", *wheel("servish", "1.0", tag=PURE))
    world.add("pypi", *wheel("servish", "2.0", ["torch==2.11.0"], tag=PURE))
    result = plan(world, tmp_path, ["servish"], only=("pypi",), driver=None)
    assert result.line == (13, 0)
    assert [p.version for p in result.packages] == ["2.0"]
    (passed,) = [e for e in result.excluded if e.line == (13, 2)]
    assert passed.kind == "held-back" and passed.packages == ("servish",)
    assert passed.message == (
        "servish resolves on 13.2 only as 1.0, which pins no CUDA line; its newest "
        "version, 2.0, does not resolve there"
    )
    # Asked for 13.2, the plan keeps it, and says what it held back.
    result = plan(world, tmp_path, ["servish"], only=("pypi",), driver=None, line=(13, 2))
    assert [p.version for p in result.packages] == ["1.0"]
    assert any(n.startswith("servish resolves on 13.2 only as 1.0") for n in result.notes)


def test_a_request_held_back_on_every_line_keeps_the_newest_line(
    world: IndexServer, tmp_path: Path
) -> None:
    """stuckfish 2.0 needs a project no index has: no line takes it newer than 1.0, so the
    newest line stays, after one more line was resolved, and the note says so."""
    from tests.plan.builders import PURE, wheel

    world.add("pypi", *wheel("stuckfish", "1.0", tag=PURE))
    world.add("pypi", *wheel("stuckfish", "2.0", ["no-such-project"], tag=PURE))
    result = plan(world, tmp_path, ["stuckfish"], only=("pypi",), driver=None)
    assert result.line == (13, 2)
    assert [p.version for p in result.packages] == ["1.0"]
    assert (
        "stuckfish resolves on 13.2 only as 1.0, which pins no CUDA line; its newest "
        "version, 2.0, does not resolve there (no line tried takes it newer)"
    ) in result.notes


def test_a_pre_release_taken_without_pre_is_named(world: IndexServer, tmp_path: Path) -> None:
    """uv takes a request's pre-release, without --pre, when no final release resolves
    with the rest (xformers 0.0.35.dev1147 beside torch 2.14.1 on 13.0, 2026-12-06)."""
    from tests.plan.builders import PURE, wheel
    from tests.plan.world import _kernel

    world.add("pypi", *_kernel("prefish", "1.0", 12))
    world.add("pypi", *wheel("prefish", "2.0rc1", ["torch==2.11.0"], tag=PURE))
    result = plan(world, tmp_path, ["prefish"], only=("pypi",), line=(13, 0))
    assert [p.version for p in result.packages] == ["2.0rc1"]
    assert (
        "takes a pre-release without --pre: prefish 2.0rc1 (uv takes one when no final "
        "release resolves with the rest)"
    ) in result.notes
    # Asked for by its specifier, it is no surprise.
    result = plan(world, tmp_path, ["prefish>=2.0rc1"], only=("pypi",), line=(13, 0))
    assert not any("pre-release" in n for n in result.notes)


def test_a_request_backtracked_to_an_older_line_is_asked_for_newer(
    world: IndexServer, tmp_path: Path
) -> None:
    """As ``vllm flashinfer-python`` on PyPI (2026-12-06): uv took flashinfer's newest, then
    the vllm whose requirements allowed it, 0.2.2, a CUDA 12 build that pins nothing (vllm
    0.33.0 pins flashinfer 0.7.2.post1); excluding 0.2.2 and the older builds read with it
    gave 13.0 up for 12.8 and vllm 0.19.1.  A request built for an older line is asked for a
    newer version too."""
    from tests.plan.builders import PURE, wheel
    from tests.plan.world import _kernel

    for version in ("0.7", "0.8", "0.9", "1.0"):
        world.add("pypi", *_kernel("servkit", version, 12))
    world.add("pypi", *wheel("servkit", "2.0", ["kernpal==1.0", "torch==2.11.0"], tag=PURE))
    world.add("pypi", *wheel("kernpal", "1.0", tag=PURE))
    world.add("pypi", *wheel("kernpal", "2.0", tag=PURE))
    result = plan(world, tmp_path, ["kernpal", "servkit"], only=("pypi",), line=(13, 0))
    assert result.closure is not None
    picked = {name: str(p.version) for name, p in result.closure.packages.items()}
    assert (picked["servkit"], picked["kernpal"]) == ("2.0", "1.0")


def test_a_request_held_back_to_a_major_alone_is_taken_newer(
    world: IndexServer, tmp_path: Path
) -> None:
    """As ``sglang-kernel`` for driver 590.48.01 (2026-12-06): on 13.1 it resolved as
    0.4.6.post1, which links libcudart.so.13 (any 13.x) and pins no torch, where 0.4.10
    pins torch 2.14.1 (13.0).  A major alone does not pin the line: 13.0 and the newest."""
    from tests.plan.builders import ABI3, shared_object, wheel
    from tests.plan.world import _kernel

    world.add("pypi", *_kernel("kernfish", "1.0", 13))
    ops = shared_object(["libcudart.so.13"], "ops.so", code=4096)
    world.add(
        "pypi",
        *wheel("kernfish", "2.0", ["torch==2.11.0"], tag=ABI3, shared={"kf/_ops.so": ops}),
    )
    result = plan(world, tmp_path, ["kernfish"], only=("pypi",), driver=None)
    assert result.line == (13, 0)
    assert [p.version for p in result.packages] == ["2.0"]
    assert [e.kind for e in result.excluded if e.line == (13, 2)] == ["held-back"]


def test_the_release_named_is_one_the_driver_runs_fully(world: IndexServer, tmp_path: Path) -> None:
    """torch 2.9.1 pins the 12.8 runtime, not a release: the plan named 12.8.2, whose
    toolkit driver 570.124.06 runs only under minor-version compatibility, beside 12.8.1,
    which it runs fully (the note then said so: nvcc 12.8.2's PTX would not JIT there)."""
    from tests.plan.builders import wheel

    world.add("pypi", *wheel("cuda-toolkit", "12.8.1", tag="py2.py3-none-any"))
    result = plan(world, tmp_path, ["torch==2.9.1"], only=("pypi",), driver="570.124.06")
    assert result.line == (12, 8) and result.release == "12.8.1"
    assert result.release_reason.endswith("that driver 570.124.06 runs fully")
    assert result.driver is not None and result.driver.verdict == "full"
    # With no driver to ask, the line's newest, as before.
    assert plan(world, tmp_path, ["torch==2.9.1"], only=("pypi",), driver=None).release == "12.8.2"


def test_a_dependency_published_only_as_source_is_named(world: IndexServer, tmp_path: Path) -> None:
    """``transformer-engine[pytorch]``: its transformer-engine-torch is source only on PyPI,
    and a plan builds nothing (uv's ``--no-build``), so uv took transformer-engine 0.0.0,
    which has no extras; the failure said only that ("transformer-engine 0.0.0 has no extra
    pytorch"), not what uv gives as a hint."""
    from tests.plan.builders import PURE, wheel

    world.add("pypi", "srcdep-1.0.tar.gz", b"not read: a plan builds nothing")
    world.add("pypi", *wheel("srcwrap", "0.1", tag=PURE))
    gpu = wheel("srcwrap", "1.0", ['srcdep==1.0; extra == "gpu"'], tag=PURE, extras=("gpu",))
    world.add("pypi", *gpu)
    with pytest.raises(NoCommonLineError) as failed:
        plan(world, tmp_path, ["srcwrap[gpu]"], only=("pypi",), line=(13, 0))
    assert (
        "srcwrap 0.1 has no extra gpu; without them there is no resolution (uv found only "
        "source for srcdep in the versions it tried, and a plan builds nothing)"
    ) in str(failed.value)


def test_an_extra_that_names_a_major_holds_the_request_to_it(
    world: IndexServer, tmp_path: Path
) -> None:
    """``flashinfer-python[cu12]``: the extra names CUDA 12 (the family table's
    ``[extras]``) but brings nothing that says so, and the plan was 13.0 with a CUDA 13
    torch beside the cu12 extra."""
    from tests.plan.builders import PURE, wheel

    # As the real one: each extra brings a package whose name says no major.
    world.add("pypi", *wheel("cutlassish", "1.0", tag=PURE))
    extras = ['cutlassish; extra == "cu12"', 'cutlassish; extra == "cu13"']
    flashinfer = wheel("flashinfer-python", "0.7.4", extras, tag=PURE, extras=("cu12", "cu13"))
    world.add("pypi", *flashinfer)
    result = plan(world, tmp_path, ["flashinfer-python[cu12]", "torch"], only=("pypi",))
    assert result.line[0] == 12
    assert {e.kind for e in result.excluded if e.line[0] == 13} == {"major"}
    (excluded,) = [e for e in result.excluded if e.line == (13, 0)]
    assert excluded.message == (
        "flashinfer-python[cu12] asks for CUDA 12: its extra cu12 names that major"
    )
    with pytest.raises(NoCommonLineError, match="asks for CUDA 12: its extra cu12"):
        plan(world, tmp_path, ["flashinfer-python[cu12]"], only=("pypi",), line=(13, 0))
    assert plan(world, tmp_path, ["flashinfer-python[cu13]"], only=("pypi",)).line[0] == 13


def test_the_silent_requests_wheels_are_read_at_once(
    index_server: IndexServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two silent requests, each a wheel whose shared object links only libc: the
    read-back reads both wheels at once, not one after the other.  Upstream holds each
    wheel's first read until the other's has begun (waited for, with a bound: read one
    after the other, the first waits it out and the test fails)."""
    build(index_server)
    names = []
    for project in ("kern", "kern2"):
        library = shared_object(["libc.so.6"], f"{project}_ops.so", code=64 * 1024)
        built = wheel(project, "1.0", shared={f"{project}/{project}_ops.so": library})
        index_server.add("pypi", *built)  # PEP 658: uv reads its metadata, never the wheel
        names.append(f"/pypi/files/{built[0]}")
    begun = {name: threading.Event() for name in names}
    served, met = index_server.handle, []

    def holding(request: http.server.BaseHTTPRequestHandler, body: bool) -> None:
        if request.path in begun:
            begun[request.path].set()
            met.append(all(event.wait(timeout=15) for event in begun.values()))
        served(request, body)

    monkeypatch.setattr(index_server, "handle", holding)
    result = plan(index_server, tmp_path, ["kern", "kern2"], only=("pypi",))
    assert {p.name for p in result.packages} == {"kern", "kern2"}
    assert met and all(met)


def test_the_read_back_opens_a_wheel_from_the_end_read_ahead_for_uv(
    index_server: IndexServer, tmp_path: Path
) -> None:
    """A silent request whose index offers no PEP 658 metadata: uv read its METADATA
    through the index memo, which read the wheel's end ahead of it; the read-back opens
    the wheel from those bytes (the whole of this small wheel), asking upstream for
    nothing more (before, its own tail again: one round trip, and its directory's next)."""
    build(index_server)
    library = shared_object(["libc.so.6"], "kern_ops.so", code=8 * 1024)
    name, body = wheel("kern", "1.0", shared={"kern/kern_ops.so": library})
    assert len(body) < AHEAD  # the memo's first read holds it all
    index_server.add("pypi", name, body, pep658=False)
    result = plan(index_server, tmp_path, ["kern"], only=("pypi",))
    assert [p.name for p in result.packages] == ["kern"]
    asked = [(r.method, r.range) for r in index_server.requests(f"/pypi/files/{name}")]
    # the memo's one tail, which answered uv's HEAD and ranges, and the read-back's reads
    assert len(asked) == 1 and asked[0][0] == "GET", asked
    assert str(asked[0][1]).startswith("bytes=-"), asked


def test_a_meta_packages_children_are_read_all_at_once(
    index_server: IndexServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pure meta-package pulling in more silent children than the plan's workers (8):
    the read-back reads every child's wheel at once.  Upstream holds each child's first
    wheel read until every child's has begun (waited for, with a bound: read eight at a
    time, the first eight wait it out for the ninth, and the test fails); a real plan's
    torch, named late among flashinfer-python's 19 children, so waited for the chains of
    range reads of the ones before it."""
    build(index_server)
    children = [f"kid{number}" for number in range(10)]
    names = []
    for project in children:
        library = shared_object(["libc.so.6"], f"{project}_ops.so", code=16 * 1024)
        built = wheel(project, "1.0", shared={f"{project}/{project}_ops.so": library})
        index_server.add("pypi", *built)  # PEP 658: uv reads its metadata, never the wheel
        names.append(f"/pypi/files/{built[0]}")
    index_server.add("pypi", *wheel("meta", "1.0", children, tag="py3-none-any"))
    begun = {name: threading.Event() for name in names}
    served, met = index_server.handle, []

    def holding(request: http.server.BaseHTTPRequestHandler, body: bool) -> None:
        if request.path in begun and not begun[request.path].is_set():
            begun[request.path].set()
            met.append(all(event.wait(timeout=10) for event in begun.values()))
        served(request, body)

    monkeypatch.setattr(index_server, "handle", holding)
    result = plan(index_server, tmp_path, ["meta"], only=("pypi",))
    assert {p.name for p in result.packages} == {"meta"}
    assert len(met) == len(children) and all(met), met


def test_a_page_uv_read_through_the_memo_is_not_asked_for_again(
    index_server: IndexServer, tmp_path: Path
) -> None:
    """A meta-package's child is no request: the read-back needs its page to find its
    wheel.  uv read that page through the plan's memo for this very resolution, so the
    read-back takes it from there (a cold `vllm flashinfer-python` asked numpy's 1.9 MB
    page again: 0.3 s on the read-back's longest chain)."""
    build(index_server)
    library = shared_object(["libc.so.6"], "kid_ops.so", code=16 * 1024)
    index_server.add("pypi", *wheel("kid", "1.0", shared={"kid/kid_ops.so": library}))
    index_server.add("pypi", *wheel("meta", "1.0", ["kid"], tag="py3-none-any"))
    result = plan(index_server, tmp_path, ["meta"], only=("pypi",))
    assert {p.name for p in result.packages} == {"meta"}
    assert len(index_server.requests("/pypi/kid/")) == 1


def test_lines_are_resolved_two_at_a_time(
    world: IndexServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """torch==2.9.1 resolves on 12.8 alone: 13.0 and 12.9 fail first.  At most two
    lines are resolving at any moment (planner.WINDOW: four cold uv runs at once, and the
    index memo serving them, need more CPU than two cores have; the lines after the first
    two find the plan's uv cache warm), and every line is still tried."""
    real = LineResolver.attempt
    lock, running, most, lines = threading.Lock(), [0], [0], []

    def counted(self: LineResolver, requirements: Any, line: Line, **options: Any) -> Any:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
            lines.append(line)
        try:
            return real(self, requirements, line, **options)
        finally:
            with lock:
                running[0] -= 1

    monkeypatch.setattr(LineResolver, "attempt", counted)
    result = plan(world, tmp_path, ["torch==2.9.1"], only=("pypi",))
    assert result.line == (12, 8)
    assert sorted(lines, reverse=True) == [(13, 0), (12, 9), (12, 8)]
    assert most[0] == 2


def test_a_warm_plan_its_kept_answers_decide_starts_no_uv_run(
    world: IndexServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """13.2 fails and 13.0 resolves, both from kept answers; 12.9's resolution and the
    conflict proof were stopped in the cold plan (kept by none), as on a slow live index.
    Neither starts a uv run while 13.0 answers, even when its kept answer takes a while
    (here up to a second, or until a uv run starts): each was a uv process and the index
    memo's requests, killed a moment later, in every warm plan (0.2 s of a 0.35 s plan).
    Nor once 13.0's attempt has ended, while the search weighs it (here up to a second
    too): 12.9 then started its run on a loaded CI machine before the search was over."""
    asked = ["servellm", "torch"]
    real_compile = uv.UvRunner.compile

    def stopped_ones_not_kept(
        runner: uv.UvRunner, job: uv.CompileJob, *args: Any, **kw: Any
    ) -> uv.CompileAnswer:
        proof = job.requirements == tuple(asked) and not job.constraints
        if proof or any(c.startswith("cuda-toolkit==12.") for c in job.constraints):
            runner = dataclasses.replace(runner, answers=None)
        return real_compile(runner, job, *args, **kw)

    with monkeypatch.context() as patched:
        patched.setattr(uv.UvRunner, "compile", stopped_ones_not_kept)
        first = plan(world, tmp_path, asked, only=("pypi",), driver=None)
    assert first.line == (13, 0)
    assert [(e.line, e.kind) for e in first.excluded] == [((13, 2), "resolution")]
    started: list[list[str]] = []
    a_run_started = threading.Event()
    real_popen, real_round = subprocess.Popen, LineResolver._round

    def counted(argv: list[str], *args: Any, **kw: Any) -> subprocess.Popen[str]:
        started.append(argv)
        a_run_started.set()
        return real_popen(argv, *args, **kw)

    def slow(resolver: LineResolver, requirements: Any, line: Line, *args: Any, **kw: Any) -> Any:
        if line == (13, 0):
            a_run_started.wait(1.0)
        return real_round(resolver, requirements, line, *args, **kw)

    def weighed_late(run: _Run, attempt: Attempt, *args: Any) -> Any:
        if attempt.line == (13, 0):
            a_run_started.wait(1.0)
        return real_check(run, attempt, *args)

    real_check = _Run._named_release_check
    monkeypatch.setattr(subprocess, "Popen", counted)
    monkeypatch.setattr(LineResolver, "_round", slow)
    monkeypatch.setattr(_Run, "_named_release_check", weighed_late)
    again = plan(world, tmp_path, asked, only=("pypi",), driver=None)
    assert again.to_json() == first.to_json()
    assert started == []


def test_a_line_whose_first_round_resolves_refutes_the_proof_before_its_next_round(
    world: IndexServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """13.0's first round resolves, with a CUDA 12 build of nvpy (uv settled fishhelper 2.0
    first), so a second round follows; 13.2 fails only then, which starts the conflict
    proof.  13.0's first resolution already shows that the requests resolve: the proof
    starts no uv run beside the second round (a cold `vllm flashinfer-python` plan ran
    both, 1.4 s each on two cores, the proof killed at the end).  The second round waits
    up to a second for the proof to start."""
    from tests.plan.builders import ABI3, PURE
    from tests.plan.world import _kernel

    world.add("pypi", *wheel("fishhelper", "1.0", tag=PURE))
    world.add("pypi", *wheel("fishhelper", "2.0", tag=PURE))
    world.add("pypi", *_kernel("nvpy", "12.6.0", 12))
    ops = shared_object(["libcudart.so.13"], "ops.so", code=4096)
    world.add(
        "pypi",
        *wheel("nvpy", "13.0.0", ["fishhelper<2"], tag=ABI3, shared={"nvpy/_ops.so": ops}),
    )
    world.add("pypi", *wheel("fishinfer", "1.0", ["fishhelper", "nvpy"], tag=PURE))
    asked = ["servellm", "torch", "fishinfer"]
    second_round, proof_started = threading.Event(), threading.Event()
    real_compile, real_round = uv.UvRunner.compile, LineResolver._round
    rounds: list[Line] = []

    def compile_(runner: uv.UvRunner, job: uv.CompileJob, *args: Any, **kw: Any) -> Any:
        if job.requirements == tuple(asked) and not job.constraints:
            proof_started.set()
        answer = real_compile(runner, job, *args, **kw)
        if "cuda-toolkit==13.2.*" in job.constraints:
            assert second_round.wait(30)  # 13.2's failure is answered once 13.0 resolved
        return answer

    def round_(resolver: LineResolver, requirements: Any, line: Line, *args: Any, **kw: Any) -> Any:
        if line == (13, 0) and line in rounds:
            second_round.set()
            proof_started.wait(1.0)
        rounds.append(line)
        return real_round(resolver, requirements, line, *args, **kw)

    monkeypatch.setattr(uv.UvRunner, "compile", compile_)
    monkeypatch.setattr(LineResolver, "_round", round_)
    result = plan(world, tmp_path, asked, only=("pypi",), driver=None)
    assert result.line == (13, 0)
    assert result.closure is not None and str(result.closure.packages["nvpy"].version) == "13.0.0"
    assert [(e.line, e.kind) for e in result.excluded] == [((13, 2), "resolution")]
    assert rounds.count((13, 0)) == 2
    assert not proof_started.is_set()


def _answer_held(
    monkeypatch: pytest.MonkeyPatch, constraint: str, until: threading.Event, seconds: float
) -> None:
    """uv's answer for the line whose constraints hold ``constraint`` is handed back once
    ``until`` is set, or after ``seconds``."""
    real_compile = uv.UvRunner.compile

    def held(runner: uv.UvRunner, job: uv.CompileJob, *args: Any, **kw: Any) -> Any:
        answer = real_compile(runner, job, *args, **kw)
        if constraint in job.constraints:
            until.wait(seconds)
        return answer

    monkeypatch.setattr(uv.UvRunner, "compile", held)


def test_the_window_is_refilled_as_any_of_its_lines_ends(
    world: IndexServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """torch==2.9.1 resolves on 12.8 alone.  13.0's answer is slow here (it waits, up to
    ten seconds, for 12.8 to start); 12.9 fails at once, which leaves room in the window:
    12.8 starts then, beside 13.0, not once 13.0 has ended (a cold `torch
    flashinfer-python sgl-kernel` plan's 12.8 waited 0.6 s for 13.0's read-back so)."""
    real_attempt = LineResolver.attempt
    events: list[tuple[str, Line]] = []
    started_128 = threading.Event()

    def attempt(self: LineResolver, requirements: Any, line: Line, **options: Any) -> Any:
        events.append(("start", line))
        if line == (12, 8):
            started_128.set()
        try:
            return real_attempt(self, requirements, line, **options)
        finally:
            events.append(("end", line))

    monkeypatch.setattr(LineResolver, "attempt", attempt)
    _answer_held(monkeypatch, "cuda-toolkit==13.0.*", started_128, 10)
    result = plan(world, tmp_path, ["torch==2.9.1"], only=("pypi",))
    assert result.line == (12, 8)
    assert events.index(("start", (12, 8))) < events.index(("end", (13, 0)))


def test_no_older_line_starts_while_a_resolved_one_waits_to_be_weighed(
    world: IndexServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """13.2 fails and 13.0 resolves.  13.0 ends first here (13.2's answer waits, up to a
    second, for another line to start): 13.0 is most likely the answer, so the window,
    though it has room, starts no older line beside 13.2 (in a cold `vllm
    flashinfer-python` plan 12.9's uv run took a core from 13.1 so), nor once 13.0 is
    weighed and answers."""
    real_attempt = LineResolver.attempt
    started: list[Line] = []
    another = threading.Event()

    def attempt(self: LineResolver, requirements: Any, line: Line, **options: Any) -> Any:
        started.append(line)
        if line < (13, 0):
            another.set()
        return real_attempt(self, requirements, line, **options)

    monkeypatch.setattr(LineResolver, "attempt", attempt)
    _answer_held(monkeypatch, "cuda-toolkit==13.2.*", another, 1.0)
    result = plan(world, tmp_path, ["servellm", "torch"], only=("pypi",), driver=None)
    assert result.line == (13, 0)
    assert sorted(started, reverse=True) == [(13, 2), (13, 0)]
