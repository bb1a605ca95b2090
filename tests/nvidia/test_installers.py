from __future__ import annotations

import csv

import pytest

from cudaup.errors import SourceFormatError
from cudaup.nvidia.installers import classify_installer
from tests.nvidia.samples import DATA

CATALOG_PLATFORM = {
    "linux-amd64": "linux-x86_64",
    "linux-arm64": "linux-sbsa",
    "windows-amd64": "windows-x86_64",
    "windows-arm64": "windows-arm64",
}


def test_every_real_installer_name_classifies() -> None:
    with (DATA / "local-installers-catalog.tsv").open() as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    assert len(rows) == 114
    for row in rows:
        info = classify_installer(row["filename"])
        assert info is not None, row["filename"]
        assert info.platform == CATALOG_PLATFORM[row["platform"]]
        assert info.version == row["version"]
        assert not info.network


@pytest.mark.parametrize(
    ("name", "platform", "driver", "network"),
    [
        ("cuda_13.0.1_580.82.07_linux.run", "linux-x86_64", "580.82.07", False),
        ("cuda_12.8.0_571.96_windows.exe", "windows-x86_64", "571.96", False),
        ("cuda_11.5.0_496.13_win10.exe", "windows-x86_64", "496.13", False),
        ("cuda_11.1.1_455.32.00_linux_ppc64le.run", "linux-ppc64le", "455.32.00", False),
        ("cuda_13.4.1_linux.run", "linux-x86_64", None, False),
        ("cuda_13.4.1_windows_arm64.exe", "windows-arm64", None, False),
        ("cuda_12.9.2_windows_x86_64_network.exe", "windows-x86_64", None, True),
        ("cuda_13.0.1_windows_network.exe", "windows-x86_64", None, True),
        # a style never seen so far still classifies by its tokens
        ("cuda_14.1.0_615.20.01_linux_x86_64.run", "linux-x86_64", "615.20.01", False),
        ("cuda_14.1.0_615.20.01_linux_arm64_sbsa.run", "linux-sbsa", "615.20.01", False),
    ],
)
def test_names(name: str, platform: str, driver: str | None, network: bool) -> None:
    info = classify_installer(name)
    assert info is not None
    assert (info.platform, info.driver, info.network) == (platform, driver, network)


@pytest.mark.parametrize(
    "name",
    [
        "cuda-repo-ubuntu2204-12-3-local_12.3.1-545.23.08-1_amd64.deb",
        "README.txt",
        "cuda_13.0.1.tar.xz",
    ],
)
def test_non_installers(name: str) -> None:
    assert classify_installer(name) is None


@pytest.mark.parametrize("name", ["..", "a/cuda_13.0.1_linux.run", "cuda\x00.run", "", "x" * 256])
def test_names_that_are_not_file_names_are_refused(name: str) -> None:
    with pytest.raises(SourceFormatError, match="^installer file name"):
        classify_installer(name)
