"""``cudaup plan`` against local PEP 503/691 indexes on loopback, and live PyPI."""

from __future__ import annotations

import io
import json
import tomllib
import zipfile
from pathlib import Path

import pytest

from cudaup.config import Settings
from cudaup.core.compat import CompatTable
from cudaup.core.driver import DriverVersion, GpuInfo
from cudaup.core.platforms import Platform, wheel_fits
from cudaup.errors import NoCommonLineError, UsageError
from cudaup.plan.choice import (
    parse_requirements,
    requirement_signals,
    tag_line,
)
from cudaup.plan.indexes import Index, load_indexes, select_indexes
from cudaup.plan.offers import Planner, Target
from tests.faultserver import FaultServer
from tests.helpers import run_cli

PY312 = (3, 12)


def make_wheel(
    name: str, version: str, requires: list[str], *, extras: tuple[str, ...] = (), pad: int = 0
) -> bytes:
    buffer = io.BytesIO()
    dist = f"{name.replace('-', '_')}-{version}.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    metadata += "".join(f"Provides-Extra: {e}\n" for e in extras)
    metadata += "".join(f"Requires-Dist: {r}\n" for r in requires)
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        if pad:
            archive.writestr(f"{name.replace('-', '_')}/_blob.bin", b"\0" * pad)
        archive.writestr(f"{dist}/METADATA", metadata)
        archive.writestr(f"{dist}/WHEEL", "Wheel-Version: 1.0\n")
    return buffer.getvalue()


class LocalIndex:
    """Serves projects as PEP 691 JSON or PEP 503 HTML pages, with or without PEP 658 files."""

    def __init__(self, server: FaultServer, root: str, *, html: bool = False) -> None:
        self.server, self.root, self.html = server, root, html
        self.pages: dict[str, list[dict[str, object]]] = {}

    @property
    def url(self) -> str:
        return self.server.url + self.root

    def add(
        self,
        project: str,
        filename: str,
        body: bytes,
        *,
        yanked: bool = False,
        pep658: bool = True,
        metadata: str | None = None,
    ) -> None:
        path = f"{self.root}/files/{filename}"
        self.server.add(path, body)
        if pep658:
            text = (
                metadata
                if metadata is not None
                else zipfile.ZipFile(io.BytesIO(body))
                .read(
                    next(
                        n
                        for n in zipfile.ZipFile(io.BytesIO(body)).namelist()
                        if n.endswith("METADATA")
                    )
                )
                .decode()
            )
            self.server.add(path + ".metadata", text.encode())
        entry = {
            "filename": filename,
            "url": path,
            "yanked": yanked,
            "core-metadata": pep658,
            "size": len(body),
            "hashes": {},
        }
        self.pages.setdefault(project, []).append(entry)
        self._publish(project)

    def _publish(self, project: str) -> None:
        entries = self.pages[project]
        if self.html:
            links = "".join(
                f'<a href="{e["url"]}"{" data-yanked" if e["yanked"] else ""}{" data-core-metadata=true" if e["core-metadata"] else ""}>{e["filename"]}</a>\n'
                for e in entries
            )
            body = f"<html><body>{links}</body></html>".encode()
        else:
            body = json.dumps(
                {"meta": {"api-version": "1.1"}, "name": project, "files": entries}
            ).encode()
        self.server.add(f"{self.root}/{project}/", body)


