"""The environment a toolkit needs (``CUDA_HOME``, ``CUDA_PATH``, ``PATH``,
``LD_LIBRARY_PATH``) and how to print it for a shell: ``eval "$(cudaup env)"``."""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from cudaup.install.store import Store
from cudaup.switch import shim

# -- environments ----------------------------------------------------------------------
#: The variables ``cudaup env`` sets, in the order it prints them.
ENV_VARIABLES = ("CUDA_HOME", "CUDA_PATH", "PATH", "LD_LIBRARY_PATH")


Shell = Literal["bash", "zsh", "fish", "sh"]
SHELLS: tuple[Shell, ...] = ("bash", "zsh", "fish", "sh")


def toolkit_env(
    toolkit: Path, store: Store, env: Mapping[str, str] | None = None
) -> dict[str, str]:
    """``CUDA_HOME``, ``CUDA_PATH``, ``PATH`` and ``LD_LIBRARY_PATH`` with ``toolkit`` active.

    The toolkit's ``bin`` (and ``lib64``) go first; the directories of other
    cudaup toolkits and of the ``CUDA_HOME`` being replaced are removed.
    """
    env = os.environ if env is None else env
    full = shim.toolkit_environ(str(toolkit), env, str(store.home.absolute()))
    return {name: full[name] for name in ENV_VARIABLES}


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
