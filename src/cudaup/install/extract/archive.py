"""Extracting an archive: open it by its format, check every member, write.

See :mod:`cudaup.install.extract.policy` for the rules every member must pass.
"""

from __future__ import annotations

import contextlib
import gzip
import lzma
import tarfile
import threading
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from cudaup.errors import IntegrityError, UsageError
from cudaup.install.extract.policy import (
    DEFAULT_LIMITS,
    ExtractLimits,
    Opener,
    Reader,
    plan_members,
)
from cudaup.install.extract.tar import TarReader
from cudaup.install.extract.wheel import check_record
from cudaup.install.extract.write import (
    Digests,
    check_space,
    clear,
    extract_in_one_pass,
    require_empty,
    write_members,
)
from cudaup.install.extract.zip import ZipReader

#: What a damaged archive raises while being read; all become IntegrityError.
_CORRUPT = (
    tarfile.TarError,
    zipfile.BadZipFile,
    EOFError,
    lzma.LZMAError,
    zlib.error,
    gzip.BadGzipFile,
)
_TAR_SUFFIXES = {".tar.xz": "xz", ".txz": "xz", ".tar.gz": "gz", ".tgz": "gz", ".tar": ""}
_ZIP_SUFFIXES = (".zip", ".whl")


@dataclass(frozen=True, slots=True)
class Extracted:
    """What one extraction wrote."""

    #: the top-level entries created in the destination
    tops: list[Path]
    #: the sha256 of every file, by its path below the destination (``bin/nvcc``): computed
    #: as it was written, or for a wheel the one its RECORD lists (:mod:`.wheel`)
    digests: Digests
    #: whether the archive was a wheel whose RECORD every file was checked against
    record_checked: bool


def extract_archive(
    archive: Path,
    destination: Path,
    *,
    limits: ExtractLimits = DEFAULT_LIMITS,
    strip_top: bool = False,
    opener: Opener | None = None,
    cancel: threading.Event | None = None,
    hash_wheel: bool = False,
) -> Extracted:
    """Extract a .tar.xz/.tar.gz/.tar/.zip/.whl into ``destination``, safely.

    ``destination`` must exist and be empty.  Returns the top-level entries created
    in it and the sha256 of every file written (computed on the way, never read
    back; a wheel's are its RECORD's, which every file's listing and size must match).  With ``strip_top`` the archive must hold exactly one top directory, whose
    contents land directly in ``destination`` (NVIDIA redist archives:
    ``cuda_nvcc-linux-x86_64-13.0.48-archive/bin/...``).  A hostile or damaged
    archive raises :class:`IntegrityError` and leaves it empty; so does a wheel whose
    files are not the ones its RECORD lists, or not of the sizes it lists.

    ``opener`` reads the archive from elsewhere than the file ``archive`` (whose
    name still tells the format): a file still downloading, whose reads wait for
    their bytes (:class:`cudaup.download.Arrival`).  Setting ``cancel`` stops it between
    members (:class:`cudaup.util.parallel.CancelledError`), the destination cleared.
    ``hash_wheel``: hash a wheel's members too, each compared with its RECORD's sha256
    (``install --verify``; see :mod:`.wheel` for why an install need not).
    """
    require_empty(archive, destination)
    wheel = archive.name.lower().endswith(".whl")
    with _reading(archive, opener) as reader:
        try:
            if isinstance(reader, TarReader):
                planned, digests = extract_in_one_pass(
                    reader, archive, destination, limits, strip_top, cancel
                )
            else:
                assert isinstance(reader, ZipReader)  # _open makes one of the two
                planned = plan_members(reader, archive, limits, strip_top)
                check_space(archive, destination, sum(member.size for member in planned))
                hashing = hash_wheel or not wheel
                digests = write_members(
                    reader, planned, archive, destination, cancel, hashing=hashing
                )
            links = {"/".join(member.parts) for member in planned if member.kind == "symlink"}
            if wheel:
                sizes = {"/".join(m.parts): m.size for m in planned if m.kind == "file"}
                computed = digests if hash_wheel else None
                digests = check_record(archive, destination, sizes, links, computed)
            record_checked = wheel
        except BaseException:
            clear(destination)
            raise
    tops = [destination / top for top in dict.fromkeys(member.parts[0] for member in planned)]
    return Extracted(tops, digests, record_checked)


def archive_members(
    archive: Path, *, strip_top: bool = False, limits: ExtractLimits = DEFAULT_LIMITS
) -> list[str]:
    """The normalized paths (``bin/nvcc``; directories too) the archive would create.

    The archive passes the same checks as :func:`extract_archive`, so a caller
    can plan around these names (conflicts between components, records).
    """
    with _reading(archive) as reader:
        return [
            "/".join(member.parts) for member in plan_members(reader, archive, limits, strip_top)
        ]


def _open(archive: Path, opener: Opener) -> Reader:
    name = archive.name.lower()
    if name.endswith(_ZIP_SUFFIXES):
        return ZipReader(archive, opener)
    for suffix, compression in _TAR_SUFFIXES.items():
        if name.endswith(suffix):
            return TarReader(archive, compression, opener)
    raise UsageError(
        f"{archive.name}: unsupported archive type; expected .tar.xz, .tar.gz, .tar, .zip or .whl"
    )


def _file_opener(archive: Path) -> Opener:
    return lambda: archive.open("rb")


@contextlib.contextmanager
def _reading(archive: Path, opener: Opener | None = None) -> Iterator[Reader]:
    """Open the archive; whatever a damaged one raises becomes an IntegrityError."""
    try:
        with contextlib.closing(_open(archive, opener or _file_opener(archive))) as reader:
            yield reader
    except _CORRUPT as exc:
        raise IntegrityError(f"{archive.name}: corrupt or truncated archive ({exc})") from exc
