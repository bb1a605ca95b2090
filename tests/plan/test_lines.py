"""The pure rules of plan: lines, evidence read back from a resolution, constraints."""

from __future__ import annotations

import pytest
from packaging.version import Version

from cudaup.errors import UsageError
from cudaup.plan.lines import (
    Evidence,
    contradictions,
    describe_lines,
    evidence_of,
    library_evidence,
    line_constraints,
    loaded_evidence,
    name_stem,
    parse_line,
    tag_line,
    toolkit_release,
)

EVERY = [(12, 6), (12, 8), (12, 9), (13, 0), (13, 1), (13, 2)]


def test_tags_lines_and_their_description() -> None:
    assert (
        tag_line("cu130") == (13, 0) and tag_line("cu92") == (9, 2) and tag_line("rocm6.2") is None
    )
    assert parse_line("13.0") == parse_line("cu130") == (13, 0)
    with pytest.raises(UsageError, match="not a CUDA line"):
        parse_line("thirteen")
    assert describe_lines([(12, 8)], EVERY) == "12.8 only"
    assert describe_lines([(13, 0), (13, 1), (13, 2)], EVERY) == "13.0-13.2"
    assert describe_lines([(12, 6), (12, 9), (13, 0)], EVERY) == "12.6 and 12.9-13.0"
    assert describe_lines([], EVERY) == "no line"


def test_toolkit_releases_from_versions() -> None:
    """cuda-toolkit publishes 13.4.1.0 for 13.4.1; 13.4.0rc1 and 0.0.0a0 are no releases."""
    assert toolkit_release(Version("13.4.1.0")) == "13.4.1"
    assert toolkit_release(Version("12.8.2")) == "12.8.2"
    assert toolkit_release(Version("13.4.0rc1")) is None
    assert toolkit_release(Version("0.0.0a0")) is None


@pytest.mark.parametrize(
    ("project", "version", "index_line", "cuda", "how"),
    [
        ("cuda-toolkit", "13.0.3.0", None, "CUDA 13.0", "cuda-toolkit 13.0.3"),
        (
            "nvidia-cuda-runtime-cu12",
            "12.8.90",
            None,
            "CUDA 12.8",
            "nvidia-cuda-runtime-cu12 12.8.90",
        ),
        ("nvidia-cuda-nvrtc", "13.2.51", None, "CUDA 13.2", "nvidia-cuda-nvrtc 13.2.51"),
        ("torch", "2.11.0+cu130", (13, 0), "CUDA 13.0", "from https://idx/cu130"),
        ("torch", "2.11.0+cu128", None, "CUDA 12.8", "local version +cu128"),
        ("nvidia-cudnn-cu13", "9.24.0.43", None, "CUDA 13.x", "the name nvidia-cudnn-cu13"),
        ("cupy-cuda12x", "14.0.0", None, "CUDA 12.x", "the name cupy-cuda12x"),
        ("jax-cuda13-plugin", "0.12.0.1", None, "CUDA 13.x", "the name jax-cuda13-plugin"),
        ("mxnet-cu112", "1.9.1", None, "CUDA 11.2", "the name mxnet-cu112"),
        ("cupy-cuda112", "10.6.0", None, "CUDA 11.2", "the name cupy-cuda112"),
    ],
)
def test_evidence_of_resolved_packages(
    project: str, version: str, index_line: tuple[int, int] | None, cuda: str, how: str
) -> None:
    found = evidence_of(project, Version(version), index_line, "https://idx/cu130")
    assert found is not None and found.cuda() == cuda and found.how == how


def test_no_evidence_where_there_is_none() -> None:
    for project in ("numpy", "cuda-bindings", "cuda-pathfinder", "nvidia-cudnn-frontend", "triton"):
        assert evidence_of(project, Version("13.5.0"), None, None) is None


def test_libraries_give_the_major_only_from_runtime_sonames() -> None:
    twelve = library_evidence("sgl-kernel", "0.3.21", ["libc.so.6", "libcudart.so.12"])
    assert twelve is not None and twelve.cuda() == "CUDA 12.x" and twelve.fits((12, 9))
    assert not twelve.fits((13, 0))
    bundled = library_evidence("x", "1", ["libnvrtc-1a2b3c4d.so.13"])
    assert bundled is not None and bundled.major == 13
    # cuFFT 11 ships in CUDA 12: its soname says nothing about the line.
    assert library_evidence("x", "1", ["libcufft.so.11", "libcuda.so.1"]) is None
    # cuBLAS's major is CUDA's (libcublas 13.0.0.19 ships in 13.0.0).
    cublas = loaded_evidence("x", "1", ["libcublas.so.12", "libcuda.so.1"])
    assert cublas is not None and cublas.major == 12
    assert cublas.how == "loads libcublas.so.12 by name"
    # Loading either major's by name (cudnn-frontend) sets no line.
    either = loaded_evidence("x", "1", ["libcudart.so.13", "libcudart.so.12"])
    assert either is not None and either.kind == "any" and either.fits((12, 8))
    assert either.fits((13, 0)) and either.how.endswith("by name: either major")
    assert loaded_evidence("x", "1", ["libcufft.so.11"]) is None


