"""A wheel's RECORD, checked against the files just written from it.

A wheel lists each of its files with a sha256 and a size in
``<name>.dist-info/RECORD`` (PEP 376, PEP 427).  The archive's own sha256 was
already checked against the index, so a mismatch here means a wheel built
wrong, or rebuilt with a RECORD that no longer tells the truth: either way the
unpacked tree would not be what the wheel says, and it is refused.  The
digests compared are the ones computed while the files were written; nothing
is read twice.
"""

from __future__ import annotations

import base64
import binascii
import csv
import io
from pathlib import Path

from cudaup.core.names import check_relative_path, check_size
from cudaup.errors import IntegrityError

#: Signatures of RECORD itself, which RECORD cannot list (PEP 376).
_UNLISTED = ("RECORD", "RECORD.jws", "RECORD.p7s")
#: No RECORD of a real wheel is anywhere near this; a bigger one is not read.
MAX_RECORD_BYTES = 64 * 2**20


def check_record(
    archive: Path,
    destination: Path,
    digests: dict[str, str],
    sizes: dict[str, int],
    links: set[str],
) -> None:
    """Compare every written file with the wheel's RECORD, which every wheel has.

    ``digests``: the sha256 (hex) of every file written, by its path below ``destination``;
    ``sizes``: the size of each (as written: the writer refuses a member of another size
    than its listing's); ``links``: the symlinks written (RECORD may list them; there is
    nothing to compare).
    A wheel without a RECORD is refused as one with a wrong RECORD is: PEP 427 makes it
    mandatory, and without it nothing says what the wheel should hold.
    """
    records = sorted(
        path for path in digests if path.count("/") == 1 and path.endswith(".dist-info/RECORD")
    )
    if not records:
        raise IntegrityError(
            f"{archive.name}: it has no <name>.dist-info/RECORD, which every wheel must "
            "have (PEP 427): nothing says what it should hold"
        )
    if len(records) > 1:
        raise IntegrityError(f"{archive.name}: more than one RECORD ({', '.join(records)})")
    [record] = records
    listed = _read(archive, destination / record)
    info = record.rsplit("/", 1)[0]
    unlisted = {f"{info}/{name}" for name in _UNLISTED}
    for path, digest in sorted(digests.items()):
        if path in unlisted:
            continue
        entry = listed.pop(path, None)
        if entry is None:
            raise IntegrityError(f"{archive.name}: {path} is not listed in the wheel's RECORD")
        expected, size = entry
        if expected is not None and expected != digest:
            raise IntegrityError(
                f"{archive.name}: {path}: its sha256 is not the one the wheel's RECORD lists"
            )
        if size is not None and size != sizes[path]:
            raise IntegrityError(
                f"{archive.name}: {path}: its size is not the one the wheel's RECORD lists"
            )
    missing = sorted(path for path in listed if path not in unlisted and path not in links)
    if missing:
        raise IntegrityError(
            f"{archive.name}: the wheel's RECORD lists {missing[0]}, which the wheel does not hold"
        )


def _read(archive: Path, path: Path) -> dict[str, tuple[str | None, int | None]]:
    """RECORD's rows: path → (sha256 hex or None, size or None)."""
    if path.lstat().st_size > MAX_RECORD_BYTES:
        raise IntegrityError(f"{archive.name}: its RECORD is over {MAX_RECORD_BYTES} bytes")
    try:
        text = path.read_text(encoding="utf-8")
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
    return listed


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
