"""Whether the line's toolkit can be installed from the channel the upgrade will use,
asked before the environment is touched.

``install`` refuses a component without the tool it exists for (:data:`REQUIRED_TOOLS`:
PyPI's CUDA 12 ``nvidia-cuda-nvcc-cu12`` wheels hold ptxas but no nvcc) only once the
wheels are unpacked; an upgrade that learnt it then had already changed and verified its
work copy.  So the plan resolves the toolkit the way ``install`` will (the same channel
choice, the same resolver, no download) and reads each such PyPI wheel's zip directory
(range reads of its tail) for the tool: missing, the upgrade is refused with the way out.
"""

from __future__ import annotations

from collections.abc import Sequence

from cudaup.config import Settings
from cudaup.core.components import REQUIRED_TOOLS
from cudaup.core.platforms import Platform
from cudaup.errors import ArtifactNotFoundError, CudaupError
from cudaup.install.installer import InstallChannel, choose_channel
from cudaup.net.http import HttpClient
from cudaup.resolve.pypi import PackageIndex
from cudaup.resolve.resolver import Resolver


def check_toolkit(
    settings: Settings,
    release: str,
    components: Sequence[str],
    platform: Platform,
    channel: InstallChannel,
) -> list[str]:
    """Refuse (:class:`ArtifactNotFoundError`) a toolkit whose channel lacks a required
    tool; the notes to keep (a toolkit that cannot be resolved ahead is one: ``install``
    says why)."""
    notes: list[str] = []
    chosen = choose_channel(settings, channel, notes)
    if chosen != "pypi":
        return []
    http = HttpClient(settings, retries=1)
    try:
        resolution = Resolver(settings, http).resolve(
            release, platform=platform, channel=chosen, components=components, closure=True
        )
        for artifact in resolution.artifacts:
            tools = REQUIRED_TOOLS.get(artifact.component, ())
            if not tools or artifact.size is None:
                continue
            members = PackageIndex(http, settings.pypi_url).members(artifact.url)
            for tool in tools:
                if not any(m.endswith(f"/bin/{tool}") for m in members):
                    fallback = next((n for n in notes if n.startswith("channel auto:")), "")
                    why = f" ({fallback})" if fallback else ""
                    raise ArtifactNotFoundError(
                        f"the CUDA {release} toolkit cannot be installed from pypi{why}: "
                        f"{artifact.filename} ({artifact.component}) has no bin/{tool}; nothing "
                        f"was changed. Install the toolkit with --channel redist (NVIDIA's "
                        f"archive of {artifact.component} has {tool}), or move the environment "
                        "alone with --no-toolkit"
                    )
    except ArtifactNotFoundError:
        raise
    except CudaupError as exc:
        return [
            f"the CUDA {release} toolkit could not be resolved ahead ({exc}); its install "
            "after the move says what it finds"
        ]
    return []
