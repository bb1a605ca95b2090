"""Safe extraction of NVIDIA redist archives (.tar.xz, .zip) and PyPI wheels.

``policy`` decides what may be written (pure), ``tar`` and ``zip`` read the two
formats, ``write`` writes without following or replacing anything, and
``unpack`` puts them together.
"""

from cudaup.install.extract.policy import DEFAULT_LIMITS, Limits
from cudaup.install.extract.unpack import Extracted, archive_members, extract_archive

__all__ = [
    "DEFAULT_LIMITS",
    "Extracted",
    "Limits",
    "archive_members",
    "extract_archive",
]
