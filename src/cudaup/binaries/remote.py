"""A wheel on a server, read by HTTP range requests (apart from :mod:`.read`: the HTTP
client and packaging cost ~0.4 s of imports that reading a local file must not pay)."""

from __future__ import annotations

import io
from pathlib import PurePosixPath

from cudaup.binaries.read import Package, read_zip
from cudaup.errors import SourceFormatError
from cudaup.net.http import HttpClient
from cudaup.resolve.pypi import HttpRangeFile


def read_remote_wheel(http: HttpClient, url: str) -> Package:
    """A wheel on a server, by range requests: its directory, then its binaries."""
    answer = http.head(url)
    if not answer.ok:
        raise SourceFormatError(f"{url} answered HTTP {answer.status}")
    length = {k.lower(): v for k, v in answer.headers.items()}.get("content-length", "")
    if not length.isdigit():
        raise SourceFormatError(f"{url} does not say its size, so it cannot be read by ranges")
    remote = HttpRangeFile(http, url, int(length))
    files = read_zip(lambda: io.BufferedReader(remote, buffer_size=1 << 16), url)
    return Package(PurePosixPath(url).name, files, size=int(length), read=remote.fetched)
