"""The program behind ``$CUDAUP_HOME/bin/nvcc`` and friends: run the active toolkit's tool.

Each shim is a short ``sh`` script written by :func:`cudaup.switch.shim_files.write_shims`::

    #!/bin/sh
    # cudaup shim: ...
    exec /usr/bin/python3 -I -S -c 'import sys; sys.path.append(sys.argv.pop(1)); from cudaup.switch.shim import main; sys.exit(main())' \
        /usr/lib/python3/site-packages /home/me/.local/share/cudaup nvcc "$@"

``-I`` keeps the user's ``PYTHON*`` variables and the current directory out of
the interpreter; ``-S`` skips ``site`` (its ``.pth`` files cost milliseconds),
so the directory cudaup was imported from when the shim was written (the first
argument) is appended to ``sys.path`` instead.  (``python -m cudaup.switch.shim
HOME TOOL ARGS...`` does the same, more slowly.)

This module runs on every compiler call, so it imports only ``os`` and ``sys``, and
two modules of cudaup that import nothing else: :mod:`cudaup.core.tools` (the tools
NVIDIA's toolkits ship) and :mod:`cudaup.util.trust` (who may choose what runs);
``pathlib``, ``re`` and ``packaging`` would each cost milliseconds.  It keeps a
small copy of the request rules of :mod:`cudaup.core.versions` and of
:meth:`cudaup.install.store.Store.find`; the tests check that the copies agree.
:mod:`cudaup.switch` uses the helpers here too, so ``cudaup which`` and the
shims name the same toolkit.

Selection order (``cudaup run VERSION`` sets ``CUDAUP_TOOLKIT`` for its command):

1. ``CUDAUP_TOOLKIT``;
2. the nearest ``.cuda-version`` file, from the current directory upwards;
3. ``$CUDAUP_HOME/default``.

A value is a version request or a path to a toolkit directory (anything with a
``/``, or starting with ``~`` or ``.``; relative paths in a ``.cuda-version``
file are relative to the file's directory).  A version request names the
installed release itself, else the newest installed match *that has the tool
being run* (``nvcc`` when no tool is named), else the newest match: a floating
``13.0`` keeps running nvcc from 13.0.1 after 13.0.2 was installed with
libraries only.  A value that matches nothing is an error, never a silent
fall-through to the next source, and a tool the chosen toolkit lacks is an
error naming the component that ships it, never another toolkit's tool.

Who may choose (:mod:`cudaup.util.trust`, git's ``safe.directory`` rule): a
``.cuda-version`` another user owns or may write is skipped with a warning that
names it and its owner; a toolkit named by path that another user owns or may
write (it, its ``bin``, the tool, or a directory above them) is refused with exit
22; ``CUDAUP_SAFE_DIRECTORIES`` lists the exceptions.  A tool name that is not one
of NVIDIA's (:data:`cudaup.core.tools.TOOL_COMPONENTS`) is never run.

With ``CUDAUP_SHIM_QUERY=1`` a shim prints (JSON) what it would run instead of
running it: ``cudaup doctor`` and ``list`` follow shims on PATH that way.
"""

# os.path, not pathlib (12 ms to import); execve is the point of this module.
# ruff: noqa: PTH100, PTH109, PTH117, PTH110, PTH111, PTH112, PTH113, PTH118, PTH119, PTH120, PTH123, PTH208, S606

from __future__ import annotations

import os
import sys

from cudaup.core.tools import TOOL_COMPONENTS, is_toolkit_tool
from cudaup.util import trust

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (mypy knows the name)
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    #: ``(home, request, tool)`` → ``(version, path)`` of the installed toolkit it names.
    Finder = Callable[[str, str, str], tuple[str, str] | None]

TOOLKIT_ENV = "CUDAUP_TOOLKIT"
QUERY_ENV = "CUDAUP_SHIM_QUERY"
PIN_FILE = ".cuda-version"
#: The tool a floating request prefers a toolkit for when no tool is named (``show``,
#: ``env``): a toolkit that compiles.  Kept equal to :data:`cudaup.install.store.COMPILER`.
COMPILER = "nvcc"
#: Exit status when no toolkit or tool can be run (as a shell's "command not found").
NOT_FOUND = 127
#: Exit status when what chose the toolkit is not trusted (:class:`cudaup.errors.UntrustedPathError`).
UNTRUSTED = 22
HOW_TO_CHOOSE = (
    "choose one with `cudaup default VERSION`, a .cuda-version file (`cudaup pin VERSION`) "
    "or CUDAUP_TOOLKIT=VERSION"
)


