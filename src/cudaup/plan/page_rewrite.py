"""Pointing an index page's file URLs at the index memo, every other byte as sent.

The memo (:mod:`cudaup.plan.index_memo`) hands uv the pages of the plan's flat indexes
with each file URL (HTML ``href``\\ s, PEP 691 ``url``\\ s) rewritten to go through it:
``{base}/f/{scheme}/{host}/{path}``, the fragment (``#sha256=…``) and every other byte
as the upstream sent them.  A relative URL is resolved against the upstream page; a URL
the memo does not forward (another scheme, no host, credentials in it, a JSON string
with escapes) is left as it is, and uv reads it itself.

What the rewrite costs is most of the memo's Python (a cold plan's uv runs ask for some
200 pages, 68 MB, ~45 of them at once in their first second), so a PEP 691 page in the
shape PyPI writes (``"url": "https://…"``, every URL absolute and plain) has its keys and
URLs cut out by one regular-expression scan and is rewritten by one byte replacement (two
where a URL is http), all in C:
numpy's 1.9 MB page in a fifth of the time the regular expression with a Python callback
per URL takes.
The fast path answers only a page whose every ``"url"`` key it accounts for; any other
page takes the exact path, which the fast one must equal byte for byte.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from urllib.parse import urljoin

#: Both run in linear time on any page: each quoted value ends at the next quote.
_JSON_URL = re.compile(r'("url":\s*")([^"\\]*)"')
_HREF = re.compile(r"""(\bhref\s*=\s*)(?:"([^"]*)"|'([^']*)')""", re.IGNORECASE)
#: PyPI's spelling of a file's key and value start (``json.dumps``' default separators).
_JSON_VALUE = b'"url": "'
#: Every ``"url"`` key of a page, in one C scan, each with its value where that value is
#: plain: written ``"url": "http[s]://host…"`` (no quote in it, a host that is not empty)
#: and not closed by a quote that also opens another ``"url"`` (``…"url": "…``: that key
#: would go unseen by the scan and by the exact path, yet be replaced by the byte path).
#: A key with any other value gives ``b""``.  Linear on any page: each value ends at the
#: next quote, and what follows it is looked at once.
_KEYED_URLS = re.compile(rb'"url"(?:: "(https?://[^"/#][^"]*)"(?!url"))?')


@dataclass(frozen=True, slots=True)
class Rewritten:
    """A page pointed at the memo, and the upstream URLs of the files it now points at
    (each without its fragment, as the page wrote it): the only files the memo forwards."""

    body: bytes
    files: list[str]


def rewrite_json(body: bytes, page_url: str, base: str) -> Rewritten:
    """A PEP 691 page with its files' ``url``\\ s pointed at the memo at ``base``."""
    fast = _plain_json(body, base)
    return fast if fast is not None else exact_json(body, page_url, base)


def exact_json(body: bytes, page_url: str, base: str) -> Rewritten:
    """:func:`rewrite_json` for any page, URL by URL (a URL written with JSON escapes is
    left as it is: uv then reads it directly, unmemoized)."""
    text = body.decode("utf-8", errors="surrogateescape")
    seen: list[str] = []

    def rewritten(match: re.Match[str]) -> str:
        return match.group(1) + _file_url(match.group(2), page_url, base, seen) + '"'

    page = _JSON_URL.sub(rewritten, text).encode("utf-8", errors="surrogateescape")
    return Rewritten(page, seen)


def rewrite_html(body: bytes, page_url: str, base: str) -> Rewritten:
    """A PEP 503 page with its ``href``\\ s pointed at the memo at ``base``."""
    text = body.decode("utf-8", errors="surrogateescape")
    seen: list[str] = []

    def rewritten(match: re.Match[str]) -> str:
        quoted = match.group(2) if match.group(2) is not None else match.group(3)
        local = _file_url(html.unescape(quoted), page_url, base, seen)
        return f'{match.group(1)}"{html.escape(local)}"'

    page = _HREF.sub(rewritten, text).encode("utf-8", errors="surrogateescape")
    return Rewritten(page, seen)


def _plain_json(body: bytes, base: str) -> Rewritten | None:
    """:func:`exact_json`'s answer for a page whose every ``"url"`` is written
    ``"url": "http[s]://host/…"`` with no escape or ``@`` in any of them; None for any
    other page."""
    urls = _KEYED_URLS.findall(body)
    # A key written otherwise (spacing, not a string, a value left open, no host, a
    # quote shared with the URL before it) is the exact path's, as is an escape or an
    # ``@`` anywhere in a URL (a one-byte search each: memchr).
    if b"" in urls:
        return None
    joined = b'"'.join(urls)
    if b"\\" in joined or b"@" in joined:
        return None
    prefix = base.encode()
    page = body
    # http first: the memo's own URLs begin "http://", and a replacement of "https://"
    # made first would not be touched again, while one of "http://" made second would.
    if joined.startswith(b"http://") or b'"http://' in joined:
        page = page.replace(_JSON_VALUE + b"http://", _JSON_VALUE + prefix + b"/f/http/")
    page = page.replace(_JSON_VALUE + b"https://", _JSON_VALUE + prefix + b"/f/https/")
    files = joined.decode("utf-8", errors="surrogateescape").split('"') if urls else []
    if b"#" in joined:
        files = [url.partition("#")[0] for url in files]
    return Rewritten(page, files)


def _file_url(href: str, page_url: str, base: str, seen: list[str]) -> str:
    """The memo's URL for a file a page links (absolute or relative to the page),
    the upstream URL added to ``seen``."""
    if not href.startswith(("https://", "http://")):
        href = urljoin(page_url, href)  # urljoin costs more than the rest together
    absolute, hashed, fragment = href.partition("#")
    scheme, _, rest = absolute.partition("://")
    host = rest.split("/", 1)[0]
    if scheme not in {"http", "https"} or not host or "@" in host:
        return href  # not one the memo forwards: uv asks for it itself
    seen.append(absolute)
    return f"{base}/f/{scheme}/{rest}{hashed}{fragment}"
