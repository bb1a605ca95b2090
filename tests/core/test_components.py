"""PyPI's names for component wheels, forecast from a component and a CUDA major."""

from __future__ import annotations

import pytest

from cudaup.core.components import ALIASES, component_of_project, pypi_project


@pytest.mark.parametrize(
    ("component", "major", "project"),
    [
        ("nvcc", 13, "nvidia-cuda-nvcc"),
        ("cuda_cudart", 13, "nvidia-cuda-runtime"),
        ("cudart", 12, "nvidia-cuda-runtime-cu12"),
        ("nvvm", 13, "nvidia-nvvm"),
        ("libcublas", 12, "nvidia-cublas-cu12"),
        ("nvml", 13, "nvidia-nvml-dev"),
        ("nvtx", 11, "nvidia-nvtx-cu11"),
    ],
)
def test_the_forecast_follows_pypis_naming(component: str, major: int, project: str) -> None:
    assert pypi_project(component, major) == project


@pytest.mark.parametrize("major", [11, 12, 13, 14])
def test_every_component_forecast_is_read_back_as_itself(major: int) -> None:
    for component in set(ALIASES.values()):
        assert component_of_project(pypi_project(component, major)) == component
