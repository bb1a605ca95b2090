"""The import contract: which package may import which, read from the source itself.

The table below is the map in ``docs/design.md``; a new import that crosses it
fails here, so the layering stays what the tree shows.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import cudaup
from cudaup.errors import EXIT_CODES, CudaupError

SRC = Path(cudaup.__file__).parent
ROOT = SRC.parent.parent

#: What each package may import from cudaup (besides itself).  ``errors`` and
#: ``config`` are modules at the top; ``data`` holds no code.
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "config": {"errors"},
    "core": {"errors"},
    "nvidia": {"errors", "core"},
    "util": {"errors", "config", "core"},
    "net": {"errors", "config", "util"},
    "resolve": {"errors", "config", "core", "nvidia", "net", "util"},
    "download": {"errors", "config", "core", "net", "util"},
    "binaries": {"errors", "config", "core", "net", "resolve", "util"},
    "machine": {"errors", "config", "core", "net", "util", "binaries"},
    "install": {"errors", "config", "core", "net", "resolve", "download", "machine", "util"},
    "switch": {"errors", "config", "core", "install", "machine", "util"},
    "plan": {"errors", "config", "core", "net", "resolve", "util", "binaries"},
    "fleet": {"errors", "config", "core", "net", "resolve", "download", "install", "plan", "util"},
    "upgrade": {"errors", "config", "core", "net", "resolve", "download", "machine", "install"}
    | {"plan", "util", "binaries"},
    "cli": set(),  # anything: nothing imports it
}
#: The pure packages import none of these (the network, processes, threads, the disk).
IO_MODULES = {"os", "shutil", "socket", "ssl", "subprocess", "threading", "urllib3", "tempfile"}
PURE = {"core", "nvidia"}


def _package_of(path: Path) -> str:
    relative = path.relative_to(SRC).parts
    return relative[0].removesuffix(".py") if relative[0] != "__init__.py" else "cudaup"


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, at any depth (function-level imports count too)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in SRC.rglob("*.py"):
        package = _package_of(path)
        edges = graph.setdefault(package, set())
        for name in _imports(path):
            parts = name.split(".")
            if parts[0] == "cudaup" and len(parts) > 1 and parts[1] in ALLOWED.keys() - {package}:
                edges.add(parts[1])
    return graph


def test_every_package_is_in_the_table() -> None:
    found = {_package_of(p) for p in SRC.rglob("*.py")} - {"cudaup", "__main__"}
    assert found == set(ALLOWED)


def test_packages_import_only_what_the_layering_allows() -> None:
    graph = _graph()
    crossings = {
        package: sorted(targets - ALLOWED[package])
        for package, targets in graph.items()
        if package in ALLOWED and package != "cli" and targets - ALLOWED[package]
    }
    assert crossings == {}


def test_nothing_outside_cli_imports_cli() -> None:
    importers = [p for p, targets in _graph().items() if "cli" in targets]
    assert importers == ["__main__"]  # `python -m cudaup`
    # the package root reaches the library lazily, never the CLI
    assert "cli" not in _imports(SRC / "__init__.py")


def test_no_loops_between_packages() -> None:
    graph = _graph()
    state: dict[str, str] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = "open"
        for target in graph.get(node, set()):
            assert state.get(target) != "open", " -> ".join([*path, target])
            if target not in state:
                visit(target, [*path, target])
        state[node] = "done"

    for package in graph:
        if package not in state:
            visit(package, [package])


def test_the_pure_packages_do_no_io() -> None:
    for package in PURE:
        for path in (SRC / package).rglob("*.py"):
            used = {name.split(".")[0] for name in _imports(path)} & IO_MODULES
            assert not used, f"{path.relative_to(SRC)} imports {sorted(used)}"


def test_install_does_not_reach_into_switching() -> None:
    assert "switch" not in _graph()["install"]


#: What starts a child process.  (``os.exec*`` replaces cudaup and waits for nothing:
#: ``cudaup run`` and the shims.)
_STARTS = {
    "subprocess": {"run", "Popen", "call", "check_call", "check_output", "getoutput"},
    "os": {"system", "popen", "fork", "forkpty", "posix_spawn", "posix_spawnp"}
    | {f"spawn{suffix}" for suffix in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe")},
    "pty": {"fork", "spawn"},
    "asyncio": {"create_subprocess_exec", "create_subprocess_shell"},
}


def test_every_child_is_started_by_util_processes() -> None:
    """One way to start a program, so that its time limit holds and a stop reaches what
    it started (``util/processes.py``): a second ``subprocess.run`` waits without limit."""
    found = []
    for path in SRC.rglob("*.py"):
        if path == SRC / "util" / "processes.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module in _STARTS:
                names = {alias.name for alias in node.names} & _STARTS[node.module]
                found += [
                    f"{path.relative_to(SRC)}: imports {node.module}.{name}" for name in names
                ]
            elif (  # a call, not an annotation: subprocess.Popen[str] names the type
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.attr in _STARTS.get(node.func.value.id, set())
            ):
                found.append(f"{path.relative_to(SRC)}:{node.lineno}: {ast.unparse(node.func)}")
    assert found == []


#: Exceptions outside errors.py: signals between the functions of one package, caught there
#: and never shown to a user as such.  Each with why it is not a CudaupError.
INTERNAL_SIGNALS = {
    "cudaup.util.parallel.CancelledError": "a worker stops because a sibling failed",
    "cudaup.plan.elf.NotElfError": "a wheel member is not ELF: the caller skips it",
    "cudaup.install.extract.policy.UnsafeMemberError": "turned into IntegrityError with the archive",
    "cudaup.install.tree.DamagedTreeError": "the unpacked cache rebuilds the tree",
    "cudaup.install.tree.ForeignTreeError": "the unpacked cache does not use another's tree",
    "cudaup.download.target.PartFileClosedError": "a late worker finds its download finished",
    "cudaup.download.remote.RemoteChangedError": "the file changed: the download restarts",
    "cudaup.download.remote.NoRangesError": "ranges refused: one stream from byte 0",
    "cudaup.download.remote.RetryableError": "the transfer loop retries it",
    "cudaup.download.remote.BusyError": "503/429: fewer connections, then retried",
    "cudaup.net.deadline.StaleConnectionError": "raised inside urllib3's getresponse; the "
    "client sends the request again on a new connection (http.kept_then_closed)",
    "cudaup.net.deadline.HeadersTooSlowError": "raised inside urllib3's read; the client "
    "turns it into a NetworkError naming the URL",
    "cudaup.net.deadline.RequestStoppedError": "raised inside urllib3's getresponse; the "
    "client turns it into a NetworkError naming the URL, not retried (http.lasting)",
}


def test_every_exception_outside_errors_py_is_a_listed_signal() -> None:
    found = set()
    for module in pkgutil.walk_packages([str(SRC)], "cudaup."):
        if module.name.startswith("cudaup.cli") or module.name == "cudaup.__main__":
            continue
        loaded = importlib.import_module(module.name)
        for _, value in inspect.getmembers(loaded, inspect.isclass):
            mine = value.__module__ == module.name
            if mine and issubclass(value, BaseException) and not issubclass(value, CudaupError):
                found.add(f"{value.__module__}.{value.__qualname__}")
    assert found == set(INTERNAL_SIGNALS)


def test_every_error_and_exit_code_is_in_errors_py() -> None:
    for module in pkgutil.walk_packages([str(SRC)], "cudaup."):
        if module.name.startswith("cudaup.cli") or module.name == "cudaup.__main__":
            continue
        loaded = importlib.import_module(module.name)
        for _, value in inspect.getmembers(loaded, inspect.isclass):
            if issubclass(value, CudaupError):
                assert value.__module__ == "cudaup.errors", f"{value} in {module.name}"
    for path in SRC.rglob("*.py"):
        if path.name != "errors.py":
            assert not re.search(r"^\s+exit_code\s*[:=]", path.read_text(), re.M), path


def test_the_readme_documents_every_exit_code() -> None:
    readme = (ROOT / "README.md").read_text()
    rows = re.findall(r"^\| (\d+)(?:, (\d+))? \|", readme, re.M)
    table = {code for row in rows for code in row if code}
    for code in set(EXIT_CODES.values()):
        assert str(code) in table, f"exit code {code} is not in the README's table"


def test_modules_stay_readable() -> None:
    long = {
        str(p.relative_to(SRC)): n
        for p in SRC.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > 650
    }
    assert long == {}


def _map_entries() -> dict[str, str]:
    """docs/design.md's map: each package's (or top module's) entry, its lines joined."""
    text = (ROOT / "docs" / "design.md").read_text()
    block = text.split("```\nsrc/cudaup/\n", 1)[1].split("```", 1)[0]
    entries: dict[str, str] = {}
    name = ""
    for line in block.splitlines():
        if match := re.match(r"  (\w+)(?:/|\.py)\s", line):
            name = match.group(1)
        entries[name] = entries.get(name, "") + line + "\n"
    return entries


def test_the_map_names_every_module() -> None:
    """Each package's modules are named in its entry of the map (a new one is added there)."""
    entries = _map_entries()
    unnamed = sorted(
        str(path.relative_to(SRC))
        for path in SRC.rglob("*.py")
        if path.stem != "__init__"
        and len(path.relative_to(SRC).parts) > 1
        and not re.search(rf"\b{path.stem}\b", entries.get(_package_of(path), ""))
    )
    assert unnamed == []
    top = {p.stem for p in SRC.glob("*.py")} - {"__init__", "__main__"}
    assert top <= set(entries), sorted(top - set(entries))
