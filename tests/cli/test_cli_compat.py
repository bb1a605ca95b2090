"""``compat`` agrees with itself and with ``resolve``: a driver and a release as one
question, "unknown" never shown as "does not run", releases only the live list knows."""

from __future__ import annotations

import pytest

from cudaup.errors import EXIT_CODES
from tests.fakenvidia.fixtures import MakeFakeNvidia
from tests.fakenvidia.server import FakeNvidiaServer
from tests.helpers import point_env_at, run_cli


@pytest.fixture
def nvidia(monkeypatch: pytest.MonkeyPatch, fake_nvidia: FakeNvidiaServer) -> FakeNvidiaServer:
    point_env_at(monkeypatch, fake_nvidia)
    monkeypatch.setenv("CUDAUP_PYPI_URL", "http://127.0.0.1:9/simple")
    return fake_nvidia


@pytest.mark.parametrize(
    ("driver", "os_name", "verdict", "code", "words"),
    [
        ("570.1", "linux", "no", EXIT_CODES["driver-too-old"], "does not run it: needs a driver ≥ 580.65.06"),
        ("580.65.06", "linux", "minor-version", 0, "runs it under minor-version compatibility"),
        ("580.82.07", "linux", "full", 0, "runs it fully: driver ≥ 580.82.07"),
        ("580.65.06", "windows", "unknown", EXIT_CODES["not-known"], "runs it or not: unknown"),
    ],
)  # fmt: skip
def test_a_release_and_a_driver_are_one_question(
    nvidia: FakeNvidiaServer,
    capsys: pytest.CaptureFixture[str],
    driver: str,
    os_name: str,
    verdict: str,
    code: int,
    words: str,
) -> None:
    argv = ["compat", "13.0.1", "--driver", driver, "--os", os_name]
    human = run_cli(capsys, *argv)
    assert human.code == code, human.err
    assert f"  driver {driver} ({os_name}) {words}" in human.out
    document = run_cli(capsys, *argv, "--json")
    assert document.code == code
    answer = document.json()["driver"]
    assert answer["version"] == driver and answer["os"] == os_name
    assert answer["verdict"] == verdict and answer["release"] == "13.0.1"


def test_without_a_driver_the_release_report_exits_0(
    nvidia: FakeNvidiaServer, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run_cli(capsys, "compat", "13.0.1", "--json")
    assert result.code == 0 and "driver" not in result.json()


def test_windows_drivers_unknown_is_not_does_not_run(
    nvidia: FakeNvidiaServer, capsys: pytest.CaptureFixture[str]
) -> None:
    human = run_cli(capsys, "compat", "--driver", "580.65.06", "--os", "windows")
    assert human.code == 0
    lines = human.out.splitlines()
    # what NVIDIA's Windows column says, not the Linux one ("13.0")
    assert lines[0] == "driver 580.65.06 (windows) runs CUDA ≤ 12.9 fully by NVIDIA's table"
    assert any(
        line.startswith("  unknown (no source names the driver they need): 13.4.x")
        for line in lines
    )
    assert not any(line.startswith("  does not run") for line in lines)
    document = run_cli(capsys, "compat", "--driver", "580.65.06", "--os", "windows", "--json")
    verdicts = {r["release"]: r["verdict"] for r in document.json()["releases"]}
    assert {verdicts[r] for r in verdicts if r.startswith("13.")} == {"unknown"}
    assert document.json()["reported_cuda"] == "12.9"
    assert document.json()["reported_by"] == "table"


def test_a_release_without_a_known_driver_says_so(
    nvidia: FakeNvidiaServer, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run_cli(capsys, "compat", "13.4.1")
    assert result.code == 0
    assert "unknown" not in result.out.split("source")[0]  # never "Linux ≥ unknown"
    assert (
        "  runs fully on      Linux: no source names it yet · Windows: no source names it yet"
        in result.out
    )
    assert "  minor-version      Linux ≥ 580.65.06 · Windows: none known" in result.out
    document = run_cli(capsys, "compat", "13.4.1", "--json").json()
    source = document["toolkit_driver"]["source"]
    assert "no source names its toolkit driver yet" in source and "runfile" not in source
    table = run_cli(capsys, "compat", "13.0.1")
    assert "Linux ≥ 580.82.07 · Windows: N/A in NVIDIA's table" in table.out


def test_compat_knows_what_resolve_finds(
    make_fake_nvidia: MakeFakeNvidia,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A release newer than every shipped table: resolve finds it, and so does compat."""
    point_env_at(monkeypatch, make_fake_nvidia(future_release=True))
    resolved = run_cli(capsys, "resolve", "14.1.0", "--platform", "linux-x86_64", "--json")
    assert resolved.code == 0 and resolved.json()["release"]["version"] == "14.1.0"
    known = run_cli(capsys, "compat", "14.1.0", "--driver", "615.20.01", "--json")
    assert known.code == 0 and known.json()["toolkit_driver"]["linux"] == "615.20.01"
    assert known.json()["driver"]["verdict"] == "full"
    offline = run_cli(capsys, "compat", "14.1.0", "--offline")
    assert offline.code == EXIT_CODES["release-not-found"]
    assert "(--offline: only cudaup's shipped tables were read)" in offline.err


def test_a_release_not_found_says_the_live_list_was_not_read(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("DOWNLOAD", "ARCHIVE", "PRERELEASE"):
        monkeypatch.setenv(f"CUDAUP_NVIDIA_{name}_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("CUDAUP_PYPI_URL", "http://127.0.0.1:9/simple")
    result = run_cli(capsys, "compat", "14.1.0")
    assert result.code == EXIT_CODES["release-not-found"]
    assert (
        "cudaup knows no CUDA 14.1.0; nearest: 13.4.1 (NVIDIA's release listing could not be read"
        in result.err
    )
