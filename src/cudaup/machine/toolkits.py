"""Every CUDA toolkit on the machine: where, whose, how found, and which release.

Search order (each step is a function; one loop runs them all and merges
what several steps find at the same real path):

1. the cudaup store (``$CUDAUP_HOME/toolkits/*``, else the user data dir);
2. ``/usr/local/cuda`` (with its link chain, and whether ``update-alternatives``
   manages it) and every ``/usr/local/cuda-*``;
3. toolkits owned by dpkg packages (``/var/lib/dpkg/status``) or rpm packages;
4. ``CUDA_HOME``, ``CUDA_PATH``;
5. ``nvcc`` on ``PATH`` (a cudaup shim is followed to the toolkit it runs here,
   and is no toolkit itself when it runs none);
6. ``/opt/nvidia/hpc_sdk/*/*/cuda/*``;
7. pip-installed ``nvidia-*`` wheels of a Python (``nvidia/cu13`` for 13.x, one
   directory per component for 12.x);
8. conda environments (``$CONDA_PREFIX``, ``~/.conda/environments.txt``,
   ``/opt/conda``).

System paths go through :class:`~cudaup.machine.sysroot.SystemRoot`.  Each toolkit's
component versions come from ``version.json``, ``nvcc --version``, the
``libcudart.so.X.Y.Z`` file name, dist-info or conda metadata; the release is
then identified from all of them (:mod:`cudaup.core.identify`).  Nothing here
raises for a broken or unreadable installation: it is reported as found.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from cudaup.config import home_dir
from cudaup.core.components import component_of_project
from cudaup.core.identify import Identity, ReleaseTable, identify, shipped_table
from cudaup.core.libraries import LIBRARIES
from cudaup.core.tools import is_toolkit_tool
from cudaup.machine.sysroot import SystemRoot
from cudaup.util import processes
from cudaup.util.reading import read_regular, read_small

_NVCC_RELEASE = re.compile(r"release (\d+\.\d+), V(\d+\.\d+\.\d+)")
_CUDART_FILE = re.compile(r"^libcudart\.so\.(\d+\.\d+\.\d+)$")
_CUDART_HEADER = re.compile(r"#define\s+CUDART_VERSION\s+(\d+)")
_DPKG_TOOLKIT = re.compile(r"^cuda-(?P<comp>[a-z0-9-]+?)-(?P<major>\d+)-(?P<minor>\d+)$")
_WRAPPED_NVCC = re.compile(r"""(/[^\s"'$;]+)/bin/nvcc\b""")
_DIST_INFO = re.compile(r"^(?P<name>nvidia[_-][A-Za-z0-9_.-]+?)-(?P<version>\d[^-]*)\.dist-info$")
#: The second line of every shim cudaup writes in ``$CUDAUP_HOME/bin``.
SHIM_MARK = "# cudaup shim"
#: With this variable set to 1 a shim prints what it would run (JSON) instead of running
#: it; the same name as :data:`cudaup.switch.shim.QUERY_ENV` (a test checks).
SHIM_QUERY_ENV = "CUDAUP_SHIM_QUERY"


@dataclass(frozen=True, slots=True)
class Lookup:
    """What the search needs from the outside world, injectable for tests."""

    root: SystemRoot
    env: Mapping[str, str]
    python: str | None = None
    store: Path | None = None
    run: Callable[[list[str], float], str | None] | None = None
    timeout: float = 10.0


@dataclass
class Toolkit:
    path: str
    real: Path
    found_via: list[str] = field(default_factory=list)
    owner: str | None = None
    layout: str = "toolkit"
    components: dict[str, str] = field(default_factory=dict)
    declared: str | None = None
    header_version: str | None = None
    link: dict[str, Any] | None = None
    identity: Identity = field(default_factory=lambda: Identity((), None, ()))
    problems: list[str] = field(default_factory=list)

    @property
    def release(self) -> str | None:
        return self.identity.exact

    @property
    def libraries(self) -> dict[str, str]:
        """The libraries beside the toolkit (cuDNN, NCCL, …) and their versions."""
        return {k: v for k, v in sorted(self.components.items()) if k in LIBRARIES}

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "found_via": self.found_via,
            "owner": self.owner,
            "layout": self.layout,
            "components": dict(sorted(self.components.items())),
            "libraries": self.libraries,
            "declared_version": self.declared,
            "header_cudart_version": self.header_version,
            "link": self.link,
            "identity": self.identity.to_json(),
        }


