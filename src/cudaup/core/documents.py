"""Decoding documents from outside without crashing: JSON, TOML and text.

Every parser of a manifest, page, index, lock or cache entry starts here, so the
ways a document can be broken are handled once: too large, not UTF-8, a
byte-order mark where the format has none, nested deeper than any real document
(``MAX_NESTING``: counted before parsing, so the answer never depends on how much
stack the caller left the recursive decoders), integers too long for ``int()`` (Python refuses
more than 4300 digits with ``ValueError``), ``NaN``, and plain syntax errors.
Each becomes :class:`~cudaup.errors.SourceFormatError` naming the document (its
URL or path), never another exception.

Pure: bytes in, values out.
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any, Literal

from cudaup.errors import SourceFormatError

_BOM = b"\xef\xbb\xbf"
Pairs = Callable[[list[tuple[str, Any]]], Any]

#: Arrays and tables (objects) inside each other: about what ``json`` allows by default
#: (NVIDIA's archive page nests its React props deep; manifests, PyPI's pages and locks
#: fewer than ten).  Deeper is refused by counting, before parsing; up to it, the parse
#: is given the stack it needs (:func:`_room_for_nesting`), wherever it is called from.
MAX_NESTING = 1000
#: Interpreter frames the recursive decoders use per level (tomllib's value/array/table).
_FRAMES_PER_LEVEL = 4
# Tokens that can hold a bracket without opening anything (strings, TOML comments) match
# whole, so only the brackets outside them count.
# The bracket is the one group: ``findall`` gives it, or "" for a token that holds one.
# A string is matched as runs of plain characters between escapes ("unrolling the
# loop"): the same strings as one alternation per character, 3x faster on numpy's page.
_JSON_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|([\[\]{}])')
_TOML_TOKENS = re.compile(
    r'"""(?:[^\\]|\\.)*?"""|\'\'\'[\s\S]*?\'\'\'|"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\'|#[^\n]*|([\[\]{}])'
)


def _too_large(data: bytes | str, max_bytes: int, what: str) -> None:
    if len(data) > max_bytes:
        raise SourceFormatError(f"{what} is larger than {max_bytes} bytes; refusing to parse it")


def _refuse_deep_nesting(text: str, tokens: re.Pattern[str], what: str) -> None:
    if text.count("[") + text.count("{") <= MAX_NESTING:
        return  # the common case, decided without a scan
    # The brackets outside strings and comments, found by the regex engine in one pass
    # (a PyPI page such as numpy's holds ~75,000 strings: matching them one by one in
    # Python took 0.1 s of every parse); only the brackets are then walked.
    depth = 0
    for bracket in "".join(tokens.findall(text)):
        if bracket in "[{":
            depth += 1
            if depth > MAX_NESTING:
                raise SourceFormatError(
                    f"{what} is nested too deeply to be a real document "
                    f"(more than {MAX_NESTING} levels)"
                )
        else:
            depth -= 1


@contextlib.contextmanager
def _room_for_nesting() -> Iterator[None]:
    """Raise the recursion limit, for this parse, to what ``MAX_NESTING`` levels need on
    top of the caller's stack, so the answer does not depend on where it is called."""
    depth = 0
    frame: FrameType | None = sys._getframe()
    while frame is not None:
        depth, frame = depth + 1, frame.f_back
    needed = depth + MAX_NESTING * _FRAMES_PER_LEVEL + 100
    before = sys.getrecursionlimit()
    if needed > before:
        sys.setrecursionlimit(needed)
    try:
        yield
    finally:
        if needed > before:
            sys.setrecursionlimit(before)


def decode_text(
    data: bytes, *, what: str, max_bytes: int, bom: Literal["refuse", "strip"] = "refuse"
) -> str:
    """``data`` as UTF-8 text.  A leading byte-order mark is refused, or stripped where
    the format allows one (HTML)."""
    _too_large(data, max_bytes, what)
    if data.startswith(_BOM):
        if bom == "refuse":
            raise SourceFormatError(f"{what} starts with a byte-order mark")
        data = data[len(_BOM) :]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SourceFormatError(f"{what} is not UTF-8 (at byte {exc.start})") from None


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def load_json(
    data: bytes | str, *, what: str, max_bytes: int, object_pairs_hook: Pairs | None = None
) -> Any:
    """The value of one JSON document (any type: callers check the shape they need)."""
    text = decode_text(data, what=what, max_bytes=max_bytes) if isinstance(data, bytes) else data
    _too_large(text, max_bytes, what)
    if text.startswith("\ufeff"):
        raise SourceFormatError(f"{what} starts with a byte-order mark")
    _refuse_deep_nesting(text, _JSON_TOKENS, what)
    try:
        with _room_for_nesting():
            return json.loads(
                text, object_pairs_hook=object_pairs_hook, parse_constant=_no_constants
            )
    except RecursionError:
        raise SourceFormatError(f"{what} is nested too deeply to be a real document") from None
    except ValueError as exc:  # JSONDecodeError, int() over 4300 digits, NaN
        raise SourceFormatError(f"{what} is not valid JSON ({_short(exc)})") from None


def load_toml(data: bytes, *, what: str, max_bytes: int) -> dict[str, Any]:
    """The table of one TOML document."""
    import tomllib  # noqa: PLC0415 - lock files and a few tables are TOML; an install reads none

    text = decode_text(data, what=what, max_bytes=max_bytes)
    _refuse_deep_nesting(text, _TOML_TOKENS, what)
    try:
        with _room_for_nesting():
            return tomllib.loads(text)
    except RecursionError:
        raise SourceFormatError(f"{what} is nested too deeply to be a real document") from None
    except ValueError as exc:  # TOMLDecodeError, int() over 4300 digits
        raise SourceFormatError(f"{what} is not valid TOML ({_short(exc)})") from None


def _short(exc: Exception) -> str:
    text = str(exc)
    return text if len(text) <= 200 else text[:200] + "…"
