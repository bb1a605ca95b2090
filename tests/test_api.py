"""The library API: every public package is reachable as ``cudaup.<package>``, names its API
in ``__all__``, and docs/api.md documents every one of those names (cuda_pathfinder's habit).
The examples of the packages that need no network run here, so they cannot go stale."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import cudaup

API = Path(__file__).parent.parent / "docs" / "api.md"
OFFLINE = ("core", "nvidia")


def _sections() -> dict[str, str]:
    """docs/api.md's text per ``## `cudaup.<package>` `` section."""
    parts = re.split(r"^## `cudaup\.(\w+)`.*$", API.read_text(), flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_every_public_package_is_reachable_and_exports_what_it_lists() -> None:
    for package in cudaup._PACKAGES:
        module = getattr(cudaup, package)
        assert module.__all__, f"cudaup.{package} has no __all__"
        for name in module.__all__:
            getattr(module, name)  # resolves (lazy exports included)
    with pytest.raises(AttributeError):
        _ = cudaup.no_such_package


def test_docs_api_documents_every_export() -> None:
    sections = _sections()
    assert set(sections) == set(cudaup._PACKAGES)
    missing = {
        package: [n for n in getattr(cudaup, package).__all__ if f"`{n}" not in sections[package]]
        for package in cudaup._PACKAGES
    }
    assert {p: names for p, names in missing.items() if names} == {}


def test_every_example_compiles() -> None:
    for block in re.findall(r"```python\n(.*?)```", API.read_text(), flags=re.DOTALL):
        compile(block, str(API), "exec")


@pytest.mark.parametrize("package", OFFLINE)
def test_the_offline_examples_run(package: str) -> None:
    blocks = re.findall(r"```python\n(.*?)```", _sections()[package], flags=re.DOTALL)
    assert blocks
    for block in blocks:
        exec(compile(block, str(API), "exec"), {})  # our own documentation