@pytest.fixture
def indexes(fault_server: FaultServer) -> tuple[LocalIndex, LocalIndex, LocalIndex]:
    pypi = LocalIndex(fault_server, "/pypi")
    cu128 = LocalIndex(fault_server, "/torch-cu128", html=True)
    cu130 = LocalIndex(fault_server, "/torch-cu130", html=True)
    # torch: PyPI default build pins CUDA 13.0 (cuda-toolkit==13.0.2); per-line indexes carry +cuXYZ builds
    pypi.add(
        "torch",
        "torch-2.11.0-cp312-cp312-manylinux_2_28_x86_64.whl",
        make_wheel(
            "torch",
            "2.11.0",
            ["cuda-toolkit[cudart,cublas]==13.0.2; platform_system == 'Linux'", "filelock"],
        ),
    )
    pypi.add(
        "torch",
        "torch-2.9.1-cp312-cp312-manylinux_2_28_x86_64.whl",
        make_wheel(
            "torch",
            "2.9.1",
            [
                "nvidia-cuda-runtime-cu12==12.8.90; platform_system == 'Linux' and platform_machine == 'x86_64'"
            ],
        ),
    )
    pypi.add(
        "torch",
        "torch-2.12.0-cp312-cp312-manylinux_2_28_aarch64.whl",
        make_wheel("torch", "2.12.0", []),
    )  # wrong platform
    pypi.add(
        "torch",
        "torch-2.13.0-cp312-cp312-manylinux_2_28_x86_64.whl",
        make_wheel("torch", "2.13.0", []),
        yanked=True,
    )
    cu128.add(
        "torch",
        "torch-2.11.0+cu128-cp312-cp312-manylinux_2_28_x86_64.whl",
        make_wheel("torch", "2.11.0+cu128", []),
    )
    cu130.add(
        "torch",
        "torch-2.11.0+cu130-cp312-cp312-manylinux_2_28_x86_64.whl",
        make_wheel("torch", "2.11.0+cu130", []),
    )
    # sgl-kernel: abi3 wheels; cu128 only up to an old version, cu130 newer; PyPI default has no CUDA signal
    cu128.add(
        "sgl-kernel",
        "sgl_kernel-0.3.14.post1+cu128-cp310-abi3-manylinux2014_x86_64.whl",
        make_wheel("sgl-kernel", "0.3.14.post1+cu128", []),
    )
    cu130.add(
        "sgl-kernel",
        "sgl_kernel-0.3.21+cu130-cp310-abi3-manylinux2014_x86_64.whl",
        make_wheel("sgl-kernel", "0.3.21+cu130", []),
    )
    pypi.add(
        "sgl-kernel",
        "sgl_kernel-0.3.21-cp310-abi3-manylinux2014_x86_64.whl",
        make_wheel("sgl-kernel", "0.3.21", ["torch"]),
    )
    # cupy-cuda13x: the name says the major; flashinfer-python: pure Python, no signal
    pypi.add(
        "cupy-cuda13x",
        "cupy_cuda13x-14.0.0-cp312-cp312-manylinux2014_x86_64.whl",
        make_wheel("cupy-cuda13x", "14.0.0", ["numpy"]),
    )
    pypi.add(
        "flashinfer-python",
        "flashinfer_python-0.6.4-py3-none-any.whl",
        make_wheel("flashinfer-python", "0.6.4", ["torch"]),
    )
    # jax: pure Python with cuda12/cuda13 extras that pull the plugins
    pypi.add(
        "jax",
        "jax-0.8.0-py3-none-any.whl",
        make_wheel(
            "jax",
            "0.8.0",
            [
                'jax-cuda12-plugin[with-cuda]==0.8.0; extra == "cuda12"',
                'jax-cuda13-plugin[with-cuda]==0.8.0; extra == "cuda13"',
            ],
            extras=("cuda12", "cuda13"),
        ),
    )
    # a big wheel without PEP 658: metadata must come from range reads
    pypi.add(
        "bigwheel",
        "bigwheel-1.0-py3-none-manylinux_2_17_x86_64.whl",
        make_wheel("bigwheel", "1.0", ["nvidia-cuda-runtime-cu12==12.6.77"], pad=6 * 1024 * 1024),
        pep658=False,
    )
    return pypi, cu128, cu130


def local_indexes(pypi: LocalIndex, cu128: LocalIndex, cu130: LocalIndex) -> dict[str, Index]:
    return {
        "pypi": Index("pypi", {"": pypi.url}, ("*",)),
        "pytorch": Index("pytorch", {"cu128": cu128.url, "cu130": cu130.url}, ("torch",)),
        "sglang": Index("sglang", {"cu128": cu128.url, "cu130": cu130.url}, ("sgl-kernel",)),
    }


