"""``md5sum.txt`` and ``sha256sum.txt``: a digest and a bare file name per line.

The separator width is not verified (GNU writes two spaces, some tools assume
one), so lines are split on the first run of whitespace.  A leading ``*``
(md5sum's binary-mode marker) and any directory part are dropped; what is left
must be a plain file name (it may become the name of a download), checked by
:mod:`cudaup.core.names`.  Files over 1 MB are refused (NVIDIA's are a few KB).
"""

from __future__ import annotations

import re
from typing import Literal

from cudaup.core.names import check_file_name
from cudaup.errors import SourceFormatError

Algorithm = Literal["md5", "sha256"]
_HEX_LENGTH: dict[Algorithm, int] = {"md5": 32, "sha256": 64}
_HEX = re.compile(r"^[0-9a-fA-F]+$")
_DIRECTORY = re.compile(r"^.*[/\\]")
MAX_CHECKSUM_FILE_BYTES = 1024 * 1024


def parse_checksum_file(
    text: str, algorithm: Algorithm, source: str = "the checksum file"
) -> dict[str, str]:
    """Map each listed file name to its lower-case hex digest."""
    if len(text) > MAX_CHECKSUM_FILE_BYTES:
        raise SourceFormatError(f"{source} is larger than {MAX_CHECKSUM_FILE_BYTES} bytes")
    digests: dict[str, str] = {}
    length = _HEX_LENGTH[algorithm]
    for line in text.splitlines():
        fields = line.strip().split(maxsplit=1)
        if len(fields) != 2 or line.lstrip().startswith("#"):
            continue
        digest, name = fields
        if len(digest) != length or not _HEX.match(digest):
            continue
        name = _DIRECTORY.sub("", name.strip().lstrip("*"))
        digests[check_file_name(name, field="file name", where=source)] = digest.lower()
    if not digests and text.strip():
        raise SourceFormatError(f"no '<{algorithm}> <file name>' lines in {source}")
    return digests
