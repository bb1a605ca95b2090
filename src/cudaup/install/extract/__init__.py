"""Safe extraction of NVIDIA redist archives (.tar.xz, .zip) and PyPI wheels.

``policy`` decides what may be written (pure), ``tar`` and ``zip`` read the two
formats, ``write`` writes without following or replacing anything, and
``archive`` puts them together.
"""

from cudaup.install.extract.archive import Extracted, archive_members, extract_archive
from cudaup.install.extract.policy import DEFAULT_LIMITS, ExtractLimits

__all__ = [
    "DEFAULT_LIMITS",
    "ExtractLimits",
    "Extracted",
    "archive_members",
    "extract_archive",
]
