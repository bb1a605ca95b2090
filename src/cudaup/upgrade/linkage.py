"""Would this shared object load here, were the NVIDIA driver installed?  Answered by
reading, as the dynamic loader would, without loading anything.

On a host without a driver an extension that links ``libcuda.so.1`` cannot be imported,
so importing it says nothing about whether it fits the torch beside it.  This walks what
``ld.so`` walks for it: the libraries it needs (``DT_NEEDED``), found by soname among those
already loaded (the interpreter's own, and torch's ``libtorch_global_deps`` closure, which
``import torch`` loads ``RTLD_GLOBAL``), then through its ``DT_RPATH``/``DT_RUNPATH``
(``$ORIGIN`` expanded), then in the environment's site-packages, then the system's library
cache (``ldconfig -p``) and default directories; and it binds every undefined symbol of the
object to a definition in that scope, by name and version.  What the driver alone defines
(``cu*`` entry points of a missing ``libcuda.so.1``, ``nvml*`` of a missing
``libnvidia-ml.so.1``) may stay unbound; anything else unbound is what the loader would
refuse, said in its own words (``x.so: undefined symbol: _ZN3c10…``).
"""

from __future__ import annotations

import functools
import mmap
import os
import re
import subprocess
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from cudaup.plan.elf import Dynamic, DynamicSymbols, NotElfError, dynamic_symbols, read_dynamic
from cudaup.util import processes

#: The driver's libraries, and the names only they define.
DRIVER_LIBRARIES: dict[str, re.Pattern[str]] = {
    "libcuda.so.1": re.compile(r"^cu[A-Z]"),
    "libnvidia-ml.so.1": re.compile(r"^nvml[A-Z]"),
}
DEFAULT_DIRECTORIES = ("/lib64", "/usr/lib64", "/lib", "/usr/lib")
_T = TypeVar("_T")
_LDCONFIG = re.compile(r"^\s*(\S+)\s+\(([^)]*)\)\s+=>\s+(/\S+)$")


@dataclass(frozen=True, slots=True)
class Linkage:
    """The answer for one object: ``problem`` is the loader's line (None: it would load)."""

    problem: str | None
    #: Driver libraries it needs that this host lacks, and the entry points left to them.
    missing_driver: tuple[str, ...] = ()
    driver_symbols: int = 0
    #: How many undefined symbols were bound, and in how many libraries.
    bound: int = 0
    libraries: int = 0


@dataclass
class _Object:
    path: Path
    dynamic: Dynamic
    _symbols: DynamicSymbols | None = field(default=None, repr=False)

    @property
    def symbols(self) -> DynamicSymbols:
        if self._symbols is None:
            self._symbols = _read(self.path, dynamic_symbols)
        return self._symbols


