"""The component wheels' pages are read while ``cuda-toolkit``'s page and metadata are.

Which projects a release pins is its metadata's to say; the pages read ahead are the
ones ``core.components.pypi_project`` forecasts, and a pick takes one only for a project
the metadata pins.  So a forecast saves the round trips of a page round when it holds,
and costs a request, never an answer, when it does not (``tests/core/test_components.py``
holds the forecast to PyPI's naming; the live test here to PyPI's real pins).

An install's resolver also opens the connections its downloads will take while the last
answers are awaited (``downloads_next``; ``tests/net/test_open_ahead.py`` holds them to
carrying the requests that follow): as many as the downloads that start at once, and no
more than the files forecast.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from packaging.utils import canonicalize_name, parse_wheel_filename

from cudaup.config import Settings
from cudaup.core.components import pypi_project
from cudaup.net.http import HttpClient
from cudaup.resolve.resolver import Resolver
from tests.faultserver import Fault, FaultServer
from tests.install.served import CUDART, make_wheel, serve_extras, serve_pypi, serve_redist
from tests.net.test_open_ahead import opened_ahead


def held_until(server: FaultServer, path: str, ready: Callable[[], bool]) -> threading.Event:
    """Hold ``path``'s answer until ``ready()`` (or 5 s: the event returned, set first,
    says so)."""
    answer, late = threading.Event(), threading.Event()
    server.resources[path].faults.append(Fault(hang="headers", until=answer))

    def watch() -> None:
        end = time.monotonic() + 5
        while not ready():
            if time.monotonic() > end:
                late.set()
                break
            time.sleep(0.005)
        answer.set()

    threading.Thread(target=watch, daemon=True).start()
    return late


def test_the_component_pages_are_read_while_cuda_toolkits_page_is(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    """The index answers ``cuda-toolkit``'s page only once cudart's page was asked for
    (or, were that page read only after the metadata, 5 s later); each page is asked
    for once."""
    url = serve_pypi(fault_server, "13.0.1", make_wheel("nvidia-cuda-runtime", "13.0.88", CUDART))
    page = "/simple/nvidia-cuda-runtime/"
    late = held_until(
        fault_server, "/simple/cuda-toolkit/", lambda: bool(fault_server.requests(page))
    )
    resolver = Resolver(Settings.from_env(pypi_url=url, cache_dir=tmp_path))
    resolution = resolver.resolve(
        "13.0.1", platform="linux-x86_64", channel="pypi", components=["cudart"], closure=True
    )
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


@pytest.mark.parametrize(("components", "downloads"), [(["nvcc"], 3), (["cudart"], 1)])
def test_the_downloads_connections_open_while_the_metadata_is_read(
    components: list[str], downloads: int, fault_server: FaultServer, tmp_path: Path
) -> None:
    """The wheels are on a host of their own, as PyPI's are.  Three downloads start at once
    after this resolution: nvcc's closure forecasts five wheels, so three connections to
    the files' host open while cuda-toolkit's metadata is awaited, and the three requests
    that follow open none; cudart's forecasts one wheel, so one opens (besides the
    metadata's own, when that request took none of those)."""
    nvcc = make_wheel("nvidia-cuda-nvcc", "13.0.88", {"nvidia/cu13/bin/nvcc": (b"\x7fELF", 0o755)})
    cudart = make_wheel("nvidia-cuda-runtime", "13.0.88", CUDART)
    with FaultServer() as files:
        url = serve_extras(
            fault_server,
            "13.0.1",
            {
                "nvcc": ("nvidia-cuda-nvcc", "13.0.88", nvcc),
                "cudart": ("nvidia-cuda-runtime", "13.0.88", cudart),
            },
            files,
        )
        meta = "/files/cuda_toolkit-13.0.1-py2.py3-none-any.whl.metadata"
        late = held_until(files, meta, lambda: files.accepted >= downloads)
        http = HttpClient(Settings.from_env(pypi_url=url, cache_dir=tmp_path))
        Resolver(http.settings, http, downloads_next=3).resolve(
            "13.0.1", platform="linux-x86_64", channel="pypi", components=components, closure=True
        )
        assert not late.is_set(), "the metadata was answered before the connections opened"
        opened_ahead()
        assert downloads <= files.accepted <= downloads + 1
        before = files.accepted
        answers = [http.open("GET", files.url + meta) for _ in range(downloads)]
        assert {a.read() for a in answers} == {files.resources[meta].body}
        assert files.accepted == before  # the downloads' requests took the connections open


def test_the_archives_connections_open_while_the_manifest_is_read(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    """The redist channel: the archives' host is the manifest's."""
    serve_redist(fault_server, "13.0.1", {"bin/nvcc": (b"\x7fELF", 0o755)})
    manifest = "/compute/cuda/redist/redistrib_13.0.1.json"
    late = held_until(fault_server, manifest, lambda: fault_server.accepted >= 2)
    http = HttpClient(Settings.from_env(download_url=fault_server.url, cache_dir=tmp_path))
    resolution = Resolver(http.settings, http, downloads_next=2).resolve(
        "13.0.1", platform="linux-x86_64", channel="redist", components=["nvcc"], closure=True
    )
    assert [a.component for a in resolution.artifacts] == ["cuda_nvcc"]
    assert not late.is_set(), "the manifest was answered before the connections opened"
    opened_ahead()
    before = fault_server.accepted
    archive = urlsplit(resolution.artifacts[0].url).path
    answers = [http.open("GET", fault_server.url + archive) for _ in range(2)]
    for answer in answers:
        answer.read()
    assert fault_server.accepted == before


def test_a_resolution_nothing_downloads_after_opens_no_connection_ahead(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    """``cudaup resolve``: every connection carries a request."""
    url = serve_pypi(fault_server, "13.0.1", make_wheel("nvidia-cuda-runtime", "13.0.88", CUDART))
    Resolver(Settings.from_env(pypi_url=url, cache_dir=tmp_path)).resolve(
        "13.0.1", platform="linux-x86_64", channel="pypi", components=["cudart"], closure=True
    )
    assert fault_server.accepted == fault_server.connections()


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
