"""A wheel's RECORD, checked against the files just written from it.

A wheel lists each of its files with a sha256 and a size in
``<name>.dist-info/RECORD`` (PEP 376, PEP 427).  Every file written must be listed,
with the size written, and every file listed must have been written; a wheel
without a RECORD is refused.  RECORD's sha256s are not compared with the files:
they become the digests of the unpacked tree's manifest, which its later checks
compare the files with (the first use after each boot, ``--verify``).  Nothing is
lost: the wheel's own sha256 was checked against the index before anything unpacked
from it counts, so RECORD is the one its publisher built, and every member's bytes
are what inflating the verified bytes gives (size and CRC-32 checked as they come).
Hashing each member too (~0.25 CPU-s for a 270 MB toolkit) would only find a wheel
its publisher built with a RECORD that does not tell the truth: pip and uv install
such a wheel, and here its tree fails its first digest check, which says so and
unpacks it again.  ``install --verify`` hashes every member as it is written and
compares it with RECORD, as every install did before: such a wheel is then refused.
See docs/security.md, "An untrusted archive".
"""

from __future__ import annotations

import base64
import binascii
import csv
import hashlib
import io
from pathlib import Path

from cudaup.core.names import check_relative_path, check_size
from cudaup.download.publish import hash_file
from cudaup.errors import IntegrityError

#: Signatures of RECORD itself, which RECORD cannot list (PEP 376).
_UNLISTED = ("RECORD", "RECORD.jws", "RECORD.p7s")
#: No RECORD of a real wheel is anywhere near this; a bigger one is not read.
MAX_RECORD_BYTES = 64 * 2**20


def check_record(
    archive: Path,
    destination: Path,
    sizes: dict[str, int],
    links: set[str],
    computed: dict[str, str] | None = None,
) -> dict[str, str]:
    """Compare every written file with the wheel's RECORD, which every wheel has; the
    sha256 (hex) of every file, by its path below ``destination``.

    ``sizes``: the size of every file written, by its path below ``destination`` (as
    written: the writer refuses a member of another size than its listing's);
    ``links``: the symlinks written (RECORD may list them; there is nothing to compare);
    ``computed``: the sha256 of every file as it was written, when its members were
    hashed (``install --verify``): then each must be the one RECORD lists, and these
    are returned.  Otherwise a file's sha256 is RECORD's (see the module's docstring);
    the few RECORD gives none for (RECORD itself, its signatures, a row with no
    sha256) are read back and hashed.
    A wheel without a RECORD is refused as one with a wrong RECORD is: PEP 427 makes it
    mandatory, and without it nothing says what the wheel should hold.
    """
    records = sorted(
        path for path in sizes if path.count("/") == 1 and path.endswith(".dist-info/RECORD")
    )
    if not records:
        raise IntegrityError(
            f"{archive.name}: it has no <name>.dist-info/RECORD, which every wheel must "
            "have (PEP 427): nothing says what it should hold"
        )
    if len(records) > 1:
        raise IntegrityError(f"{archive.name}: more than one RECORD ({', '.join(records)})")
    [record] = records
    listed, record_digest = _read(archive, destination / record)
    info = record.rsplit("/", 1)[0]
    unlisted = {f"{info}/{name}" for name in _UNLISTED}
    digests = dict(computed) if computed is not None else {record: record_digest}

    def digest_of(path: str) -> str:
        return digests.get(path) or hash_file(destination / path, "sha256")

    for path, written in sorted(sizes.items()):
        if path in unlisted:
            digests[path] = digest_of(path)
            continue
        entry = listed.pop(path, None)
        if entry is None:
            raise IntegrityError(f"{archive.name}: {path} is not listed in the wheel's RECORD")
        expected, size = entry
        if computed is not None and expected is not None and expected != computed[path]:
            raise IntegrityError(
                f"{archive.name}: {path}: its sha256 is not the one the wheel's RECORD lists"
            )
        if size is not None and size != written:
            raise IntegrityError(
                f"{archive.name}: {path}: its size is not the one the wheel's RECORD lists"
            )
        digests[path] = expected or digest_of(path)
    missing = sorted(path for path in listed if path not in unlisted and path not in links)
    if missing:
        raise IntegrityError(
            f"{archive.name}: the wheel's RECORD lists {missing[0]}, which the wheel does not hold"
        )
    return digests


def _read(archive: Path, path: Path) -> tuple[dict[str, tuple[str | None, int | None]], str]:
    """RECORD's rows (path → (sha256 hex or None, size or None)), and RECORD's own sha256."""
    if path.lstat().st_size > MAX_RECORD_BYTES:
        raise IntegrityError(f"{archive.name}: its RECORD is over {MAX_RECORD_BYTES} bytes")
    try:
        data = path.read_bytes()
        text = data.decode("utf-8")
        rows = list(csv.reader(io.StringIO(text)))
    except (UnicodeDecodeError, csv.Error) as exc:
        raise IntegrityError(f"{archive.name}: its RECORD cannot be read ({exc})") from None
    listed: dict[str, tuple[str | None, int | None]] = {}
    for row in rows:
        if not row:
            continue
        if len(row) != 3:
            raise IntegrityError(f"{archive.name}: its RECORD has a malformed row {row!r}")
        name, hashed, size = row
        # A RECORD names paths: checked like every name from outside, before any use.
        check_relative_path(
            name, field="RECORD path", where=f"{archive.name}'s RECORD", error=IntegrityError
        )
        listed[name] = (_sha256(archive, name, hashed), _size(archive, name, size))
    return listed, hashlib.sha256(data).hexdigest()


def _sha256(archive: Path, name: str, hashed: str) -> str | None:
    """``sha256=<urlsafe base64>`` as hex; None for an empty field or another algorithm
    (PEP 376 allows sha384 and sha512; the files were hashed with sha256 only)."""
    algorithm, _, value = hashed.partition("=")
    if not hashed or algorithm != "sha256":
        return None
    try:
        raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != 32:
        raise IntegrityError(f"{archive.name}: its RECORD has a malformed sha256 for {name}")
    return raw.hex()


def _size(archive: Path, name: str, size: str) -> int | None:
    if not size:
        return None
    return check_size(
        size, field="size", where=f"{archive.name}'s RECORD for {name}", error=IntegrityError
    )
