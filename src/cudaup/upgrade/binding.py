"""The binding of a Python environment to the toolkit of its CUDA line: one ``.pth`` file.

``cudaup-toolkit.pth`` in the environment's site-packages is run by ``site`` at every start
of the environment's interpreter (a line that starts with ``import``), so ``E/bin/python -m
…`` sees it without any activation, as do the processes it starts: when neither
``CUDA_HOME`` nor ``CUDA_PATH`` is set it sets both to the toolkit, so a value the user
chose wins, and ``torch.utils.cpp_extension`` and flashinfer's JIT build with the toolkit
of the environment's line rather than whatever nvcc a shell finds.  The activation scripts
(conda's ``activate.d`` way) were the other choice: they reach only shells that source
them.  Being a file of the environment, the binding is in every snapshot of it, so
``rollback`` restores the previous one (or its absence) byte for byte.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from cudaup.util.atomic import atomic_write
from cudaup.util.reading import read_small

BINDING = "cudaup-toolkit.pth"
_BOUND = re.compile(r"CUDA_HOME=('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")")


def binding_text(toolkit: Path) -> str:
    home = repr(str(toolkit))
    return (
        "import os; os.environ.get('CUDA_HOME') or os.environ.get('CUDA_PATH') or "
        f"os.environ.update(CUDA_HOME={home}, CUDA_PATH={home})  # written by cudaup\n"
    )


def write_binding(site: Path, toolkit: Path | None) -> Path:
    """Bind the environment whose site-packages is ``site`` to ``toolkit`` (None: remove
    the binding); the binding's path."""
    path = site / BINDING
    if toolkit is None:
        path.unlink(missing_ok=True)
    else:
        atomic_write(path, binding_text(toolkit))
    return path


def read_binding(site: Path) -> Path | None:
    """The toolkit ``site``'s binding names (None: there is none cudaup wrote)."""
    try:
        text = read_small(site / BINDING).decode()
    except (OSError, UnicodeDecodeError):
        return None
    match = _BOUND.search(text)
    if match is None:
        return None
    value = ast.literal_eval(match.group(1))
    return Path(value) if isinstance(value, str) else None
