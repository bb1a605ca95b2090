"""An index page's file URLs pointed at the memo: the byte-level path for PyPI's pages
gives exactly what the URL-by-URL path gives, and any page it cannot account for
whole takes the URL-by-URL path."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cudaup.plan import page_rewrite
from cudaup.plan.page_rewrite import exact_json, rewrite_json

PAGE_URL = "https://pypi.example/simple/alpha/"
BASE = "http://127.0.0.1:4321/Zq-token_0"
SHA = "a" * 64


def _page(*urls: Any, **extra: Any) -> bytes:
    """A PEP 691 page as PyPI writes it (``json.dumps``' separators)."""
    files = [
        {"filename": f"alpha-1.{n}.tar.gz", "hashes": {"sha256": SHA}, "url": url, **extra}
        for n, url in enumerate(urls)
    ]
    return json.dumps({"meta": {"api-version": "1.1"}, "name": "alpha", "files": files}).encode()


PLAIN = [
    _page(),
    _page(
        "https://files.example/packages/ab/cd/alpha-1.0-py3-none-any.whl",
        "http://mirror.example:8080/p/alpha-1.1.tar.gz",
        "https://files.example/p/alpha-1.2.tar.gz#sha256=" + SHA,
        "https://files.example/p/alpha-1.3.tar.gz?token=x",
        "https://files.example",
        "https://files.example/p/%C3%A9-1.4.tar.gz",
    ),
    # A string holding what looks like a key is written escaped: the page is still plain.
    _page("https://files.example/p/alpha-1.0.tar.gz", yanked='"url": "https://evil.example/x"'),
    # A URL that is not UTF-8 passes byte for byte.
    _page("https://files.example/p/alpha-1.0.tar.gz").replace(b"alpha-1.0.tar", b"\xff-1.0.tar"),
    # What follows the host is the URL's own: another scheme in its query changes nothing.
    _page("https://files.example/r?to=https:///p/alpha-1.0.tar.gz", "https://files.example/#x"),
    # A key whose opening quote closed a string that is not a URL: the scan sees it.
    b'{"files": [{"filename": "a-1.0.tar.gz"url": "https://files.example/p/a-1.0.tar.gz"}]}',
]

NOT_PLAIN = [
    _page("https://files.example/p/alpha-1.0.tar.gz", "../../p/alpha-0.9.tar.gz"),
    _page("https://files.example/p/alpha-1.0.tar.gz").replace(b'"url": "', b'"url":"'),
    _page("https://files.example/p/alpha-1.0.tar.gz").replace(b"/p/", b"\\/p\\/"),
    _page("https://user:secret@files.example/p/alpha-1.0.tar.gz"),
    _page("https://files.example/p/alpha@1.0.tar.gz"),
    _page("https:///p/alpha-1.0.tar.gz"),
    _page("https://"),
    _page("https://#sha256=" + SHA),
    _page("HTTPS://files.example/p/alpha-1.0.tar.gz"),
    _page("ftp://files.example/p/alpha-1.0.tar.gz"),
    _page(None),
    b'{"files": [{"url": "https://files.example/p/alpha-1.0.tar.gz',  # cut off
    # A key whose opening quote is the one that closed the URL before it.
    b'{"files": [{"url": "https://files.example/p/a-1.0.tar.gz"url": "https://b.example/x"}]}',
    # ... or the one that closed the key before it, or that opened its value.
    b'{"files": [{"url"url": "https://files.example/p/a-1.0.tar.gz"}]}',
    b'{"files": [{"url": "url": "https://files.example/p/a-1.0.tar.gz"}]}',
    # A key whose value is not a string, beside one that is plain.
    _page("https://files.example/p/alpha-1.0.tar.gz", None),
]


@pytest.mark.parametrize("page", PLAIN)
def test_a_plain_page_is_rewritten_by_bytes_as_the_exact_path_would(page: bytes) -> None:
    fast = page_rewrite._plain_json(page, BASE)
    assert fast is not None, "PyPI's shape of page takes the byte-level path"
    assert fast == exact_json(page, PAGE_URL, BASE) == rewrite_json(page, PAGE_URL, BASE)


@pytest.mark.parametrize("page", NOT_PLAIN)
def test_any_other_page_takes_the_exact_path(page: bytes) -> None:
    assert page_rewrite._plain_json(page, BASE) is None
    assert rewrite_json(page, PAGE_URL, BASE) == exact_json(page, PAGE_URL, BASE)


def test_what_the_rewrite_points_at_the_memo() -> None:
    """Exact path or not: every absolute http(s) URL with a host and no credentials goes
    through the memo (its fragment kept, not listed), a relative one resolved against
    the upstream page; others are left for uv."""
    page = _page(
        "https://files.example/p/alpha-1.0.tar.gz#sha256=" + SHA,
        "http://files.example/p/alpha-1.1.tar.gz",
        "../../p/alpha-0.9.tar.gz",
        "https://user@files.example/p/alpha-0.8.tar.gz",
    )
    rewritten = rewrite_json(page, PAGE_URL, BASE)
    urls = [entry["url"] for entry in json.loads(rewritten.body)["files"]]
    assert urls == [
        f"{BASE}/f/https/files.example/p/alpha-1.0.tar.gz#sha256={SHA}",
        f"{BASE}/f/http/files.example/p/alpha-1.1.tar.gz",
        f"{BASE}/f/https/pypi.example/p/alpha-0.9.tar.gz",
        "https://user@files.example/p/alpha-0.8.tar.gz",
    ]
    assert rewritten.files == [
        "https://files.example/p/alpha-1.0.tar.gz",
        "http://files.example/p/alpha-1.1.tar.gz",
        "https://pypi.example/p/alpha-0.9.tar.gz",
    ]


#: The pieces a page's bytes are drawn from: whole keys with values plain and not, and
#: the bytes the byte path looks at one by one (quotes, schemes, hosts, escapes), which
#: join into keys sharing quotes, hosts left empty, values left open.
_PIECES = [
    b'"url": "https://files.example/p/a.whl"', b'"url": "http://files.example/b#x"',
    b'"url": "https:///p"', b'"url": "https://@h/p"', b'"url":"https://h/p"',
    b'url": "https://h/q"', b'"url": "https://h', b'"url": "https://h\\/b"', b'\\"',
    b'"url"', b'"url": "', b'"', b"url", b'url": "', b"https://", b"http://", b"HTTPS://",
    b"files.example", b"/", b"#", b"@", b"\\", b" ", b"{", b"}", b",",
]  # fmt: skip


@settings(max_examples=600)
@given(st.lists(st.sampled_from(_PIECES), max_size=24).map(b"".join))
def test_whatever_the_byte_path_answers_is_the_exact_paths_answer(page: bytes) -> None:
    """Pages of any shape, most of them no JSON at all: where the byte path answers, it
    gives the exact path's bytes and files; where it cannot, it says so (None)."""
    fast = page_rewrite._plain_json(page, BASE)
    if fast is not None:
        assert fast == exact_json(page, PAGE_URL, BASE)
