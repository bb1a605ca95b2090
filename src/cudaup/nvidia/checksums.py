"""``md5sum.txt`` and ``sha256sum.txt``: a digest and a bare file name per line.

The separator width is not verified (GNU writes two spaces, some tools assume
one), so lines are split on the first run of whitespace.  A leading ``*``
(md5sum's binary-mode marker) and any directory part are dropped.
"""

from __future__ import annotations

import re
from typing import Literal

from cudaup.errors import SourceFormatError

Algorithm = Literal["md5", "sha256"]
_HEX_LENGTH: dict[Algorithm, int] = {"md5": 32, "sha256": 64}
_HEX = re.compile(r"^[0-9a-fA-F]+$")


def parse_checksum_file(text: str, algorithm: Algorithm) -> dict[str, str]:
    """Map each listed file name to its lower-case hex digest."""
    digests: dict[str, str] = {}
    length = _HEX_LENGTH[algorithm]
    for line in text.splitlines():
        fields = line.strip().split(maxsplit=1)
        if len(fields) != 2 or line.lstrip().startswith("#"):
            continue
        digest, name = fields
        name = name.strip().lstrip("*").rsplit("/", 1)[-1]
        if len(digest) != length or not _HEX.match(digest) or not name:
            continue
        digests[name] = digest.lower()
    if not digests and text.strip():
        raise SourceFormatError(f"no '<{algorithm}> <file name>' lines in the checksum file")
    return digests
