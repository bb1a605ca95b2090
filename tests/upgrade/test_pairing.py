"""What is built together stays together (issue 21, item 2): libtorch builds paired with
the torch chosen (a pin preferred, else the symbols proven, else refused), companions at
their package's version, extras that name a line moved with their old dependencies gone,
release-versioned packages held to the line, renamed projects.  Through the CLI on the
loopback world with real ELF objects (tests/upgrade/stackworld.py), uv resolving."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from cudaup.errors import EXIT_CODES, UsageError
from cudaup.plan.closure import Closure, Resolved
from cudaup.upgrade.census import Request
from cudaup.upgrade.families import load_families
from cudaup.upgrade.pairing import (
    SymbolCheck,
    companion_pins,
    pins_torch,
    read_symbols,
    with_pins,
)
from tests.plan.pyindex import IndexServer
from tests.upgrade.stackworld import COMMON, NEW, OLD, _objects, add_stack
from tests.upgrade.world import freeze, make_environment, tree_state, upgrade

TARGET = ("--driver", "590.48.01", "--index", "pypi")


@pytest.fixture
def stack(world: IndexServer, tmp_path: Path, uv_cache: Path) -> Any:
    add_stack(world)

    def make(packages: list[str], name: str = "venv") -> Path:
        return make_environment(
            world, tmp_path / "project" / name, packages, uv_cache, per_line=False
        )

    return make


def changes_of(plan: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {(c["new"] or c["old"])["name"]: c for c in plan["changes"]}


def test_what_is_built_together_moves_together(
    stack: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    python = stack(
        ["torch==2.9.1", "kernelish==1.0", "flashinfer-python[cu12]==0.6.8",
         "flashinfer-cubin==0.6.8", "cupy-cuda12x==13.4.1"]
    )  # fmt: skip
    root = python.parent.parent
    frozen, state = freeze(python), tree_state(root)
    result = upgrade(capsys, python, "--dry-run", "--json", *TARGET)
    assert result.code == 0, result.err
    plan = result.json()
    # 590.48.01 runs 13.0 fully, 13.2 only under minor-version compatibility.
    assert plan["line_after"] == "13.0"
    assert (
        plan["excluded"][0]["line"] == "13.2" and "minor-version" in plan["excluded"][0]["message"]
    )
    changes = changes_of(plan)
    assert changes["torch"]["new"]["version"] == "2.11.0"
    # The newest kernelish (1.2) pins no torch; 1.1 pins torch==2.11.0: the build for it.
    assert changes["kernelish"]["new"]["version"] == "1.1"
    assert "kernelish 1.1 pins torch==2.11.0 (it links libtorch.so)" in plan["notes"]
    # flashinfer-python must move (0.6.8 wants torch<2.10); its cubin follows it to 0.7.0,
    # not to its own newest 0.7.1.
    assert changes["flashinfer-python"]["new"]["version"] == "0.7.0"
    assert changes["flashinfer-cubin"]["new"]["version"] == "0.7.0"
    assert "flashinfer-cubin 0.7.0 has flashinfer-python's version (its companion)" in plan["notes"]
    # [cu12] → [cu13]: its dependencies come, the old extra's go.
    assert changes["newkernels"]["kind"] == "add"
    assert changes["oldkernels"]["kind"] == "remove"
    assert changes["oldkernels"]["reason"] == (
        "required by flashinfer-python[cu12], which becomes [cu13]; nothing else requires it"
    )
    assert tree_state(root) == state  # a dry run writes nothing

    applied = upgrade(capsys, python, "--yes", "--no-toolkit", "--json", *TARGET)
    assert applied.code == 0, applied.err
    after = dict(line.split("==") for line in freeze(python))
    assert after["kernelish"] == "1.1" and after["torch"] == "2.11.0"
    assert after["flashinfer-python"] == after["flashinfer-cubin"] == "0.7.0"
    assert "newkernels" in after and "oldkernels" not in after
    assert after["cupy-cuda13x"] == "14.0.0" and "cupy-cuda12x" not in after
    restored = upgrade_rollback(capsys, python)
    assert restored == 0
    assert freeze(python) == frozen and tree_state(root) == state


def upgrade_rollback(capsys: pytest.CaptureFixture[str], python: Path) -> int:
    from tests.helpers import run_cli

    return run_cli(capsys, "rollback", "--python", str(python)).code


def test_no_pin_but_every_symbol_is_there(stack: Any, capsys: pytest.CaptureFixture[str]) -> None:
    python = stack(["torch==2.9.1", "symkernel==1.0"])
    result = upgrade(capsys, python, "13.0", "--dry-run", "--json", *TARGET)
    assert result.code == 0, result.err
    plan = result.json()
    assert changes_of(plan)["symkernel"]["new"]["version"] == "2.0"
    assert (
        "symkernel 2.0 pins no torch, but torch 2.11.0's libraries export all 2 torch symbols "
        "its symkernel/_ops.abi3.so need" in plan["notes"]
    )


def test_an_unprovable_pairing_is_refused_before_anything_changes(
    stack: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    python = stack(["torch==2.9.1", "badkernel==1.0"])
    root = python.parent.parent
    state = tree_state(root)
    result = upgrade(capsys, python, "13.0", "--yes", "--no-toolkit", *TARGET)
    assert result.code == EXIT_CODES["no-common-line"] == 13, result.err
    # The installed 1.0 is what the resolution keeps; neither it nor 2.0 finds its symbols.
    assert (
        "badkernel 1.0 links libtorch.so, and nothing proves it was built for torch 2.11.0: "
        "none of the 2 versions read pins that torch, and torch 2.11.0's libraries lack 1 of the "
        f"2 torch symbols its badkernel/_ops.abi3.so need ({OLD}) (nor those of 2.0)"
    ) in result.err
    assert tree_state(root) == state and not list(root.parent.glob(".cudaup-snapshots/*/*-*"))
    # With no line asked for, the move is not made: the environment's own line is the answer.
    newest = upgrade(capsys, python, "--dry-run", "--json", *TARGET)
    assert newest.code == 0, newest.err
    assert newest.json()["line_after"] == "12.8" and newest.json()["changes"] == []
    assert any("badkernel 1.0 links libtorch.so" in n for n in newest.json()["notes"])


def test_release_versioned_packages_stay_on_the_line(
    stack: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """cuda-bindings comes through a loose requirement (bindingsuser: cuda-bindings), not
    as a root: it is still held to the line, never another major."""
    python = stack(["bindingsuser==1.0", "cuda-bindings==12.8.0", "cupy-cuda12x==13.4.1"])
    twelve = upgrade(capsys, python, "12.9", "--dry-run", "--json", *TARGET)
    assert twelve.code == 0, twelve.err
    assert changes_of(twelve.json())["cuda-bindings"]["new"]["version"] == "12.9.0"
    thirteen = upgrade(capsys, python, "13.0", "--dry-run", "--json", *TARGET)
    assert changes_of(thirteen.json())["cuda-bindings"]["new"]["version"] == "13.0.3"


# -- pure rules ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("requires", "torch", "pinned"),
    [
        (["torch==2.14.1"], "2.14.1", True),
        (["torch==2.14.1"], "2.14.1+cu130", True),  # a build of that version
        (["torch==2.14.1; platform_system == 'Linux'"], "2.14.1", True),
        (["torch===2.14.1"], "2.14.1", True),
        (["torch===2.14.1"], "2.14.1+cu130", False),  # arbitrary equality is the string
        (["torch"], "2.14.1", False),
        (["torch>=2.14"], "2.14.1", False),
        (["torch==2.14.*"], "2.14.1", False),
        (["torch==2.13.0"], "2.14.1", False),
        (["torch==2.14.1; extra == 'test'"], "2.14.1", False),  # an extra's pin says nothing
        (["numpy==2.14.1"], "2.14.1", False),
    ],
)
def test_what_pins_a_torch(requires: list[str], torch: str, pinned: bool) -> None:
    assert pins_torch([Requirement(r) for r in requires], Version(torch)) is pinned


class Published:
    """An index's versions, as data (the rule under test reads nothing else)."""

    def __init__(self, versions: dict[str, list[str]]) -> None:
        self.published = {k: [Version(v) for v in vs] for k, vs in versions.items()}

    def versions(self, project: str) -> Sequence[Version]:
        return sorted(self.published.get(project, []), reverse=True)

    def requires(self, project: str, version: Version) -> Sequence[Requirement]:
        return ()

    def symbols(self, project: str, version: Version, torch: Version) -> SymbolCheck:
        return SymbolCheck((), 0, ())


