"""Parsers for NVIDIA's download-server formats, one module per format.

All pure: each takes the bytes or text of one document and returns typed
values, raising :class:`~cudaup.errors.SourceFormatError` when the document is
not what it should be.  Where a detail of NVIDIA's format has not been seen in
real data (separators in md5sum.txt, quotes in the listing, where the archive
page keeps its payload), the parsers accept every plausible variant, and the
fake NVIDIA server in ``tests/fakenvidia/`` serves each one.
"""

from typing import TYPE_CHECKING

from cudaup.core.lazy import exports

if TYPE_CHECKING:
    from cudaup.nvidia.archive_page import ArchivePage, PageDownload, parse_archive_page
    from cudaup.nvidia.checksums import parse_checksum_file
    from cudaup.nvidia.installers import InstallerName, classify_installer
    from cudaup.nvidia.listing import ListedRelease, parse_redist_listing
    from cudaup.nvidia.manifest import Archive, Component, Manifest, parse_manifest

__all__ = [
    "Archive",
    "ArchivePage",
    "Component",
    "InstallerName",
    "ListedRelease",
    "Manifest",
    "PageDownload",
    "classify_installer",
    "parse_archive_page",
    "parse_checksum_file",
    "parse_manifest",
    "parse_redist_listing",
]
# Each parser loads when first asked for.
__getattr__ = exports(
    __name__,
    {
        "Manifest": "cudaup.nvidia.manifest",
        "Component": "cudaup.nvidia.manifest",
        "Archive": "cudaup.nvidia.manifest",
        "parse_manifest": "cudaup.nvidia.manifest",
        "ListedRelease": "cudaup.nvidia.listing",
        "parse_redist_listing": "cudaup.nvidia.listing",
        "parse_checksum_file": "cudaup.nvidia.checksums",
        "ArchivePage": "cudaup.nvidia.archive_page",
        "PageDownload": "cudaup.nvidia.archive_page",
        "parse_archive_page": "cudaup.nvidia.archive_page",
        "InstallerName": "cudaup.nvidia.installers",
        "classify_installer": "cudaup.nvidia.installers",
    },
)
