"""cudaup: find, verify, install and switch NVIDIA CUDA toolkits.

The library, by package (each with its own ``__all__``; docs/api.md)::

    cudaup.core       parse_request("13.0"), DriverVersion.parse("590.48.01"), CompatTable
    cudaup.nvidia     parse_manifest(bytes), parse_redist_listing(html, ...): NVIDIA's formats
    cudaup.resolve    Resolver(settings).resolve("13.0", platform=..., channel=...)
    cudaup.download   download(artifact, directory, http=...), download_many(...)
    cudaup.install    install("13.0", InstallOptions(...), settings=..., store=Store.from_env())
    cudaup.plan       Planner(settings).plan(requirements, indexes, target)
    cudaup.machine    doctor(), detect_driver(), find_toolkits(...)
    cudaup.switch     which toolkit is active, shims, pins, the system link
    cudaup.fleet      cuda.lock.toml, mirrors
    cudaup.upgrade    Upgrader(...).upgrade(request), .rollback(): an environment's CUDA line

docs/api.md documents every exported name with an example.
Settings come from :class:`cudaup.Settings`; every error is a
:class:`cudaup.CudaupError` carrying its exit code.  Importing ``cudaup`` itself
is free: the packages load when first used.
"""

from __future__ import annotations

__version__ = "0.1.0"

_PACKAGES = (
    "core",
    "nvidia",
    "resolve",
    "download",
    "install",
    "plan",
    "machine",
    "switch",
    "fleet",
    "upgrade",
)
_NAMES = {"Settings": "cudaup.config", "CudaupError": "cudaup.errors"}

__all__ = [
    "CudaupError",
    "Settings",
    "__version__",
    "core",
    "download",
    "fleet",
    "install",
    "machine",
    "nvidia",
    "plan",
    "resolve",
    "switch",
    "upgrade",
]


def __getattr__(name: str) -> object:
    # Imported here: every shim imports this package, and must load nothing beyond it.
    import importlib  # noqa: PLC0415

    if name in _PACKAGES:
        return importlib.import_module(f"cudaup.{name}")
    if name in _NAMES:
        return getattr(importlib.import_module(_NAMES[name]), name)
    raise AttributeError(f"module 'cudaup' has no attribute {name!r}")
