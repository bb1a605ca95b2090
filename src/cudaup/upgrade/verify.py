"""Checking an upgraded environment in its own interpreter, before it replaces the old one.

Steps, in order, each an answer (ok, skipped with its reason, or failed with the
package): ``versions`` (what uv left is what the plan named, and nothing renamed or
removed remains), ``check`` (``uv pip check``: no broken requirement the environment
did not already have), ``import`` (every changed distribution's top-level modules
import; one this host cannot load for want of the driver is loaded against a stub driver
library, or bound symbol by symbol to its libraries (:mod:`cudaup.upgrade.linkage`); a
failure the environment had before, for the same cause, is reported, not fatal), ``line``
(the frameworks report the new line without a GPU: torch's ``torch/version.py``, CuPy's CUDA
runtime version), ``kernels`` (the changed CUDA packages carry kernels for every GPU present
or named by ``--gpu``: exit 20 when one is left without; :mod:`cudaup.upgrade.coverage`),
and ``gpu`` (with a driver found
on this machine, a tiny kernel runs through torch or CuPy; a test supplies its own
script through the same step).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from cudaup.core.driver import DriverInfo
from cudaup.errors import VerificationFailedError
from cudaup.install.store import Store
from cudaup.machine.torch_version import read_torch
from cudaup.plan.lines import Line, line_text
from cudaup.plan.uv import find_uv, uv_environment
from cudaup.upgrade.changes import Change
from cudaup.upgrade.coverage import check_kernels
from cudaup.upgrade.environment import Distribution, Environment, read_environment
from cudaup.upgrade.families import FamilyTable
from cudaup.upgrade.linkage import Linker, is_shared_object
from cudaup.util import processes
from cudaup.util.trust import path_problem

#: Importing torch takes seconds; a module that hangs is a failure after this long.
STEP_TIMEOUT = 600.0
_PROBLEM = re.compile(r"^The package `([^`]+)` ")
#: What an import says when this host, not the module, is the reason it cannot load:
#: no driver library (a host without the NVIDIA driver), or the driver's stub answering.
_HOST_REASON = re.compile(
    r"(libcuda\.so\.1|libnvidia-ml\.so\.1): cannot open shared object file"
    r"|CUDA_ERROR_STUB_LIBRARY|cudaErrorStubLibrary|CUDA driver is a stub library"
    r"|[Ff]ound no NVIDIA driver|[Nn]o CUDA GPUs are available|no CUDA-capable device"
)
#: A stub older than the module asks for an entry point it lacks: the stub, not the module.
_DRIVER_SYMBOL = re.compile(r"undefined symbol: (cu|nvml)[A-Z]")
#: Where a toolkit keeps NVIDIA's stub driver library (redist ``cuda_cudart``).
STUB_PLACES = ("lib/stubs/libcuda.so", "lib64/stubs/libcuda.so", "targets/*/lib/stubs/libcuda.so")

IMPORTS = r"""
import importlib, json, sys
failures = {}
for name in json.loads(sys.argv[1]):
    sys.stderr.write("importing %s\n" % name)
    sys.stderr.flush()
    try:
        importlib.import_module(name)
    except BaseException as exc:
        failures[name] = ("%s: %s" % (type(exc).__name__, exc))[-65536:]
facts = {}
if "cupy" in sys.modules:
    try:
        facts["cupy_runtime"] = str(sys.modules["cupy"].cuda.runtime.runtimeGetVersion())
    except BaseException as exc:
        facts["cupy_runtime"] = ("%s: %s" % (type(exc).__name__, exc))[:400]
