"""A resolution as uv writes it, read back into a graph (pure).

``uv pip compile --annotation-style split --emit-index-annotation`` prints each
package as ``name==version`` followed by ``# via`` lines (who requires it:
packages, ``-r FILE`` for the requested set, ``-c FILE`` for constraints) and
``# from URL`` (the index it came from).  Names and versions are checked as
they are read: they came from package indexes.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from cudaup.errors import SourceFormatError

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+?)(?:\s*;.*)?$")
_VIA_ONE = re.compile(r"^\s+# via (.+)$")
_VIA_OPEN = re.compile(r"^\s+# via\s*$")
_VIA_ITEM = re.compile(r"^\s+#   (.+)$")
_FROM = re.compile(r"^\s+# from (\S+)$")
#: The marker uv writes for the requested set (``-r FILE``).
REQUESTED = "-r"


@dataclass(frozen=True, slots=True)
class Resolved:
    name: str  # canonical
    version: Version
    index_url: str | None
    parents: frozenset[str]  # canonical names; REQUESTED for the requested set

    @property
    def requested(self) -> bool:
        return REQUESTED in self.parents

    def __str__(self) -> str:
        return f"{self.name} {self.version}"


@dataclass(frozen=True)
class Closure:
    packages: Mapping[str, Resolved]

    def __iter__(self) -> Iterator[Resolved]:
        return iter(self.packages.values())

    def __len__(self) -> int:
        return len(self.packages)

    def get(self, name: str) -> Resolved | None:
        return self.packages.get(canonicalize_name(name))

    def children(self, name: str) -> list[Resolved]:
        """What ``name`` requires in this resolution."""
        key = canonicalize_name(name)
        return sorted((p for p in self if key in p.parents), key=lambda p: p.name)

    def chain(self, start: str, targets: set[str]) -> list[Resolved] | None:
        """The shortest requirement path from ``start`` to one of ``targets`` (inclusive)."""
        first = self.get(start)
        if first is None:
            return None
        queue: deque[list[Resolved]] = deque([[first]])
        seen = {first.name}
        while queue:
            path = queue.popleft()
            if path[-1].name in targets:
                return path
            for child in self.children(path[-1].name):
                if child.name not in seen:
                    seen.add(child.name)
                    queue.append([*path, child])
        return None


def _parent(text: str) -> str | None:
    text = text.strip()
    if text.startswith("-r "):
        return REQUESTED
    if text.startswith(("-c ", "-o ")):
        return None  # a constraint, not a requirer
    name = text.split("[", 1)[0].strip()
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
        raise SourceFormatError(f"uv named {text!r} as a requirer, which is not a project name")
    return canonicalize_name(name)


def parse_compile_output(text: str) -> Closure:
    """The packages of one ``uv pip compile`` answer, with who requires each and where from."""
    packages: dict[str, Resolved] = {}
    name: str | None = None
    version: Version | None = None
    parents: set[str] = set()
    index: str | None = None
    open_via = False

    def close() -> None:
        if name is not None and version is not None:
            packages[name] = Resolved(name, version, index, frozenset(parents))

    for raw in text.splitlines():
        if not raw.strip():
            continue
        if pin := _PIN.match(raw):
            close()
            name = canonicalize_name(pin.group(1))
            try:
                version = Version(pin.group(2))
            except InvalidVersion:
                raise SourceFormatError(
                    f"uv resolved {pin.group(1)} to {pin.group(2)!r}, which is not a version"
                ) from None
            parents, index, open_via = set(), None, False
            continue
        if name is None:
            if raw.lstrip().startswith("#"):
                continue  # a header comment before the first package
            raise SourceFormatError(f"uv wrote {raw.strip()!r} where a pinned package belongs")
        if _VIA_OPEN.match(raw):
            open_via = True
        elif via := _VIA_ONE.match(raw):
            open_via = False
            if (parent := _parent(via.group(1))) is not None:
                parents.add(parent)
        elif open_via and (item := _VIA_ITEM.match(raw)):
            if (parent := _parent(item.group(1))) is not None:
                parents.add(parent)
        elif source := _FROM.match(raw):
            open_via, index = False, source.group(1)
        elif raw.lstrip().startswith("#"):
            continue  # other annotations uv may add
        else:
            raise SourceFormatError(f"uv wrote {raw.strip()!r}, which cudaup cannot read")
    close()
    return Closure(packages)
