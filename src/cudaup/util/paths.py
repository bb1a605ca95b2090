"""The one place that builds a destination below a root, and proves it stays there.

Every path cudaup writes or deletes below its home (the store, the shims, the locks),
the cache, a prefix or a download directory is made here: each part must be a plain
name (checked by :mod:`cudaup.core.names`), the result must lie lexically below the
root, and no existing entry on the way below the root may be a symbolic link (a link
planted there would carry the write elsewhere), checked from the root down:

- :func:`inside`: a path to create or replace; the directories on the way are checked,
  the last part is not (a file is then created without following a link, or renamed
  over one, which replaces the link itself);
- :func:`directory`: a directory to write into; the last part is checked too;
- :func:`make_directory`: the same, created one level at a time where missing.

A link is refused with :class:`~cudaup.errors.UntrustedPathError` (exit 22) naming it
and where it points.  The root itself may be a link, and so may anything above it:
``CUDAUP_HOME``, ``CUDAUP_CACHE_DIR`` and ``--prefix`` are the user's choice, not an
attacker's.  The checks look at the filesystem as it is when they run: whoever can
replace a directory below the home between the check and the write could as well have
written there directly (docs/security.md).
"""

from __future__ import annotations

import contextlib
import stat
from pathlib import Path

from cudaup.core.names import check_file_name
from cudaup.errors import CudaupError, IntegrityError, UntrustedPathError


def inside(
    root: Path, *parts: str, field: str = "path", error: type[CudaupError] = IntegrityError
) -> Path:
    """``root / part / …``, proven to stay inside ``root``.

    ``parts`` are single names (never ``a/b``: pass ``"a", "b"``); a part that is not
    a plain name raises ``error`` naming ``field``.  An existing entry on the way (all
    parts but the last) that is a symbolic link raises :class:`UntrustedPathError`.
    """
    destination = _joined(root, parts, field, error)
    _refuse_links(root, parts[:-1])
    return destination


def directory(
    root: Path, *parts: str, field: str = "path", error: type[CudaupError] = IntegrityError
) -> Path:
    """Like :func:`inside`, for a directory cudaup writes into: the last part may not be
    a symbolic link either."""
    destination = _joined(root, parts, field, error)
    _refuse_links(root, parts)
    return destination


def make_directory(root: Path, *parts: str, mode: int = 0o755, field: str = "path") -> Path:
    """:func:`directory`, created where missing: ``root`` (and what is above it) as the
    user named it, then each part below it one level at a time, never through a link."""
    destination = _joined(root, parts, field, IntegrityError)
    root.mkdir(parents=True, exist_ok=True)
    current = root
    for part in parts:
        current = current / part
        with contextlib.suppress(FileExistsError):
            current.mkdir(mode)
        _refuse_link(root, current)
    return destination


def _joined(root: Path, parts: tuple[str, ...], field: str, error: type[CudaupError]) -> Path:
    for part in parts:
        # A plain name (no separator, no '..', not empty) keeps the join below the root.
        check_file_name(part, field=field, where=str(root), error=error)
    return root.joinpath(*parts)


def _refuse_links(root: Path, parts: tuple[str, ...]) -> None:
    current = root
    for part in parts:
        current = current / part
        if not _refuse_link(root, current):
            return  # nothing exists below a missing entry


def _refuse_link(root: Path, path: Path) -> bool:
    """Raise when ``path`` is a symbolic link; whether it exists."""
    try:
        mode = path.lstat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        return False
    if stat.S_ISLNK(mode):
        try:
            target = f" (to {path.readlink()})"
        except OSError:
            target = ""
        raise UntrustedPathError(
            f"{path} is a symbolic link{target}; cudaup does not write through links below "
            f"{root}: remove it (the root itself may be a link)"
        )
    return True
