"""The family table (``data/families.toml``, extended by the user's ``families.toml``):
which project is one package's build for each CUDA major.

A family names its project per major (``cupy-cuda12x``, ``cupy-cuda13x``); one marked
``line = "version"`` is versioned by release (``nvidia-cuda-runtime`` 13.0.96 is CUDA
13.0), so its version says the line and an environment's own copy is held to the
target line.  ``[extras]`` lists the extras that name a major (``jax[cuda12]``);
``[renamed]`` the projects published under a new name (``sgl-kernel`` → ``sglang-kernel``),
which a move takes to the new name; ``[companions]`` the packages released with another at
its version (``flashinfer-cubin`` with ``flashinfer-python``), which move with it.
Projects outside the table whose name carries a major (``…-cu12``, ``…-cuda12x``,
``jax-cuda12-…``) are renamed by that pattern, which ``plan`` reads the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import Version

from cudaup.core.documents import load_toml
from cudaup.core.major_extras import extra_major, parse_major_extras
from cudaup.core.names import is_project_name
from cudaup.core.renames import Renamed, parse_renamed
from cudaup.errors import SourceFormatError, UsageError
from cudaup.plan.lines import Line, name_stem
from cudaup.util.reading import read_small

#: A user's table is a few kilobytes; the shipped one is smaller than this.
MAX_TABLE_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class Family:
    name: str
    #: CUDA major → canonical project name.
    names: Mapping[int, str]
    #: The version is the CUDA release the build belongs to.
    versioned_by_line: bool = False

    def majors_of(self, project: str) -> list[int]:
        return sorted(major for major, name in self.names.items() if name == project)

    def line_of(self, version: Version) -> Line | None:
        """The line a version of a release-versioned project is (13.0.96 → 13.0)."""
        if not self.versioned_by_line or len(version.release) < 2:
            return None
        line = (version.release[0], version.release[1])
        return line if line[0] in self.names else None


@dataclass(frozen=True)
class FamilyTable:
    families: tuple[Family, ...]
    #: canonical project → the extra templates naming a major (``cuda{major}``).
    extras: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: old project → its rename.
    renamed: Mapping[str, Renamed] = field(default_factory=dict)
    #: companion project → the project whose version it always has.
    companions: Mapping[str, str] = field(default_factory=dict)

    def family_of(self, project: str) -> Family | None:
        name = canonicalize_name(project)
        return next((f for f in self.families if name in f.names.values()), None)

    def versioned_by_line(self, major: int) -> list[str]:
        """The projects of ``major`` whose version is their CUDA release (``cuda-bindings``,
        ``nvidia-cuda-runtime``): held to the target line whoever requires them, so that a
        dependency's loose ``cuda-bindings`` never floats onto another line or major."""
        return sorted(
            {f.names[major] for f in self.families if f.versioned_by_line and major in f.names}
        )

    def rename(self, project: str, major: int) -> str | None:
        """The project that is ``project``'s build for ``major``; None when nothing says.

        A renamed project first takes its new name (``sgl-kernel`` → ``sglang-kernel``).
        Then the table; else a name that carries a major (``…-cu12``, ``cupy-cuda12x``,
        ``jax-cuda12-plugin``) with the major replaced; a name that carries none stays."""
        name: str = canonicalize_name(project)
        if name in self.renamed:
            name = self.renamed[name].new
        family = self.family_of(name)
        if family is not None:
            return family.names.get(major)
        stem = name_stem(name)
        if stem is None:
            return name
        return stem.replace("NN", str(major))

    def rename_extra(self, project: str, extra: str, major: int) -> str:
        """``jax``'s ``cuda12`` for major 13 → ``cuda13``; an extra naming no major stays."""
        for template in self.extras.get(canonicalize_name(project), ()):
            if extra_major((template,), extra) is not None:
                return template.replace("{major}", str(major))
        return extra


def load_families(extra: Path | None = None) -> FamilyTable:
    """The shipped family table, extended or overridden (by family name) by a user file."""
    shipped = resources.files("cudaup").joinpath("data/families.toml").read_bytes()
    documents = [("the shipped families.toml", shipped)]
    if extra is not None and extra.is_file():
        try:
            documents.append((str(extra), read_small(extra)))
        except OSError as exc:
            raise UsageError(f"cannot read {extra} ({exc.strerror})") from None
    families: dict[str, Family] = {}
    extras: dict[str, tuple[str, ...]] = {}
    renamed: dict[str, Renamed] = {}
    companions: dict[str, str] = {}
    for where, data in documents:
        try:
            document = load_toml(data, what=where, max_bytes=MAX_TABLE_BYTES)
        except SourceFormatError as exc:
            raise UsageError(str(exc)) from None
        for name, entry in _table(document.get("families", {}), where, "families").items():
            families[name] = _family(name, _table(entry, where, f"families.{name}"), where)
        extras.update(parse_major_extras(document.get("extras", {}), where))
        renamed.update(parse_renamed(document.get("renamed", {}), where))
        for companion, package in _table(
            document.get("companions", {}), where, "companions"
        ).items():
            if _project(companion, where) == _project(package, where):
                raise UsageError(f"{where}: companions.{companion} names itself")
            companions[_project(companion, where)] = _project(package, where)
    return FamilyTable(tuple(families.values()), extras, renamed, companions)


def _table(value: object, where: str, key: str) -> dict[str, object]:
    if not isinstance(value, dict):
        raise UsageError(f"{where}: [{key}] is not a table")
    return value


def _project(value: object, where: str) -> str:
    if not isinstance(value, str) or not is_project_name(canonicalize_name(value)):
        raise UsageError(f"{where}: {value!r} is not a project name")
    return canonicalize_name(value)


def _family(name: str, entry: dict[str, object], where: str) -> Family:
    names: dict[int, str] = {}
    for major, project in _table(entry.get("names"), where, f"families.{name}.names").items():
        if not major.isdigit() or not 1 <= int(major) <= 99:
            raise UsageError(f"{where}: family {name}: {major!r} is not a CUDA major such as 13")
        names[int(major)] = _project(project, where)
    if not names:
        raise UsageError(f"{where}: family {name} names no project")
    line = entry.get("line")
    if line not in {None, "version"}:
        raise UsageError(f'{where}: family {name}: line = {line!r}; the only kind is "version"')
    return Family(name, names, line == "version")
