"""Installing toolkits side by side: the store, safe extraction, the unpacked-archive
cache, one CUDA_HOME layout from every channel, the runfile, and ``install`` itself."""

from typing import TYPE_CHECKING

from cudaup.core.lazy import exports

if TYPE_CHECKING:
    from cudaup.install.installer import InstallOptions, InstallResult, install, uninstall
    from cudaup.install.store import InstalledToolkit, Store

__all__ = ["InstallOptions", "InstallResult", "InstalledToolkit", "Store", "install", "uninstall"]
# What only reads the store (`which`, `env`, `show`, `list`, the shims' commands) imports
# ``install.store``, and so this package: it must not pay for the download engine.
__getattr__ = exports(
    __name__,
    {
        "InstallOptions": "cudaup.install.installer",
        "InstallResult": "cudaup.install.installer",
        "install": "cudaup.install.installer",
        "uninstall": "cudaup.install.installer",
        "InstalledToolkit": "cudaup.install.store",
        "Store": "cudaup.install.store",
    },
)
