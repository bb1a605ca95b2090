"""Component names: NVIDIA's redist keys, the friendly aliases users type, PyPI extras.

The friendly aliases are exactly the extras of PyPI's ``cuda-toolkit``
meta-package (``nvcc``, ``cudart``, ``cublas`` …), so one word works on every
channel.  NVIDIA's own names (``cuda_nvcc``, ``libcublas``) are accepted too.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

from cudaup.core.versions import shown
from cudaup.errors import UsageError

#: friendly alias (= cuda-toolkit extra) → NVIDIA redist component key
ALIASES: dict[str, str] = {
    "nvcc": "cuda_nvcc",
    "cudart": "cuda_cudart",
    "cccl": "cuda_cccl",
    "crt": "cuda_crt",
    "nvrtc": "cuda_nvrtc",
    "cupti": "cuda_cupti",
    "nvtx": "cuda_nvtx",
    "nvml": "cuda_nvml_dev",
    "cuxxfilt": "cuda_cuxxfilt",
    "culibos": "cuda_culibos",
    "opencl": "cuda_opencl",
    "profiler_api": "cuda_profiler_api",
    "sanitizer_api": "cuda_sanitizer_api",
    "cuobjdump": "cuda_cuobjdump",
    "nvdisasm": "cuda_nvdisasm",
    "nvprune": "cuda_nvprune",
    "gdb": "cuda_gdb",
    "cublas": "libcublas",
    "cufft": "libcufft",
    "cufile": "libcufile",
    "curand": "libcurand",
    "cusolver": "libcusolver",
    "cusparse": "libcusparse",
    "npp": "libnpp",
    "nvjpeg": "libnvjpeg",
    "nvjitlink": "libnvjitlink",
    "nvfatbin": "libnvfatbin",
    "nvvm": "libnvvm",
    "nvptxcompiler": "libnvptxcompiler",
}
_EXTRA_OF: dict[str, str] = {nvidia: alias for alias, nvidia in ALIASES.items()}
#: PyPI projects whose names do not follow ``nvidia-cuda-X`` → ``cuda_X`` / ``nvidia-X`` → ``libX``.
_PYPI_SPECIAL: dict[str, str] = {
    "cuda-runtime": "cuda_cudart",
    "nvtx": "cuda_nvtx",
    "nvml-dev": "cuda_nvml_dev",
}

#: ... and the other way: such a component → its project's name after ``nvidia-``.
_PYPI_NAME: dict[str, str] = {component: base for base, component in _PYPI_SPECIAL.items()}

#: What a component needs to be useful on its own.  ``nvcc`` brings what compiling
#: everyday code needs: cicc (nvvm) and the crt headers, which ``nvidia-cuda-nvcc`` 13.x
#: itself requires, the cudart headers, and the C++ core libraries (cccl: libcu++,
#: Thrust, CUB), without which ``cuda_fp16.h``, ``<thrust/...>`` and cooperative groups
#: fail on ``nv/target``.  Every ``cuda-toolkit`` release on PyPI (12.x and 13.x) offers
#: a ``cccl`` extra and every redist manifest a ``cuda_cccl``; CUDA 12 has no separate
#: crt and nvvm (they are inside ``cuda_nvcc``).  Only entries a release has are added.
CLOSURE: dict[str, tuple[str, ...]] = {
    "cuda_nvcc": ("cuda_crt", "libnvvm", "cuda_cudart", "cuda_cccl"),
    "libcublas": ("libnvjitlink",),
    "libcusolver": ("libcublas", "libcusparse", "libnvjitlink"),
    "libcusparse": ("libnvjitlink",),
    "libcufft": ("libnvjitlink",),
}

#: ``install --profile`` (rustup's profiles), by friendly alias; ``complete`` is
#: ``--all``.  ``minimal`` compiles and runs CUDA C++ (nvcc brings crt, nvvm and cccl);
#: ``default`` adds what code links against most: runtime compilation (nvrtc), the math
#: libraries (cuBLAS, cuFFT, cuRAND, cuSOLVER, cuSPARSE, and nvJitLink, which cuBLAS,
#: cuFFT and cuSPARSE need at run time) and NVTX's markers.  Left out of ``default``,
#: each for a few users: profilers and debuggers (cupti, gdb, sanitizer), binary tools
#: (cuobjdump, nvdisasm, nvprune), image libraries (npp, nvjpeg), GPUDirect Storage
#: (cufile), OpenCL.  A component a release lacks is left out of a profile and said.
PROFILES: dict[str, tuple[str, ...] | None] = {
    "minimal": ("nvcc", "cudart"),
    "default": (
        "nvcc", "cudart", "cccl", "nvrtc", "cublas", "cufft", "curand", "cusolver",
        "cusparse", "nvjitlink", "nvtx",
    ),
    "complete": None,
}  # fmt: skip
DEFAULT_PROFILE = "default"


def check_profile(name: str, where: str) -> str:
    """``name`` if it is a profile, else :class:`UsageError` naming ``where`` it came from."""
    if name not in PROFILES:
        raise UsageError(
            f"{where} names no profile {name!r}; the profiles are {', '.join(PROFILES)}"
        )
    return name


#: Tools without which a component is not what its name promises: an install whose
#: ``cuda_nvcc`` has no ``bin/nvcc`` (PyPI's CUDA 12 nvcc wheels hold only ptxas) is
#: refused rather than published as a toolkit that cannot compile.  (Which component
#: ships each tool is :data:`cudaup.core.tools.TOOL_COMPONENTS`.)
REQUIRED_TOOLS: dict[str, tuple[str, ...]] = {"cuda_nvcc": ("nvcc",)}


def with_closure(names: Iterable[str], available: Iterable[str]) -> list[str]:
    """NVIDIA names plus what each needs, keeping only what ``available`` has."""
    have = set(available)
    result: list[str] = []
    pending = [nvidia_name(n) for n in names]
    while pending:
        name = pending.pop(0)
        if name in result:
            continue
        result.append(name)
        pending += [dep for dep in CLOSURE.get(name, ()) if dep in have and dep not in result]
    return result


def split_components(text: str | None) -> tuple[str, ...] | None:
    """``"nvcc, cudart"`` → ``("nvcc", "cudart")``; ``None`` when not given."""
    if text is None:
        return None
    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    if not names:
        raise UsageError("--components is empty; name at least one component (e.g. nvcc,cudart)")
    return names


def nvidia_name(name: str) -> str:
    """NVIDIA's key for an alias or an NVIDIA name (``nvcc`` → ``cuda_nvcc``)."""
    key = name.strip().lower().replace("-", "_")
    return ALIASES.get(key, key)


