"""The pure driver facts and parsers, over recorded outputs in tests/data/driver/."""

from __future__ import annotations

from pathlib import Path

import pytest

from cudaup.core.driver import (
    CudaVersion,
    DriverInfo,
    DriverVersion,
    GpuInfo,
    parse_nvidia_smi_banner,
    parse_nvidia_smi_csv,
    parse_proc_driver_version,
    parse_sys_module_version,
)
from cudaup.errors import UsageError

DATA = Path(__file__).resolve().parents[1] / "data" / "driver"


def fixture(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def dv(text: str) -> DriverVersion:
    return DriverVersion.from_text(text)


# ---------------------------------------------------------------------------- DriverVersion


@pytest.mark.parametrize(
    ("text", "normalized", "components", "branch"),
    [
        ("590.48.01", "590.48.01", (590, 48, 1), 590),
        ("571.96", "571.96", (571, 96), 571),
        ("455.32.00", "455.32.00", (455, 32, 0), 455),
        (">= 450.51.06", "450.51.06", (450, 51, 6), 450),
        (">=570.26", "570.26", (570, 26), 570),
        ("  580.65.06\n", "580.65.06", (580, 65, 6), 580),
        ("580", "580", (580,), 580),
    ],
)
def test_driver_version_from_text(
    text: str, normalized: str, components: tuple[int, ...], branch: int
) -> None:
    version = dv(text)
    assert version.text == normalized
    assert str(version) == normalized
    assert version.components == components
    assert version.branch == branch


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "not an NVIDIA driver version"),
        ("abc", "not an NVIDIA driver version"),
        ("590.48.01a", "not an NVIDIA driver version"),
        ("590..48", "not an NVIDIA driver version"),
        ("590.48.01.2.3", "not an NVIDIA driver version"),
        ("> 590", "not an NVIDIA driver version"),
        ("N/A", "not an NVIDIA driver version"),
        ("13.1", "looks like a CUDA version"),
        ("12", "looks like a CUDA version"),
        ("32.0.15.7188", "Windows driver file version"),
    ],
)
def test_driver_version_rejects_garbage(text: str, match: str) -> None:
    with pytest.raises(UsageError, match=match):
        dv(text)


def test_driver_version_ordering_pads_missing_components() -> None:
    assert dv("570.26") < dv("570.86.10")
    assert dv("570.86.10") > dv(">=570.26")
    assert dv("525.60.13") >= dv("525.60.13")
    assert dv("525.60.13") <= dv("525.60.13")
    assert dv("525.60.13") < dv("527.41")
    assert dv("580") < dv("580.0.1")
    assert dv("455.32.00") >= dv("455.32")
    assert dv("455.32.00") <= dv("455.32")
    assert not dv("455.32.00") < dv("455.32")
    assert not dv("455.32.00") > dv("455.32")
    assert dv("590.48.01") > dv("590.44.01") > dv("580.126.09") > dv("580.65.06")


def test_driver_version_equality_ignores_trailing_zeros() -> None:
    assert dv("570.26") == dv("570.26.00")
    assert hash(dv("570.26")) == hash(dv("570.26.00"))
    assert dv("590.48.01") == dv("590.48.1")
    assert dv("590.48.01") != dv("590.48.02")
    assert dv("590.48.01") != "590.48.01"
    assert sorted([dv("590.48.01"), dv("455.32.00"), dv("571.96")]) == [
        dv("455.32.00"),
        dv("571.96"),
        dv("590.48.01"),
    ]


def test_driver_version_does_not_compare_with_strings() -> None:
    with pytest.raises(TypeError):
        _ = dv("590.48.01") < "600"  # type: ignore[operator]


# ------------------------------------------------------------------------------ CudaVersion


@pytest.mark.parametrize(
    ("value", "expected"),
    [(13010, (13, 1)), (13000, (13, 0)), (12040, (12, 4)), (11040, (11, 4)), (12090, (12, 9))],
)
def test_cuda_version_from_int(value: int, expected: tuple[int, int]) -> None:
    version = CudaVersion.from_int(value)
    assert (version.major, version.minor) == expected


@pytest.mark.parametrize("value", [0, -1, 999, True])
def test_cuda_version_from_int_rejects_garbage(value: int) -> None:
    with pytest.raises(UsageError, match="not an NVML CUDA version"):
        CudaVersion.from_int(value)


@pytest.mark.parametrize(
    ("text", "expected"), [("13.1", (13, 1)), (" 12.4 ", (12, 4)), ("13", (13, 0))]
)
def test_cuda_version_from_text(text: str, expected: tuple[int, int]) -> None:
    version = CudaVersion.from_text(text)
    assert (version.major, version.minor) == expected
    assert str(version) == f"{expected[0]}.{expected[1]}"


@pytest.mark.parametrize("text", ["", "N/A", "13.x", "v13.1", "13.1.0.0", "13.1 beta"])
def test_cuda_version_from_text_rejects_garbage(text: str) -> None:
    with pytest.raises(UsageError, match="not a CUDA version"):
        CudaVersion.from_text(text)


