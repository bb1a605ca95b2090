"""The redist directory listing ``/compute/cuda/redist/``: which releases exist.

The page is an auto-generated HTML index.  Its exact markup is not verified, so
this does what NVIDIA's own ``shell-parse.sh`` does, tolerantly: find every
``redistrib_X.Y.Z.json`` that is linked or is the text of an element (single,
double or no quotes), ignore neighbours such as ``redistrib_X.Y.Z.json.asc``
and mentions in prose, de-duplicate and sort numerically.  HTML comments are
not part of the listing.  A ``<span class='date'>`` in the same ``<li>`` gives
a date.  A release number is at most six digits per part (longer is not a
release, and ``int()`` of thousands of digits would fail); a listing over
10 MB is refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from packaging.version import Version

from cudaup.errors import SourceFormatError

# A manifest counts when it is linked (<a href=...redistrib_X.json>) or is the whole
# text of an element (>redistrib_X.json<, what NVIDIA's shell-parse.sh keeps), not
# when the name merely appears in prose.
# Attribute values never span a '<' or '>' here, so every attempt stops at the next
# tag and a hostile page costs linear time.
_MANIFEST_NAME = re.compile(
    r"""(?:<a(?:\s+[\w-]+(?:\s*=\s*(?:"[^"<>]*"|'[^'<>]*'|[^\s<>"']+))?)*?\s+href\s*=\s*["']?"""
    r"""(?:[^"'\s<>]*/)?|>\s*)"""
    r"""redistrib_(\d{1,6}(?:\.\d{1,6}){1,3})\.json(?=["'\s>]|\s*<)""",
    re.IGNORECASE,
)
_DATE = re.compile(r"""<span\s+class=['"]date['"]\s*>\s*(\d{4}-\d{2}-\d{2})""", re.IGNORECASE)
_ITEM_SPLIT = re.compile(r"<li\b", re.IGNORECASE)
MAX_LISTING_BYTES = 10 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class ListedRelease:
    label: str
    version: Version
    date: str | None


def _without_comments(html: str) -> str:
    """``html`` without ``<!-- … -->`` (an unclosed one runs to the end), in linear time."""
    kept: list[str] = []
    position = 0
    while (start := html.find("<!--", position)) >= 0:
        kept.append(html[position:start])
        end = html.find("-->", start + 4)
        if end < 0:
            return "".join(kept)
        position = end + 3
    kept.append(html[position:])
    return "".join(kept)


def parse_redist_listing(
    html: str, source: str = "the redist directory listing"
) -> list[ListedRelease]:
    """Every release with a ``redistrib_*.json`` in the listing, newest first."""
    if len(html) > MAX_LISTING_BYTES:
        raise SourceFormatError(f"{source} is larger than {MAX_LISTING_BYTES} bytes")
    found: dict[Version, ListedRelease] = {}
    for chunk in _ITEM_SPLIT.split(_without_comments(html)):
        date_match = _DATE.search(chunk)
        date = date_match.group(1) if date_match else None
        for match in _MANIFEST_NAME.finditer(chunk):
            label = match.group(1)
            version = Version(label)
            known = found.get(version)
            if known is None or (known.date is None and date is not None):
                found[version] = ListedRelease(label, version, date)
    if not found and "<" not in html:
        raise SourceFormatError(f"{source} is not an HTML page")
    return sorted(found.values(), key=lambda r: r.version, reverse=True)