sys.stdout.write(json.dumps({"failures": failures, "facts": facts}))
"""

TORCH_KERNEL = """
import sys, torch
x = torch.arange(4, device="cuda")
sys.exit(0 if int((x * 2).sum().item()) == 12 else 3)
"""
CUPY_KERNEL = """
import sys, cupy
sys.exit(0 if int((cupy.arange(4) * 2).sum()) == 12 else 3)
"""


@dataclass(frozen=True, slots=True)
class Check:
    step: str
    status: str  # ok, skipped, failed
    detail: str
    package: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "status": self.status,
            "detail": self.detail,
            "package": self.package,
        }


@dataclass(frozen=True, slots=True)
class Stub:
    """A stub driver library (``libcuda.so`` that answers every call "no driver")."""

    path: Path
    label: str


@dataclass(frozen=True, slots=True)
class _Words:
    """Paths in a message as the user knows them: the work tree is named by the
    environment it becomes, a private directory by what it held."""

    replacements: tuple[tuple[str, str], ...] = ()

    def clean(self, text: str) -> str:
        for old, new in self.replacements:
            text = text.replace(old, new)
        return text

    def hiding(self, old: str, new: str) -> _Words:
        return _Words(((old, new), *self.replacements))


@dataclass
class _Imported:
    failures: dict[str, str]
    facts: dict[str, str]
    notes: list[str] = field(default_factory=list)
    #: Modules this host cannot import, checked by their symbols instead.
    by_symbols: set[str] = field(default_factory=set)


def host_reason(error: str) -> bool:
    """Whether an import failed because of this host (no driver, no GPU), not the module."""
    return _HOST_REASON.search(error) is not None


def find_stub(toolkits: Sequence[Path] | None = None) -> Stub | None:
    """NVIDIA's stub ``libcuda.so`` from a toolkit cudaup installed (newest first), or
    from ``toolkits``; None where none has one (PyPI's wheels ship none)."""
    if toolkits is None:
        roots = [(t.path, f"CUDA {t.version}") for t in Store.from_env().runnable()]
    else:
        roots = [(root, str(root)) for root in toolkits]
    for root, label in roots:
        for place in STUB_PLACES:
            for candidate in sorted(root.glob(place)):
                # A library loaded into the interpreter is code that runs: the one rule for
                # what decides that (util/trust.py), for the stub and every directory above.
                if path_problem(str(candidate)) is None and is_shared_object(candidate):
                    return Stub(candidate, label)
    return None


def problems(interpreter: Path) -> dict[str, str]:
    """``uv pip check``'s broken requirements (line → the package it names)."""
    done = processes.run(
        [find_uv(), "pip", "check", "--python", str(interpreter), "--no-config"],
        timeout=STEP_TIMEOUT,
        environment=uv_environment(30.0),
    )
    found = {}
    for line in (done.stdout + done.stderr).splitlines():
        if match := _PROBLEM.match(line.strip()):
            found[line.strip()] = match.group(1)
    if done.returncode != 0 and not found:
        raise VerificationFailedError(
            f"uv pip check could not check {interpreter} (exit {done.returncode})", "check", None
        )
    return found


class Verifier:
    def __init__(
        self,
        driver: DriverInfo,
        *,
        gpu_script: str | None = None,
        timeout: float = STEP_TIMEOUT,
        stubs: Sequence[Path] | None = None,
        gpus: Sequence[str] = (),
    ) -> None:
        """``stubs``: the toolkits to take a stub driver library from (default: those
        cudaup installed)."""
        self.driver, self.gpu_script, self.timeout = driver, gpu_script, timeout
        self.stubs = stubs
        self.gpus = gpus  # --gpu: the targets the kernels step checks where no GPU is present
        #: Where the checks' temporary directories go (the upgrade's own, whose lock tells a
        #: later run that a dead one left them); None: the system's.
        self.scratch: Path | None = None

    def verify(
        self,
        work_python: Path,
        line: Line,
        changes: Sequence[Change],
        pins: dict[str, str],
        before: dict[str, str],
        families: FamilyTable,
        original: Environment,
    ) -> list[Check]:
        """Every step on the work tree; the first that fails raises (its message without
        what the caller did about it, naming the environment, never the work tree).
        ``original``: the environment as it is, for what failed before the upgrade."""
        after = read_environment(str(work_python))
        versions = self._versions(after, changes, pins)
        # ``uv pip check`` runs beside the imports (a subprocess each, two cores); a broken
        # requirement is still the failure reported first, as when the steps ran in turn.
        with ThreadPoolExecutor(max_workers=1) as side:
            checked = side.submit(self._check, work_python, before)
            try:
                imported, facts, unimported = self.imports(work_python, after, changes, original)
            except VerificationFailedError:
                checked.result()
                raise
            checks = [versions, checked.result()]
        checks += [imported, *self._line(after, line, changes, families, facts, unimported)]
        # kernels (upgrade/coverage.py): every GPU keeps kernels in the changed packages
        status, detail = check_kernels(after, [c.name for c in changes], self.driver, self.gpus)
        checks.append(Check("kernels", status, detail))
        return [*checks, self._gpu(work_python, after, families)]

    # -- steps ---------------------------------------------------------------------------
    def _versions(
        self, after: Environment, changes: Sequence[Change], pins: dict[str, str]
    ) -> Check:
        for name, version in sorted(pins.items()):
            dist = after.get(name)
            if dist is None or (dist.version_text != version and str(dist.version) != version):
                have = dist.version_text if dist else "nothing"
                _fail("versions", name, f"the plan names {name} {version}; uv left {have}")
        for change in changes:
            if change.kind in {"rename", "remove"} and change.old and after.get(change.old):
                _fail("versions", change.old, f"{change.old} is still installed")
        return Check("versions", "ok", f"{len(pins)} packages as planned")

    def _check(self, python: Path, before: dict[str, str]) -> Check:
        new = {line: name for line, name in problems(python).items() if line not in before}
        if new:
            line, name = sorted(new.items())[0]
            _fail("check", name, line)
        kept = f" ({len(before)} broken before, unchanged)" if before else ""
        return Check("check", "ok", f"no broken requirement{kept}")

    def imports(
        self, python: Path, after: Environment, changes: Sequence[Change], original: Environment
    ) -> tuple[Check, dict[str, str], dict[str, str]]:
        """The import step, what the imported frameworks said (CuPy's runtime version: one
        interpreter imports CuPy once for both), and the modules not imported, with why:
        those that failed for the same cause before the upgrade (reported, not fatal) and
        those this host cannot load, checked by their symbols."""
        owners: dict[str, str] = {}
        for change in changes:
            dist = after.get(change.new) if change.new else None
            if dist is not None and change.kind != "remove":
                for module in dist.modules:
                    owners.setdefault(module, dist.name)
        if not owners:
            return Check("import", "skipped", "no changed distribution has a module"), {}, {}
        words = _Words(((str(after.root), str(original.root)),))
        outcome = self._import_in(python, after, owners, words)
        kept: dict[str, str] = {}
        if outcome.failures:
            earlier = {
                module: dist.name
                for dist in original.distributions.values()
                for module in dist.modules
                if module in outcome.failures
            }
            before = self._import_in(original.interpreter, original, earlier, _Words())
            for module, error in sorted(outcome.failures.items()):
                if before.failures.get(module) != error:
                    _fail("import", owners.get(module), f"import {module}: {shown(error)}")
                kept[module] = shown(error)
        count = f"{len(owners)} modules of {len(set(owners.values()))} distributions"
        notes = [*outcome.notes]
        notes += [
            f"import {m} failed before the upgrade too, for the same cause ({e})"
            for m, e in kept.items()
        ]
        detail = "; ".join([count, *notes])
        facts = {k: str(v) for k, v in outcome.facts.items()}
        unimported = dict.fromkeys(kept, "it failed to import before the upgrade too")
        unimported |= dict.fromkeys(outcome.by_symbols, "this host cannot load it (no driver)")
        return Check("import", "ok", detail), facts, unimported

    def _import_in(
        self, python: Path, environment: Environment, owners: dict[str, str], words: _Words
    ) -> _Imported:
        """Import ``owners``' modules in ``python``; a module that fails only because this
        host has no driver is loaded again against a stub driver library, or, without one,
        checked by its shared objects' symbols (:mod:`cudaup.upgrade.linkage`)."""
        failures, facts = self._import_run(python, sorted(owners), words)
        host = sorted(m for m, error in failures.items() if host_reason(error))
        notes: list[str] = []
        if host and (stub := find_stub(self.stubs)) is not None:
            with tempfile.TemporaryDirectory(prefix="cudaup-stub-", dir=self.scratch) as private:
                (Path(private) / "libcuda.so.1").symlink_to(stub.path)
                library_path = os.pathsep.join(
                    p for p in (private, os.environ.get("LD_LIBRARY_PATH", "")) if p
                )
                hidden = words.hiding(f"{private}/libcuda.so.1", str(stub.path))
                again, _facts = self._import_run(
                    python,
                    host,
                    hidden.hiding(private, str(stub.path.parent)),
                    {"LD_LIBRARY_PATH": library_path},
                )
            facts = {**_facts, **facts}
            for module in host:
                if module not in again:
                    del failures[module]
                elif not host_reason(again[module]) and not _DRIVER_SYMBOL.search(again[module]):
                    failures[module] = again[module]  # the stub let it load far enough to fail
            loaded = [m for m in host if m not in again]
            if loaded:
                notes.append(
                    f"{', '.join(loaded)} loaded against the stub driver library of {stub.label} "
                    "(this host has no NVIDIA driver)"
                )
            host = [m for m in host if host_reason(failures.get(m, ""))]
        by_symbols: set[str] = set()
        if host:
            linker = Linker(_sites(environment), Path(os.path.realpath(environment.interpreter)))
            for module in host:
                dist = environment.get(owners.get(module, ""))
                answer = _link_check(linker, environment, dist) if dist else None
                if answer is None:
                    continue  # nothing of its own needs the driver: the failure stands
                problem, checked = answer
                if problem is None:
                    del failures[module]
                    notes.append(f"{module}: {checked}")
                    by_symbols.add(module)
                else:
                    failures[module] = words.clean(problem)
        return _Imported(failures, facts, notes, by_symbols)

    def _import_run(
        self, python: Path, modules: list[str], words: _Words, env: dict[str, str] | None = None
    ) -> tuple[dict[str, str], dict[str, str]]:
        done = self._run(python, IMPORTS, json.dumps(modules), env=env)
        if done.returncode != 0:
            tried = [ln for ln in done.stderr.splitlines() if ln.startswith("importing ")]
            module = tried[-1].removeprefix("importing ") if tried else "?"
            said = words.clean(_last(done.stderr))
            return {
                module: f"the interpreter died importing {module} (exit {done.returncode}: {said})"
            }, {}
        try:
            answer = json.loads(done.stdout)
            failures, facts = dict(answer["failures"]), dict(answer["facts"])
        except (ValueError, KeyError, TypeError):
            _fail(
                "import",
                None,
                f"the import check wrote no answer ({words.clean(_last(done.stderr))})",
            )
        return {str(m): words.clean(str(e)) for m, e in failures.items()}, {
            str(k): str(v) for k, v in facts.items()
        }

    def _line(
        self,
        after: Environment,
        line: Line,
        changes: Sequence[Change],
        families: FamilyTable,
        facts: dict[str, str],
        unimported: dict[str, str],
    ) -> list[Check]:
        changed = {c.new for c in changes if c.new}
        checks = []
        if "torch" in changed:
            torch = read_torch([after.purelib])
            if torch is None or torch.cuda != line_text(line):
                said = torch.cuda if torch and torch.cuda else "no CUDA"
                _fail("line", "torch", f"torch/version.py says {said}, not {line_text(line)}")
            checks.append(Check("line", "ok", f"torch reports CUDA {line_text(line)}", "torch"))
        for name in sorted(changed & _cupys(families, after)):
            if "cupy" in unimported:
                said = f"cupy was not imported ({unimported['cupy']}): its runtime cannot be asked"
                checks.append(Check("line", "skipped", said, name))
                continue
            reported = facts.get("cupy_runtime", "cupy was not imported")
            if not reported.isdigit():
                _fail("line", name, f"cupy's CUDA runtime version cannot be read ({reported})")
            if int(reported) // 1000 != line[0]:
                _fail("line", name, f"cupy reports CUDA runtime {reported}, not CUDA {line[0]}")
            checks.append(Check("line", "ok", f"cupy reports CUDA runtime {reported}", name))
        if not checks:
            checks.append(Check("line", "skipped", "neither torch nor cupy changed"))
        return checks

    def _gpu(self, python: Path, after: Environment, families: FamilyTable) -> Check:
        if self.driver.version is None or self.driver.source in {"override", "none"}:
            return Check(
                "gpu", "skipped", "no NVIDIA driver found on this machine: no kernel was run"
            )
        script, framework = self.gpu_script, "the supplied script"
        if script is None and after.get("torch") is not None:
            script, framework = TORCH_KERNEL, "torch"
        elif script is None and (cupys := _cupys(families, after)):
            script, framework = CUPY_KERNEL, sorted(cupys)[0]
        if script is None:
            return Check(
                "gpu", "skipped", "no torch or cupy in the environment to run a kernel with"
            )
        done = self._run(python, script)
        if done.returncode != 0:
            _fail(
                "gpu",
                framework,
                f"a kernel did not run (exit {done.returncode}: {_last(done.stderr)})",
            )
        return Check("gpu", "ok", f"a kernel ran on the GPU through {framework}", framework)

    def _run(
        self, python: Path, script: str, *arguments: str, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        environ = {**os.environ, **env} if env else None
        with tempfile.TemporaryDirectory(prefix="cudaup-verify-", dir=self.scratch) as scratch:
            try:
                return processes.run(
                    [str(python), "-I", "-B", "-c", script, *arguments],
                    timeout=self.timeout,
                    environment=environ,
                    cwd=Path(scratch),
                )
            except subprocess.TimeoutExpired:
                _fail("timeout", None, f"{python} did not finish within {self.timeout:.0f} s")
            except OSError as exc:
                _fail("run", None, f"cannot run {python} ({exc.strerror})")


def _sites(environment: Environment) -> list[Path]:
    """The environment's site directories, purelib first."""
    sites = [environment.purelib]
    for dist in environment.distributions.values():
        if dist.site not in sites:
            sites.append(dist.site)
    return sites


def _link_check(
    linker: Linker, environment: Environment, dist: Distribution
) -> tuple[str | None, str] | None:
    """(the loader's line or None, what was checked) for the shared objects of ``dist``
    that need a driver library this host lacks; None where none does."""
    preload = []
    torch = environment.get("torch")
    if torch is not None and (
        dist.name == "torch" or any(r.name.lower() == "torch" for r in dist.requires)
    ):
        global_deps = torch.site / "torch" / "lib" / "libtorch_global_deps.so"
        if global_deps.is_file():
            preload.append(global_deps)  # `import torch` loads it RTLD_GLOBAL
    checked = entry_points = 0
    for relative in dist.shared_objects:
        answer = linker.check(dist.site / relative, preload)
        if not answer.missing_driver:
            continue
        if answer.problem is not None:
            return answer.problem, ""
        checked += 1
        entry_points += answer.driver_symbols
    if not checked:
        return None
    objects = "1 shared object" if checked == 1 else f"{checked} shared objects"
    needs = "it needs" if checked == 1 else "they need"
    points = (
        "1 driver entry point is"
        if entry_points == 1
        else f"{entry_points} driver entry points are"
    )
    return None, (
        f"{objects} bound by symbol to the libraries {needs} (no driver on this host, no stub "
        f"driver library at hand): only {points} left to the driver"
    )


def _cupys(families: FamilyTable, environment: Environment) -> set[str]:
    family = next((f for f in families.families if f.name == "cupy"), None)
    names: Iterable[str] = family.names.values() if family else ()
    return {n for n in names if environment.get(n) is not None}


def _last(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no message"


#: How much of an import error a message shows: its start (the exception) and its end, where
#: the loader's own line stands (``libcuda.so.1: cannot open shared object file``).
SHOWN_CHARACTERS = 1000


def shown(error: str) -> str:
    """``error`` for a message: whole when short, else its start and its end.  The whole
    text (up to 64 KiB) is what the host-reason check reads: an extension whose error names
    its own directory three times before the loader's line must not lose that line."""
    if len(error) <= SHOWN_CHARACTERS:
        return error
    head, tail = SHOWN_CHARACTERS // 4, SHOWN_CHARACTERS * 3 // 4
    return f"{error[:head]} … {error[-tail:]}"


def _fail(step: str, package: str | None, detail: str) -> NoReturn:
    raise VerificationFailedError(detail, step, package)
