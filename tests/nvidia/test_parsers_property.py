"""Every NVIDIA parser, fed anything: it returns, or raises SourceFormatError naming the
document; never another exception (which the CLI would report as an internal error)."""

from __future__ import annotations

import contextlib
import html
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cudaup.errors import SourceFormatError
from cudaup.nvidia.archive_page import parse_archive_index, parse_archive_page
from cudaup.nvidia.checksums import parse_checksum_file
from cudaup.nvidia.installers import classify_installer
from cudaup.nvidia.listing import parse_redist_listing
from cudaup.nvidia.manifest import parse_manifest

pytestmark = pytest.mark.property
SOURCE = "https://mirror.example/doc"

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=40)
    | st.sampled_from(["../x", "/abs", "a\\b", "13.0.1", "1" * 60, "linux-x86_64"]),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(
        st.sampled_from(
            ["cuda_nvcc", "../k", "version", "relative_path", "sha256", "md5", "size",
             "linux-x86_64", "source", "cuda12", "releases", "details", "name", "a/b"]
        )
        | st.text(max_size=10),
        inner,
        max_size=5,
    ),
    max_leaves=20,
)  # fmt: skip


def _refuses_cleanly(parse: Callable[[], Any]) -> None:
    with contextlib.suppress(SourceFormatError):
        parse()


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=2048))
def test_manifest_from_any_bytes(data: bytes) -> None:
    _refuses_cleanly(lambda: parse_manifest(data, SOURCE))


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_manifest_from_any_json(document: Any) -> None:
    _refuses_cleanly(lambda: parse_manifest(json.dumps(document).encode(), SOURCE))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            ["<a href='", "redistrib_", "13.0.1", ".json", "'>", "</a>", "<li>", "<!--", "-->",
             "<span class='date'>", "2025-01-01", " ", "/", "9" * 30, "<", ">", '"']
        )
        | st.text(max_size=8),
        max_size=40,
    ).map("".join)
)  # fmt: skip
def test_listing_from_any_text(text: str) -> None:
    _refuses_cleanly(lambda: parse_redist_listing(text, SOURCE))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(["8c56e3cb1ab74370aafed5a4600bc5bc", "  ", " *", "\n", "../", "..",
                         "cuda.run", "\\", "#", "\x00", "C:"])
        | st.text(max_size=8),
        max_size=30,
    ).map("".join),
    st.sampled_from(["md5", "sha256"]),
)  # fmt: skip
def test_checksums_from_any_text(text: str, algorithm: Any) -> None:
    _refuses_cleanly(lambda: parse_checksum_file(text, algorithm, SOURCE))


@settings(max_examples=200, deadline=None)
@given(json_values, st.sampled_from(['"', "'"]))
def test_archive_page_from_any_payload(payload: Any, quote: str) -> None:
    encoded = html.escape(json.dumps(payload), quote=True)
    page = f"<div data-react-props={quote}{encoded}{quote}></div>"
    _refuses_cleanly(lambda: parse_archive_page(page, SOURCE))


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_archive_page_and_index_from_any_text(text: str) -> None:
    _refuses_cleanly(lambda: parse_archive_page("data-react-props='" + text, SOURCE))
    _refuses_cleanly(lambda: parse_archive_index(text, SOURCE))


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_installer_names_from_any_text(name: str) -> None:
    _refuses_cleanly(lambda: classify_installer(name))