def plan(
    tmp_path: Path,
    indexes: dict[str, Index],
    packages: list[str],
    driver: str | None = "590.48.01",
    gpus: tuple[GpuInfo, ...] = (),
) -> object:
    target = Target(
        PY312, "linux-x86_64", DriverVersion.from_text(driver) if driver else None, None, gpus
    )
    planner = Planner(Settings.from_env(cache_dir=tmp_path / "cache"))
    return planner.plan(parse_requirements(packages), indexes, target)


def test_the_real_upgrade_case(
    tmp_path: Path, indexes: tuple[LocalIndex, LocalIndex, LocalIndex]
) -> None:
    result = plan(tmp_path, local_indexes(*indexes), ["torch", "sgl-kernel", "flashinfer-python"])
    choice = result.choice  # type: ignore[attr-defined]
    assert choice.line == (13, 0) and choice.release == "13.0.2"
    assert choice.release_reason == "torch 2.11.0 pins cuda-toolkit==13.0.2"
    assert choice.picks["sgl-kernel"].version == "0.3.21+cu130"
    packages = {p.project: p for p in result.packages}  # type: ignore[attr-defined]
    assert "no CUDA signal" in (packages["flashinfer-python"].note or "")
    assert result.pins() == ["torch==2.11.0", "sgl-kernel==0.3.21+cu130", "flashinfer-python"]  # type: ignore[attr-defined]
    assert result.extra_index_urls() == [indexes[2].url]  # type: ignore[attr-defined]


def test_exclusions_are_explained(
    tmp_path: Path, indexes: tuple[LocalIndex, LocalIndex, LocalIndex]
) -> None:
    result = plan(
        tmp_path, local_indexes(*indexes), ["torch==2.11.0", "sgl-kernel"], driver="575.57.08"
    )
    choice = result.choice  # type: ignore[attr-defined]
    assert choice.line == (12, 8) and choice.release == "12.8.2"
    assert any(e.startswith("13.0: driver 575.57.08 cannot run it") for e in choice.excluded)
    assert choice.picks["sgl-kernel"].version == "0.3.14.post1+cu128"


def test_missing_line_and_no_common_line(
    tmp_path: Path, indexes: tuple[LocalIndex, LocalIndex, LocalIndex]
) -> None:
    with pytest.raises(NoCommonLineError, match=r"13\.0: driver 570\.124\.06 cannot run it"):
        plan(
            tmp_path,
            {"pypi": local_indexes(*indexes)["pypi"]},
            ["torch==2.11.0"],
            driver="570.124.06",
        )
    result = plan(tmp_path, local_indexes(*indexes), ["torch==2.11.0", "cupy-cuda13x"])
    assert result.choice.line == (13, 0)  # type: ignore[attr-defined]
    assert any(e.startswith("13.4: torch publishes no cu134") for e in result.choice.excluded)  # type: ignore[attr-defined]


def test_signals_from_metadata_names_and_extras(
    tmp_path: Path, indexes: tuple[LocalIndex, LocalIndex, LocalIndex]
) -> None:
    pypi_only = {"pypi": local_indexes(*indexes)["pypi"]}
    assert plan(tmp_path, pypi_only, ["torch==2.9.1"]).choice.line == (12, 8)  # type: ignore[attr-defined]
    cupy = plan(tmp_path, pypi_only, ["cupy-cuda13x"]).choice  # type: ignore[attr-defined]
    assert cupy.line[0] == 13 and any("minor-version" in n for n in cupy.notes)
    jax12 = plan(tmp_path, pypi_only, ["jax[cuda12]"], driver="570.124.06").choice  # type: ignore[attr-defined]
    assert jax12.line[0] == 12
    jax_any = plan(tmp_path, pypi_only, ["jax"]).choice  # type: ignore[attr-defined]
    assert jax_any.line[0] == 13  # both extras offered: the newest line the driver runs


