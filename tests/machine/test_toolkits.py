"""Toolkit discovery on fake machines under a temporary system root."""

from __future__ import annotations

from pathlib import Path

from cudaup.core.identify import shipped_table
from cudaup.machine.sysroot import SystemRoot
from cudaup.machine.toolkits import Lookup, Toolkit, find_toolkits, parse_nvcc_version
from tests import fakemachine as fm


def lookup(root: Path, env: dict[str, str] | None = None, python: str | None = None) -> Lookup:
    return Lookup(
        root=SystemRoot(root),
        env={"PATH": "", **(env or {})},
        python=python or str(root / "no-python"),
        store=root / "store" / "toolkits",
    )


def by_path(toolkits: list[Toolkit]) -> dict[str, Toolkit]:
    return {t.path: t for t in toolkits}


def test_runfile_toolkit_is_identified_as_a_range(tmp_path: Path) -> None:
    fm.runfile_13_0(tmp_path)
    fm.link(tmp_path, "/usr/local/cuda", "/usr/local/cuda-13.0")
    found = by_path(find_toolkits(lookup(tmp_path)))
    toolkit = found["/usr/local/cuda-13.0"]
    assert toolkit.found_via == ["/usr/local/cuda", "/usr/local/cuda-*"]
    assert toolkit.owner == "runfile installer"
    assert toolkit.components == {"cuda_nvcc": "13.0.88", "cuda_cudart": "13.0.96"}
    assert toolkit.declared == "13.0.20251002"  # date-based: never shown as the release
    assert toolkit.identity.describe() == "13.0.2 or 13.0.3"
    assert toolkit.link is not None and toolkit.link["exists"] and not toolkit.link["alternatives"]


def test_deb_owned_toolkit_with_alternatives(tmp_path: Path) -> None:
    fm.deb_12_4_with_alternatives(tmp_path)
    [toolkit] = find_toolkits(lookup(tmp_path))
    assert toolkit.path == "/usr/local/cuda-12.4"
    assert set(toolkit.found_via) == {"/usr/local/cuda", "/usr/local/cuda-*", "dpkg"}
    assert toolkit.owner == "dpkg: cuda-toolkit-12-4 12.4.1-1"
    assert toolkit.link is not None and toolkit.link["alternatives"] is True
    assert toolkit.link["resolves_to"] == "/usr/local/cuda-12.4"
    assert toolkit.identity.exact == "12.4.1"


def test_dangling_usr_local_cuda(tmp_path: Path) -> None:
    fm.link(tmp_path, "/usr/local/cuda", "/usr/local/cuda-11.8")
    [toolkit] = find_toolkits(lookup(tmp_path))
    assert toolkit.found_via == ["/usr/local/cuda (dangling)"]
    assert toolkit.link is not None and toolkit.link["exists"] is False


def test_pip_cu13_and_cu12_wheels(tmp_path: Path) -> None:
    site = fm.site_packages(
        tmp_path / "venv",
        cu13={
            "nvidia-cuda-nvcc": "13.0.88",
            "nvidia-cuda-runtime": "13.0.88",
            "nvidia-cudnn-cu13": "9.13.0.50",
        },
        cu12={"nvidia-cuda-runtime-cu12": "12.8.90", "nvidia-cuda-nvrtc-cu12": "12.8.93"},
    )
    python = fm.fake_python(tmp_path / "venv/bin/python3", [site])
    found = by_path(find_toolkits(lookup(tmp_path, python=str(python))))
    cu13 = found[str(site / "nvidia/cu13")]
    assert cu13.layout == "pip-cu13" and cu13.owner == f"pip: {python}"
    assert cu13.identity.exact == "13.0.1"  # nvcc and cudart 13.0.88 only in 13.0.1
    cu12 = found[str(site / "nvidia")]
    assert cu12.layout == "pip-cu12" and cu12.components["cuda_cudart"] == "12.8.90"
    assert cu12.identity.line == "12.8"


