"""A hostile or broken package index: every file name is checked, every field typed, and
every failure is SourceFormatError naming the page (never an internal error)."""

from __future__ import annotations

import contextlib
import io
import json
import zipfile
from collections.abc import Callable
from typing import Any
from urllib.parse import urljoin

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cudaup.errors import SourceFormatError
from cudaup.resolve.pypi import (
    MAX_METADATA_BYTES,
    _metadata_from_wheel,
    parse_metadata,
    parse_simple_html,
    parse_simple_json,
)

PAGE = "https://index.example/simple/nvidia-cuda-nvcc/"
WHEEL = "nvidia_cuda_nvcc-13.0.88-py3-none-manylinux_2_27_x86_64.whl"


def _json(**changes: Any) -> bytes:
    entry: dict[str, Any] = {
        "filename": WHEEL,
        "url": f"../../packages/{WHEEL}",
        "hashes": {"sha256": "ab" * 32},
        "size": 10,
    }
    entry.update(changes)
    return json.dumps({"meta": {"api-version": "1.1"}, "files": [entry]}).encode()


def test_a_good_entry_still_parses() -> None:
    [file] = parse_simple_json(_json(), PAGE)
    assert file.filename == WHEEL and file.sha256 == "ab" * 32 and file.size == 10


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (_json(filename="../../../../tmp/x.whl"), "filename '../../../../tmp/x.whl'"),
        (_json(filename="a/b.whl"), "filename 'a/b.whl'"),
        (_json(filename=".."), "filename '..'"),
        (_json(filename="x\x1b[2J.whl"), "control characters"),
        (_json(filename=5), "filename 5"),
        (_json(url=5), "'url' is not a string"),
        (_json(size=-1), "size -1"),
        (_json(size="10"), "size '10'"),
        (_json(size=2**60), f"size {2**60}"),
        (_json(hashes=["x"]), "'hashes' is not an object"),
        (_json(hashes={"sha256": "zz"}), "sha256 'zz'"),
        (_json(**{"requires-python": 3}), "'requires-python' is int"),
        (b'{"files": {"a": 1}}', "is not a PEP 691 project page"),
        (b"[1]", "is not a PEP 691 project page"),
        (b'{"files": ' + b"[" * 100_000 + b"}", "nested too deeply"),
        (b'{"files": [], "x": ' + b"1" * 5000 + b"}", "not valid JSON"),
        (b"\xef\xbb\xbf{}", "byte-order mark"),
        (b'{"files": ["\xff"]}', "not UTF-8"),
    ],
)
def test_hostile_json_pages(data: bytes, says: str) -> None:
    with pytest.raises(SourceFormatError) as caught:
        parse_simple_json(data, PAGE)
    assert PAGE in str(caught.value) and says in str(caught.value)


def test_html_directory_links_are_passed_over_and_file_links_checked() -> None:
    page = f'<a href="../">parent</a><a href="sub/">dir</a><a href="/packages/{WHEEL}">w</a>'
    assert [f.filename for f in parse_simple_html(page, PAGE)] == [WHEEL]


@pytest.mark.parametrize(
    ("href", "says"),
    [
        ("/packages/%2e%2e", "file name '..'"),
        ("/packages/a%2Fb.whl", "file name 'a/b.whl'"),
        ("/packages/x%00.whl", "control characters"),
        ("//[::1/x.whl", "not a URL"),
        (f"/packages/{WHEEL}#sha256=zz", "sha256 'zz'"),
    ],
)
def test_hostile_html_links(href: str, says: str) -> None:
    with pytest.raises(SourceFormatError) as caught:
        parse_simple_html(f'<a href="{href}">x</a>', PAGE)
    assert PAGE in str(caught.value) and says in str(caught.value)


def _zip(members: dict[str, bytes]) -> Callable[[], io.BytesIO]:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return lambda: io.BytesIO(buffer.getvalue())


@pytest.mark.parametrize(
    ("wheel", "says"),
    [
        (lambda: io.BytesIO(b"not a zip at all"), "is not a readable wheel"),
        (lambda: io.BytesIO(b""), "is not a readable wheel"),
        (_zip({"x/METADATA": b""}), "has no single *.dist-info/METADATA"),
        (
            _zip({"a.dist-info/METADATA": b"Name: a\n" + b"x" * MAX_METADATA_BYTES}),
            "is larger than",
        ),
        (
            _zip({"a.dist-info/METADATA": b"Name: a\nRequires-Dist: nvidia-x ==== 1\n"}),
            "cannot read the core metadata",
        ),
    ],
    ids=["not-zip", "empty", "no-metadata", "huge-metadata", "bad-requirement"],
)
def test_broken_wheels_are_refused_naming_the_url(
    wheel: Callable[[], io.BytesIO], says: str
) -> None:
    url = f"https://files.example/{WHEEL}"
    with pytest.raises(SourceFormatError) as caught:
        _metadata_from_wheel(wheel, url)
    assert url in str(caught.value) and says in str(caught.value)


@pytest.mark.property
@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=1024))
def test_index_parsers_from_any_bytes(data: bytes) -> None:
    for parse in (
        lambda: parse_simple_json(data, PAGE),
        lambda: parse_simple_html(data.decode("utf-8", "replace"), PAGE),
        lambda: parse_metadata(data, PAGE),
        lambda: _metadata_from_wheel(lambda: io.BytesIO(data), PAGE),
    ):
        with contextlib.suppress(SourceFormatError):
            parse()


@pytest.mark.property
@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(['<a href="', '">', "</a>", "../", "%2e", "#sha256=", "ab" * 32, WHEEL,
                         "data-yanked", "<!", "<![", "&#", "[", "//", "\\", "/"])
        | st.text(max_size=6),
        max_size=30,
    ).map("".join)
)  # fmt: skip
def test_html_pages_from_any_markup(page: str) -> None:
    with contextlib.suppress(SourceFormatError):
        parse_simple_html(page, PAGE)


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(["https://", "http://", "HTTPS://", "ftp://", "//", "/", "../", ""]),
    st.text(alphabet="abAB09.-:@[]%", max_size=12),
    st.text(alphabet="abZ09/._~%+=!$&'()*,:;@?#- \t\n\\", max_size=24),
)
def test_each_file_url_is_the_page_joined_with_the_listed_one(
    scheme: str, host: str, rest: str
) -> None:
    """A page's plain absolute URLs skip urljoin's parse; every URL still comes out as
    urljoin gives it (or the page is refused, as urljoin refuses it)."""
    listed = scheme + host + rest
    try:
        expected = urljoin(PAGE, listed)
    except ValueError:
        return  # urljoin refuses it (an invalid IPv6 host): a plain URL never is
    try:
        (file,) = parse_simple_json(_json(url=listed), PAGE)
    except SourceFormatError:
        return  # refused for another field, the same either way
    assert file.url == expected