def pypi_extra(name: str) -> str:
    """The ``cuda-toolkit`` extra for an alias or NVIDIA name (``cuda_nvcc`` → ``nvcc``)."""
    key = nvidia_name(name)
    return _EXTRA_OF.get(key, key)


def component_of_project(project: str) -> str:
    """NVIDIA's component key for a component wheel (``nvidia-cuda-runtime-cu12`` → ``cuda_cudart``)."""
    base = re.sub(r"-cu\d+$", "", project.lower().replace("_", "-"))
    base = base.removeprefix("nvidia-")
    if base in _PYPI_SPECIAL:
        return _PYPI_SPECIAL[base]
    if base.startswith("cuda-"):
        return base.replace("-", "_")
    return "lib" + base.replace("-", "_")


def pypi_project(name: str, major: int) -> str:
    """The PyPI project of a component's wheel for CUDA ``major``, by PyPI's naming
    (``cudart``, 13 → ``nvidia-cuda-runtime``; 12 → ``nvidia-cuda-runtime-cu12``): the
    inverse of :func:`component_of_project`.  Only a forecast, for reading a page ahead:
    which project a release pins is what its ``cuda-toolkit`` metadata says."""
    key = nvidia_name(name)
    base = _PYPI_NAME.get(key) or (
        key.replace("_", "-")
        if key.startswith("cuda_")
        else key.removeprefix("lib").replace("_", "-")
    )
    return f"nvidia-{base}" + (f"-cu{major}" if major < 13 else "")


def unknown_component(name: str, available: Iterable[str], where: str) -> UsageError:
    options = sorted(set(available))
    close = difflib.get_close_matches(name[:200], options, n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return UsageError(
        f"{where} has no component {shown(name)}{hint} (available: {', '.join(options)})"
    )
