"""Decoding documents from outside: every broken input is SourceFormatError naming it."""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cudaup.core.documents import MAX_NESTING, decode_text, load_json, load_toml
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


def _with_little_stack_left(call: Callable[[], Any], frames_left: int = 40) -> Any:
    """``call()`` from so deep a stack that only ``frames_left`` frames remain."""

    def descend(depth: int) -> Any:
        if depth <= frames_left:
            return call()
        return descend(depth - 1)

    used = len(inspect.stack(0))
    return descend(sys.getrecursionlimit() - used)


JSON_DEEP = b"[" * 100_000 + b"]" * 100_000
TOML_DEEP = b"a = " + b"[" * 100_000


@pytest.mark.parametrize(
    "load",
    [
        lambda: load_json(JSON_DEEP, what=WHAT, max_bytes=10**7),
        lambda: load_toml(TOML_DEEP, what=WHAT, max_bytes=10**7),
    ],
    ids=["json", "toml"],
)
def test_nesting_is_refused_the_same_however_little_stack_is_left(
    load: Callable[[], Any],
) -> None:
    """The limit is counted, not found by running out of stack: the same answer from a
    test's shallow stack and from one with 40 frames to spare."""
    says = f"^{re.escape(WHAT)} is nested too deeply to be a real document \\(more than 1000 levels\\)$"
    with pytest.raises(SourceFormatError, match=says):
        load()
    with pytest.raises(SourceFormatError, match=says):
        _with_little_stack_left(load)


def test_nesting_up_to_the_limit_parses_and_brackets_in_strings_do_not_count() -> None:
    deepest = b"[" * MAX_NESTING + b"]" * MAX_NESTING
    assert load_json(deepest, what=WHAT, max_bytes=10**6) is not None
    with pytest.raises(SourceFormatError, match="nested too deeply"):
        load_json(b"[" + deepest + b"]", what=WHAT, max_bytes=10**6)
    # A string that ends in an escaped backslash ends at the next quote: what follows counts.
    with pytest.raises(SourceFormatError, match="nested too deeply"):
        load_json(b'["a\\\\", ' + deepest + b"]", what=WHAT, max_bytes=10**6)
    assert load_json(b'["a\\\\", "\\\\\\"' + b"[" * 2000 + b'"]', what=WHAT, max_bytes=10**6)
    brackets = "[{" * 5000
    assert load_json(f'{{"a": "{brackets}\\"{brackets}"}}', what=WHAT, max_bytes=10**6) == {
        "a": f'{brackets}"{brackets}'
    }
    toml = (
        f'a = "{brackets}"\nb = \'{brackets}\'\nc = """\n{brackets}"""\n'
        f"d = '''{brackets}'''\n# {brackets}\n[[t.u]]\ne = {{f = [[1], [2]]}}\n"
    )
    assert load_toml(toml.encode(), what=WHAT, max_bytes=10**6) == {
        "a": brackets, "b": brackets, "c": brackets, "d": brackets,
        "t": {"u": [{"e": {"f": [[1], [2]]}}]},
    }  # fmt: skip
    nested_toml = b"a = " + b"[" * MAX_NESTING + b"]" * MAX_NESTING
    assert load_toml(nested_toml, what=WHAT, max_bytes=10**6)["a"] is not None


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
