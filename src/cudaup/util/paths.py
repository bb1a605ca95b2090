"""The one function that builds a destination below a root, and proves it stays there.

Every path cudaup writes or deletes below the store, a prefix, the cache or a
download directory is made by :func:`inside`: each part must be a plain name
(checked by :mod:`cudaup.core.names`), the result must lie lexically below the
root, and no existing directory on the way below the root may be a symbolic
link (a link planted there could carry the write elsewhere).  The root itself
may be a link: that is the user's choice, not an attacker's.
"""

from __future__ import annotations

import stat
from pathlib import Path

from cudaup.core.names import check_file_name
from cudaup.errors import CudaupError, IntegrityError


def inside(
    root: Path, *parts: str, field: str = "path", error: type[CudaupError] = IntegrityError
) -> Path:
    """``root / part / …``, proven to stay inside ``root``.

    ``parts`` are single names (never ``a/b``: pass ``"a", "b"``); a part that is not
    a plain name raises ``error`` naming ``field``.  An existing directory on the way
    that is a symbolic link raises :class:`IntegrityError`.
    """
    for part in parts:
        # A plain name (no separator, no '..', not empty) keeps the join below the root.
        check_file_name(part, field=field, where=str(root), error=error)
    destination = root.joinpath(*parts)
    current = root
    for part in parts[:-1]:
        current = current / part
        try:
            mode = current.lstat().st_mode
        except FileNotFoundError:
            break
        if stat.S_ISLNK(mode):
            raise IntegrityError(
                f"{current} is a symbolic link; cudaup does not write through links below {root}"
            )
    return destination