def closure(**versions: str) -> Closure:
    return Closure(
        {n: Resolved(n, Version(v), None, frozenset({"-r"})) for n, v in versions.items()}
    )


@pytest.mark.parametrize(
    ("resolved", "published", "pins"),
    [
        # The package moved, the companion stayed: both at the package's version.
        ({"fi": "0.7.0", "fi-cubin": "0.6.8"}, {"fi": ["0.6.8", "0.7.0"],
          "fi-cubin": ["0.6.8", "0.7.0", "0.7.1"]}, {"fi": "0.7.0", "fi-cubin": "0.7.0"}),
        # The companion ran ahead; the newest both publish, not above the package.
        ({"fi": "0.7.2", "fi-cubin": "0.7.3"}, {"fi": ["0.7.0", "0.7.2"],
          "fi-cubin": ["0.7.0", "0.7.3"]}, {"fi": "0.7.0", "fi-cubin": "0.7.0"}),
        # Equal already: nothing to pin.
        ({"fi": "0.7.0", "fi-cubin": "0.7.0"}, {}, {}),
        # The companion is not in the resolution: nothing to pin.
        ({"fi": "0.7.0"}, {}, {}),
    ],
)  # fmt: skip
def test_companion_pins(
    resolved: dict[str, str], published: dict[str, list[str]], pins: dict[str, str]
) -> None:
    found = companion_pins(closure(**resolved), {"fi-cubin": "fi"}, Published(published))
    assert {k: str(v) for k, v in found.items()} == pins


