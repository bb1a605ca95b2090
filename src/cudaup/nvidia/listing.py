"""The redist directory listing ``/compute/cuda/redist/``: which releases exist.

The page is an auto-generated HTML index.  Its exact markup is not verified, so
this does what NVIDIA's own ``shell-parse.sh`` does, tolerantly: find every
``redistrib_X.Y.Z.json`` that is linked or is the text of an element (single,
double or no quotes), ignore neighbours such as ``redistrib_X.Y.Z.json.asc``
and mentions in prose, de-duplicate and sort numerically.  HTML comments are not part of the listing.  A ``<span class='date'>`` in the same ``<li>`` gives a date.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from packaging.version import Version

from cudaup.errors import SourceFormatError

# A manifest counts when it is linked (<a href=...redistrib_X.json>) or is the whole
# text of an element (>redistrib_X.json<, what NVIDIA's shell-parse.sh keeps), not
# when the name merely appears in prose.
_MANIFEST_NAME = re.compile(
    r"""(?:<a(?:\s+[\w-]+(?:\s*=\s*(?:"[^"]*"|'[^']*'|[^\s>"']+))?)*?\s+href\s*=\s*["']?"""
    r"""(?:[^"'\s>]*/)?|>\s*)"""
    r"""redistrib_(\d+(?:\.\d+){1,3})\.json(?=["'\s>]|\s*<)""",
    re.IGNORECASE,
)
_DATE = re.compile(r"""<span\s+class=['"]date['"]\s*>\s*(\d{4}-\d{2}-\d{2})""", re.IGNORECASE)
_ITEM_SPLIT = re.compile(r"<li\b", re.IGNORECASE)
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)


@dataclass(frozen=True, slots=True)
class ListedRelease:
    label: str
    version: Version
    date: str | None


def parse_redist_listing(html: str) -> list[ListedRelease]:
    """Every release with a ``redistrib_*.json`` in the listing, newest first."""
    found: dict[Version, ListedRelease] = {}
    for chunk in _ITEM_SPLIT.split(_COMMENT.sub("", html)):
        date_match = _DATE.search(chunk)
        date = date_match.group(1) if date_match else None
        for match in _MANIFEST_NAME.finditer(chunk):
            label = match.group(1)
            version = Version(label)
            known = found.get(version)
            if known is None or (known.date is None and date is not None):
                found[version] = ListedRelease(label, version, date)
    if not found and "<" not in html:
        raise SourceFormatError("the redist directory listing is not an HTML page")
    return sorted(found.values(), key=lambda r: r.version, reverse=True)