def test_cuda_version_ordering() -> None:
    assert CudaVersion.from_text("12.9") < CudaVersion.from_text("13.0")
    assert CudaVersion.from_text("12.10") > CudaVersion.from_text("12.9")
    assert CudaVersion.from_int(13010) == CudaVersion.from_text("13.1")
    assert max(CudaVersion(12, 4), CudaVersion(13, 1), CudaVersion(11, 8)) == CudaVersion(13, 1)


# ------------------------------------------------------------------------------- DriverInfo


def test_driver_info_json() -> None:
    info = DriverInfo(
        version=dv("590.48.01"),
        cuda_version=CudaVersion(13, 1),
        gpus=(GpuInfo(0, "NVIDIA H200", "9.0", 143771, "GPU-1d0a"),),
        source="nvml",
        notes=("sysfs: skipped",),
    )
    assert info.found
    assert info.to_json() == {
        "found": True,
        "version": "590.48.01",
        "branch": 590,
        "cuda_version": "13.1",
        "source": "nvml",
        "gpus": [
            {
                "index": 0,
                "name": "NVIDIA H200",
                "compute_capability": "9.0",
                "memory_mib": 143771,
                "uuid": "GPU-1d0a",
            }
        ],
        "notes": ["sysfs: skipped"],
    }


def test_driver_info_not_found_json() -> None:
    info = DriverInfo(None, None, (), "none", ("nvidia-smi: not on PATH",))
    assert not info.found
    assert info.to_json()["version"] is None
    assert info.to_json()["branch"] is None
    assert info.to_json()["cuda_version"] is None


# ---------------------------------------------------------------------- /sys and /proc


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("sys-module-version-590.txt", "590.48.01"),
        ("sys-module-version-535.txt", "535.183.01"),
        ("sys-module-version-580-recorded.txt", "580.159.04"),
    ],
)
def test_parse_sys_module_version(name: str, expected: str) -> None:
    assert parse_sys_module_version(fixture(name)) == dv(expected)


@pytest.mark.parametrize("text", ["", "\n", "garbage\n", "13.1\n"])
def test_parse_sys_module_version_garbage(text: str) -> None:
    assert parse_sys_module_version(text) is None


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("proc-version-535-x86_64.txt", "535.183.01"),
        ("proc-version-550-aarch64.txt", "550.127.05"),
        ("proc-version-580-open-x86_64.txt", "580.65.06"),
        ("proc-version-590-open-aarch64.txt", "590.48.01"),
        ("proc-version-580-open-x86_64-recorded.txt", "580.159.04"),  # a real H200 machine
    ],
)
def test_parse_proc_driver_version(name: str, expected: str) -> None:
    version = parse_proc_driver_version(fixture(name))
    assert version is not None
    assert version.text == expected


def test_parse_proc_driver_version_ignores_gcc_line() -> None:
    assert parse_proc_driver_version("GCC version:  gcc version 13.3.0 (Ubuntu)\n") is None
    assert parse_proc_driver_version("") is None
    assert parse_proc_driver_version("NVRM version: something unexpected\n") is None


# ------------------------------------------------------------------- nvidia-smi CSV


@pytest.mark.parametrize(
    ("name", "version", "count", "gpu"),
    [
        ("nvidia-smi-csv-535-a100.txt", "535.183.01", 1, ("NVIDIA A100-SXM4-80GB", "8.0", 81920)),
        ("nvidia-smi-csv-550-l4.txt", "550.54.15", 1, ("NVIDIA L4", "8.9", 23034)),
        ("nvidia-smi-csv-570-h100x8.txt", "570.133.20", 8, ("NVIDIA H100 80GB HBM3", "9.0", 81559)),
        (
            "nvidia-smi-csv-580-rtx-pro-6000.txt",
            "580.95.05",
            1,
            ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "12.0", 97887),
        ),
        ("nvidia-smi-csv-590-b200x8.txt", "590.48.01", 8, ("NVIDIA B200", "10.0", 183359)),
        ("nvidia-smi-csv-590-h200.txt", "590.48.01", 1, ("NVIDIA H200", "9.0", 143771)),
        # recorded on a real H200
        ("nvidia-smi-csv-580-h200-recorded.txt", "580.159.04", 1, ("NVIDIA H200", "9.0", 143771)),
    ],
)
def test_parse_nvidia_smi_csv(
    name: str, version: str, count: int, gpu: tuple[str, str, int]
) -> None:
    parsed_version, gpus = parse_nvidia_smi_csv(fixture(name))
    assert parsed_version is not None
    assert parsed_version.text == version
    assert gpus == [GpuInfo(index, *gpu) for index in range(count)]


@pytest.mark.parametrize(
    "name",
    ["nvidia-smi-csv-470-tesla-t4.txt", "nvidia-smi-failed.txt", "nvidia-smi-no-devices.txt"],
)
def test_parse_nvidia_smi_csv_errors_give_nothing(name: str) -> None:
    assert parse_nvidia_smi_csv(fixture(name)) == (None, [])


