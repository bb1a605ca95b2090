"""What the survey says of a project's files alone (plan/survey.py)."""

from __future__ import annotations

from packaging.version import Version

from cudaup.core.platforms import Platform
from cudaup.plan.survey import pure_among_compiled
from cudaup.resolve.pypi import DistFile

LINUX: Platform = "linux-x86_64"
PY312 = (3, 12)


def _files(*names: str) -> list[DistFile]:
    return [
        DistFile(n, f"https://files.example/{n}", None, None, None, False, False) for n in names
    ]


def test_a_pure_version_of_a_compiled_project_is_named() -> None:
    """xformers' files on PyPI: 0.0.33 ships compiled wheels, 0.0.35.dev1147 only a pure
    one (and its sdist), which the target then installs."""
    files = _files(
        "xformers-0.0.33-cp39-abi3-manylinux_2_28_x86_64.whl",
        "xformers-0.0.33-cp39-abi3-win_amd64.whl",
        "xformers-0.0.35.dev1147-py3-none-any.whl",
        "xformers-0.0.35.dev1147.tar.gz",
    )
    pure = pure_among_compiled(files, Version("0.0.35.dev1147"), PY312, LINUX)
    assert pure is not None and pure.filename == "xformers-0.0.35.dev1147-py3-none-any.whl"
    assert pure_among_compiled(files, Version("0.0.33"), PY312, LINUX) is None


def test_a_pure_project_or_a_version_with_compiled_wheels_is_not_named() -> None:
    """A project every version of which is pure says nothing new; nor does a version that
    has compiled wheels, only for other platforms (the target takes its pure fallback)."""
    pure_project = _files("requests-2.32.3-py3-none-any.whl", "requests-2.32.4-py3-none-any.whl")
    assert pure_among_compiled(pure_project, Version("2.32.4"), PY312, LINUX) is None
    fallback = _files(
        "fastjson-1.0-cp312-cp312-win_amd64.whl",
        "fastjson-1.0-py3-none-any.whl",
        "fastjson-0.9-cp312-cp312-manylinux_2_17_x86_64.whl",
    )
    assert pure_among_compiled(fallback, Version("1.0"), PY312, LINUX) is None
    # No wheel of the version for the target at all: nothing to say here.
    assert pure_among_compiled(fallback, Version("2.0"), PY312, LINUX) is None
