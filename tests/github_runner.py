"""A stand-in for GitHub's Actions runner: its file commands, and a composite action's steps.

The file formats are written from GitHub's documentation of workflow commands
("Setting an environment variable", "Adding a system path", "Setting an output
parameter", "Multiline strings"), and follow the runner's reading of them on
Linux: lines end at ``\\n``; ``NAME=value`` or ``NAME<<DELIMITER`` then the value's
lines then ``DELIMITER`` alone on a line, a missing delimiter being an error;
``$GITHUB_PATH`` holds one directory a line (split at ``\\r`` too), each put in
front of ``PATH``, the last one added first.

:class:`ActionRunner` plays a composite action the way the runner does: each
step gets fresh ``GITHUB_ENV``/``GITHUB_PATH``/``GITHUB_OUTPUT`` files, its
``${{ … }}`` expressions substituted, and runs as ``bash --noprofile --norc -eo
pipefail SCRIPT`` in the workspace; what the step wrote is applied before the
next one; a failing step ends the action.  ``uses:`` steps are skipped (they
cannot run here), and an expression the runner here does not play fails the
test rather than turning into an empty string.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
ACTION_FILE = REPO / "action.yml"

_EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


class FileCommandError(Exception):
    """A file command the runner would reject (and fail the step for)."""


def parse_key_values(text: str) -> dict[str, str]:
    """``$GITHUB_ENV`` / ``$GITHUB_OUTPUT``, as the runner reads them."""
    result: dict[str, str] = {}
    lines = text.split("\n")
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        if not line:
            continue
        equals, heredoc = line.find("="), line.find("<<")
        if equals >= 0 and (heredoc < 0 or equals < heredoc):
            name, value = line.split("=", 1)
        elif heredoc >= 0:
            name, delimiter = line.split("<<", 1)
            if not name or not delimiter:
                raise FileCommandError(f"empty name or delimiter: {line!r}")
            body: list[str] = []
            while True:
                if index >= len(lines) or (index == len(lines) - 1 and not lines[index]):
                    raise FileCommandError(f"matching delimiter not found: {delimiter!r}")
                current = lines[index]
                index += 1
                if current == delimiter:
                    break
                body.append(current)
            value = "\n".join(body)
        else:
            raise FileCommandError(f"invalid format: {line!r}")
        if not name:
            raise FileCommandError(f"empty name: {line!r}")
        result[name] = value
    return result


def parse_path_file(text: str) -> list[str]:
    """``$GITHUB_PATH``: the directories, in the order written (empty lines skipped)."""
    return [line for line in re.split(r"\r\n|\r|\n", text) if line]


@dataclass
class StepResult:
    id: str | None
    name: str
    returncode: int
    stdout: str
    stderr: str
    outputs: dict[str, str]
    env: dict[str, str]  # what the step appended to $GITHUB_ENV
    path: list[str]  # what it appended to $GITHUB_PATH


@dataclass
class ActionRun:
    steps: list[StepResult]
    outputs: dict[str, str]
    skipped: list[str]  # names of the `uses:` steps not run

    @property
    def failed(self) -> StepResult | None:
        return next((s for s in self.steps if s.returncode != 0), None)

    def step(self, step_id: str) -> StepResult:
        return next(s for s in self.steps if s.id == step_id)


@dataclass
class ActionRunner:
    """One job on one runner: its environment and PATH additions carry from step to step."""

    action_path: Path
    temp: Path  # RUNNER_TEMP
    workspace: Path  # GITHUB_WORKSPACE, the steps' working directory
    env: dict[str, str]  # the job's environment (PATH is the runner's own)
    os_name: str = "Linux"
    arch: str = "X64"
    prepend_path: list[str] = field(default_factory=list)
    #: run before each step with its id (or name); a test's meter of what the step did
    before_step: Callable[[str], None] | None = None
    timeout: float = 900.0

    def __post_init__(self) -> None:
        self.files = self.temp / "_runner_file_commands"
        for directory in (self.temp, self.workspace, self.files):
            directory.mkdir(parents=True, exist_ok=True)

    def job_environ(self) -> dict[str, str]:
        """The environment a step (or the user's next step) starts with."""
        environ = dict(self.env)
        environ["PATH"] = os.pathsep.join([*reversed(self.prepend_path), self.env["PATH"]])
        environ.update(
            RUNNER_TEMP=str(self.temp),
            RUNNER_OS=self.os_name,
            RUNNER_ARCH=self.arch,
            GITHUB_WORKSPACE=str(self.workspace),
            GITHUB_ACTIONS="true",
            CI="true",
        )
        return environ

    def run_user_step(self, script: str) -> subprocess.CompletedProcess[str]:
        """A later `run:` step of the workflow, after the action."""
        path = self.files / "user-step.sh"
        path.write_text(script)
        return subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(path)],
            cwd=self.workspace,
            env=self.job_environ(),
            capture_output=True,
            text=True,
            timeout=self.timeout,
            check=False,
        )

    def run(self, inputs: Mapping[str, str], *, skip: frozenset[str] = frozenset()) -> ActionRun:
        """Run the action's steps in order (``skip``: ids of steps a test stands in for)."""
        action: dict[str, Any] = yaml.safe_load((self.action_path / "action.yml").read_text())
        assert action["runs"]["using"] == "composite"
        given = dict(inputs)
        unknown = given.keys() - action["inputs"].keys()
        assert not unknown, f"the action has no input {sorted(unknown)}"
        for name, spec in action["inputs"].items():
            if name not in given:
                assert not spec.get("required"), f"input {name} is required"
                given[name] = str(spec.get("default", ""))
        results: list[StepResult] = []
        skipped: list[str] = []
        outputs: dict[str, dict[str, str]] = {}

        def substitute(text: str) -> str:
            return _EXPRESSION.sub(lambda m: self._value(m.group(1), given, outputs), text)

        for number, step in enumerate(action["runs"]["steps"]):
            label = step.get("id") or step.get("name") or f"step {number}"
            if "uses" in step:
                skipped.append(step.get("name", step["uses"]))
                continue
            if step.get("id") in skip:
                continue
            assert "if" not in step, f"{label}: the runner here plays no `if:` on run steps"
            assert step.get("shell") == "bash", f"{label}: every run step says shell: bash"
            result = self._run_step(step, label, substitute)
            results.append(result)
            if result.id:
                outputs[result.id] = result.outputs
            if result.returncode != 0:
                break
        final = {}
        if not any(r.returncode for r in results):
            final = {
                name: substitute(str(spec["value"]))
                for name, spec in action.get("outputs", {}).items()
            }
        return ActionRun(results, final, skipped)

    def _value(
        self, expression: str, inputs: Mapping[str, str], outputs: Mapping[str, Mapping[str, str]]
    ) -> str:
        parts = expression.split(".")
        if parts[0] == "inputs" and len(parts) == 2:
            return inputs[parts[1]]
        if parts == ["github", "action_path"]:
            return str(self.action_path)
        if parts[0] == "runner" and len(parts) == 2 and parts[1] in {"temp", "os", "arch"}:
            return {"temp": str(self.temp), "os": self.os_name, "arch": self.arch}[parts[1]]
        if parts[0] == "steps" and len(parts) == 4 and parts[2] == "outputs":
            return outputs.get(parts[1], {}).get(parts[3], "")
        raise AssertionError(f"the action uses ${{{{ {expression} }}}}, which is not played here")

    def _run_step(
        self, step: Mapping[str, Any], label: str, substitute: Callable[[str], str]
    ) -> StepResult:
        if self.before_step is not None:
            self.before_step(label)
        files = {}
        for variable in ("GITHUB_ENV", "GITHUB_PATH", "GITHUB_OUTPUT"):
            files[variable] = self.files / f"{variable.lower()}_{label}"
            files[variable].write_bytes(b"")
        script = self.files / f"{label}.sh"
        script.write_text(substitute(step["run"]))
        environ = self.job_environ()
        environ.update({k: substitute(str(v)) for k, v in step.get("env", {}).items()})
        environ.update({k: str(v) for k, v in files.items()})
        environ["GITHUB_ACTION_PATH"] = str(self.action_path)
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
            cwd=self.workspace,
            env=environ,
            capture_output=True,
            text=True,
            timeout=self.timeout,
            check=False,
        )
        added_env = parse_key_values(files["GITHUB_ENV"].read_text(encoding="utf-8"))
        added_path = parse_path_file(files["GITHUB_PATH"].read_text(encoding="utf-8"))
        self.env.update(added_env)
        for entry in added_path:
            if entry in self.prepend_path:
                self.prepend_path.remove(entry)
            self.prepend_path.append(entry)
        return StepResult(
            step.get("id"),
            step.get("name", label),
            done.returncode,
            done.stdout,
            done.stderr,
            parse_key_values(files["GITHUB_OUTPUT"].read_text(encoding="utf-8")),
            added_env,
            added_path,
        )