def test_range_reads_instead_of_downloading(
    fault_server: FaultServer, tmp_path: Path, indexes: tuple[LocalIndex, LocalIndex, LocalIndex]
) -> None:
    result = plan(tmp_path, {"pypi": local_indexes(*indexes)["pypi"]}, ["bigwheel"])
    assert result.choice.line == (12, 6)  # type: ignore[attr-defined]
    wheel = [
        r
        for r in fault_server.requests()
        if r.path.endswith("bigwheel-1.0-py3-none-manylinux_2_17_x86_64.whl")
    ]
    assert wheel and all(r.range for r in wheel)
    read = fault_server.sent(path=wheel[0].path)
    assert read < 300 * 1024  # the central directory, not the 6 MiB wheel


def test_gpus_and_no_driver(
    tmp_path: Path, indexes: tuple[LocalIndex, LocalIndex, LocalIndex]
) -> None:
    volta = (GpuInfo(0, "Tesla V100-SXM2-32GB", "7.0", 32768),)
    result = plan(tmp_path, local_indexes(*indexes), ["torch"], gpus=volta)
    assert result.choice.line == (12, 8)  # type: ignore[attr-defined]
    assert any("cannot target GPU Tesla V100" in e for e in result.choice.excluded)  # type: ignore[attr-defined]
    blind = plan(tmp_path, local_indexes(*indexes), ["torch"], driver=None)
    assert any("planned by the packages alone" in n for n in blind.choice.notes)  # type: ignore[attr-defined]


def test_unreachable_index_is_reported_not_empty(
    tmp_path: Path, indexes: tuple[LocalIndex, LocalIndex, LocalIndex]
) -> None:
    table = local_indexes(*indexes)
    table["pytorch"] = Index(
        "pytorch", {"cu130": "http://127.0.0.1:9/whl/cu130", "cu128": indexes[1].url}, ("torch",)
    )
    result = plan(tmp_path, table, ["torch"])
    assert [u["index"] for u in result.unreachable] == ["pytorch"]  # type: ignore[attr-defined]
    assert result.choice.line == (13, 0)  # type: ignore[attr-defined]  # from PyPI's default build
    assert any("could not check pytorch" in n for n in result.choice.notes)  # type: ignore[attr-defined]


def test_tags_and_index_table() -> None:
    def fits(name: str, platform: Platform = "linux-x86_64") -> bool:
        return wheel_fits(name, platform, PY312)

    assert fits("sgl_kernel-0.3.21+cu130-cp310-abi3-manylinux2014_x86_64.whl")
    assert fits("x-1.0-cp312-cp312-manylinux_2_28_x86_64.whl")
    assert not fits("x-1.0-cp313-cp313-manylinux_2_28_x86_64.whl")
    assert not fits("x-1.0-cp312-cp312-manylinux_2_28_aarch64.whl")
    assert not fits("x-1.0-cp312-cp312-manylinux_2_41_x86_64.whl")
    assert fits("x-1.0-cp312-cp312-win_amd64.whl", "windows-x86_64")
    assert (
        tag_line("cu130") == (13, 0) and tag_line("cu92") == (9, 2) and tag_line("rocm6.2") is None
    )
    table = load_indexes()
    assert table["pytorch"].urls["cu130"] == "https://download.pytorch.org/whl/cu130"
    assert table["sglang"].serves("sgl_kernel") and not table["sglang"].serves("torch")
    assert list(select_indexes(table, ["pypi", "https://example.org/simple"])) == [
        "pypi",
        "https://example.org/simple",
    ]
    with pytest.raises(UsageError, match="unknown index 'pytroch'"):
        select_indexes(table, ["pytroch"])


