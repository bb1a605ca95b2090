"""The component wheels' pages are read while ``cuda-toolkit``'s page and metadata are.

Which projects a release pins is its metadata's to say; the pages read ahead are the
ones ``core.components.pypi_project`` forecasts, and a pick takes one only for a project
the metadata pins.  So a forecast saves the round trips of a page round when it holds,
and costs a request, never an answer, when it does not (``tests/core/test_components.py``
holds the forecast to PyPI's naming; the live test here to PyPI's real pins).
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name, parse_wheel_filename

from cudaup.config import Settings
from cudaup.core.components import pypi_project
from cudaup.resolve.resolver import Resolver
from tests.faultserver import Fault, FaultServer
from tests.install.served import CUDART, make_wheel, serve_extras, serve_pypi


def test_the_component_pages_are_read_while_cuda_toolkits_page_is(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    """The index answers ``cuda-toolkit``'s page only once cudart's page was asked for
    (or, were that page read only after the metadata, 5 s later); each page is asked
    for once."""
    url = serve_pypi(fault_server, "13.0.1", make_wheel("nvidia-cuda-runtime", "13.0.88", CUDART))
    asked, late = threading.Event(), threading.Event()
    fault_server.resources["/simple/cuda-toolkit/"].faults.append(
        Fault(hang="headers", until=asked)
    )

    def watch() -> None:
        try:
            fault_server.wait_for_requests(1, "/simple/nvidia-cuda-runtime/", deadline=5)
        except AssertionError:
            late.set()
        asked.set()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    resolver = Resolver(Settings.from_env(pypi_url=url, cache_dir=tmp_path))
    resolution = resolver.resolve(
        "13.0.1", platform="linux-x86_64", channel="pypi", components=["cudart"], closure=True
    )
    watcher.join()
    assert not late.is_set(), "cudart's page was read only after cuda-toolkit's"
    assert [a.component for a in resolution.artifacts] == ["cuda_cudart"]
    assert len(fault_server.requests("/simple/nvidia-cuda-runtime/")) == 1
    assert len(fault_server.requests("/simple/cuda-toolkit/")) == 1


def test_a_forecast_that_misses_costs_a_request_not_the_answer(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    """nvcc's closure is forecast (crt, nvvm, cudart, cccl: no such pages here, 404), and
    this release pins its cudart under another name than PyPI's: the pick reads that
    page itself, and the pages read for nothing change nothing."""
    nvcc = make_wheel("nvidia-cuda-nvcc", "13.0.88", {"nvidia/cu13/bin/nvcc": (b"\x7fELF", 0o755)})
    cudart = make_wheel("nvidia-cudart-renamed", "13.0.88", CUDART)
    url = serve_extras(
        fault_server,
        "13.0.1",
        {
            "nvcc": ("nvidia-cuda-nvcc", "13.0.88", nvcc),
            "cudart": ("nvidia-cudart-renamed", "13.0.88", cudart),
        },
    )
    resolver = Resolver(Settings.from_env(pypi_url=url, cache_dir=tmp_path))
    resolution = resolver.resolve(
        "13.0.1", platform="linux-x86_64", channel="pypi", components=["nvcc"], closure=True
    )
    projects = [parse_wheel_filename(a.filename)[0] for a in resolution.artifacts]
    assert sorted(projects) == ["nvidia-cuda-nvcc", "nvidia-cudart-renamed"]
    for forecast in ("nvidia-cuda-crt", "nvidia-nvvm", "nvidia-cuda-runtime", "nvidia-cuda-cccl"):
        assert len(fault_server.requests(f"/simple/{forecast}/")) == 1  # asked ahead, unused
    assert len(fault_server.requests("/simple/nvidia-cudart-renamed/")) == 1
    assert len(fault_server.requests("/simple/nvidia-cuda-nvcc/")) == 1


def test_latest_has_no_major_to_forecast(fault_server: FaultServer, tmp_path: Path) -> None:
    url = serve_pypi(fault_server, "13.0.1", make_wheel("nvidia-cuda-runtime", "13.0.88", CUDART))
    fault_server.resources["/simple/cuda-toolkit/"].faults.append(Fault(latency=0.2))
    resolver = Resolver(Settings.from_env(pypi_url=url, cache_dir=tmp_path))
    resolution = resolver.resolve(
        "latest", platform="linux-x86_64", channel="pypi", components=["cudart"]
    )
    assert [a.component for a in resolution.artifacts] == ["cuda_cudart"]
    [toolkit, page] = [s for s in fault_server.log if s.path.startswith("/simple/")]
    assert (toolkit.path, page.path) == ("/simple/cuda-toolkit/", "/simple/nvidia-cuda-runtime/")
    assert page.started >= toolkit.started + 0.2  # read once the metadata named it


@pytest.mark.pypi
@pytest.mark.parametrize(("release", "major"), [("13.0.1", 13), ("12.8.1", 12)])
def test_the_forecast_is_the_project_live_pypi_pins(
    release: str, major: int, tmp_path: Path
) -> None:
    """Every component wheel of a whole release on PyPI is the project forecast for it."""
    resolution = Resolver(Settings.from_env(cache_dir=tmp_path)).resolve(
        release, platform="linux-x86_64", channel="pypi"
    )
    assert len(resolution.artifacts) > 10
    for artifact in resolution.artifacts:
        project = parse_wheel_filename(artifact.filename)[0]
        assert project == canonicalize_name(pypi_project(artifact.component, major)), artifact