# -- version requests (mirrors cudaup.core.versions.parse_request) ----------------------
#: A release's numbers have at most 9 digits (core.versions says the same); a longer run is
#: no release, and int() of thousands of digits would raise instead of answering.
_MAX_DIGITS = 9


def _digits(text: str) -> bool:
    return text.isdecimal() and text.isascii() and len(text) <= _MAX_DIGITS


def _lstrip_sep(text: str) -> str:
    index = 0
    while index < len(text) and (text[index].isspace() or text[index] in "_-"):
        index += 1
    return text[index:]


def _strip_prefix(body: str) -> str:
    lowered = body.lower()
    if lowered.startswith("cuda"):
        rest = _lstrip_sep(body[4:])
        if rest.lower().startswith("toolkit"):
            return _lstrip_sep(rest[7:])
        return rest
    if lowered.startswith("v"):
        return _lstrip_sep(body[1:])
    return body


def _update_form(body: str) -> tuple[int, ...] | None:
    """``13.0 Update 1``, ``13.0u1``, ``13.0.0 GA`` → ``(13, 0, 1)``; else ``None``."""
    major, dot, rest = body.partition(".")
    if not dot or not _digits(major):
        return None
    end = 0
    while end < len(rest) and _digits(rest[end]):
        end += 1
    if end == 0:
        return None
    minor, rest = rest[:end], rest[end:]
    if len(minor) > _MAX_DIGITS:
        return None
    if rest.startswith(".0"):
        rest = rest[2:]
    rest = rest.lstrip()
    lowered = rest.lower()
    if lowered == "ga":
        return (int(major), int(minor), 0)
    for word in ("update", "upd", "u"):
        if lowered.startswith(word):
            number = rest[len(word) :].lstrip()
            if _digits(number):
                return (int(major), int(minor), int(number))
            return None
    return None


def parse_request(text: str) -> tuple[str, tuple[int, ...]] | None:
    """``(kind, parts)`` of a version request, or ``None`` when it is not one.

    ``kind`` is ``exact``, ``minor``, ``major`` or ``latest``, as in
    :class:`cudaup.core.versions.ReleaseRequest`.
    """
    body = _strip_prefix(text.strip()).strip()
    lowered = body.lower()
    if lowered in {"latest", "newest"}:
        return ("latest", ())
    if lowered.startswith("cu") and _digits(body[2:]) and 2 <= len(body) - 2 <= 4:
        digits = body[2:]
        return ("minor", (int(digits[:-1]), int(digits[-1])))
    if (parts := _update_form(body)) is not None:
        return ("exact", parts)
    pieces = body.split(".")
    if 1 <= len(pieces) <= 4 and all(_digits(p) for p in pieces):
        numbers = tuple(int(p) for p in pieces)
        if len(numbers) == 4:
            if numbers[3] != 0:
                return None
            numbers = numbers[:3]
        return ({1: "major", 2: "minor", 3: "exact"}[len(numbers)], numbers)
    return None


def _release(name: str) -> tuple[int, ...] | None:
    pieces = name.split(".")
    if not all(_digits(p) for p in pieces):
        return None
    return tuple(int(p) for p in pieces)


def matches(kind: str, parts: tuple[int, ...], release: tuple[int, ...]) -> bool:
    """Whether a release such as ``(13, 0, 1)`` satisfies a parsed request."""
    if kind == "latest":
        return True
    return release[: len(parts)] == parts and (
        kind != "exact" or len(release) <= 3 or not any(release[3:])
    )


def is_path_request(text: str) -> bool:
    """Whether a value names a directory rather than a version."""
    return "/" in text or text.startswith(("~", "."))


# -- the store, read without cudaup.install (mirrors Store.installed and Store.find) ------
def installed(home: str) -> list[tuple[str, str]]:
    """``(version, path)`` of every toolkit in the store that runs here, unsorted."""
    found: list[tuple[str, str]] = []
    toolkits = os.path.join(home, "toolkits")
    try:
        names = os.listdir(toolkits)
    except OSError:
        names = []
    for name in names:
        path = os.path.join(toolkits, name)
        if not name.startswith(".") and os.path.isdir(path):
            found.append((name, path))
    document = _external(home)
    if document.get("schema") == 2:
        # {path: release}; the "foreign" toolkits (another platform's) never run here
        entries = document.get("toolkits")
        pairs = [(v, p) for p, v in entries.items()] if isinstance(entries, dict) else []
    else:
        pairs = list(document.items())  # the first format: {release: path}
    found += [(v, p) for v, p in pairs if _is_external(v, p) and os.path.isdir(p)]
    return found


