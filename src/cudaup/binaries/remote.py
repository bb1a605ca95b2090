"""A wheel on a server, read by HTTP range requests (apart from :mod:`.read`: the HTTP
client and packaging cost ~0.4 s of imports that reading a local file must not pay)."""

from __future__ import annotations

from pathlib import PurePosixPath

from cudaup.binaries.read import Package, read_zip
from cudaup.net.http import HttpClient
from cudaup.net.ranged_file import RangedFile


def read_remote_wheel(http: HttpClient, url: str) -> Package:
    """A wheel on a server, by range requests: its directory, then its binaries."""
    # The tail (the directory, and the file's size), then small reads: most members are
    # skipped after their first 64 bytes.
    remote = RangedFile(http, url, chunk=64 * 1024)
    files = read_zip(lambda: remote, url)
    return Package(PurePosixPath(url).name, files, size=remote.size, read=remote.fetched)
