"""A Python environment as its own interpreter sees it: where it is, what it holds.

The environment is a virtual environment (a directory with ``pyvenv.cfg``), named by
its interpreter (``.venv/bin/python``) or its directory.  Its distributions are read
by running that interpreter on a small standard-library script (``importlib.metadata``:
names, versions, requirements, extras, whether it came from a URL, its top-level
modules and shared objects), so the answer is the environment's own, whatever
installed it.  The answer is outside input: sizes, names, versions and module names
are checked before anything uses them.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from cudaup.core.documents import load_json
from cudaup.errors import ConflictError, PermissionDeniedError, SourceFormatError, UsageError
from cudaup.plan.elf import NotElfError, scan
from cudaup.util import processes

#: What the probe may print: a torch + vllm environment answers about 1 MB.
MAX_ANSWER = 64 << 20
PROBE_TIMEOUT = 120.0
#: A top-level module, or a namespace package's package (``cuda.bindings``).
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?$")
_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$")

# Runs in the environment's interpreter: the standard library only, Python 3.8 syntax.
PROBE = r"""
import csv, json, os, platform, sys, sysconfig
import importlib.metadata as md

SUFFIXES = (".py", ".pyc", ".so", ".pyd")

def file_names(dist):
    # What dist.files lists, as "/"-separated strings, read once: its PackagePath objects
    # cost seconds for torch's 15,000 files, and every function below needs the list.
    text = dist.read_text("RECORD")
    if text is None:
        return [str(path).replace("\\", "/") for path in dist.files or ()]
    names = []
    for row in csv.reader(text.splitlines()):
        if row and row[0]:
            # PurePosixPath's spelling: empty and "." parts dropped, a leading "/" kept
            name = "/".join(part for part in row[0].split("/") if part not in ("", "."))
            names.append("/" + name if row[0].startswith("/") else name)
    return names

def namespaced(names, tops):
    # A top-level package without __init__.py is a namespace (cuda, shared by cuda-bindings
    # and cuda-python): importing it loads nothing of this distribution, its packages do.
    files = set(names)
    found = set()
    for top in tops:
        subs = sorted({name.split("/")[1] for name in files
                       if name.startswith(top + "/") and name.count("/") == 2
                       and name.endswith("/__init__.py")})
        if files and top + "/__init__.py" not in files and subs:
            found.update(top + "." + sub for sub in subs)
        else:
            found.add(top)
    return sorted(found)

def modules(dist, names):
    text = dist.read_text("top_level.txt")
    if text:
        return namespaced(names, {line.strip().replace("/", ".").split(".")[0] for line in text.splitlines() if line.strip()})
    found = set()
    for name in names:
        parts = name.split("/")
        if parts[0] == "":
            parts[0] = "/"
        if parts[0] == ".." or parts[0].endswith((".dist-info", ".data", ".egg-info")):
            continue
        if parts[0] == "__pycache__":
            continue
        if len(parts) == 1:
            if not name.endswith(SUFFIXES) or name.endswith(".pth"):
                continue
            found.add(name.split(".")[0])
        else:
            found.add(parts[0])
    return namespaced(names, found)

def shared_objects(names):
    found = []
    for name in names:
        if name.startswith("..") or not (name.endswith(".so") or ".so." in name.rsplit("/", 1)[-1]):
            continue
        found.append(name)
    return sorted(found)[:64]

answer = {
    "schema": 1,
    "prefix": sys.prefix,
    "base_prefix": sys.base_prefix,
    "executable": sys.executable,
    "version": list(sys.version_info[:3]),
    "purelib": sysconfig.get_paths()["purelib"],
    "platlib": sysconfig.get_paths()["platlib"],
    "markers": {
        "implementation_name": sys.implementation.name,
        "implementation_version": "%d.%d.%d" % sys.implementation.version[:3],
        "os_name": os.name,
        "platform_machine": platform.machine(),
        "platform_release": platform.release(),
        "platform_system": platform.system(),
        "platform_version": platform.version(),
        "python_full_version": platform.python_version(),
        "platform_python_implementation": platform.python_implementation(),
        "python_version": "%d.%d" % sys.version_info[:2],
        "sys_platform": sys.platform,
    },
    "distributions": [],
}
for dist in md.distributions():
    meta = dist.metadata
    names = file_names(dist)
    direct = dist.read_text("direct_url.json")
    answer["distributions"].append({
        "name": meta["Name"],
        "version": meta["Version"],
        "requires": list(dist.requires or ()),
        "extras": list(meta.get_all("Provides-Extra") or ()),
        "installer": (dist.read_text("INSTALLER") or "").strip() or None,
        "direct_url": direct is not None,
        "modules": modules(dist, names),
        "shared_objects": shared_objects(names),
        "site": str(dist.locate_file("")),
    })
