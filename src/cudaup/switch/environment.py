"""The environment a toolkit needs (``CUDA_HOME``, ``CUDA_PATH``, ``PATH``,
``LD_LIBRARY_PATH``) and how to hand it on: printed for a shell (``eval "$(cudaup
env)"``), as a Dockerfile's ``ENV`` lines, or appended to a GitHub Actions step's
``$GITHUB_ENV``/``$GITHUB_PATH``/``$GITHUB_OUTPUT`` (:mod:`cudaup.switch.github`)."""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from cudaup.errors import UsageError
from cudaup.install.store import Store
from cudaup.machine.sysroot import SystemRoot
from cudaup.machine.toolkits import looks_like_toolkit
from cudaup.switch import github, shim
from cudaup.switch.selection import Active

# -- environments ----------------------------------------------------------------------
#: The variables ``cudaup env`` sets, in the order it prints them.
ENV_VARIABLES = ("CUDA_HOME", "CUDA_PATH", "PATH", "LD_LIBRARY_PATH")


Shell = Literal["bash", "zsh", "fish", "sh"]
SHELLS: tuple[Shell, ...] = ("bash", "zsh", "fish", "sh")
#: What ``cudaup env --shell`` takes: a shell, or where the environment goes instead.
EnvFormat = Literal["bash", "zsh", "fish", "sh", "github", "dockerfile"]
ENV_FORMATS: tuple[EnvFormat, ...] = (*SHELLS, "github", "dockerfile")


def toolkit_env(
    toolkit: Path, store: Store, env: Mapping[str, str] | None = None
) -> dict[str, str]:
    """``CUDA_HOME``, ``CUDA_PATH``, ``PATH`` and ``LD_LIBRARY_PATH`` with ``toolkit`` active.

    The toolkit's ``bin`` (and ``lib64``) go first; the directories of other
    cudaup toolkits and of the ``CUDA_HOME`` being replaced are removed, and so are
    the library directories of any other toolkit recognised on LD_LIBRARY_PATH
    (``/usr/local/cuda/lib64`` left by a profile): two toolkits' libraries there mix
    libcudart versions, which ``doctor`` warns about.
    """
    env = os.environ if env is None else env
    full = shim.toolkit_environ(str(toolkit), env, str(store.home.absolute()))
    own, *others = full["LD_LIBRARY_PATH"].split(os.pathsep)
    root = SystemRoot.from_env()
    kept = [entry for entry in others if not _toolkit_library(entry, root)]
    full["LD_LIBRARY_PATH"] = os.pathsep.join([own, *kept])
    return {name: full[name] for name in ENV_VARIABLES}


def _toolkit_library(entry: str, root: SystemRoot) -> bool:
    """Whether ``entry`` is a toolkit's library directory: ``lib64``, ``lib`` or
    ``targets/<triple>/lib`` of a directory named ``cuda*`` that holds a toolkit (a
    directory of its own: ``/usr/lib`` of a distribution's toolkit stays)."""
    path = PurePosixPath(os.path.normpath(entry))
    if path.name not in {"lib64", "lib"} or not path.is_absolute():
        return False
    home = path.parent
    if home.parent.name == "targets":
        home = home.parent.parent
    if not home.name.lower().startswith("cuda"):
        return False
    final, exists = root.resolve(str(home))  # /usr/local/cuda: a link, followed in the root
    return exists and looks_like_toolkit(root.path(final))


def detect_shell(env: Mapping[str, str] | None = None) -> Shell:
    """The shell named by ``$SHELL`` (bash when unknown: its syntax is POSIX ``sh``'s)."""
    env = os.environ if env is None else env
    name = Path(env.get("SHELL", "")).name
    for shell in SHELLS:
        if name == shell:
            return shell
    return "bash"


def _fish_quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def render_env(variables: Mapping[str, str], shell: Shell) -> str:
    """Lines that set ``variables`` when ``eval``-ed by ``shell`` (fish: ``set -gx``)."""
    lines = []
    for name, value in variables.items():
        if shell == "fish":
            # fish keeps PATH-like variables as lists and joins them with ':' on export.
            items = value.split(os.pathsep) if name.endswith("PATH") else [value]
            lines.append(f"set -gx {name} {' '.join(_fish_quote(item) for item in items)};")
        else:
            lines.append(f"export {name}={shlex.quote(value)}")
    return "\n".join(lines) + "\n"


# -- Dockerfiles ---------------------------------------------------------------------------
def _dockerfile_escaped(what: str, value: str) -> str:
    """``value`` for a Dockerfile's double quotes: ``\\``, ``"`` and ``$`` escaped."""
    if "\n" in value or "\r" in value:
        raise UsageError(f"{what} {value!r} has a line break, which a Dockerfile cannot hold")
    github.utf8(what, value, "a Dockerfile")
    return re.sub(r'([\\"$])', r"\\\1", value)


