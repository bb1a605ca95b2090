"""A system root: every system path doctor inspects, relative to one directory.

``CUDAUP_SYSTEM_ROOT`` (default ``/``) lets the tests build whole fake machines
in a temporary directory.  Paths outside the user's home (``/usr/local``,
``/opt``, ``/proc``, ``/sys``, ``/etc``, ``/var/lib``) go through
:meth:`SystemRoot.path`; symbolic links with absolute targets are resolved
inside the root, as a chroot would, so a fake ``/usr/local/cuda ->
/usr/local/cuda-12.4`` behaves like the real one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

MAX_LINK_HOPS = 40


@dataclass(frozen=True, slots=True)
class SystemRoot:
    root: Path = Path("/")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> SystemRoot:
        env = os.environ if env is None else env
        return cls(Path(env.get("CUDAUP_SYSTEM_ROOT") or "/"))

    @property
    def is_real(self) -> bool:
        """Whether this is the machine's own root (live hardware queries allowed)."""
        return self.root.resolve() == Path("/").resolve()

    def path(self, system_path: str | PurePosixPath) -> Path:
        """The real path of a system path such as ``/usr/local/cuda``."""
        relative = str(system_path).lstrip("/")
        return self.root / relative if relative else self.root

    def display(self, real: Path) -> str:
        """A real path shown as the system path it stands for."""
        if self.is_real:
            return str(real)
        try:
            relative = str(real.relative_to(self.root))
        except ValueError:
            return str(real)
        return "/" if relative == "." else "/" + relative

    def readlink(self, system_path: str) -> str | None:
        """The target of a link as written (a system path), or ``None``."""
        try:
            return str(self.path(system_path).readlink())
        except OSError:
            return None

    def resolve(self, system_path: str) -> tuple[str, bool]:
        """Follow links inside the root: the final system path, and whether it exists.

        A dangling link gives its last target and ``False``.
        """
        parts = [p for p in PurePosixPath(system_path).parts if p != "/"]
        resolved: list[str] = []
        hops = 0
        while parts:
            part = parts.pop(0)
            if part in {"", "."}:
                continue
            if part == "..":
                if resolved:
                    resolved.pop()
                continue
            candidate = "/" + "/".join([*resolved, part])
            target = self.readlink(candidate)
            if target is None:
                resolved.append(part)
                continue
            hops += 1
            if hops > MAX_LINK_HOPS:
                return candidate, False
            new_parts = [p for p in PurePosixPath(target).parts if p != "/"]
            if target.startswith("/"):
                resolved = []
            parts = new_parts + parts
        final = "/" + "/".join(resolved)
        return final, self.path(final).exists()