sys.stdout.write(json.dumps(answer))
"""


@dataclass(frozen=True, slots=True)
class Distribution:
    name: str  # canonical
    version: Version | None  # None: not a PEP 440 version (a legacy or broken one)
    version_text: str
    requires: tuple[Requirement, ...]
    extras: tuple[str, ...]
    installer: str | None
    #: Installed from a URL or a path (editable or not): no index serves it.
    direct_url: bool
    modules: tuple[str, ...]
    #: Shared objects it installed, relative to its site directory (at most 64).
    shared_objects: tuple[str, ...]
    site: Path

    def __str__(self) -> str:
        return f"{self.name} {self.version_text}"


@dataclass(frozen=True)
class Environment:
    """One virtual environment: its directory, interpreter and distributions."""

    root: Path
    interpreter: Path
    python: tuple[int, int]
    markers: Mapping[str, str]
    distributions: Mapping[str, Distribution]
    purelib: Path
    notes: tuple[str, ...] = field(default=())

    def get(self, name: str) -> Distribution | None:
        return self.distributions.get(canonicalize_name(name))

    @property
    def python_text(self) -> str:
        return f"{self.python[0]}.{self.python[1]}"


def locate(python: str) -> tuple[Path, Path]:
    """(environment root, interpreter) for ``--python``: an interpreter inside a virtual
    environment (``.venv/bin/python``) or the environment's directory.  The path is taken
    as written, never through ``bin/python``'s link (which leaves the environment), and
    nothing here runs or even opens the interpreter: a rollback works when it is broken."""
    given = Path(python).absolute()
    try:
        # An interpreter that is a link this user may not follow is an interpreter still.
        directory = given.is_dir()
    except PermissionError:
        directory = False
    try:
        if directory:
            root, interpreter = given, given / "bin" / "python"
        else:
            root, interpreter = given.parent.parent, given
        if (root / "pyvenv.cfg").is_file():
            return root, interpreter
    except PermissionError as exc:
        raise PermissionDeniedError(
            f"cannot read {exc.filename or python}: permission denied"
        ) from None
    if not os.path.lexists(given):
        raise UsageError(f"{python} does not exist; name an environment's interpreter")
    raise UsageError(
        f"{python} is not in a virtual environment (no pyvenv.cfg in {root}): cudaup "
        "upgrade changes virtual environments, never a system or conda base Python"
    )


def read_environment(python: str, *, timeout: float = PROBE_TIMEOUT) -> Environment:
    """Run the environment's interpreter and read what it holds (see the module docstring)."""
    root, interpreter = locate(python)
    try:
        done = processes.run(
            [str(interpreter), "-I", "-B", "-c", PROBE],
            timeout=timeout,
            text=False,
            environment={k: v for k, v in os.environ.items() if not k.startswith("PYTHON")},
        )
    except subprocess.TimeoutExpired:
        raise UsageError(f"{interpreter} did not answer within {timeout:.0f} s") from None
    except OSError as exc:
        raise UsageError(f"cannot run {interpreter} ({exc.strerror})") from None
    if done.returncode != 0:
        tail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no message"]
        raise UsageError(
            f"{interpreter} could not list its distributions (exit {done.returncode}: {tail[0]})"
        )
    what = f"the answer of {interpreter}"
    document = load_json(done.stdout, what=what, max_bytes=MAX_ANSWER)
    return parse_environment(document, root, interpreter, what)


