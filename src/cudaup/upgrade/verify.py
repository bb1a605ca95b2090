"""Checking an upgraded environment in its own interpreter, before it replaces the old one.

Steps, in order, each an answer (ok, skipped with its reason, or failed with the
package): ``versions`` (what uv left is what the plan named, and nothing renamed or
removed remains), ``check`` (``uv pip check``: no broken requirement the environment
did not already have), ``import`` (every changed distribution's top-level modules
import), ``line`` (the frameworks report the new line without a GPU: torch's
``torch/version.py``, CuPy's CUDA runtime version), ``kernels`` (the changed CUDA
packages carry kernels for every GPU present or named by ``--gpu``: exit 20 when one
is left without; :mod:`cudaup.upgrade.coverage`), and ``gpu`` (with a driver found
on this machine, a tiny kernel runs through torch or CuPy; a test supplies its own
script through the same step).
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from cudaup.core.driver import DriverInfo
from cudaup.errors import VerificationFailedError
from cudaup.machine.doctor import read_torch
from cudaup.plan.lines import Line, line_text
from cudaup.plan.uv import find_uv, uv_environment
from cudaup.upgrade.changes import Change
from cudaup.upgrade.coverage import check_kernels
from cudaup.upgrade.environment import Environment, read_environment
from cudaup.upgrade.families import FamilyTable

#: Importing torch takes seconds; a module that hangs is a failure after this long.
STEP_TIMEOUT = 600.0
_PROBLEM = re.compile(r"^The package `([^`]+)` ")

IMPORTS = r"""
import importlib, json, sys
failures = {}
for name in json.loads(sys.argv[1]):
    sys.stderr.write("importing %s\n" % name)
    sys.stderr.flush()
    try:
        importlib.import_module(name)
    except BaseException as exc:
        failures[name] = ("%s: %s" % (type(exc).__name__, exc))[:400]
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


def problems(interpreter: Path) -> dict[str, str]:
    """``uv pip check``'s broken requirements (line → the package it names)."""
    done = subprocess.run(
        [find_uv(), "pip", "check", "--python", str(interpreter), "--no-config"],
        stdin=subprocess.DEVNULL, capture_output=True, text=True,
        env=uv_environment(30.0), timeout=STEP_TIMEOUT, check=False,
    )  # fmt: skip
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
        gpus: Sequence[str] = (),
    ) -> None:
        self.driver, self.gpu_script, self.timeout = driver, gpu_script, timeout
        self.gpus = gpus  # --gpu: the targets the kernels step checks where no GPU is present

    def verify(
        self,
        work_python: Path,
        line: Line,
        changes: Sequence[Change],
        pins: dict[str, str],
        before: dict[str, str],
        families: FamilyTable,
    ) -> list[Check]:
        """Every step on the work tree; the first that fails raises (its message without
        what the caller did about it)."""
        after = read_environment(str(work_python))
        checks = [self._versions(after, changes, pins), self._check(work_python, before)]
        imported, facts = self._imports(work_python, after, changes)
        checks += [imported, *self._line(after, line, changes, families, facts)]
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

    def _imports(
        self, python: Path, after: Environment, changes: Sequence[Change]
    ) -> tuple[Check, dict[str, str]]:
        """The import step, and what the imported frameworks said (CuPy's runtime version:
        one interpreter imports CuPy once for both)."""
        owners: dict[str, str] = {}
        for change in changes:
            dist = after.get(change.new) if change.new else None
            if dist is not None and change.kind != "remove":
                for module in dist.modules:
                    owners.setdefault(module, dist.name)
        if not owners:
            return Check("import", "skipped", "no changed distribution has a module"), {}
        done = self._run(python, IMPORTS, json.dumps(sorted(owners)))
        if done.returncode != 0:
            tried = [ln for ln in done.stderr.splitlines() if ln.startswith("importing ")]
            module = tried[-1].removeprefix("importing ") if tried else "?"
            _fail(
                "import",
                owners.get(module),
                f"the interpreter died importing {module} (exit {done.returncode})",
            )
        try:
            answer = json.loads(done.stdout)
            failures, facts = dict(answer["failures"]), dict(answer["facts"])
        except (ValueError, KeyError, TypeError):
            _fail("import", None, f"the import check wrote no answer ({_last(done.stderr)})")
        if failures:
            module, error = sorted(failures.items())[0]
            _fail("import", owners.get(module), f"import {module}: {error}")
        count = f"{len(owners)} modules of {len(set(owners.values()))} distributions"
        return Check("import", "ok", count), {k: str(v) for k, v in facts.items()}

    def _line(
        self,
        after: Environment,
        line: Line,
        changes: Sequence[Change],
        families: FamilyTable,
        facts: dict[str, str],
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

    def _run(self, python: Path, script: str, *arguments: str) -> subprocess.CompletedProcess[str]:
        with tempfile.TemporaryDirectory(prefix="cudaup-verify-") as scratch:
            try:
                return subprocess.run(
                    [str(python), "-I", "-B", "-c", script, *arguments],
                    cwd=scratch, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                    timeout=self.timeout, check=False,
                )  # fmt: skip
            except subprocess.TimeoutExpired:
                _fail("timeout", None, f"{python} did not finish within {self.timeout:.0f} s")
            except OSError as exc:
                _fail("run", None, f"cannot run {python} ({exc.strerror})")


def _cupys(families: FamilyTable, environment: Environment) -> set[str]:
    family = next((f for f in families.families if f.name == "cupy"), None)
    names: Iterable[str] = family.names.values() if family else ()
    return {n for n in names if environment.get(n) is not None}


def _last(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no message"


def _fail(step: str, package: str | None, detail: str) -> NoReturn:
    raise VerificationFailedError(detail, step, package)