def _external(home: str) -> dict[str, object]:
    """``external.json`` (toolkits installed with ``--prefix``), or ``{}``."""
    external = os.path.join(home, "external.json")
    if not os.path.exists(external):
        return {}
    import json  # noqa: PLC0415 - only stores with external toolkits pay for it

    try:
        with open(external) as handle:
            document = json.load(handle)
    except (OSError, ValueError, RecursionError):
        return {}
    return document if isinstance(document, dict) else {}


def _is_external(version: object, path: object) -> bool:
    """Store.external's checks: a release, and an absolute, normalised, printable path."""
    return (
        isinstance(version, str)
        and _release(version) is not None
        and isinstance(path, str)
        and path.isprintable()
        and os.path.isabs(path)
        and os.path.normpath(path) == path
    )


def foreign_at(home: str, path: str) -> tuple[str, str] | None:
    """``(release, platform)`` when cudaup installed ``path`` for another platform (``--platform
    linux-sbsa --prefix DIR``): no shim runs its tools (mirrors Store.external's ``foreign``)."""
    document = _external(home)
    entries = document.get("foreign") if document.get("schema") == 2 else None
    real = os.path.realpath(path)
    for where, entry in entries.items() if isinstance(entries, dict) else ():
        facts = entry if isinstance(entry, dict) else {}
        release, platform = facts.get("release"), str(facts.get("platform"))
        if _is_external(release, where) and os.path.realpath(where) == real:
            return str(release), platform if platform.isprintable() else "another platform"
    return None