def test_parse_nvidia_smi_csv_tolerates_not_available_and_spacing() -> None:
    text = (
        "\n"
        "  550.163.01 ,  NVIDIA GH200 480GB ,  9.0 ,   97871 MiB  \n"
        "550.163.01, NVIDIA A100-PCIE-40GB, [N/A], [Not Supported]\n"
        "\n"
        "550.163.01, [N/A], 8.0, 40960\n"
    )
    version, gpus = parse_nvidia_smi_csv(text)
    assert version == dv("550.163.01")
    assert gpus == [
        GpuInfo(0, "NVIDIA GH200 480GB", "9.0", 97871),
        GpuInfo(1, "NVIDIA A100-PCIE-40GB", None, None),
        GpuInfo(2, "unknown", "8.0", 40960),
    ]


def test_parse_nvidia_smi_csv_skips_a_header() -> None:
    text = "driver_version, name, compute_cap, memory.total [MiB]\n590.48.01, NVIDIA H200, 9.0, 143771 MiB\n"
    version, gpus = parse_nvidia_smi_csv(text)
    assert version == dv("590.48.01")
    assert len(gpus) == 1


# ---------------------------------------------------------------- nvidia-smi banner


@pytest.mark.parametrize(
    ("name", "version", "cuda", "gpus"),
    [
        ("nvidia-smi-470-tesla-t4.txt", "470.256.02", "11.4", [("Tesla T4", 15109)]),
        ("nvidia-smi-535-a100.txt", "535.183.01", "12.2", [("NVIDIA A100-SXM4-80GB", 81920)]),
        ("nvidia-smi-550-l4.txt", "550.54.15", "12.4", [("NVIDIA L4", 23034)]),
        (
            "nvidia-smi-580-rtx-pro-6000.txt",
            "580.95.05",
            "13.0",
            [("NVIDIA RTX PRO 6000 Blac...", 97887)],
        ),
        ("nvidia-smi-590-b200x8.txt", "590.48.01", "13.1", [("NVIDIA B200", 183359)] * 8),
        ("nvidia-smi-580-h200-recorded.txt", "580.159.04", "13.0", [("NVIDIA H200", 143771)]),
    ],
)
def test_parse_nvidia_smi_banner(
    name: str, version: str, cuda: str, gpus: list[tuple[str, int]]
) -> None:
    parsed_version, parsed_cuda, parsed_gpus = parse_nvidia_smi_banner(fixture(name))
    assert parsed_version is not None
    assert parsed_version.text == version
    assert str(parsed_cuda) == cuda
    assert [(gpu.name, gpu.memory_mib) for gpu in parsed_gpus] == gpus
    assert [gpu.index for gpu in parsed_gpus] == list(range(len(gpus)))
    assert all(gpu.compute_capability is None for gpu in parsed_gpus)


def test_parse_nvidia_smi_banner_one_line_layouts() -> None:
    for line in (
        "| NVIDIA-SMI 590.48.01    Driver Version: 590.48.01    CUDA Version: 13.1 |",
        "NVIDIA-SMI 550.54.15  Driver Version: 550.54.15  CUDA Version: 12.4",
    ):
        version, cuda, gpus = parse_nvidia_smi_banner(line)
        assert version is not None
        assert cuda is not None
        assert gpus == []
    version, cuda, _ = parse_nvidia_smi_banner("Driver Version: 571.96   CUDA Version: 12.8")
    assert (version, cuda) == (dv("571.96"), CudaVersion(12, 8))


def test_parse_nvidia_smi_banner_windows_row() -> None:
    text = (
        "| NVIDIA-SMI 571.96                 Driver Version: 571.96         CUDA Version: 12.8     |\n"
        "|   0  NVIDIA GeForce RTX 4090      WDDM  |   00000000:01:00.0  On |                  Off |\n"
        "|  0%   41C    P8             19W /  450W |    1203MiB /  24564MiB |      3%      Default |\n"
    )
    version, cuda, gpus = parse_nvidia_smi_banner(text)
    assert version == dv("571.96")
    assert cuda == CudaVersion(12, 8)
    assert gpus == [GpuInfo(0, "NVIDIA GeForce RTX 4090", None, 24564)]


@pytest.mark.parametrize("name", ["nvidia-smi-failed.txt", "nvidia-smi-no-devices.txt"])
def test_parse_nvidia_smi_banner_failures(name: str) -> None:
    assert parse_nvidia_smi_banner(fixture(name)) == (None, None, [])


def test_parse_nvidia_smi_banner_without_cuda() -> None:
    version, cuda, _ = parse_nvidia_smi_banner(
        "| NVIDIA-SMI 590.48.01    Driver Version: 590.48.01    CUDA Version: N/A  |"
    )
    assert version == dv("590.48.01")
    assert cuda is None