def test_a_family_of_both_majors_decides_nothing() -> None:
    """nvidia-cutlass-dsl 4.8.0 requires -libs-cu12 always and -libs-cu13 with [cu13]."""
    both = [
        Evidence("nvidia-cutlass-dsl-libs-cu12", "4.8.0", 12, None, "name", kind="name"),
        Evidence("nvidia-cutlass-dsl-libs-cu13", "4.8.0", 13, None, "name", kind="name"),
        Evidence("cuda-toolkit", "13.0.3", 13, 0, "cuda-toolkit 13.0.3", release="13.0.3"),
    ]
    assert contradictions(both, (13, 0)) == []
    alone = [both[0], both[2]]
    assert [e.project for e in contradictions(alone, (13, 0))] == ["nvidia-cutlass-dsl-libs-cu12"]
    assert name_stem("nvidia-cutlass-dsl-libs-cu12") == name_stem("nvidia-cutlass-dsl-libs-cu13")
    assert (
        name_stem("jax-cuda12-plugin")
        == name_stem("jax-cuda13-plugin")
        != name_stem("cupy-cuda13x")
    )


def test_exclusions_answer_each_kind() -> None:
    assert (
        Evidence("cupy-cuda12x", "14.0", 12, None, "n", kind="name").exclusion() == "cupy-cuda12x<0"
    )
    assert Evidence("sgl-kernel", "0.3.21", 12, None, "l").exclusion() == "sgl-kernel!=0.3.21"
    cpu = Evidence.cpu_only("torch", "2.9.1", "a CPU-only build")
    assert not cpu.fits((12, 8)) and cpu.cuda() == "no CUDA" and cpu.exclusion() == "torch!=2.9.1"


def test_exclusions_toward_a_line_keep_out_the_far_side() -> None:
    """A build for older lines than the one planned keeps out its version and all older,
    one for newer lines its version and all newer; a build whose lines include the one
    planned, says nothing of a direction, or carries a local label is excluded alone."""
    older = Evidence("cuda-python", "12.6.2.post1", 12, None, "loads libnvrtc.so.12")
    assert older.exclusion((13, 0)) == "cuda-python>12.6.2.post1"
    assert older.exclusion() == "cuda-python!=12.6.2.post1"
    newer = Evidence("cuda-bindings", "13.4.4", 13, None, "loads libnvrtc.so.13")
    assert newer.exclusion((12, 8)) == "cuda-bindings<13.4.4"
    same_major = Evidence("ops", "2.0", 13, 2, "its version module")
    assert same_major.exclusion((13, 0)) == "ops<2.0"
    assert same_major.exclusion((13, 4)) == "ops>2.0"
    assert Evidence("ops", "2.0", 13, None, "l").exclusion((13, 0)) == "ops!=2.0"
    spread = Evidence("bnb", "0.45", 0, None, "o", kind="lines", lines=((11, 7), (12, 8)))
    assert spread.exclusion((13, 0)) == "bnb>0.45"
    assert spread.exclusion((11, 0)) == "bnb<0.45"
    assert spread.exclusion((12, 0)) == "bnb!=0.45"  # between its lines: no direction
    tagged = Evidence("torch", "2.9.1+cu128", 12, 8, "t")
    assert tagged.exclusion((13, 0)) == "torch!=2.9.1+cu128"
    cpu = Evidence.cpu_only("torch", "2.9.1", "a CPU-only build")
    assert cpu.exclusion((13, 0)) == "torch!=2.9.1"
    assert Evidence.any_line("triton", "3.3.0", "ptxas").exclusion((13, 0)) == "triton!=3.3.0"
    assert (
        Evidence("cupy-cuda12x", "14", 12, None, "n", kind="name").exclusion((13, 0))
        == "cupy-cuda12x<0"
    )


def test_line_constraints() -> None:
    constraints = line_constraints((13, 0), {11, 12, 13}, ["sgl-kernel!=0.3.21"])
    assert constraints[0] == "cuda-toolkit==13.0.*"
    assert "nvidia-cuda-runtime==13.0.*" in constraints
    assert "nvidia-cuda-nvrtc-cu13==13.0.*" in constraints
    assert "nvidia-cuda-runtime-cu12<0" in constraints and "nvidia-cuda-nvrtc-cu11<0" in constraints
    assert "nvidia-cuda-runtime-cu13<0" not in constraints
    assert constraints[-1] == "sgl-kernel!=0.3.21"


def test_held_projects_are_held_to_the_line() -> None:
    """``upgrade`` holds a project versioned by release (cuda-bindings 13.0.3 is CUDA 13.0)."""
    constraints = line_constraints((13, 0), {12, 13}, held=["cuda_bindings", "cuda-bindings"])
    assert constraints.count("cuda-bindings==13.0.*") == 1
