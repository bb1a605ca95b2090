"""The family table, the census of an environment and the change set, as values (pure)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from cudaup.errors import ConflictError, NoCommonLineError, SourceFormatError, UsageError
from cudaup.plan.closure import Closure, Resolved
from cudaup.upgrade.census import take_census
from cudaup.upgrade.changes import change_set, removals
from cudaup.upgrade.environment import Distribution, Environment, parse_environment
from cudaup.upgrade.families import load_families

FAMILIES = load_families()
MARKERS = {
    "python_version": "3.12",
    "python_full_version": "3.12.3",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "os_name": "posix",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
}


def dist(
    name: str,
    version: str,
    requires: tuple[str, ...] = (),
    *,
    extras: tuple[str, ...] = (),
    direct_url: bool = False,
    shared: tuple[str, ...] = (),
) -> Distribution:
    return Distribution(
        name=name,
        version=Version(version),
        version_text=version,
        requires=tuple(Requirement(r) for r in requires),
        extras=extras,
        installer="uv",
        direct_url=direct_url,
        modules=(name.replace("-", "_"),),
        shared_objects=shared,
        site=Path("/env/lib/python3.12/site-packages"),
    )


def environment(*dists: Distribution) -> Environment:
    return Environment(
        Path("/env"), Path("/env/bin/python"), (3, 12), MARKERS, {d.name: d for d in dists},
        Path("/env/lib/python3.12/site-packages"),
    )  # fmt: skip


def torch_stack() -> Environment:
    return environment(
        dist("torch", "2.9.1", ('nvidia-cuda-runtime-cu12==12.8.90; platform_system == "Linux"',)),
        dist("nvidia-cuda-runtime-cu12", "12.8.90"),
        dist("torchvision", "0.24.1", ("torch==2.9.1",)),
        dist("cupy-cuda12x", "13.4.1", ("numpy>=1.22",)),
        dist("numpy", "2.2.6"),
        dist("requests", "2.32.0"),
        dist("servellm", "1.0", ("torch>=2.9",)),
    )


# -- the family table ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("project", "major", "renamed"),
    [
        ("cupy-cuda12x", 13, "cupy-cuda13x"),
        ("cupy_cuda13x", 12, "cupy-cuda12x"),
        ("nvidia-cuda-runtime-cu12", 13, "nvidia-cuda-runtime"),
        ("nvidia-cublas", 12, "nvidia-cublas-cu12"),
        ("nvidia-cudnn-cu12", 13, "nvidia-cudnn-cu13"),
        ("jax-cuda12-plugin", 13, "jax-cuda13-plugin"),
        ("cuda-bindings", 13, "cuda-bindings"),
        # outside the table, a name that carries a major is renamed by the pattern plan reads
        ("cuequivariance-ops-torch-cu12", 13, "cuequivariance-ops-torch-cu13"),
        ("numpy", 13, "numpy"),
        # a family without a build for the major says so
        ("cupy-cuda11x", 14, None),
    ],
)
def test_renames(project: str, major: int, renamed: str | None) -> None:
    assert FAMILIES.rename(project, major) == renamed


def test_extras_that_name_a_major() -> None:
    assert FAMILIES.rename_extra("jax", "cuda12", 13) == "cuda13"
    assert FAMILIES.rename_extra("jax", "cuda12-local", 13) == "cuda13-local"
    assert FAMILIES.rename_extra("flashinfer-python", "cu12", 13) == "cu13"
    assert FAMILIES.rename_extra("cupy-cuda12x", "ctk", 13) == "ctk"


def test_no_project_is_in_two_shipped_families() -> None:
    seen: dict[str, str] = {}
    for family in FAMILIES.families:
        for project in set(family.names.values()):
            assert project not in seen, f"{project} in {family.name} and {seen[project]}"
            seen[project] = family.name


def test_the_user_table_extends_and_overrides(tmp_path: Path) -> None:
    user = tmp_path / "families.toml"
    user.write_text(
        '[families.mylib]\nnames = { "12" = "mylib-gpu12", "13" = "mylib-gpu13" }\n'
        '[families.cupy]\nnames = { "12" = "cupy-cuda12x", "13" = "cupy-cuda13x", "14" = "cupy-cuda14x" }\n'
        '[extras]\nmyframework = ["gpu{major}"]\n'
    )
    table = load_families(user)
    assert table.rename("mylib-gpu12", 13) == "mylib-gpu13"
    assert table.rename("cupy-cuda12x", 14) == "cupy-cuda14x"
    assert table.rename_extra("myframework", "gpu12", 13) == "gpu13"
    assert table.rename("nvidia-cuda-runtime-cu12", 13) == "nvidia-cuda-runtime"  # the rest stays


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[families.x\n", "is not valid TOML"),
        ('[families.x]\nnames = { "twelve" = "x-cu12" }\n', "is not a CUDA major"),
        ('[families.x]\nnames = { "12" = "x cu12" }\n', "is not a project name"),
        ('[families.x]\nnames = { "12" = "x-cu12" }\nline = "name"\n', "the only kind is"),
        ("[families.x]\nnames = {}\n", "names no project"),
        ('[extras]\njax = ["cuda"]\n', "is not an extra with {major}"),
        ('[extras]\njax = "cuda{major}"\n', "extras.jax is not a list of extras"),
        ('[extras]\n"no such" = ["cu{major}"]\n', "is not a project name"),
        ("extras = 3\n", "[extras] is not a table"),
        ("families = 3\n", "[families] is not a table"),
    ],
)
def test_a_broken_user_table_is_named(tmp_path: Path, text: str, message: str) -> None:
    user = tmp_path / "families.toml"
    user.write_text(text)
    with pytest.raises(UsageError, match=re.escape(message)) as caught:
        load_families(user)
    assert str(user) in str(caught.value)


# -- the census ----------------------------------------------------------------------------------
def test_signals_and_dependents() -> None:
    census = take_census(
        environment(
            *torch_stack().distributions.values(),
            dist("cuda-bindings", "12.8.0"),
            dist("torch-cpu-only", "1.0+cpu"),
            dist("sgl-kernel", "0.3.21", shared=("sgl_kernel/common_ops.abi3.so",)),
            dist("localtagged", "2.0+cu128"),
        ),
        FAMILIES,
        linked=lambda d: ["libcudart.so.12", "libc.so.6"] if d.name == "sgl-kernel" else [],
    )
    lines = {name: (s.major, s.minor) for name, s in census.signals.items()}
    assert lines == {
        "nvidia-cuda-runtime-cu12": (12, 8),
        "cupy-cuda12x": (12, None),
        "cuda-bindings": (12, 8),
        "sgl-kernel": (12, None),
        "localtagged": (12, 8),
    }
    assert census.dependents == {"torch", "torchvision", "servellm"}
    assert census.line() == "12.8"
    assert census.signals["sgl-kernel"].how == "its shared objects link libcudart.so.12"


def test_requests_rename_roots_and_keep_what_carries_no_line() -> None:
    census = take_census(torch_stack(), FAMILIES)
    requests = census.requests(13, FAMILIES, per_line=lambda name: name in {"torch", "torchvision"})
    assert [str(r.requirement) for r in requests] == [
        "cupy-cuda13x",
        "servellm",
        "torchvision",
        "torch",
    ]
    assert [r.source.name if r.source else None for r in requests] == [
        "cupy-cuda12x", "servellm", "torchvision", "torch",
    ]  # fmt: skip
    # numpy, requests and servellm carry no line: they stay where the resolution allows.
    # PyPI's untagged torch is a CUDA build all the same: it moves to the newest of the line.
    assert census.preferences(lambda name: name in {"torch", "torchvision"}) == [
        "numpy==2.2.6", "requests==2.32.0", "servellm==1.0",
    ]  # fmt: skip


def test_extras_are_kept_and_renamed() -> None:
    census = take_census(
        environment(
            dist("jax", "0.7.0", ('jax-cuda12-plugin==0.7.0; extra == "cuda12"', 'jax-cuda13-plugin==0.7.0; extra == "cuda13"'),
                 extras=("cuda12", "cuda13")),
            dist("jax-cuda12-plugin", "0.7.0", ("nvidia-cuda-runtime-cu12>=12.1",)),
            dist("nvidia-cuda-runtime-cu12", "12.9.79"),
        ),
        FAMILIES,
    )  # fmt: skip
    assert census.extras["jax"] == ("cuda12",)
    [request] = census.requests(13, FAMILIES)
    assert str(request.requirement) == "jax[cuda13]"


def test_held_and_missing_builds() -> None:
    census = take_census(
        environment(dist("cuda-bindings", "12.8.0"), dist("cupy-cuda11x", "12.0")), FAMILIES
    )
    requests = {str(r.requirement): r.held for r in census.requests(13, FAMILIES)}
    assert requests == {"cuda-bindings": True, "cupy-cuda13x": False}
    alone = take_census(environment(dist("cupy-cuda11x", "12.0")), FAMILIES)
    with pytest.raises(NoCommonLineError, match="cupy-cuda11x 12.0 has no CUDA 14 build"):
        alone.requests(14, FAMILIES)


def test_a_project_installed_from_a_url_is_asked_for_through_its_requirements() -> None:
    census = take_census(
        environment(
            dist("myproject", "0.1", ("torch>=2.9", "requests"), direct_url=True),
            dist("torch", "2.9.1+cu128"),
            dist("requests", "2.32.0"),
        ),
        FAMILIES,
    )
    assert [str(r.requirement) for r in census.requests(13, FAMILIES)] == ["torch>=2.9"]
    assert "myproject==0.1" not in census.preferences()


def test_a_cycle_is_asked_for_once() -> None:
    census = take_census(
        environment(
            dist("a", "1.0", ("b", "cupy-cuda12x")),
            dist("b", "1.0", ("a",)),
            dist("cupy-cuda12x", "13.4.1"),
        ),
        FAMILIES,
    )
    assert census.roots() == ["a"]


def test_the_line_of_a_mixed_environment() -> None:
    census = take_census(
        environment(dist("cuda-toolkit", "12.9.1"), dist("nvidia-cuda-runtime-cu12", "12.8.90")),
        FAMILIES,
    )
    assert census.line() == "12.9 (also 12.8)"


# -- the change set ------------------------------------------------------------------------------
def test_the_change_set() -> None:
    census = take_census(torch_stack(), FAMILIES)
    requests = census.requests(13, FAMILIES, per_line=lambda name: name in {"torch", "torchvision"})

    def resolved(
        name: str, version: str, *parents: str, url: str = "https://pypi.org/simple"
    ) -> Resolved:
        return Resolved(name, Version(version), url, frozenset(parents))

    closure = Closure(
        {
            p.name: p
            for p in (
                resolved(
                    "torch", "2.11.0+cu130", "-r", "servellm", "torchvision", url="file:///local"
                ),
                resolved("torchvision", "0.26.0+cu130", "-r", url="file:///local"),
                resolved("nvidia-cuda-runtime", "13.0.96", "torch"),
                resolved("cupy-cuda13x", "14.0.0", "-r"),
                resolved("numpy", "2.2.6", "cupy-cuda13x"),
                resolved("cuda-pathfinder", "1.9.1", "cupy-cuda13x"),
                resolved("servellm", "1.0", "-r"),
            )
        }
    )
    changes = change_set(
        census, (13, 0), requests, closure, {}, {}, {"https://pypi.org/simple": "pypi"},
        lambda name: FAMILIES.rename(name, 13),
    )  # fmt: skip
    assert [c.describe() for c in changes] == [
        "cupy-cuda12x 13.4.1 → cupy-cuda13x 14.0.0",
        "nvidia-cuda-runtime-cu12 12.8.90 → nvidia-cuda-runtime 13.0.96",
        "torch 2.9.1 → 2.11.0+cu130",
        "torchvision 0.24.1 → 0.26.0+cu130",
        "+ cuda-pathfinder 1.9.1",
    ]
    runtime = changes[1]
    assert (
        runtime.kind == "rename"
        and runtime.reason
        == "the CUDA 13 build of nvidia-cuda-runtime-cu12; required by torch 2.11.0+cu130"
    )
    assert changes[-1].index == "pypi"
    assert removals(changes) == ["cupy-cuda12x", "nvidia-cuda-runtime-cu12"]


# -- what an interpreter answers -----------------------------------------------------------------
def _answer(**overrides: object) -> dict[str, object]:
    entry = {
        "name": "numpy", "version": "2.2.6", "requires": [], "extras": [], "installer": "uv",
        "direct_url": False, "modules": ["numpy"], "shared_objects": [], "site": "/env/lib",
    }  # fmt: skip
    answer: dict[str, object] = {
        "schema": 1, "prefix": "/env", "base_prefix": "/usr", "version": [3, 12, 3],
        "purelib": "/env/lib", "markers": MARKERS, "distributions": [entry],
    }  # fmt: skip
    answer.update(overrides)
    return answer


def test_an_answer_is_checked() -> None:
    parsed = parse_environment(_answer(), Path("/env"), Path("/env/bin/python"), "it")
    assert parsed.get("NumPy") is not None and parsed.python == (3, 12)
    with pytest.raises(ConflictError, match="runs in /elsewhere"):
        parse_environment(_answer(prefix="/elsewhere"), Path("/env"), Path("/env/bin/python"), "it")
    with pytest.raises(UsageError, match="not a virtual environment"):
        parse_environment(_answer(base_prefix="/env"), Path("/env"), Path("/env/bin/python"), "it")
    twice = _answer()
    twice["distributions"] = [*twice["distributions"], *twice["distributions"]]  # type: ignore[misc]
    with pytest.raises(ConflictError, match="holds numpy twice"):
        parse_environment(twice, Path("/env"), Path("/env/bin/python"), "it")
    broken: list[dict[str, object]] = [
        {"version": "three"}, {"markers": {"a": 1}}, {"distributions": {}}, {"schema": 2},
    ]  # fmt: skip
    for bad in broken:
        with pytest.raises(SourceFormatError):
            parse_environment(_answer(**bad), Path("/env"), Path("/env/bin/python"), "it")


def test_odd_distributions_are_kept_out_and_said() -> None:
    entries = [
        {"name": None, "version": "1", "requires": [], "extras": [], "installer": None,
         "direct_url": False, "modules": [], "shared_objects": [], "site": "/env/lib"},
        {"name": "legacy", "version": "1.0-SNAPSHOT", "requires": ["not a requirement!"], "extras": [],
         "installer": None, "direct_url": False, "modules": ["ok", "not-a-module", "../x"],
         "shared_objects": ["../../evil.so", "/abs.so", "legacy/ok.so"], "site": "/env/lib"},
    ]  # fmt: skip
    parsed = parse_environment(
        _answer(distributions=entries), Path("/env"), Path("/env/bin/python"), "it"
    )
    legacy = parsed.distributions["legacy"]
    assert legacy.version is None and legacy.requires == () and legacy.modules == ("ok",)
    assert legacy.shared_objects == ("legacy/ok.so",)
    assert len(parsed.notes) == 3


def test_what_links_libtorch_and_what_is_a_companion() -> None:
    """What links libtorch (read from its objects' needed libraries) is named, torch aside;
    a companion moves with its package though it carries no line and requires nothing."""
    env = environment(
        dist("torch", "2.10.0", ("nvidia-cuda-runtime-cu12==12.8.90",), shared=("torch/lib/libtorch.so",)),
        dist("nvidia-cuda-runtime-cu12", "12.8.90"),
        dist("sglang-kernel", "0.4.1", shared=("sgl_kernel/ops.abi3.so",)),
        dist("flashinfer-python", "0.6.8", ("torch",)),
        dist("flashinfer-cubin", "0.6.8"),
        dist("fastlock", "1.0"),
    )  # fmt: skip
    linked = {
        "torch": ["libc10.so", "libcudart.so.12"],
        "sglang-kernel": ["libtorch.so", "libc10_cuda.so", "libcuda.so.1", "libcudart.so.12"],
    }
    census = take_census(env, FAMILIES, lambda d: linked.get(d.name, []))
    assert census.torch_linked == {"sglang-kernel": ("libc10_cuda.so", "libtorch.so")}
    assert {"flashinfer-python", "flashinfer-cubin"} <= census.dependents
    assert "fastlock" not in census.moving
    assert [str(r.requirement) for r in census.requests(13, FAMILIES)] == [
        "flashinfer-cubin", "flashinfer-python", "sglang-kernel"
    ]  # fmt: skip


def test_an_extra_that_names_the_old_major() -> None:
    env = environment(
        dist("flashinfer-python", "0.6.8", ("torch", 'oldkernels; extra == "cu12"',
             'newkernels; extra == "cu13"'), extras=("cu12", "cu13")),
        dist("oldkernels", "1.0"),
        dist("torch", "2.10.0", ("nvidia-cuda-runtime-cu12==12.8.90",)),
        dist("nvidia-cuda-runtime-cu12", "12.8.90"),
    )  # fmt: skip
    census = take_census(env, FAMILIES)
    assert census.extras["flashinfer-python"] == ("cu12",)
    assert census.moved_extras(13, FAMILIES) == {
        "oldkernels": "required by flashinfer-python[cu12], which becomes [cu13]"
    }
    assert census.moved_extras(12, FAMILIES) == {}  # the extra stays: nothing goes