def dockerfile_env(toolkit: Path, *, escaped: bool = False) -> dict[str, str]:
    """What a Dockerfile's ``ENV`` sets to make ``toolkit`` the image's CUDA.

    ``PATH`` and ``LD_LIBRARY_PATH`` extend the image's own values through Docker's
    ``${PATH}`` references (expanded at build time), never with those of the machine
    that ran cudaup.  ``escaped``: the paths ready for double quotes.
    """

    def path(what: str, value: str) -> str:
        return _dockerfile_escaped(what, value) if escaped else value

    home = path("the toolkit path", str(toolkit))
    library = path("the library path", shim.library_dir(str(toolkit)))
    return {
        "CUDA_HOME": home,
        "CUDA_PATH": home,
        "PATH": f"{home}/bin:${{PATH}}",
        "LD_LIBRARY_PATH": f"{library}${{LD_LIBRARY_PATH:+:${{LD_LIBRARY_PATH}}}}",
    }


def render_dockerfile(toolkit: Path) -> str:
    """``ENV NAME="value"`` lines for :func:`dockerfile_env`."""
    variables = dockerfile_env(toolkit, escaped=True)
    return "".join(f'ENV {name}="{value}"\n' for name, value in variables.items())


# -- GitHub Actions -----------------------------------------------------------------------
#: The variables that go to ``$GITHUB_ENV``; ``PATH`` goes through ``$GITHUB_PATH``.
GITHUB_VARIABLES = ("CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH")


def github_appends(
    variables: Mapping[str, str],
    toolkit: Path,
    outputs: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> list[github.Append]:
    """What ``cudaup env --shell github`` appends: the variables to ``$GITHUB_ENV``, the
    toolkit's ``bin`` to ``$GITHUB_PATH``, and ``outputs`` (if any) to ``$GITHUB_OUTPUT``.

    Every block is built (and checked) before anything is written.
    """
    blocks = [
        (
            github.ENV_FILE,
            b"".join(github.key_value(name, variables[name]) for name in GITHUB_VARIABLES),
        ),
        (github.PATH_FILE, github.path_entry(str(toolkit / "bin"))),
    ]
    if outputs is not None:
        data = b"".join(github.key_value(k, v, output=True) for k, v in outputs.items())
        blocks.append((github.OUTPUT_FILE, data))
    return [github.Append(name, github.command_file(name, environ), data) for name, data in blocks]


def _github_env(
    active: Active, toolkit: Path, variables: dict[str, str], *, output: bool
) -> tuple[str, dict[str, str]]:
    """Append the environment (with ``output``, the outputs too) to the runner's files.

    Returns what went where, in words for the step's log, and the files written.
    """
    outputs = None
    if output:
        if active.version is None:
            raise UsageError(
                f"cudaup did not install the toolkit at {toolkit}, so it does not know its exact "
                "release for cuda-version; name one it installed, or drop --output"
            )
        outputs = {"cuda-version": active.version, "cuda-home": str(toolkit)}
    appends = github_appends(variables, toolkit, outputs)
    github.append_all(appends)
    lines = [
        active.describe(),
        f"  ${github.ENV_FILE}     {', '.join(GITHUB_VARIABLES)}",
        f"  ${github.PATH_FILE}    {toolkit / 'bin'}",
    ]
    if outputs:
        pairs = ", ".join(f"{name}={value}" for name, value in outputs.items())
        lines.append(f"  ${github.OUTPUT_FILE}  {pairs}")
    return "\n".join(lines) + "\n", {a.variable: str(a.path) for a in appends}


# -- cudaup env ----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class HandedOn:
    """``cudaup env``'s answer: the toolkit's environment in one format, the text it
    prints without ``--json``, and (``github``) the runner's files it appended to."""

    shell: EnvFormat
    active: Active
    variables: dict[str, str]
    text: str
    files: dict[str, str] | None = None

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "shell": self.shell,
            "toolkit": self.active.to_json(),
            "variables": self.variables,
        }
        if self.files is not None:
            document["files"] = self.files
        return document


def hand_on(
    active: Active,
    shell: EnvFormat,
    store: Store,
    *,
    extra: Mapping[str, str] | None = None,
    github_output: bool = False,
) -> HandedOn:
    """The environment of ``active``'s toolkit for ``shell``: printed for a shell (with
    ``extra``, an environment's own variables), as a Dockerfile's lines (its paths
    checked first), or appended to a GitHub runner's files (``github_output``: with
    the step's outputs) and described for the step's log."""
    toolkit = active.require()
    if shell == "dockerfile":
        text = render_dockerfile(toolkit)  # checks the paths first
        return HandedOn(shell, active, dockerfile_env(toolkit), text)
    variables = toolkit_env(toolkit, store)
    if shell == "github":  # the runner's files take the toolkit's variables alone
        text, files = _github_env(active, toolkit, variables, output=github_output)
        return HandedOn(shell, active, variables, text, files)
    variables.update(extra or {})
    return HandedOn(shell, active, variables, render_env(variables, shell))