def default_run(argv: list[str], timeout: float) -> str | None:
    """Run a command; its stdout, or ``None`` if it failed, hung or is missing."""
    try:
        done = processes.run(argv, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def parse_nvcc_version(text: str) -> tuple[str, str] | None:
    """``Cuda compilation tools, release 13.0, V13.0.88`` → ``("13.0", "13.0.88")``."""
    match = _NVCC_RELEASE.search(text)
    return (match.group(1), match.group(2)) if match else None


def _version_json(directory: Path) -> tuple[dict[str, str], str | None]:
    try:
        document = json.loads(read_small(directory / "version.json"))
    except (OSError, ValueError, RecursionError):
        return {}, None
    components: dict[str, str] = {}
    declared: str | None = None
    if isinstance(document, dict):
        for key, value in document.items():
            if isinstance(value, dict) and isinstance(value.get("version"), str):
                if key == "cuda":
                    declared = value["version"]
                elif key != "nvidia_driver":
                    components[key] = value["version"]
    return components, declared


def _cudart_from_files(directory: Path) -> str | None:
    for folder in (
        "lib64",
        "lib",
        *(str(p.relative_to(directory)) for p in directory.glob("targets/*/lib")),
    ):
        try:
            names = sorted(p.name for p in (directory / folder).iterdir())
        except OSError:
            continue
        for name in names:
            if match := _CUDART_FILE.match(name):
                return match.group(1)
    return None


def _header_version(directory: Path) -> str | None:
    for header in (
        directory / "include" / "cuda_runtime_api.h",
        *directory.glob("targets/*/include/cuda_runtime_api.h"),
    ):
        try:
            match = _CUDART_HEADER.search(read_small(header).decode(errors="replace"))
        except OSError:
            continue
        if match:
            number = int(match.group(1))
            return f"{number // 1000}.{number % 1000 // 10}"
    return None


def inspect_directory(
    directory: Path, lookup: Lookup
) -> tuple[dict[str, str], str | None, str | None]:
    """Component versions, declared version and header version of a CUDA_HOME-style tree."""
    components, declared = _version_json(directory)
    # A toolkit assembled from wheels may keep their records (dist-info/nvidia_*.dist-info).
    for group in _wheel_groups(directory / "dist-info").values():
        for name, version in group.items():
            components.setdefault(name, version)
    if declared is None:
        try:
            text = read_small(directory / "version.txt").decode()
        except (OSError, ValueError):
            text = ""
        if match := re.search(r"CUDA Version (\d+\.\d+\.\d+)", text):
            declared = match.group(1)
    nvcc = directory / "bin" / "nvcc"
    if "cuda_nvcc" not in components and nvcc.exists():
        run = lookup.run or default_run
        output = run([str(nvcc), "--version"], lookup.timeout)
        parsed = parse_nvcc_version(output or "")
        if parsed:
            components["cuda_nvcc"] = parsed[1]
    if "cuda_cudart" not in components and (cudart := _cudart_from_files(directory)):
        components["cuda_cudart"] = cudart
    return components, declared, _header_version(directory)


# -- search steps ---------------------------------------------------------------------
Found = tuple[Path, str, dict[str, Any]]  # real path, how found, extra facts


def _store(lookup: Lookup) -> Iterable[Found]:
    store = lookup.store if lookup.store is not None else home_dir(lookup.env) / "toolkits"
    if store.is_dir():
        for entry in sorted(store.iterdir()):
            if entry.is_dir() and not entry.name.startswith("."):
                yield entry, "cudaup store", {"owner": "cudaup"}


def _usr_local(lookup: Lookup) -> Iterable[Found]:
    root = lookup.root
    link = root.readlink("/usr/local/cuda")
    if link is not None or root.path("/usr/local/cuda").exists():
        target, exists = root.resolve("/usr/local/cuda")
        managed = any(
            root.path(p).exists()
            for p in ("/var/lib/dpkg/alternatives/cuda", "/var/lib/alternatives/cuda")
        ) and (link or "").startswith("/etc/alternatives/")
        facts = {
            "link": {
                "link": "/usr/local/cuda",
                "target": link,
                "resolves_to": target,
                "exists": exists,
                "alternatives": managed,
            }
        }
        if exists:
            yield root.path(target), "/usr/local/cuda", facts
        else:
            yield root.path(target), "/usr/local/cuda (dangling)", facts
    parent = root.path("/usr/local")
    try:
        entries = sorted(parent.iterdir())
    except OSError:
        entries = []
    for entry in entries:
        if entry.name.startswith("cuda-") and entry.is_dir() and not entry.is_symlink():
            yield entry, "/usr/local/cuda-*", {}


def _dpkg_status(text: str) -> list[dict[str, str]]:
    stanzas: list[dict[str, str]] = []
    for block in text.split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.splitlines():
            if ":" in line and not line.startswith(" "):
                key, value = line.split(":", 1)
                fields[key.strip()] = value.strip()
        if fields.get("Package"):
            stanzas.append(fields)
    return stanzas


def _dpkg(lookup: Lookup) -> Iterable[Found]:
    try:
        text = lookup.root.path("/var/lib/dpkg/status").read_text(errors="replace")
    except OSError:
        return
    groups: dict[str, dict[str, Any]] = {}
    for stanza in _dpkg_status(text):
        if "installed" not in stanza.get("Status", "install ok installed"):
            continue
        match = _DPKG_TOOLKIT.match(stanza["Package"])
        if not match:
            continue
        line = f"{match.group('major')}.{match.group('minor')}"
        group = groups.setdefault(line, {"components": {}, "packages": []})
        version = stanza.get("Version", "").split("-", 1)[0].split(":")[-1]
        group["packages"].append(f"{stanza['Package']} {stanza.get('Version', '')}".strip())
        comp = match.group("comp")
        key = {"cudart": "cuda_cudart", "nvcc": "cuda_nvcc", "nvrtc": "cuda_nvrtc"}.get(comp)
        if key and version:
            group["components"][key] = version
        if comp in {"toolkit", "toolkit-config-common"} and version and "declared" not in group:
            group["declared"] = version
    for line, group in groups.items():
        owner_pkg = next(
            (p for p in group["packages"] if p.startswith("cuda-toolkit-")), group["packages"][0]
        )
        yield (
            lookup.root.path(f"/usr/local/cuda-{line}"),
            "dpkg",
            {
                "owner": f"dpkg: {owner_pkg}",
                "components": group["components"],
                "declared": group.get("declared"),
            },
        )


def _rpm(lookup: Lookup) -> Iterable[Found]:
    if not lookup.root.is_real or shutil.which("rpm", path=lookup.env.get("PATH")) is None:
        return
    run = lookup.run or default_run
    output = (
        run(["rpm", "-qa", "--queryformat", "%{NAME} %{VERSION}\n", "cuda-*"], lookup.timeout) or ""
    )
    groups: dict[str, list[str]] = {}
    for row in output.splitlines():
        name, _, version = row.partition(" ")
        if match := _DPKG_TOOLKIT.match(name):
            groups.setdefault(f"{match.group('major')}.{match.group('minor')}", []).append(
                f"{name} {version}"
            )
    for line, packages in groups.items():
        yield lookup.root.path(f"/usr/local/cuda-{line}"), "rpm", {"owner": f"rpm: {packages[0]}"}


def _environment(lookup: Lookup) -> Iterable[Found]:
    for name in ("CUDA_HOME", "CUDA_PATH"):
        value = lookup.env.get(name)
        if value:
            yield Path(value), name, {}


def looks_like_toolkit(directory: Path) -> bool:
    """Whether ``directory`` holds what only a CUDA toolkit has (nvvm/, cuda_runtime_api.h)."""
    # /usr/local has include/ and lib/ too: look for what only a toolkit has.
    return (
        (directory / "nvvm").is_dir()
        or (directory / "include" / "cuda_runtime_api.h").exists()
        or any(directory.glob("targets/*/include/cuda_runtime_api.h"))
    )


def not_a_toolkit(directory: Path, shown: str | None = None) -> str | None:
    """Why ``directory`` (``shown`` so), named as a toolkit, is none (``cudaup default /opt``
    would record a default every shim then fails with); None when it has a ``bin/`` and
    what a toolkit has: one of its tools in ``bin/`` (a store toolkit of cuobjdump alone),
    ``nvvm/``, ``cuda_runtime_api.h`` or a ``version.json``."""
    shown = str(directory) if shown is None else shown
    binaries = directory / "bin"
    if not binaries.is_dir():
        return f"{shown} has no bin/ directory: it is not a CUDA toolkit"
    try:
        tools = any(is_toolkit_tool(entry.name) for entry in binaries.iterdir())
    except OSError:
        tools = False
    if tools or looks_like_toolkit(directory) or (directory / "version.json").is_file():
        return None
    return (
        f"{shown} is not a CUDA toolkit: it has no CUDA tool in bin/ (nvcc, cuobjdump, …), "
        "no nvvm/, include/cuda_runtime_api.h or version.json"
    )


def nvcc_home(nvcc: Path) -> Path:
    """The toolkit an ``nvcc`` belongs to, through symlinks and wrapper scripts.

    Some images put a two-line ``exec /usr/local/cuda-13.0/bin/nvcc "$@"`` script
    in ``/usr/local/bin``; its own parent is not a toolkit.
    """
    real = nvcc.resolve()
    home = real.parent.parent
    if looks_like_toolkit(home):
        return home
    try:
        head = read_regular(real, 4096)[:4096]
    except OSError:
        return home
    if head.startswith(b"#!"):
        match = _WRAPPED_NVCC.search(head.decode(errors="replace"))
        if match:
            return Path(match.group(1)).resolve()
    return home


def is_shim(path: Path) -> bool:
    """Whether ``path`` is a shim cudaup wrote (its mark on the second or third line)."""
    try:
        with path.open("rb") as handle:
            head = handle.read(256)
    except OSError:
        return False
    return any(line.startswith(SHIM_MARK.encode()) for line in head.splitlines()[1:3])


@dataclass(frozen=True, slots=True)
class ShimAnswer:
    """What a cudaup shim runs here: the executable, or why it runs nothing."""

    executable: Path | None
    toolkit: Path | None
    problem: str | None


def ask_shim(shim: Path, lookup: Lookup) -> ShimAnswer:
    """Ask a shim what it would run, in ``lookup``'s environment and the current directory
    (a ``.cuda-version`` here counts, as it does for the shim)."""
    env = {**lookup.env, SHIM_QUERY_ENV: "1"}
    try:
        done = processes.run([str(shim)], timeout=lookup.timeout, text=False, environment=env)
        document = json.loads(done.stdout)
    except (OSError, subprocess.TimeoutExpired, ValueError, RecursionError) as exc:
        return ShimAnswer(None, None, f"the shim {shim} did not answer ({exc})")
    if not isinstance(document, dict):
        return ShimAnswer(None, None, f"the shim {shim} did not answer")
    executable, toolkit, problem = (
        document.get("executable"),
        document.get("toolkit"),
        document.get("problem"),
    )
    return ShimAnswer(
        Path(executable) if isinstance(executable, str) else None,
        Path(toolkit) if isinstance(toolkit, str) else None,
        problem if isinstance(problem, str) else None,
    )


def _nvcc_on_path(lookup: Lookup) -> Iterable[Found]:
    nvcc = shutil.which("nvcc", path=lookup.env.get("PATH", ""))
    if not nvcc:
        return
    if is_shim(Path(nvcc)):
        # $CUDAUP_HOME is not a toolkit: the one the shim runs here is in use.
        answer = ask_shim(Path(nvcc), lookup)
        if answer.executable is not None:
            yield nvcc_home(answer.executable), "nvcc on PATH", {"nvcc": nvcc}
        return
    yield nvcc_home(Path(nvcc)), "nvcc on PATH", {"nvcc": nvcc}


def _hpc_sdk(lookup: Lookup) -> Iterable[Found]:
    for nvcc in sorted(lookup.root.path("/opt/nvidia/hpc_sdk").glob("*/*/cuda/*/bin/nvcc")):
        yield nvcc.parent.parent, "NVIDIA HPC SDK", {"owner": "NVIDIA HPC SDK"}


def python_site_packages(lookup: Lookup) -> tuple[str | None, list[Path]]:
    """The Python doctor inspects (default: ``python3`` on PATH) and its site-packages."""
    python = lookup.python or shutil.which("python3", path=lookup.env.get("PATH", ""))
    if not python:
        return None, []
    run = lookup.run or default_run
    script = (
        "import json, site, sysconfig; "
        "paths = [sysconfig.get_paths()['purelib'], sysconfig.get_paths()['platlib']]; "
        "paths += getattr(site, 'getsitepackages', lambda: [])(); "
        "paths.append(site.getusersitepackages()); print(json.dumps(paths))"
    )
    output = run([python, "-c", script], lookup.timeout)
    try:
        paths = json.loads(output or "[]")
    except ValueError:
        paths = []
    unique = list(dict.fromkeys(Path(p) for p in paths if isinstance(p, str)))
    return python, [p for p in unique if p.is_dir()]


def _wheel_groups(site: Path) -> dict[str, dict[str, str]]:
    groups: dict[str, dict[str, str]] = {}
    try:
        names = [p.name for p in site.iterdir()]
    except OSError:
        return groups
    for name in names:
        match = _DIST_INFO.match(name)
        if not match:
            continue
        project = canonicalize_name(match.group("name"))
        suffix = re.search(r"-cu(\d+)$", project)
        # CUDA 13 dropped the -cuXX suffix for toolkit components (nvidia-cuda-nvcc);
        # libraries versioned outside the toolkit keep it (nvidia-cudnn-cu13).
        major = suffix.group(1) if suffix else "13"
        groups.setdefault(major, {})[component_of_project(project)] = match.group("version")
    return groups


def _pip(lookup: Lookup) -> Iterable[Found]:
    python, sites = python_site_packages(lookup)
    for site in sites:
        for major, components in sorted(_wheel_groups(site).items()):
            if not any(
                k in components for k in ("cuda_nvcc", "cuda_cudart", "cuda_nvrtc", "libcublas")
            ):
                continue
            directory = site / "nvidia" / "cu13" if major == "13" else site / "nvidia"
            yield (
                directory,
                f"pip ({python})",
                {
                    "owner": f"pip: {python}",
                    "components": components,
                    "layout": f"pip-cu{major}",
                },
            )


def _conda_prefixes(lookup: Lookup) -> list[Path]:
    prefixes: list[Path] = []
    if prefix := lookup.env.get("CONDA_PREFIX"):
        prefixes.append(Path(prefix))
    home = lookup.env.get("HOME")
    if home:
        try:
            text = read_small(Path(home) / ".conda" / "environments.txt")
            listed = text.decode().splitlines()
        except (OSError, ValueError):
            listed = []
        prefixes += [Path(line.strip()) for line in listed if line.strip()]
    base = lookup.root.path("/opt/conda")
    if base.is_dir():
        prefixes.append(base)
        prefixes += sorted(p for p in (base / "envs").glob("*") if p.is_dir())
    return list(dict.fromkeys(prefixes))


def _conda(lookup: Lookup) -> Iterable[Found]:
    for prefix in _conda_prefixes(lookup):
        components: dict[str, str] = {}
        declared: str | None = None
        for meta in sorted((prefix / "conda-meta").glob("*.json")):
            try:
                record = json.loads(read_small(meta))
            except (OSError, ValueError, RecursionError):
                continue
            name, version = record.get("name", ""), record.get("version", "")
            if name == "cuda-version":
                declared = version
            elif name == "cudatoolkit":
                declared = version
                components["cuda_cudart"] = version
            elif name.startswith(("cuda-", "libcu", "libnv", "libnpp")):
                components[name.replace("-", "_")] = version
        if components:
            yield (
                prefix,
                f"conda ({prefix.name})",
                {
                    "owner": f"conda: {prefix}",
                    "components": components,
                    "declared": declared,
                    "layout": "conda",
                },
            )


SEARCH_STEPS: tuple[Callable[[Lookup], Iterable[Found]], ...] = (
    _store,
    _usr_local,
    _dpkg,
    _rpm,
    _environment,
    _nvcc_on_path,
    _hpc_sdk,
    _pip,
    _conda,
)


SYSTEM_STEPS = frozenset({_usr_local, _dpkg, _rpm, _hpc_sdk})


def find_toolkits(lookup: Lookup, table: ReleaseTable | None = None) -> list[Toolkit]:
    """Every toolkit the search steps find, merged by real path, each identified."""
    table = shipped_table() if table is None else table
    found: dict[str, Toolkit] = {}
    for step in SEARCH_STEPS:
        try:
            results = list(step(lookup))
        except OSError:
            continue  # an unreadable place is not a reason to stop looking elsewhere
        for real, how, facts in results:
            key = str(real.resolve()) if real.exists() else str(real)
            toolkit = found.get(key)
            if toolkit is None:
                # System paths are shown as the machine knows them (/usr/local/cuda-13.0
                # even under a test root); paths from the environment stay as given.
                shown = lookup.root.display(real) if step in SYSTEM_STEPS else str(real)
                toolkit = Toolkit(path=shown, real=real)
                found[key] = toolkit
            if how not in toolkit.found_via:
                toolkit.found_via.append(how)
            toolkit.owner = toolkit.owner or facts.get("owner")
            toolkit.layout = facts.get("layout", toolkit.layout)
            toolkit.components.update(facts.get("components") or {})
            toolkit.declared = toolkit.declared or facts.get("declared")
            if "link" in facts:
                toolkit.link = facts["link"]
    for toolkit in found.values():
        if toolkit.real.is_dir():
            components, declared, header = inspect_directory(toolkit.real, lookup)
            for name, version in components.items():
                toolkit.components.setdefault(name, version)
            toolkit.declared = toolkit.declared or declared
            toolkit.header_version = header
            if toolkit.owner is None and (toolkit.real / "bin" / "cuda-uninstaller").exists():
                toolkit.owner = "runfile installer"
        toolkit.identity = identify(toolkit.components, table, declared=toolkit.declared)
    return list(found.values())
