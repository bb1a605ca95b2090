"""cudaup: find, verify, install and switch NVIDIA CUDA toolkits."""

__version__ = "0.1.0"
