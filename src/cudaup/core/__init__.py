"""Pure values and rules: version requests, platforms (the one table), components,
the result model, driver facts, compatibility and release identification.

Nothing here does network or disk I/O beyond reading cudaup's own data files, so
every rule is tested by feeding it values (an import-contract test checks that no
module here imports an I/O package).
"""

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (mypy knows the name)
if TYPE_CHECKING:
    from cudaup.core.compat import Compatibility, CompatTable
    from cudaup.core.components import split_components, with_closure
    from cudaup.core.driver import CudaVersion, DriverInfo, DriverVersion, GpuInfo
    from cudaup.core.identify import Identity, identify
    from cudaup.core.model import Artifact, Release, Resolution, SourceRef
    from cudaup.core.platforms import Platform, describe, parse_platform
    from cudaup.core.versions import ReleaseRequest, nvidia_label, parse_request

__all__ = [
    "Artifact",
    "CompatTable",
    "Compatibility",
    "CudaVersion",
    "DriverInfo",
    "DriverVersion",
    "GpuInfo",
    "Identity",
    "Platform",
    "Release",
    "ReleaseRequest",
    "Resolution",
    "SourceRef",
    "describe",
    "identify",
    "nvidia_label",
    "parse_platform",
    "parse_request",
    "split_components",
    "with_closure",
]
# Each name loads its module when first asked for: a command that needs one rule pays for no other.
_EXPORTS = {
    "ReleaseRequest": "cudaup.core.versions",
    "parse_request": "cudaup.core.versions",
    "nvidia_label": "cudaup.core.versions",
    "Platform": "cudaup.core.platforms",
    "parse_platform": "cudaup.core.platforms",
    "describe": "cudaup.core.platforms",
    "Artifact": "cudaup.core.model",
    "Release": "cudaup.core.model",
    "Resolution": "cudaup.core.model",
    "SourceRef": "cudaup.core.model",
    "DriverVersion": "cudaup.core.driver",
    "CudaVersion": "cudaup.core.driver",
    "GpuInfo": "cudaup.core.driver",
    "DriverInfo": "cudaup.core.driver",
    "CompatTable": "cudaup.core.compat",
    "Compatibility": "cudaup.core.compat",
    "with_closure": "cudaup.core.components",
    "split_components": "cudaup.core.components",
    "Identity": "cudaup.core.identify",
    "identify": "cudaup.core.identify",
}


def __getattr__(name: str) -> object:
    # Imported only when a name is asked for: every shim imports cudaup.core.tools through
    # this package and must load nothing else (typing and importlib cost milliseconds).
    from cudaup.core.lazy import exports  # noqa: PLC0415

    return exports(__name__, _EXPORTS)(name)
