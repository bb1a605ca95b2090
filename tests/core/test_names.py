"""Names from outside: what passes, what is refused, and the words of the refusal."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cudaup.core.names import (
    MAX_NAME,
    MAX_PATH,
    check_component,
    check_file_name,
    check_file_names,
    check_file_url,
    check_label,
    check_relative_path,
    check_release,
    check_size,
    is_project_name,
)
from cudaup.errors import IntegrityError, SourceFormatError, UntrustedPathError
from cudaup.util.paths import directory, inside, make_directory

HOSTILE = [
    "",
    ".",
    "..",
    "../x",
    "a/../../b",
    "/etc/passwd",
    "\\\\server\\share",
    "C:evil",
    "c:\\windows",
    "a\x00b",
    "a\nb",
    "x" * 300,
]


@pytest.mark.parametrize("value", [*HOSTILE, "a/b", "a\\b", 5, None, ["x"]])
def test_file_names_refused(value: object) -> None:
    with pytest.raises(SourceFormatError, match=r"^component key .* in redistrib_13\.0\.1\.json"):
        check_file_name(value, field="component key", where="redistrib_13.0.1.json")


@pytest.mark.parametrize(
    "value",
    ["cuda_nvcc-linux-x86_64-13.0.88-archive.tar.xz", "nvidia_cuda_nvcc-13.0.88-py3-none.whl"],
)
def test_file_names_accepted(value: str) -> None:
    assert check_file_name(value, field="file") == value


@pytest.mark.parametrize("value", [v for v in HOSTILE if v not in {"C:evil"}] + ["a//b", "a/./b"])
def test_relative_paths_refused(value: str) -> None:
    with pytest.raises(IntegrityError, match="relative_path"):
        check_relative_path(value, field="relative_path", error=IntegrityError)


def test_relative_paths_accepted() -> None:
    value = "cuda_nvcc/linux-x86_64/cuda_nvcc-linux-x86_64-13.0.88-archive.tar.xz"
    assert check_relative_path(value, field="relative_path") == value


def _segment_passes(segment: str) -> bool:
    """The rule for one segment, written out as the module's docstring states it."""
    return (
        segment not in {"", ".", ".."}
        and not any(c in segment for c in "/\\")
        and not any(ord(c) < 0x20 or ord(c) == 0x7F for c in segment)
        and not (
            len(segment) >= 2
            and segment[0].isascii()
            and segment[0].isalpha()
            and segment[1] == ":"
        )
        and len(segment.encode("utf-8", "surrogatepass")) <= MAX_NAME
    )


@settings(max_examples=3000, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(alphabet="ab.C:/\\\x00\n\x7fé", max_size=6),
            st.sampled_from(["..", ".", "", "x" * 200, "é" * 130, "C:", "..."]),
        ),
        min_size=1,
        max_size=5,
    ).map("/".join)
)
def test_a_relative_path_passes_exactly_when_each_segment_does(value: str) -> None:
    """The one-match fast path accepts nothing the segment-by-segment rule refuses."""
    expected = (
        not value.startswith(("/", "\\"))
        and "://" not in value
        and len(value.encode("utf-8", "surrogatepass")) <= MAX_PATH
        and all(_segment_passes(segment) for segment in value.split("/"))
    )
    try:
        check_relative_path(value, field="path")
    except SourceFormatError:
        assert not expected, value
    else:
        assert expected, value


@settings(max_examples=2000, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(alphabet="ab.C:/\\\x00\n\x7fé", max_size=6),
            st.sampled_from(["..", ".", "", "x" * 255, "x" * 256, "é" * 128, "C:", "a:b", "..."]),
        ),
        max_size=5,
    )
)
def test_file_names_pass_together_exactly_when_each_does(values: list[str]) -> None:
    """One match for a page's names accepts nothing the name-by-name rule refuses."""
    expected = all(_segment_passes(value) for value in values)
    try:
        check_file_names(values, field="filename")
    except SourceFormatError:
        assert not expected, values
    else:
        assert expected, values


@pytest.mark.parametrize("value", ["../../tmp/x", "cuda nvcc", "", "-rf", "x" * 200, 3])
def test_components_refused(value: object) -> None:
    with pytest.raises(SourceFormatError, match="component"):
        check_component(value, field="component")


@pytest.mark.parametrize("value", ["cuda_nvcc", "libcublas", "nvidia_driver", "cuda_cccl"])
def test_components_accepted(value: str) -> None:
    assert check_component(value, field="component") == value


@pytest.mark.parametrize(
    "value", ["../../../../srv/data", "13", "13.0.1/..", "v13.0.1", "1.2.3.4.5"]
)
def test_releases_refused(value: str) -> None:
    with pytest.raises(IntegrityError, match="release"):
        check_release(value, field="release", error=IntegrityError)