def parse_environment(document: Any, root: Path, interpreter: Path, what: str) -> Environment:
    """The probe's answer, checked: every field the shape it must have."""
    if not isinstance(document, dict) or document.get("schema") != 1:
        raise SourceFormatError(f"{what} is not the answer cudaup's probe writes")
    prefix = _text(document, "prefix", what)
    if os.path.realpath(prefix) != os.path.realpath(root):
        raise ConflictError(
            f"{interpreter} runs in {prefix}, not in the environment {root} around it"
        )
    if os.path.realpath(_text(document, "base_prefix", what)) == os.path.realpath(prefix):
        raise UsageError(f"{interpreter} is not a virtual environment's interpreter")
    version = document.get("version")
    if not (
        isinstance(version, list) and len(version) >= 2 and all(type(v) is int for v in version)
    ):
        raise SourceFormatError(f"{what}: the Python version is {version!r}")
    markers = document.get("markers")
    if not isinstance(markers, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in markers.items()
    ):
        raise SourceFormatError(f"{what}: the marker environment is not a table of strings")
    entries = document.get("distributions")
    if not isinstance(entries, list):
        raise SourceFormatError(f"{what}: no list of distributions")
    distributions: dict[str, Distribution] = {}
    notes: list[str] = []
    for entry in entries:
        dist = _distribution(entry, what, notes)
        if dist is None:
            continue
        if (other := distributions.get(dist.name)) is not None:
            raise ConflictError(
                f"{root} holds {dist.name} twice ({other.version_text} in {other.site} and "
                f"{dist.version_text} in {dist.site}): repair it before upgrading it"
            )
        distributions[dist.name] = dist
    return Environment(
        root,
        interpreter,
        (version[0], version[1]),
        markers,
        distributions,
        Path(_text(document, "purelib", what)),
        tuple(notes),
    )


def _text(document: dict[str, Any], key: str, what: str) -> str:
    value = document.get(key)
    if not isinstance(value, str) or not value or "\0" in value:
        raise SourceFormatError(f"{what}: {key!r} is not a path or text")
    return value


def _strings(entry: dict[str, Any], key: str, what: str, name: str) -> list[str]:
    value = entry.get(key)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SourceFormatError(f"{what}: {name}'s {key} is not a list of strings")
    return value


def _distribution(entry: Any, what: str, notes: list[str]) -> Distribution | None:
    if not isinstance(entry, dict):
        raise SourceFormatError(f"{what}: a distribution is not a table")
    raw_name = entry.get("name")
    if not isinstance(raw_name, str) or not _NAME.match(raw_name):
        # A dist-info without a usable Name (a half-removed install): not a package to move.
        notes.append(f"a distribution named {raw_name!r} was skipped: not a project name")
        return None
    name = canonicalize_name(raw_name)
    text = entry.get("version")
    if not isinstance(text, str) or not text or len(text) > 200:
        raise SourceFormatError(f"{what}: {name} has no version")
    try:
        version: Version | None = Version(text)
    except InvalidVersion:
        version = None
        notes.append(f"{name} {text}: not a PEP 440 version; it is left as it is")
    requires = []
    for line in _strings(entry, "requires", what, name):
        try:
            requires.append(Requirement(line))
        except InvalidRequirement:
            notes.append(f"{name} {text}: requirement {line!r} cannot be read; it is ignored")
    extras = [canonicalize_name(e) for e in _strings(entry, "extras", what, name)]
    modules = [m for m in _strings(entry, "modules", what, name) if _MODULE.match(m)]
    shared = [
        s
        for s in _strings(entry, "shared_objects", what, name)
        if ".." not in Path(s).parts and not Path(s).is_absolute()
    ]
    installer = entry.get("installer")
    direct_url = entry.get("direct_url")
    if not isinstance(direct_url, bool) or not (installer is None or isinstance(installer, str)):
        raise SourceFormatError(
            f"{what}: {name}'s installer or direct_url is not what it should be"
        )
    return Distribution(
        name=name,
        version=version,
        version_text=text,
        requires=tuple(requires),
        extras=tuple(extras),
        installer=installer,
        direct_url=direct_url,
        modules=tuple(sorted(set(modules)))[:256],
        shared_objects=tuple(shared)[:64],
        site=Path(_text(entry, "site", what)),
    )


#: Shared objects read per distribution, and the most read of each (the dynamic string
#: table sits in the first segment, a few kilobytes in).
LINKED_OBJECTS = 4
LINKED_PREFIX = 64 << 10
LINKED_MAX = 16 << 20


def read_linked(dist: Distribution) -> list[str]:
    """The libraries the first few shared objects of ``dist`` link (``libcudart.so.12``)."""
    libraries: list[str] = []
    for relative in dist.shared_objects[:LINKED_OBJECTS]:
        try:
            fd = os.open(dist.site / relative, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        with os.fdopen(fd, "rb") as handle:
            try:
                data = handle.read(LINKED_PREFIX)
                found = scan(data)
                if not found.complete and len(data) < found.needed <= LINKED_MAX:
                    data += handle.read(found.needed - len(data))
                    found = scan(data)
            except (OSError, NotElfError):
                continue
        libraries += found.libraries
    return libraries
