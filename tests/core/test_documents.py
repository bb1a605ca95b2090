"""Decoding documents from outside: every broken input is SourceFormatError naming it."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cudaup.core.documents import decode_text, load_json, load_toml
from cudaup.errors import SourceFormatError

WHAT = "https://mirror.example/doc"


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (b'{"a": ' + b"1" * 5000 + b"}", "not valid JSON"),
        (b"\xef\xbb\xbf{}", "byte-order mark"),
        (b'{"a": "\xff"}', "not UTF-8 (at byte 7)"),
        (b'{"a": NaN}', "NaN is not JSON"),
        (b'{"a": -Infinity}', "not valid JSON"),
        (b"{", "not valid JSON"),
        (b"", "not valid JSON"),
        (b" " * 101, "larger than 100 bytes"),
    ],
)
def test_broken_json(data: bytes, says: str) -> None:
    with pytest.raises(SourceFormatError, match=f"^{re.escape(WHAT)} .*{re.escape(says)}"):
        load_json(data, what=WHAT, max_bytes=100 if data.strip() == b"" else 10**7)


def test_json_text_with_a_bom_and_good_json() -> None:
    with pytest.raises(SourceFormatError, match="byte-order mark"):
        load_json("\ufeff{}", what=WHAT, max_bytes=10)
    assert load_json(b'{"a": [1, "x"]}', what=WHAT, max_bytes=100) == {"a": [1, "x"]}


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"a = " + b"[" * 100_000, "nested too deeply"),
        (b"a = " + b"1" * 5000, "not valid TOML"),
        (b"\xef\xbb\xbfa = 1", "byte-order mark"),
        (b'a = "\xc3"', "not UTF-8"),
        (b"[[a]\n", "not valid TOML"),
    ],
)
def test_broken_toml(data: bytes, says: str) -> None:
    with pytest.raises(SourceFormatError, match=f"^{re.escape(WHAT)} .*{re.escape(says)}"):
        load_toml(data, what=WHAT, max_bytes=10**7)


def test_text_boms_are_refused_or_stripped_as_the_format_allows() -> None:
    assert decode_text(b"\xef\xbb\xbf<html>", what=WHAT, max_bytes=100, bom="strip") == "<html>"
    with pytest.raises(SourceFormatError, match="byte-order mark"):
        decode_text(b"\xef\xbb\xbfabc  x.run", what=WHAT, max_bytes=100)


@pytest.mark.property
@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=512))
def test_any_bytes_decode_or_are_refused(data: bytes) -> None:
    for parse in (
        lambda: load_json(data, what=WHAT, max_bytes=256),
        lambda: load_toml(data, what=WHAT, max_bytes=256),
        lambda: decode_text(data, what=WHAT, max_bytes=256, bom="strip"),
    ):
        try:
            parse()
        except SourceFormatError as exc:
            assert str(exc).startswith(WHAT)