def test_releases_accepted() -> None:
    assert check_release("13.0.1", field="release") == "13.0.1"
    assert check_release("12.4.131.1", field="release") == "12.4.131.1"


def test_inside_builds_only_paths_below_the_root(tmp_path: Path) -> None:
    assert inside(tmp_path, "toolkits", "13.0.1") == tmp_path / "toolkits" / "13.0.1"
    for parts in (("..",), ("a", ".."), ("a/b",), ("/etc",), ("",)):
        with pytest.raises(IntegrityError):
            inside(tmp_path, *parts)


def test_inside_refuses_a_link_below_the_root(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    root = tmp_path / "root"
    root.mkdir()
    (root / "toolkits").symlink_to(elsewhere)
    with pytest.raises(UntrustedPathError, match="toolkits is a symbolic link"):
        inside(root, "toolkits", "13.0.1")
    with pytest.raises(UntrustedPathError, match="toolkits is a symbolic link"):
        directory(root, "toolkits")
    with pytest.raises(UntrustedPathError, match="toolkits is a symbolic link"):
        make_directory(root, "toolkits", "13.0.1")
    assert not (elsewhere / "13.0.1").exists()
    assert make_directory(root, "bin", "x") == root / "bin" / "x" and (root / "bin/x").is_dir()
    # The root itself may be a link: the user made it.
    linked_root = tmp_path / "linked"
    linked_root.symlink_to(root)
    assert inside(linked_root, "downloads", "x.run") == linked_root / "downloads" / "x.run"


@pytest.mark.parametrize(
    ("value", "expected"),
    [(0, 0), ("26732376", 26732376), (" 10 ", 10), (2**50, 2**50), (str(2**50), 2**50)],
)
def test_sizes_accepted(value: object, expected: int) -> None:
    assert check_size(value, field="size") == expected


@pytest.mark.parametrize(
    "value",
    ["1" * 5000, "1" * 17, 2**50 + 1, -1, "-1", True, None, 1.5, "1e9", "١٢", "", "0x10"],
)
def test_sizes_refused_without_converting_huge_numbers(value: object) -> None:
    with pytest.raises(SourceFormatError, match=r"^size .* in x\.json is refused"):
        check_size(value, field="size", where="x.json")


def test_a_size_as_text_is_refused_where_the_format_has_numbers() -> None:
    with pytest.raises(IntegrityError, match="not an integer"):
        check_size("10", field="size", error=IntegrityError, text=False)


@pytest.mark.parametrize("value", ["13.0.88", "CUDA 13.0 Update 1", "580.82.07", "ü"])
def test_labels_accepted(value: str) -> None:
    assert check_label(value, field="label") == value


@pytest.mark.parametrize("value", ["", "x" * 201, "a\x1b[2Jb", "a\nb", "\u202e", 5, None])
def test_labels_refused(value: object) -> None:
    with pytest.raises(SourceFormatError, match="^label "):
        check_label(value, field="label")


@pytest.mark.parametrize(
    "value",
    [
        "https://developer.download.nvidia.com/compute/cuda/redist/cuda_nvcc/linux-x86_64/x.tar.xz",
        "http://127.0.0.1:8080/packages/nvidia_cuda_nvcc-13.0.88-py3-none-manylinux_2_27_x86_64.whl",
        "https://host/a%20b.whl",
    ],
)
def test_file_urls_accepted(value: str) -> None:
    assert check_file_url(value, field="url") == value


@pytest.mark.parametrize(
    "value",
    [
        "https://host/compute/..",
        "https://host/compute/../../etc/passwd",
        "https://host/compute/%2e%2e/x",
        "https://host/compute/%2E%2E/x",
        "https://host/a%2Fb",
        "https://host/a%00b",
        "https://host/a//b",
        "https://host/",
        "https://host",
        "https://host/x.whl?a=b/c",
        "https://host/x.whl#frag",
        "https://host/x.whl?",
        "https:///x.whl",
        "file:///etc/passwd",
        "ftp://host/x",
        "/compute/x",
        "https://host/a b",
        "https://host/a\nb",
        "https://[::1/x",
        "https://host/" + "x" * 9000,
        5,
    ],
)
def test_file_urls_refused(value: object) -> None:
    with pytest.raises(IntegrityError, match=r"^url .* in cuda\.lock\.toml is refused"):
        check_file_url(value, field="url", where="cuda.lock.toml", error=IntegrityError)


def test_project_names_are_canonical_names_only() -> None:
    """The one check the plan's local index, the family table and the renames share."""
    assert is_project_name("flashinfer-python") and is_project_name("cuda-toolkit")
    for name in ("../x", "Flashinfer-Python", "a_b", "-x", "x-", "a--b", "", "a/b", "a.b"):
        assert not is_project_name(name), name
