"""An install's head start: the wheels the shipped release table forecasts download while
``cuda-toolkit``'s metadata is read; only what that metadata chose is installed."""

from __future__ import annotations

import hashlib
import json
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cudaup.config import Settings
from cudaup.core.identify import shipped_table
from cudaup.install.head_start import HeadStart
from cudaup.install.installer import InstallOptions, install
from cudaup.install.store import Store
from cudaup.util.cachedir import CacheLayout
from cudaup.util.faults import cache_place
from cudaup.util.locks import locked
from cudaup.util.paths import make_directory
from tests.faultserver import Fault, FaultServer
from tests.install.served import CUDART, make_wheel, serve_pypi

CUDART_ONLY = InstallOptions(platform="linux-x86_64", channel="pypi", components=("cudart",))
META = "/files/cuda_toolkit-13.0.1-py2.py3-none-any.whl.metadata"
#: hold(path): the metadata waits for a request to path; late: set when none came in time
Held = tuple[Callable[[str], None], threading.Event]


def wheel_path(version: str) -> str:
    return f"/files/nvidia_cuda_runtime-{version}-py3-none-manylinux_2_27_x86_64.whl"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Store:
    monkeypatch.setenv("CUDAUP_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CUDAUP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CUDAUP_SYSTEM_ROOT", str(tmp_path / "root"))
    monkeypatch.delenv("CUDAUP_DRIVER_VERSION", raising=False)
    (tmp_path / "root").mkdir()
    return Store(tmp_path / "home")


@pytest.fixture
def metadata_held(fault_server: FaultServer) -> Iterator[Held]:
    """``cuda-toolkit``'s metadata answered only once a request for the path ``hold`` names
    came (``late`` set when none came in 5 s: the metadata is then answered anyway)."""
    asked, late = threading.Event(), threading.Event()
    watched: list[str] = []

    def watch() -> None:
        while not watched:
            asked.wait(0.01)
        try:
            fault_server.wait_for_requests(1, watched[0], deadline=5)
        except AssertionError:
            late.set()
        asked.set()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()

    def hold(path: str) -> None:
        fault_server.resources[META].faults.append(Fault(hang="headers", until=asked))
        watched.append(path)

    yield hold, late
    asked.set()
    watched.append("")
    watcher.join()


def test_the_table_forecasts_13_0_1s_cudart() -> None:
    """What the tests below rest on: the shipped table pins cudart 13.0.88 in 13.0.1."""
    assert shipped_table()["13.0.1"]["cuda_cudart"] == "13.0.88"


def test_a_forecast_wheel_downloads_while_the_release_metadata_is_read(
    fault_server: FaultServer, home: Store, metadata_held: Held
) -> None:
    wheel = make_wheel("nvidia-cuda-runtime", "13.0.88", CUDART)
    url = serve_pypi(fault_server, "13.0.1", wheel)
    hold, late = metadata_held
    hold(wheel_path("13.0.88"))
    result = install("13.0.1", CUDART_ONLY, settings=Settings.from_env(pypi_url=url), store=home)
    assert not late.is_set(), "the wheel was asked for only after the metadata"
    assert (result.path / "lib" / "libcudart.so.13").read_bytes() == CUDART[
        "nvidia/cu13/lib/libcudart.so.13"
    ][0]
    # Staging took the head start's download over: the wheel's bytes came once.
    assert fault_server.sent(wheel_path("13.0.88")) == len(wheel)
    assert not [t for t in threading.enumerate() if t.name.startswith("cudaup-head-start")]