def test_user_index_file_extends_the_table(tmp_path: Path) -> None:
    extra = tmp_path / "indexes.toml"
    extra.write_text(
        '[indexes.mirror]\nprojects = ["torch"]\n[indexes.mirror.urls]\ncu130 = "https://mirror.example/cu130/"\n'
    )
    table = load_indexes(extra)
    assert table["mirror"].urls == {"cu130": "https://mirror.example/cu130"} and "pytorch" in table


def test_requirement_signals() -> None:
    from packaging.requirements import Requirement

    from cudaup.core.platforms import marker_environment

    env = marker_environment("linux-x86_64", PY312)
    found = requirement_signals(
        [
            Requirement("cuda-toolkit[cudart]==13.0.2"),
            Requirement("nvidia-cuda-runtime-cu12==12.8.90; platform_system == 'Windows'"),
            Requirement("nvidia-cudnn-cu13"),
        ],
        env,
        [],
    )
    assert [(line, exact) for line, exact, _ in found] == [
        ((13, 0), "13.0.2")
    ]  # the specific signal wins
    majors = requirement_signals(
        [Requirement("nvidia-cudnn-cu13"), Requirement("nvidia-nccl-cu13")], env, []
    )
    assert [line for line, _, _ in majors] == [(13, -1)]
    per_extra = requirement_signals(
        [
            Requirement('jax-cuda12-plugin==0.8; extra == "cuda12"'),
            Requirement('jax-cuda13-plugin==0.8; extra == "cuda13"'),
        ],
        env,
        ["cuda12", "cuda13"],
    )
    assert [line for line, _, _ in per_extra] == [(12, -1), (13, -1)]


def test_known_lines_include_the_newest() -> None:
    from cudaup.plan.choice import known_lines

    assert (13, 0) in known_lines(CompatTable.load())


# -- live PyPI -----------------------------------------------------------------------------
@pytest.mark.pypi
@pytest.mark.parametrize(
    ("packages", "driver", "line", "release"),
    [
        (["torch==2.9.1"], "590.48.01", "12.8", None),
        (["torch==2.11.0"], "590.48.01", "13.0", "13.0.2"),
        (["cupy-cuda13x"], "590.48.01", "13.", None),
    ],
)
def test_live_pypi(
    capsys: pytest.CaptureFixture[str],
    packages: list[str],
    driver: str,
    line: str,
    release: str | None,
) -> None:
    result = run_cli(
        capsys,
        "plan",
        *packages,
        "--index",
        "pypi",
        "--driver",
        driver,
        "--python",
        "3.12",
        "--platform",
        "linux-x86_64",
        "--json",
    )
    assert result.code == 0, result.err
    document = result.json()
    assert document["cuda_line"].startswith(line)
    if release:
        assert (
            document["release"] == release
            and "pins cuda-toolkit==13.0.2" in document["release_reason"]
        )


@pytest.mark.pypi
def test_live_pypi_refused_with_the_reason(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_cli(
        capsys,
        "plan",
        "torch==2.11.0",
        "--index",
        "pypi",
        "--driver",
        "570.124.06",
        "--python",
        "3.12",
        "--platform",
        "linux-x86_64",
    )
    assert result.code == 13
    assert "13.0: driver 570.124.06 cannot run it" in result.err


@pytest.mark.pypi
def test_live_pypi_export_pylock(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    lock = tmp_path / "pylock.toml"
    result = run_cli(
        capsys,
        "plan",
        "cupy-cuda13x",
        "--index",
        "pypi",
        "--driver",
        "590.48.01",
        "--python",
        "3.12",
        "--platform",
        "linux-x86_64",
        "--export",
        str(lock),
    )
    assert result.code == 0, result.err
    document = tomllib.loads(lock.read_text())
    assert document["lock-version"] == "1.0"
    names = {p["name"] for p in document["packages"]}
    assert {"cupy-cuda13x", "numpy"} <= names
    for package in document["packages"]:
        for wheel in package.get("wheels", []):
            assert len(wheel["hashes"]["sha256"]) == 64
