"""Projects published under a new name from one release on (``data/families.toml``
``[renamed]``: ``sgl-kernel`` became ``sglang-kernel`` at 0.4.0) (pure).

``upgrade`` moves the old name to the new one (through its family table, which a user's
``families.toml`` extends); ``plan`` names the new project when the old one fits no line.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from cudaup.core.documents import load_toml
from cudaup.core.names import is_project_name
from cudaup.errors import UsageError


@dataclass(frozen=True, slots=True)
class Renamed:
    old: str
    new: str
    #: The first release under the new name.
    since: Version

    def describe(self) -> str:
        return f"{self.old} is published as {self.new} since {self.since}"


def parse_renamed(table: object, where: str) -> dict[str, Renamed]:
    """``[renamed]``: ``old = { to = "new", since = "X.Y" }`` per project."""
    if not isinstance(table, dict):
        raise UsageError(f"{where}: [renamed] is not a table")
    found: dict[str, Renamed] = {}
    for old, entry in table.items():
        to = entry.get("to") if isinstance(entry, dict) else None
        since = entry.get("since") if isinstance(entry, dict) else None
        names = [canonicalize_name(n) for n in (old, to) if isinstance(n, str)]
        if len(names) != 2 or not all(is_project_name(n) for n in names) or names[0] == names[1]:
            raise UsageError(f'{where}: renamed.{old} is not {{ to = "project", since = "X.Y" }}')
        try:
            version = Version(since) if isinstance(since, str) else None
        except InvalidVersion:
            version = None
        if version is None:
            raise UsageError(f"{where}: renamed.{old}: since = {since!r} is not a version")
        found[names[0]] = Renamed(names[0], names[1], version)
    return found


@cache
def shipped_renames() -> dict[str, Renamed]:
    """The renames the shipped family table lists."""
    data = resources.files("cudaup").joinpath("data/families.toml").read_bytes()
    document = load_toml(data, what="the shipped families.toml", max_bytes=1 << 20)
    return parse_renamed(document.get("renamed", {}), "the shipped families.toml")
