"""A local stand-in for NVIDIA's CUDA download hosts, for tests.

* :func:`build_site` / :class:`SiteOptions` / :class:`Site` -- the pure site builder
  (:mod:`tests.fakenvidia.site`);
* :class:`FakeNvidiaServer` -- the loopback HTTP server (:mod:`tests.fakenvidia.server`);
* :mod:`tests.fakenvidia.fixtures` -- pytest fixtures.
"""

from .resources import StaticResource, VirtualFile
from .server import FakeNvidiaServer, RequestRecord
from .site import (
    ArchiveInfo,
    CatalogRow,
    ReleaseInfo,
    Site,
    SiteOptions,
    build_site,
    nvidia_url_to_path,
    variant_options,
)

__all__ = [
    "ArchiveInfo",
    "CatalogRow",
    "FakeNvidiaServer",
    "ReleaseInfo",
    "RequestRecord",
    "Site",
    "SiteOptions",
    "StaticResource",
    "VirtualFile",
    "build_site",
    "nvidia_url_to_path",
    "variant_options",
]