def test_a_wrong_forecast_costs_a_download_never_the_answer(
    fault_server: FaultServer, home: Store, metadata_held: Held
) -> None:
    """The table says 13.0.88; this index's 13.0.1 pins 13.0.89, a wheel whose files
    differ: 13.0.88 is fetched ahead, and 13.0.89 is what gets installed."""
    newer = {"nvidia/cu13/lib/libcudart.so.13": (b"\x7fELF cudart 13.0.89", 0o755)}
    url = serve_pypi(
        fault_server, "13.0.1", make_wheel("nvidia-cuda-runtime", "13.0.89", newer), "13.0.89"
    )
    forecast = make_wheel("nvidia-cuda-runtime", "13.0.88", CUDART)
    fault_server.add(wheel_path("13.0.88"), forecast)
    page = fault_server.resources["/simple/nvidia-cuda-runtime/"]
    document = json.loads(page.body)
    document["files"].append(
        {
            "filename": wheel_path("13.0.88").rsplit("/", 1)[1],
            "url": wheel_path("13.0.88"),
            "yanked": False,
            "size": len(forecast),
            "hashes": {"sha256": hashlib.sha256(forecast).hexdigest()},
        }
    )
    page.body = json.dumps(document).encode()
    hold, late = metadata_held
    hold(wheel_path("13.0.88"))
    result = install("13.0.1", CUDART_ONLY, settings=Settings.from_env(pypi_url=url), store=home)
    assert not late.is_set(), "the forecast wheel was not fetched ahead"
    installed = (result.path / "lib" / "libcudart.so.13").read_bytes()
    assert installed == b"\x7fELF cudart 13.0.89"
    record = json.loads((result.path / "cudaup-record.json").read_text())
    assert "13.0.89" in json.dumps(record) and "13.0.88" not in json.dumps(record)
    assert not [t for t in threading.enumerate() if t.name.startswith("cudaup-head-start")]


def test_a_release_already_installed_gets_no_head_start(
    fault_server: FaultServer, home: Store, tmp_path: Path
) -> None:
    """A re-run stages nothing (already installed): its cache emptied, it fetches no wheel."""
    url = serve_pypi(fault_server, "13.0.1", make_wheel("nvidia-cuda-runtime", "13.0.88", CUDART))
    settings = Settings.from_env(pypi_url=url)
    install("13.0.1", CUDART_ONLY, settings=settings, store=home)
    shutil.rmtree(tmp_path / "cache")
    before = len(fault_server.requests(wheel_path("13.0.88")))
    again = install("13.0.1", CUDART_ONLY, settings=settings, store=home)
    assert again.skipped
    assert len(fault_server.requests(wheel_path("13.0.88"))) == before


def test_a_cache_a_prune_holds_gets_no_head_start(
    fault_server: FaultServer, home: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A head start never waits for the cache's lock: while `cache prune` holds it, the
    offer opens nothing (no wheel is fetched ahead), and the install's staging waits for
    the prune as before."""
    url = serve_pypi(fault_server, "13.0.1", make_wheel("nvidia-cuda-runtime", "13.0.88", CUDART))
    cache = tmp_path / "cache"
    make_directory(tmp_path, cache.name)
    tried = threading.Event()
    opened: list[object] = []
    real = HeadStart._open

    def open_stager(self: HeadStart) -> object:
        try:
            opened.append(real(self))
            return opened[-1]
        finally:
            tried.set()

    monkeypatch.setattr(HeadStart, "_open", open_stager)
    lock = CacheLayout(cache).unpacked_lock
    with locked(lock, busy="pruning", wait=5, place=cache_place(cache), exclusive=True):
        done: list[object] = []
        settings = Settings.from_env(pypi_url=url)
        worker = threading.Thread(
            target=lambda: done.append(
                install("13.0.1", CUDART_ONLY, settings=settings, store=home)
            )
        )
        worker.start()
        assert tried.wait(10), "the forecast wheel was never offered, or its offer waited"
        assert opened == [None], "a head start began while a prune held the cache"
    worker.join(30)
    assert done and (home.toolkit_dir("13.0.1") / "lib" / "libcudart.so.13").is_file()
    assert fault_server.requests(wheel_path("13.0.88")), "staging fetched it, once free"
