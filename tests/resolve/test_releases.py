"""The live release list (NVIDIA's listing, else PyPI's cuda-toolkit, else the snapshot)
and what compat learns from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from cudaup.config import Settings
from cudaup.core.compat import CompatTable
from cudaup.core.driver import DriverVersion
from cudaup.net.http import HttpClient
from cudaup.resolve.releases import learn_releases, live_releases
from tests.fakenvidia.server import FakeNvidiaServer
from tests.helpers import point_env_at, run_cli
from tests.plan.builders import wheel
from tests.plan.pyindex import IndexServer

DOWN = "http://127.0.0.1:9"


def _toolkits(server: IndexServer, *versions: str, yanked: tuple[str, ...] = ()) -> str:
    for version in versions:
        name, body = wheel("cuda-toolkit", version, tag="py2.py3-none-any")
        server.add("pypi", name, body, yanked=version in yanked)
    return server.url("pypi")


def _live(settings: Settings) -> object:
    return live_releases(settings, HttpClient(settings, retries=0))


def test_from_pypi_when_nvidia_is_down(index_server: IndexServer, tmp_path: Path) -> None:
    pypi = _toolkits(
        index_server, "12.8.2", "13.0.3.0", "13.4.0rc1", "13.4.1.0", "13.5.0", "0.0.0a0", "13.1.0",
        yanked=("13.1.0",),
    )  # fmt: skip
    settings = Settings.from_env(pypi_url=pypi, download_url=DOWN, cache_dir=tmp_path / "c")
    live = live_releases(settings, HttpClient(settings, retries=0))
    assert live.source == "pypi" and live.described == f"the versions of cuda-toolkit on {pypi}"
    assert live.versions == ("13.5.0", "13.4.1", "13.0.3", "12.8.2")
    assert live.newest((13, 4)) == "13.4.1" and live.lines() == [(13, 5), (13, 4), (13, 0), (12, 8)]
    assert len(live.notes) == 1 and "NVIDIA's release listing could not be read" in live.notes[0]


def test_from_nvidia_first(
    index_server: IndexServer, fake_nvidia: FakeNvidiaServer, tmp_path: Path
) -> None:
    settings = Settings.from_env(
        download_url=fake_nvidia.download_url,
        pypi_url=_toolkits(index_server, "99.0.0"),
        cache_dir=tmp_path / "c",
    )
    live = live_releases(settings, HttpClient(settings, retries=0))
    assert live.source == "nvidia" and "99.0.0" not in live.versions and live.notes == ()
    assert index_server.requests() == []  # PyPI is not asked when NVIDIA answers


def test_the_snapshot_names_its_date(index_server: IndexServer, tmp_path: Path) -> None:
    index_server.root("pypi")  # no cuda-toolkit project there
    settings = Settings.from_env(
        pypi_url=index_server.url("pypi"), download_url=DOWN, cache_dir=tmp_path / "c"
    )
    live = live_releases(settings, HttpClient(settings, retries=0))
    assert live.source == "snapshot" and "snapshot of 2026-11-29" in live.described
    assert "13.0.2" in live.versions and len(live.notes) == 2
    offline = live_releases(
        Settings.from_env(offline=True, cache_dir=tmp_path / "c"), HttpClient(settings)
    )
    assert offline.source == "snapshot" and offline.notes == (
        "--offline: the release list was not fetched",
    )


def test_releases_without_driver_facts_are_never_refused_for_want_of_them(
    index_server: IndexServer, tmp_path: Path
) -> None:
    settings = Settings.from_env(
        pypi_url=_toolkits(index_server, "13.5.0", "14.0.0"),
        download_url=DOWN,
        cache_dir=tmp_path / "c",
    )
    table = learn_releases(
        CompatTable.load(), live_releases(settings, HttpClient(settings, retries=0))
    )
    newer = table.check(DriverVersion.from_text("590.48.01"), "13.5.0")
    assert newer.verdict == "minor-version" and "not known yet" in newer.reason
    old = table.check(DriverVersion.from_text("570.124.06"), "13.5.0")
    assert old.verdict == "no" and "needs a driver ≥ 580.65.06" in old.reason
    fourteen = table.check(DriverVersion.from_text("700.10.01"), "14.0.0")
    assert fourteen.verdict == "unknown" and fourteen.needs is None


def test_compat_learns_from_pypi(
    index_server: IndexServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CUDAUP_PYPI_URL", _toolkits(index_server, "13.5.0", "14.0.0"))
    monkeypatch.setenv("CUDAUP_NVIDIA_DOWNLOAD_URL", DOWN)
    document = run_cli(capsys, "compat", "--driver", "590.48.01", "--json").json()
    verdicts = {r["release"]: r["verdict"] for r in document["releases"]}
    assert verdicts["13.5.0"] == "minor-version" and verdicts["14.0.0"] == "unknown"
    assert any("NVIDIA's release listing" in n for n in document["notes"])
    human = run_cli(capsys, "compat", "--driver", "590.48.01")
    assert "unknown (no source names the driver they need): 14.0.x" in human.out
    release = run_cli(capsys, "compat", "13.5.0", "--json").json()
    assert release["toolkit_driver"]["linux"] is None
    assert "no source names its toolkit driver yet" in release["toolkit_driver"]["source"]


def test_compat_from_nvidia_manifests_is_unchanged(
    make_fake_nvidia: object, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    server = make_fake_nvidia(future_release=True)  # type: ignore[operator]
    point_env_at(monkeypatch, server)
    document = run_cli(capsys, "compat", "--driver", "615.20.01", "--json").json()
    assert {r["release"]: r["verdict"] for r in document["releases"]}["14.1.0"] == "full"
