"""Which torch an environment holds, and for which CUDA, read from ``torch/version.py``
without importing torch (importing it would load CUDA, and run the environment's code).

``doctor`` reports it, ``env --python`` and ``run --python`` choose the toolkit of its
line by it, and ``upgrade`` checks the line a move left by it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from cudaup.util.reading import read_small

_TORCH_VERSION = re.compile(r"""^__version__\s*(?::\s*str)?\s*=\s*['"]([^'"]+)['"]""", re.M)
_TORCH_CUDA = re.compile(r"""^cuda\s*(?::\s*[\w\[\]. ]+)?\s*=\s*(?:['"]([^'"]+)['"]|None)""", re.M)


@dataclass(frozen=True, slots=True)
class TorchInfo:
    version: str
    #: the CUDA line its wheels were built for; ``None`` for a CPU build
    cuda: str | None
    #: the ``torch`` package directory it was read from
    path: str


def read_torch(sites: list[Path]) -> TorchInfo | None:
    """torch's version and CUDA from the first ``site/torch/version.py`` that names one."""
    for site in sites:
        path = site / "torch" / "version.py"
        try:
            text = read_small(path).decode()
        except (OSError, ValueError):
            continue
        version = _TORCH_VERSION.search(text)
        cuda = _TORCH_CUDA.search(text)
        if version:
            return TorchInfo(
                version.group(1),
                cuda.group(1) if cuda and cuda.group(1) else None,
                str(path.parent),
            )
    return None