def test_conda_env_store_hpc_sdk_and_environment(tmp_path: Path) -> None:
    env_prefix = fm.conda_env(
        tmp_path / "conda/envs/ml",
        {"cuda-nvcc": "12.6.77", "cuda-cudart": "12.6.77", "cuda-version": "12.6"},
    )
    fm.toolkit_tree(tmp_path / "store/toolkits/12.8.1", nvcc="12.8.93", cudart="12.8.90")
    fm.toolkit_tree(
        tmp_path / "opt/nvidia/hpc_sdk/Linux_x86_64/25.7/cuda/12.9",
        nvcc="12.9.86",
        cudart="12.9.79",
    )
    home = fm.toolkit_tree(tmp_path / "elsewhere/cuda", nvcc="12.6.85", cudart="12.6.77")
    found = by_path(
        find_toolkits(
            lookup(
                tmp_path,
                env={
                    "CONDA_PREFIX": str(env_prefix),
                    "CUDA_HOME": str(home),
                    "PATH": str(home / "bin"),
                },
            )
        )
    )
    conda = found[str(env_prefix)]
    assert conda.found_via == ["conda (ml)"] and conda.declared == "12.6"
    assert conda.identity.line == "12.6"
    store = found[str(tmp_path / "store/toolkits/12.8.1")]
    assert store.owner == "cudaup" and store.identity.line == "12.8"
    hpc = found["/opt/nvidia/hpc_sdk/Linux_x86_64/25.7/cuda/12.9"]
    assert hpc.owner == "NVIDIA HPC SDK"
    assert found[str(home)].found_via == ["CUDA_HOME", "nvcc on PATH"]


def test_unreadable_and_broken_trees_do_not_raise(tmp_path: Path) -> None:
    broken = tmp_path / "usr/local/cuda-12.1"
    fm.write(broken / "version.json", "{not json")
    fm.write(broken / "bin/nvcc", "#!/bin/sh\nexit 3\n", 0o755)
    [toolkit] = find_toolkits(lookup(tmp_path))
    assert toolkit.components == {} and toolkit.identity.describe() == "unknown release"


def test_nvcc_banner() -> None:
    assert parse_nvcc_version(fm.NVCC_BANNER.format(line="13.0", version="13.0.88")) == (
        "13.0",
        "13.0.88",
    )
    assert parse_nvcc_version("garbage") is None


def test_this_machine_reports_without_error() -> None:
    import os

    toolkits = find_toolkits(Lookup(root=SystemRoot(), env=dict(os.environ)), shipped_table())
    for toolkit in toolkits:
        assert toolkit.to_json()["path"]
    if Path("/usr/local/cuda/bin/nvcc").exists():  # this machine: CUDA 13.0 assembled from wheels
        cuda = next(t for t in toolkits if "/usr/local/cuda" in t.found_via)
        assert cuda.components.get("cuda_nvcc", "").startswith("13.0.")


def test_nvcc_wrapper_script_and_wheel_records(tmp_path: Path) -> None:
    """This machine's case: /usr/local/bin/nvcc is `exec .../cuda-13.0/bin/nvcc "$@"`, and the
    toolkit assembled from wheels keeps their dist-info records."""
    tree = fm.toolkit_tree(tmp_path / "opt/cuda-13.0", nvcc="13.0.88", cudart=None, header="13.0")
    fm.write(tree / "lib64/libcudart.so.13", "ELF")  # no full version in the file name
    for record in (
        "nvidia_cuda_nvcc-13.0.88",
        "nvidia_cuda_runtime-13.0.96",
        "nvidia_cuda_cccl-13.0.85",
    ):
        fm.write(tree / "dist-info" / f"{record}.dist-info" / "METADATA", "")
    wrapper = fm.write(
        tmp_path / "usr/local/bin/nvcc", f'#!/bin/sh\nexec {tree}/bin/nvcc "$@"\n', 0o755
    )
    (tmp_path / "usr/local/include").mkdir(parents=True)
    [toolkit] = find_toolkits(lookup(tmp_path, env={"PATH": str(wrapper.parent)}))
    assert toolkit.real == tree and toolkit.found_via == ["nvcc on PATH"]
    assert (
        toolkit.components["cuda_cudart"] == "13.0.96"
        and toolkit.components["cuda_cccl"] == "13.0.85"
    )
    assert toolkit.identity.describe() == "13.0.2 or 13.0.3"
