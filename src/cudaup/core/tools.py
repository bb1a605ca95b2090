"""The programs NVIDIA's CUDA toolkits ship in ``bin/``, and the component each comes with.

This is the one list of names cudaup treats as a toolkit's tools: only these get a
shim in ``$CUDAUP_HOME/bin``, and only these are run by a shim, ``cudaup which`` and
``cudaup run`` from a toolkit's ``bin``.  Any other name a toolkit's ``bin`` holds
(``ls``, ``sudo``, ``python3`` from a hostile archive or wheel) is not NVIDIA's, so
it never shadows a system command; ``cudaup install`` names what it skipped.

Checked against real toolkits: a runfile install's ``bin`` (CUDA 12.x and 13.x),
NVIDIA's redist components (``cuda_nvcc``, ``cuda_gdb``, ``nsight_compute`` …) and
PyPI's ``nvidia/cu13/bin`` (``nvidia-cuda-nvcc`` 13.0.88: ``__nvcc_device_query``,
``bin2c``, ``cudafe++``, ``fatbinary``, ``nvcc``, ``nvlink``, ``ptxas``; ``crt/`` and
``nvcc.profile`` are not programs).  ``cuda-uninstaller``, which a runfile install
leaves in ``bin``, is left out on purpose: ``cudaup uninstall`` removes what cudaup
installed, and a shim must never run another toolkit's uninstaller.

Imported by every shim (:mod:`cudaup.switch.shim`), so it imports nothing.
"""

from __future__ import annotations

#: cuda-gdb's per-Python builds (CUDA 12.4 and later): ``cuda-gdb`` picks one at start.
_GDB_PYTHONS = tuple(f"cuda-gdb-python3.{minor}-tui" for minor in range(8, 15))

#: tool → the NVIDIA component that ships it (for "install X to get it").
TOOL_COMPONENTS: dict[str, str] = {
    # the compiler and the programs nvcc runs itself
    "nvcc": "cuda_nvcc",
    "ptxas": "cuda_nvcc",
    "fatbinary": "cuda_nvcc",
    "nvlink": "cuda_nvcc",
    "cudafe++": "cuda_nvcc",
    "bin2c": "cuda_nvcc",
    "__nvcc_device_query": "cuda_nvcc",
    "tileiras": "cuda_tileiras",
    # binary utilities
    "cuobjdump": "cuda_cuobjdump",
    "nvdisasm": "cuda_nvdisasm",
    "cu++filt": "cuda_cuxxfilt",
    "nvprune": "cuda_nvprune",
    # debugging and correctness
    "cuda-gdb": "cuda_gdb",
    "cuda-gdbserver": "cuda_gdb",
    "cuda-gdb-minimal": "cuda_gdb",
    **dict.fromkeys(_GDB_PYTHONS, "cuda_gdb"),
    "compute-sanitizer": "cuda_sanitizer_api",
    # profilers
    "nsys": "nsight_systems",
    "nsys-ui": "nsight_systems",
    "nsight-sys": "nsight_systems",
    "ncu": "nsight_compute",
    "ncu-ui": "nsight_compute",
    "nvprof": "cuda_nvprof",
    "nvvp": "cuda_nvvp",
    "computeprof": "cuda_nvvp",
    # Nsight Eclipse Edition (CUDA 12 and earlier)
    "nsight": "cuda_nsight",
    "nsight_ee_plugins_manage.sh": "cuda_nsight",
}


def is_toolkit_tool(name: str) -> bool:
    """Whether ``name`` is one of the programs NVIDIA's toolkits ship in ``bin/``."""
    return name in TOOL_COMPONENTS