def test_companions_without_a_common_version() -> None:
    from cudaup.errors import NoCommonLineError

    with pytest.raises(NoCommonLineError, match="publish no version of both"):
        companion_pins(
            closure(fi="0.7.0", **{"fi-cubin": "0.6.8"}),
            {"fi-cubin": "fi"},
            Published({"fi": ["0.7.0"], "fi-cubin": ["0.6.8"]}),
        )


def test_pins_keep_extras_and_add_what_was_not_asked() -> None:
    asked = [Request(Requirement("fi[cu13]"), None), Request(Requirement("cupy-cuda13x"), None)]
    pinned = with_pins(asked, {"fi": Version("0.7.0"), "fi-cubin": Version("0.7.0")})
    assert [str(r.requirement) for r in pinned] == [
        "fi[cu13]==0.7.0", "cupy-cuda13x", "fi-cubin==0.7.0"
    ]  # fmt: skip


def test_the_symbols_an_extension_needs_from_torch(tmp_path: Path) -> None:
    """What the proof reads: the mangled c10::/at:: names an extension leaves undefined,
    against what a libtorch defines (read as ld.so binds them)."""
    objects = _objects()
    paths = {}
    for name in ("libtorch-new.so", "ext-old.so", "ext-new.so"):
        paths[name] = tmp_path / name
        paths[name].write_bytes(objects[name])
    library = read_symbols(paths["libtorch-new.so"])
    for extension, missing in (("ext-new.so", set()), ("ext-old.so", {OLD})):
        needed = {
            s for s in read_symbols(paths[extension]).undefined if s.name in {OLD, NEW, COMMON}
        }
        assert {s.name for s in needed} in ({NEW, COMMON}, {OLD, COMMON})
        assert {s.name for s in needed if not library.defines(s)} == missing
    (tmp_path / "text.so").write_text("not an object")
    assert read_symbols(tmp_path / "text.so").undefined == ()


def test_the_family_table_renames_and_companions(tmp_path: Path) -> None:
    table = load_families()
    assert table.rename("sgl-kernel", 13) == table.rename("sgl-kernel", 12) == "sglang-kernel"
    assert table.rename("sglang-kernel", 12) == "sglang-kernel"
    assert table.companions["flashinfer-cubin"] == "flashinfer-python"
    assert table.companions["flashinfer-jit-cache"] == "flashinfer-python"
    assert "cuda-bindings" in table.versioned_by_line(13)
    assert "cuda-python" in table.versioned_by_line(12)
    user = tmp_path / "families.toml"
    user.write_text('[renamed]\nold-thing = { to = "new-thing", since = "2.0" }\n'
                    '[companions]\nthing-data = "new-thing"\n')  # fmt: skip
    extended = load_families(user)
    assert extended.rename("old-thing", 13) == "new-thing"
    assert extended.companions["thing-data"] == "new-thing"
    for text, message in (
        ('[renamed]\nx = "y"\n', r"renamed.x is not"),
        ('[renamed]\nx = { to = "y", since = "soon" }\n', r"'soon' is not a version"),
        ('[companions]\nx = "x"\n', r"companions.x names itself"),
        ('[companions]\nx = "Not A Name!"\n', r"is not a project name"),
    ):
        user.write_text(text)
        with pytest.raises(UsageError, match=message):
            load_families(user)


def test_exit_13_names_the_package_that_keeps_the_line(
    stack: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """13.2 has a runtime, bindings and cupy, but no torch: torch is the blocker, not
    servellm (the request that fails because it requires torch)."""
    python = stack(["torch==2.9.1", "servellm==1.0", "cupy-cuda12x==13.4.1"])
    result = upgrade(capsys, python, "13.2", "--dry-run", "--json", *TARGET)
    assert result.code == EXIT_CODES["no-common-line"], result.err
    error = result.json()["error"]
    assert error["message"].startswith("torch has no build that resolves on CUDA 13.2 (")
    assert "), and servellm requires it: no CUDA line fits every package" in error["message"]
    assert error["kind"] == "no-common-line" and error["exit_code"] == 13
    assert error["details"]["blocker"] == "torch"
