"""``plan`` against package indexes on loopback (tests/plan/world.py), resolved by uv."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from cudaup.core.driver import GpuInfo
from cudaup.errors import (
    NetworkError,
    NoCommonLineError,
    OfflineError,
    PackageNotFoundError,
    ReleaseNotFoundError,
    UsageError,
)
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
    assert thirteen.line == (13, 0) and thirteen.pins() == ["jaxish[cuda13]==1.0"]
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
    assert asked.pins() == ['jaxish[cuda13]==1.0; sys_platform == "linux"']


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


def test_a_warm_plan_asks_nothing(world: IndexServer, tmp_path: Path) -> None:
    first = plan(world, tmp_path, ["torch", "sgl-kernel"], only=("pypi", "pytorch", "sglang"))
    asked = len(world.requests())
    again = plan(world, tmp_path, ["torch", "sgl-kernel"], only=("pypi", "pytorch", "sglang"))
    assert len(world.requests()) == asked
    assert again.to_json() == first.to_json()
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
