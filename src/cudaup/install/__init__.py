"""Installing toolkits side by side: the store, safe extraction, the unpacked-archive
cache, one CUDA_HOME layout from every channel, the runfile, and ``install`` itself."""

from cudaup.install.installer import InstallOptions, InstallResult, install, uninstall
from cudaup.install.store import InstalledToolkit, Store

__all__ = ["InstallOptions", "InstallResult", "InstalledToolkit", "Store", "install", "uninstall"]