def newest_first(toolkits: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Version-ordered, newest first; names that are not versions come last."""

    def key(entry: tuple[str, str]) -> tuple[int, tuple[int, ...], str]:
        release = _release(entry[0])
        return (0, (), entry[0]) if release is None else (1, release, "")

    return sorted(toolkits, key=key, reverse=True)


def find_installed(home: str, request: str, tool: str = COMPILER) -> tuple[str, str] | None:
    """The installed toolkit a version request names: the exact name, else the newest
    match that has ``tool``, else the newest match."""
    toolkits = newest_first(installed(home))
    for version, path in toolkits:
        if version == request:
            return version, path
    parsed = parse_request(request)
    if parsed is None:
        return None
    matching = [
        (version, path)
        for version, path in toolkits
        if (release := _release(version)) is not None and matches(parsed[0], parsed[1], release)
    ]
    for version, path in matching:
        if tool_path(path, tool) is not None:
            return version, path
    return matching[0] if matching else None


# -- where the choice comes from ------------------------------------------------------
def find_pin(start: str) -> str | None:
    """The nearest ``.cuda-version`` file in ``start`` or a directory above it."""
    directory = os.path.abspath(start)
    while True:
        candidate = os.path.join(directory, PIN_FILE)
        if os.path.isfile(candidate):
            return candidate
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


def read_pin(path: str, env: Mapping[str, str] | None = None) -> tuple[str, str | None]:
    """The request in a ``.cuda-version`` file (its first line that is not blank or
    ``#``) and ``None``; or ``""`` and a warning when :mod:`cudaup.util.trust` refuses
    the file: the warning names it, its owner and the way to trust it."""
    env = os.environ if env is None else env
    text, problem = trust.read_pin_file(path, env)
    if problem is not None:
        directory = os.path.dirname(os.path.abspath(path))
        return "", (
            f"ignoring {path}: {problem}; a pin another user could write does not choose "
            f"what runs as you ({trust.SAFE_DIRECTORIES_ENV}={directory} trusts it)"
        )
    for line in text.splitlines():
        request = line.strip()
        if request and not request.startswith("#"):
            return request, None
    return "", None


def nearest_pin(start: str, env: Mapping[str, str]) -> tuple[str | None, str, list[str]]:
    """The nearest pin from ``start`` upwards that may choose, the request in it, and a
    warning for each nearer one skipped because another user could have written it."""
    warnings: list[str] = []
    directory = os.path.abspath(start)
    while (pin := find_pin(directory)) is not None:
        request, warning = read_pin(pin, env)
        if warning is None:
            return pin, request, warnings
        warnings.append(warning)
        above = os.path.dirname(os.path.dirname(pin))
        if above == os.path.dirname(pin):
            break
        directory = above
    return None, "", warnings


def read_default(home: str) -> str:
    """The default cudaup wrote in ``home`` ("" when none, or not text of at most 4 KiB)."""
    try:
        with open(os.path.join(home, "default"), encoding="utf-8") as handle:
            text = handle.read(4097).strip()
    except (OSError, ValueError):  # ValueError: bytes that are no UTF-8
        return ""
    return text if len(text) <= 4096 else ""


class Choice:
    """Which toolkit is active and why; ``path`` is ``None`` when none is usable.

    ``source`` is ``run``, ``env``, ``file``, ``default`` or ``none``.  When
    ``path`` is ``None``, ``failure`` says why (``none``, ``not-installed``,
    ``not-a-request``, ``not-a-directory``, ``empty``, ``untrusted``) and ``problem``
    says it in a sentence.  ``warnings`` names the pins skipped on the way.
    """

    __slots__ = (
        "failure",
        "origin",
        "path",
        "problem",
        "request",
        "source",
        "version",
        "warnings",
    )

    def __init__(
        self,
        source: str,
        request: str | None = None,
        origin: str | None = None,
        version: str | None = None,
        path: str | None = None,
        failure: str | None = None,
        problem: str | None = None,
    ) -> None:
        self.source = source
        self.request = request
        self.origin = origin  # the .cuda-version file
        self.version = version
        self.path = path
        self.failure = failure
        self.problem = problem
        self.warnings: list[str] = []

    def where(self) -> str:
        """Who asked: ``CUDAUP_TOOLKIT``, ``/work/.cuda-version``, ``the default``."""
        return asker(self.source, self.origin)


def asker(source: str, origin: str | None) -> str:
    """How a source is named in messages."""
    if source == "file":
        return str(origin)
    return {"run": "the command line", "env": TOOLKIT_ENV, "default": "the default"}.get(
        source, "nothing"
    )


def installed_names(home: str) -> str:
    """``13.0.1, 12.8.1`` (newest first), or ``none``."""
    names = [version for version, _ in newest_first(installed(home))]
    return ", ".join(names) if names else "none"


def resolve(
    home: str,
    request: str,
    source: str,
    origin: str | None,
    base: str,
    find: Finder = find_installed,
    tool: str = COMPILER,
    env: Mapping[str, str] | None = None,
) -> Choice:
    """Turn one request into a :class:`Choice`; ``base`` anchors relative paths, and
    ``tool`` is what the toolkit is wanted for (see :func:`find_installed`).  A path
    must pass :func:`cudaup.util.trust.toolkit_problem` (``env`` holds the exceptions)."""
    who = asker(source, origin)
    if is_path_request(request):
        path = os.path.normpath(os.path.join(base, os.path.expanduser(request)))
        if not os.path.isdir(path):
            problem = f"{who} names {request}, which is not a directory"
            return Choice(source, request, origin, failure="not-a-directory", problem=problem)
        why = trust.toolkit_problem(path, tool, os.environ if env is None else env)
        if why is not None:
            problem = (
                f"{who} names the toolkit {path}, which another user could change: {why} "
                f"({trust.SAFE_DIRECTORIES_ENV}={path} trusts it)"
            )
            return Choice(source, request, origin, failure="untrusted", problem=problem)
        return Choice(source, request, origin, version=version_at(home, path), path=path)
    found = find(home, request, tool)
    if found is not None:
        return Choice(source, request, origin, version=found[0], path=found[1])
    if parse_request(request) is None:
        shown = request if len(request) <= 40 else f"{request[:40]}… ({len(request)} characters)"
        problem = f"{who} holds {shown!r}, which is neither a CUDA version nor a path"
        return Choice(source, request, origin, failure="not-a-request", problem=problem)
    problem = (
        f"{who} asks for CUDA {request}, which is not installed "
        f"(installed: {installed_names(home)})"
    )
    return Choice(source, request, origin, failure="not-installed", problem=problem)


def version_at(home: str, path: str) -> str | None:
    """The store's version for a toolkit directory, or ``None`` if it is not in the store."""
    real = os.path.realpath(path)
    for version, where in installed(home):
        if os.path.realpath(where) == real:
            return version
    return None


def choose(
    home: str,
    env: Mapping[str, str],
    cwd: str | None,
    find: Finder = find_installed,
    tool: str = COMPILER,
) -> Choice:
    """The active toolkit for ``tool``: ``CUDAUP_TOOLKIT``, else the nearest pin, else
    the default."""
    request = env.get(TOOLKIT_ENV, "").strip()
    if request:
        return resolve(home, request, "env", None, cwd or os.sep, find, tool, env)
    pin, request, skipped = nearest_pin(cwd, env) if cwd else (None, "", [])
    if pin is not None and not request:
        choice = Choice("file", "", pin, failure="empty", problem=f"{pin} names no toolkit")
    elif pin is not None:
        choice = resolve(home, request, "file", pin, os.path.dirname(pin), find, tool, env)
    elif request := read_default(home):
        choice = resolve(home, request, "default", None, home, find, tool, env)
    else:
        problem = f"no CUDA toolkit is chosen here; {HOW_TO_CHOOSE}"
        choice = Choice("none", failure="none", problem=problem)
    choice.warnings = skipped
    return choice


# -- the environment a toolkit's tools run in -------------------------------------------
def _split(value: str | None) -> list[str]:
    return [entry for entry in (value or "").split(os.pathsep) if entry]


def library_dir(toolkit: str) -> str:
    """``lib64`` (the usual layout), else ``lib`` when only that exists."""
    lib64 = os.path.join(toolkit, "lib64")
    lib = os.path.join(toolkit, "lib")
    return lib if not os.path.isdir(lib64) and os.path.isdir(lib) else lib64


def toolkit_environ(toolkit: str, env: Mapping[str, str], home: str) -> dict[str, str]:
    """``env`` with ``toolkit`` active: CUDA_HOME, CUDA_PATH, PATH and LD_LIBRARY_PATH.

    The toolkit's ``bin`` and library directory go first; those of every other
    toolkit in the store, and of the ``CUDA_HOME`` being replaced, are removed,
    so switching again (or ``eval``-ing ``cudaup env`` twice) does not stack.
    """
    stale = {os.path.normpath(path) for _, path in installed(home)}
    stale.add(os.path.normpath(toolkit))
    for name in ("CUDA_HOME", "CUDA_PATH"):
        previous = os.path.normpath(env.get(name) or os.sep)
        # Only a directory of its own: CUDA_HOME=/usr or a conda prefix must keep its bin.
        if os.path.basename(previous).lower().startswith("cuda"):
            stale.add(previous)
    store = os.path.join(os.path.normpath(home), "toolkits") + os.sep

    def keep(entry: str) -> bool:
        normal = os.path.normpath(entry)
        return not normal.startswith(store) and os.path.dirname(normal) not in stale

    result = dict(env)
    result["CUDA_HOME"] = toolkit
    result["CUDA_PATH"] = toolkit
    path = [os.path.join(toolkit, "bin"), *(e for e in _split(env.get("PATH")) if keep(e))]
    result["PATH"] = os.pathsep.join(path)
    libraries = [
        library_dir(toolkit),
        *(e for e in _split(env.get("LD_LIBRARY_PATH")) if keep(e)),
    ]
    result["LD_LIBRARY_PATH"] = os.pathsep.join(libraries)
    return result


def tool_path(toolkit: str, tool: str) -> str | None:
    """The executable ``tool`` in a toolkit's ``bin``, or ``None``."""
    if not tool or "/" in tool or tool in {".", ".."}:
        return None
    path = os.path.join(toolkit, "bin", tool)
    return path if os.path.isfile(path) and os.access(path, os.X_OK) else None


def describe(choice: Choice) -> str:
    """``CUDA 12.8.1 (/path)``, or ``the toolkit at /path`` when its version is unknown."""
    if choice.version:
        return f"CUDA {choice.version} ({choice.path})"
    return f"the toolkit at {choice.path}"


def missing_tool(tool: str, toolkit: str, version: str | None) -> str:
    """What to do about a tool a toolkit lacks: the component that ships it, if known."""
    component = TOOL_COMPONENTS.get(tool)
    if component is None:
        return "cudaup knows no component that ships it"
    if tool == "nvcc" and os.path.isfile(os.path.join(toolkit, "bin", "ptxas")):
        # What an install from PyPI's CUDA 12 nvcc wheel (ptxas, no nvcc) looks like.
        return (
            f"its {component} has ptxas but not nvcc, as PyPI's CUDA 12 nvcc wheels do; "
            f"`cudaup install {version or 'VERSION'} --channel redist --components nvcc` "
            "brings the compiler"
        )
    if version is None:
        return f"it comes with the {component} component"
    return (
        f"it comes with the {component} component "
        f"(`cudaup install {version} --components {component}` adds it)"
    )


def not_a_toolkit_tool(tool: str) -> str:
    """Why ``tool`` is not run from a toolkit's ``bin``: it is not one of NVIDIA's tools,
    so a name such as ``ls`` or ``sudo`` in a hostile archive never shadows a system command."""
    return (
        f"{tool!r} is not one of the tools NVIDIA's CUDA toolkits ship (nvcc, ptxas, "
        "cuobjdump, ncu and the rest), and cudaup runs no other program from a toolkit's bin"
    )


def _query(tool: str, choice: Choice, executable: str | None, problem: str) -> int:
    import json  # noqa: PLC0415 - doctor's question only

    document = {
        "tool": tool,
        "executable": executable,
        "toolkit": choice.path,
        "version": choice.version,
        "source": choice.source,
        "problem": problem or None,
        "warnings": choice.warnings,
    }
    sys.stdout.write(json.dumps(document) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m cudaup.switch.shim HOME TOOL ARGS...``: exec TOOL from the active toolkit."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 2:
        sys.stderr.write("usage: python -m cudaup.switch.shim CUDAUP_HOME TOOL [ARGS...]\n")
        return 2
    home, tool, args = argv[0], argv[1], argv[2:]
    query = os.environ.get(QUERY_ENV) == "1"
    if not is_toolkit_tool(tool):
        problem = f"cannot run {tool}: {not_a_toolkit_tool(tool)}"
        if query:
            return _query(tool, Choice("none"), None, problem)
        sys.stderr.write(f"cudaup: {problem}\n")
        return NOT_FOUND
    try:
        cwd: str | None = os.getcwd()
    except OSError:  # the current directory was deleted
        cwd = None
    choice = choose(home, os.environ, cwd, tool=tool)
    if not query:
        for warning in choice.warnings:
            sys.stderr.write(f"cudaup: warning: {warning}\n")
    if choice.path is None:
        other = HOW_TO_CHOOSE.replace("choose one", "choose another", 1)
        hint = {
            "none": "",
            "not-installed": f"; install it (`cudaup install {choice.request}`), or {other}",
        }.get(choice.failure or "", f"; fix it, or {other}")
        problem = f"cannot run {tool}: {choice.problem}{hint}"
        if query:
            return _query(tool, choice, None, problem)
        sys.stderr.write(f"cudaup: {problem}\n")
        return UNTRUSTED if choice.failure == "untrusted" else NOT_FOUND
    executable = tool_path(choice.path, tool)
    shims = os.path.realpath(os.path.join(home, "bin"))
    problem = ""
    if foreign := foreign_at(home, choice.path):
        problem = (
            f"cannot run {tool}: {choice.path} holds CUDA {foreign[0]} for {foreign[1]} "
            f"(installed with --platform {foreign[1]}), chosen by {choice.where()}, which "
            f"cannot run on this machine; cudaup never selects it: {HOW_TO_CHOOSE}"
        )
    elif executable is None or os.path.realpath(os.path.dirname(executable)) == shims:
        problem = (
            f"{tool} is not in {describe(choice)}, chosen by {choice.where()}; "
            f"{missing_tool(tool, choice.path, choice.version)}, or {HOW_TO_CHOOSE}"
        )
    if problem or executable is None:
        if query:
            return _query(tool, choice, None, problem)
        sys.stderr.write(f"cudaup: {problem}\n")
        return NOT_FOUND
    if query:
        return _query(tool, choice, executable, "")
    environ = toolkit_environ(choice.path, os.environ, home)
    try:
        os.execve(executable, [executable, *args], environ)
    except OSError as exc:
        sys.stderr.write(f"cudaup: cannot run {executable}: {exc.strerror}\n")
        return 126
    return 0  # pragma: no cover - execve does not return


if __name__ == "__main__":
    sys.exit(main())
