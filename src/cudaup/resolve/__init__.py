"""Choosing artifacts: a release request and a platform to exact, vouched-for files.

``choose`` is pure (documents in, candidates out); ``sources`` and ``pypi`` know
where NVIDIA's and PyPI's documents live; ``resolver`` orchestrates; ``releases``
lists every release, ``probe`` explains a URL, ``snapshot`` answers offline.
"""

from typing import TYPE_CHECKING

from cudaup.core.lazy import exports

if TYPE_CHECKING:
    from cudaup.resolve.resolver import Resolver

__all__ = ["Resolver"]
# ``cudaup probe`` imports this package's sources and nothing of the resolver
# (packaging, every parser) unless a file is missing.
__getattr__ = exports(__name__, {"Resolver": "cudaup.resolve.resolver"})