def _read(path: Path, reader: Callable[[mmap.mmap], _T]) -> _T:
    with path.open("rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size == 0:
            raise NotElfError(f"{path} is empty")
        with mmap.mmap(handle.fileno(), 0, prot=mmap.PROT_READ) as data:
            return reader(data)


def is_shared_object(path: Path) -> bool:
    """Whether ``path`` reads as an ELF object with a dynamic section the loader can use."""
    try:
        _read(path, read_dynamic)
    except (OSError, NotElfError, ValueError):
        return False
    return True


class Linker:
    """Answers for the objects of one environment (its site-packages directories)."""

    def __init__(self, sites: Sequence[Path], interpreter: Path) -> None:
        self.sites, self.interpreter = list(sites), interpreter
        self._objects: dict[Path, _Object | None] = {}
        self._site_index: dict[str, Path] | None = None

    # -- finding libraries ------------------------------------------------------------------
    def _object(self, path: Path) -> _Object | None:
        key = path.absolute()
        if key not in self._objects:
            try:
                self._objects[key] = _Object(key, _read(key, read_dynamic))
            except (OSError, NotElfError, ValueError):
                self._objects[key] = None
        return self._objects[key]

    def _in_site(self, name: str) -> Path | None:
        if self._site_index is None:
            index: dict[str, Path] = {}
            for site in self.sites:
                for directory, _dirs, files in os.walk(site):
                    for file in sorted(files):
                        if ".so" in file:
                            index.setdefault(file, Path(directory) / file)
            self._site_index = index
        return self._site_index.get(name)

    def _locate(self, name: str, by: _Object) -> Path | None:
        if "/" in name:
            return Path(name) if Path(name).is_file() else None
        origin = str(by.path.parent)
        # DT_RPATH counts only where the object has no DT_RUNPATH (as ld.so reads them).
        paths = by.dynamic.runpath or by.dynamic.rpath
        for entry in paths:
            directory = entry.replace("${ORIGIN}", origin).replace("$ORIGIN", origin)
            if (candidate := Path(directory) / name).is_file():
                return candidate
        if (found := self._in_site(name)) is not None:
            return found
        if (cached := system_libraries().get(name)) is not None and Path(cached).is_file():
            return Path(cached)
        for directory in _default_directories():
            if (candidate := Path(directory) / name).is_file():
                return candidate
        return None

    def _closure(
        self, roots: Iterable[_Object], loaded: dict[str, _Object], missing: list[str]
    ) -> list[_Object]:
        """The objects ``roots`` bring in, breadth first (the loader's order), each soname
        once; a name found nowhere goes to ``missing``."""
        order: list[_Object] = []
        queue = list(roots)
        while queue:
            current = queue.pop(0)
            order.append(current)
            for name in current.dynamic.needed:
                if name in loaded or name in missing:
                    continue
                path = self._locate(name, current)
                found = self._object(path) if path is not None else None
                if found is None:
                    missing.append(name)
                    continue
                loaded[name] = found
                if found.dynamic.soname:
                    loaded.setdefault(found.dynamic.soname, found)
                queue.append(found)
        return order

    # -- the answer ------------------------------------------------------------------------
    def check(self, path: Path, preload: Sequence[Path] = ()) -> Linkage:
        """Whether ``path`` would load after the interpreter and ``preload`` (see the module
        docstring); what it says names ``path`` as given."""
        target = self._object(path)
        if target is None:
            return Linkage(f"{path}: cannot read it as a shared object")
        loaded: dict[str, _Object] = {}
        scope: list[_Object] = []
        ignored: list[str] = []
        for root in [self.interpreter, *preload]:
            if (found := self._object(root)) is not None:
                scope += self._closure([found], loaded, ignored)
        if target.dynamic.soname:
            loaded.setdefault(target.dynamic.soname, target)
        missing: list[str] = []
        scope += self._closure([target], loaded, missing)
        driver_missing = tuple(name for name in missing if name in DRIVER_LIBRARIES)
        absent = [name for name in missing if name not in DRIVER_LIBRARIES]
        if absent:
            line = f"{absent[0]}: cannot open shared object file: No such file or directory"
            return Linkage(line, driver_missing)
        patterns = [DRIVER_LIBRARIES[name] for name in driver_missing]
        unique = list({id(o): o for o in scope}.values())
        bound = driver = 0
        for symbol in target.symbols.undefined:
            if symbol.weak:
                continue
            if any(other.symbols.defines(symbol) for other in unique):
                bound += 1
            elif any(pattern.match(symbol.name) for pattern in patterns):
                driver += 1
            else:
                version = f", version {symbol.version}" if symbol.version else ""
                line = f"{path}: undefined symbol: {symbol.name}{version}"
                return Linkage(line, driver_missing)
        return Linkage(None, driver_missing, driver, bound, len(unique))


@functools.cache
def system_libraries() -> dict[str, str]:
    """The system's library cache, soname → path, for this machine's word size."""
    try:
        done = processes.run(["/sbin/ldconfig", "-p"], timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    wide = os.uname().machine in {"x86_64", "aarch64", "ppc64le", "s390x"}
    found: dict[str, str] = {}
    for line in done.stdout.splitlines():
        if (match := _LDCONFIG.match(line)) is None:
            continue
        name, flags, path = match.groups()
        if wide != ("64" in flags):
            continue
        found.setdefault(name, path)
    return found


def _default_directories() -> list[str]:
    machine = os.uname().machine
    multiarch = {"x86_64": "x86_64-linux-gnu", "aarch64": "aarch64-linux-gnu"}.get(machine)
    extra = [f"/lib/{multiarch}", f"/usr/lib/{multiarch}"] if multiarch else []
    return [*extra, *DEFAULT_DIRECTORIES]
