"""Choosing artifacts: a release request and a platform to exact, vouched-for files.

``choose`` is pure (documents in, candidates out); ``sources`` and ``pypi`` know
where NVIDIA's and PyPI's documents live; ``resolver`` orchestrates; ``releases``
lists every release, ``probe`` explains a URL, ``snapshot`` answers offline.
"""

from cudaup.resolve.resolver import Resolver

__all__ = ["Resolver"]
