from __future__ import annotations

import pytest

from cudaup.core.compat import CompatTable
from cudaup.core.driver import CudaVersion, DriverVersion
from tests.fakenvidia.fixtures import MakeFakeNvidia

TABLE = CompatTable.load()


def d(text: str) -> DriverVersion:
    return DriverVersion.from_text(text)


def test_toolkit_drivers_come_from_nvidia_table_then_runfile_names() -> None:
    assert TABLE.toolkit_driver("13.0.1") == (
        d("580.82.07"),
        "NVIDIA CUDA release notes (13.2.2 edition), Table 3",
    )
    assert TABLE.toolkit_driver("12.8.0", "windows")[0] == d("570.65")
    assert TABLE.toolkit_driver("13.0.1", "windows") == (None, None)  # N/A for 13.x
    # releases NVIDIA's table leaves out: the driver bundled in the runfile name
    linux, source = TABLE.toolkit_driver("13.0.3")
    assert linux == d("580.126.20") and source is not None and "runfile" in source
    assert TABLE.toolkit_driver("12.8.2")[0] == d("570.211.01")
    assert TABLE.toolkit_driver("13.4.1")[0] is None  # driver independent


@pytest.mark.parametrize(
    ("driver", "release", "verdict"),
    [
        ("590.48.01", "13.1.1", "full"),
        ("590.48.01", "13.0.1", "full"),  # backward compatibility
        ("590.48.01", "12.8.0", "full"),
        ("590.48.01", "13.2.0", "minor-version"),  # 13.x floor 580.65.06
        ("580.65.06", "13.0.1", "minor-version"),
        ("575.57.08", "13.0.0", "no"),  # below the 13.x floor
        ("525.60.13", "12.8.0", "minor-version"),
        ("525.60.12", "12.0.0", "no"),  # full versions, not branches
        ("470.82.01", "12.0.0", "no"),
        ("450.80.02", "11.8.0", "minor-version"),
    ],
)
def test_check(driver: str, release: str, verdict: str) -> None:
    assert TABLE.check(d(driver), release).verdict == verdict


def test_windows_uses_windows_floors() -> None:
    assert TABLE.check(d("527.41"), "12.4.0", "windows").verdict == "minor-version"
    assert TABLE.check(d("527.40"), "12.4.0", "windows").verdict == "no"


def test_driver_reported_cuda_wins() -> None:
    # the driver says it runs 13.2 (NVML): trust it over the table's 595.45.04 threshold
    assert TABLE.check(d("590.99.00"), "13.2.0", reported=CudaVersion(13, 2)).verdict == "full"
    assert TABLE.check(d("595.45.04"), "13.3.0", reported=CudaVersion(12, 9)).verdict == "no"


def test_reported_cuda_from_the_table() -> None:
    assert TABLE.reported_cuda(d("590.48.01")) == CudaVersion(13, 1)
    assert TABLE.reported_cuda(d("580.126.20")) == CudaVersion(13, 0)
    assert TABLE.reported_cuda(d("570.124.06")) == CudaVersion(12, 8)
    assert TABLE.reported_cuda(d("610.43.02")) == CudaVersion(13, 3)
    assert TABLE.reported_cuda(d("400.00")) is None


def test_with_bundled_adds_manifest_drivers() -> None:
    table = TABLE.with_bundled({"13.5.0": "620.10.01"})
    assert table.toolkit_driver("13.5.0")[0] == d("620.10.01")
    assert table.reported_cuda(d("620.10.01")) == CudaVersion(13, 5)


def test_architectures() -> None:
    if not TABLE.architectures:
        pytest.skip("architectures.tsv not shipped")
    volta = TABLE.architecture("7.0")
    assert volta is not None and volta.supported_by("12.9.1") and not volta.supported_by("13.0.0")
    hopper = TABLE.architecture("9.0")
    assert hopper is not None and hopper.supported_by("13.0.1")
    assert all(float(a.compute_capability) >= 7.5 for a in TABLE.targets("13.0.1"))


def test_cli_compat_driver(capsys: pytest.CaptureFixture[str]) -> None:
    from tests.helpers import run_cli

    result = run_cli(capsys, "compat", "--driver", "590.48.01", "--json")
    document = result.json()
    assert document["reported_cuda"] == "13.1"
    verdicts = {r["release"]: r["verdict"] for r in document["releases"]}
    assert (
        verdicts["13.1.1"] == "full"
        and verdicts["13.2.0"] == "minor-version"
        and verdicts["11.0.1"] == "full"
    )
    human = run_cli(capsys, "compat", "--driver", "580.82.07")
    assert "runs fully: 13.0.1, 13.0.0, 12.9.x" in human.out
    assert (
        "minor-version compatibility: 13.4.x, 13.3.x, 13.2.x, 13.1.x, 13.0.3, 13.0.2" in human.out
    )


def test_cli_compat_release(capsys: pytest.CaptureFixture[str]) -> None:
    from tests.helpers import run_cli

    document = run_cli(capsys, "compat", "cu130", "--json").json()
    assert document["release"] == "13.0.3"
    assert (
        document["toolkit_driver"]["linux"] == "580.126.20"
        and "runfile" in document["toolkit_driver"]["source"]
    )
    assert document["minor_version_floor"]["linux"] == "580.65.06"
    sms = [t["sm"] for t in document["targets"]]
    if TABLE.architectures:
        assert "sm_75" in sms and "sm_70" not in sms and "sm_110" in sms
    missing = run_cli(capsys, "compat", "12.7")
    assert missing.code == 3 and "nearest: 12.6.3 and 12.8.0" in missing.err
    bad = run_cli(capsys, "compat", "--driver", "five-ninety")
    assert bad.code == 2


def test_cli_compat_learns_new_releases_from_manifests(
    capsys: pytest.CaptureFixture[str],
    make_fake_nvidia: MakeFakeNvidia,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.helpers import point_env_at, run_cli

    server = make_fake_nvidia(future_release=True)
    point_env_at(monkeypatch, server)
    document = run_cli(capsys, "compat", "--driver", "615.20.01", "--json").json()
    verdicts = {r["release"]: r for r in document["releases"]}
    assert (
        verdicts["14.1.0"]["verdict"] == "full"
        and verdicts["14.1.0"]["toolkit_driver"] == "615.20.01"
    )
    assert document["reported_cuda"] == "14.1" and document["notes"] == []
    older = run_cli(capsys, "compat", "--driver", "590.48.01", "--json").json()
    assert {r["release"]: r["verdict"] for r in older["releases"]}["14.1.0"] == "no"
