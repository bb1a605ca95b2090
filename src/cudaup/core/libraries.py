"""NVIDIA's libraries beside the toolkit: cuDNN, NCCL, cuSPARSELt, cuTENSOR and NVSHMEM.

They install like toolkit components (``--components nvcc,cudart,cudnn,nccl``) into the
same CUDA_HOME, but they are products of their own, with their own versions, built once
per CUDA major: the build for the toolkit's major is taken, never another.  A component
name may pin the library's own version, as a prefix: ``cudnn==9.27`` is any 9.27.x.

Where each is published (facts in ../shared/reference/nvidia-samples/README.md):

* NVIDIA's redist channel: ``/compute/<product>/redist/redistrib_<label>.json``, the CUDA
  manifest format with one archive per CUDA major nested in each platform
  (``"linux-x86_64": {"cuda12": {…}, "cuda13": {…}}``).  NCCL has an archive tree there
  but no manifest, so on this channel it is refused with the reason, never a file name
  built from a pattern.
* PyPI: one project per CUDA major (``nvidia-cudnn-cu13``), sha256 from the simple API;
  the wheel's tree (``nvidia/cudnn``, ``nvidia/cu13``, ``cutensor``) holds ``include/``
  and ``lib/``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cudaup.errors import UsageError


@dataclass(frozen=True, slots=True)
class Library:
    """One library product and where each channel publishes it."""

    name: str
    title: str
    #: the redist product directory (``/compute/<product>/redist/``); None: no manifest
    product: str | None
    #: the manifest's component keys that make the library (runtime + headers); None:
    #: every component with a build for the platform and CUDA major (no sample was seen)
    redist_components: tuple[str, ...] | None
    #: the PyPI project for a CUDA major, ``{major}`` where the number goes
    pypi_project: str
    #: the directory inside the wheel that is shaped like CUDA_HOME (``include/``, ``lib/``)
    wheel_root: str
    #: toolkit components it needs at run time (cuDNN loads cuBLAS), added on install
    needs: tuple[str, ...] = ()

    def project(self, major: int) -> str:
        return self.pypi_project.format(major=major)

    def variant(self, major: int) -> str:
        """The manifest's key for the build made for CUDA ``major``."""
        return f"cuda{major}"


LIBRARIES: dict[str, Library] = {
    library.name: library
    for library in (
        Library(
            "cudnn", "cuDNN", "cudnn", ("cudnn",), "nvidia-cudnn-cu{major}", "nvidia/cudnn",
            needs=("libcublas",),
        ),
        Library("nccl", "NCCL", None, None, "nvidia-nccl-cu{major}", "nvidia/nccl"),
        Library(
            "cusparselt", "cuSPARSELt", "cusparselt", ("libcusparse_lt",),
            "nvidia-cusparselt-cu{major}", "nvidia/cu{major}",
        ),
        Library(
            "cutensor", "cuTENSOR", "cutensor", ("libcutensor",), "cutensor-cu{major}", "cutensor"
        ),
        Library(
            "nvshmem", "NVSHMEM", "nvshmem", None, "nvidia-nvshmem-cu{major}",
            "nvidia/nvshmem", needs=("cuda_cccl",),
        ),
    )
}  # fmt: skip

#: The shared object that is each library (``libcudnn.so.9``): what the loader looks for.
LIBRARY_SONAMES = {
    "cudnn": "libcudnn",
    "nccl": "libnccl",
    "cusparselt": "libcusparseLt",
    "cutensor": "libcutensor",
    "nvshmem": "libnvshmem_host",
}

_PIN = re.compile(r"^(?P<name>[A-Za-z][A-Za-z0-9_-]*)\s*(?:==\s*(?P<version>\d+(?:\.\d+){0,3}))?$")
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
_VERSION_DIGITS = 12  # a library version part has a few digits; more is not a version


@dataclass(frozen=True, slots=True)
class LibraryRequest:
    """``cudnn`` or ``cudnn==9.27``: a library and, optionally, its own version as a prefix."""

    library: Library
    version: str | None = None

    @property
    def text(self) -> str:
        return self.library.name + (f"=={self.version}" if self.version else "")


def parse_library(text: str) -> LibraryRequest | None:
    """The library a component name asks for, or ``None`` when it names no library
    (then it is a toolkit component).  A malformed pin of a library is exit 2."""
    match = _PIN.match(text.strip())
    leading = _NAME.match(text.strip())
    name = leading.group(0).lower() if leading else ""
    library = LIBRARIES.get(name)
    if library is None:
        if "==" in text:
            raise UsageError(
                f"{text!r}: only libraries take a version "
                f"({', '.join(sorted(LIBRARIES))}); a toolkit component has the release's"
            )
        return None
    if match is None or any(len(part) > _VERSION_DIGITS for part in text.split("==")[1:]):
        raise UsageError(f"{text!r} is not a library pin such as {name}==9.27")
    return LibraryRequest(library, match.group("version"))


def split_libraries(names: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[LibraryRequest, ...]]:
    """Component names → (the toolkit's components, the libraries asked for)."""
    components: list[str] = []
    libraries: dict[str, LibraryRequest] = {}
    for text in names:
        request = parse_library(text)
        if request is None:
            components.append(text)
        elif request.library.name in libraries:
            raise UsageError(f"--components names {request.library.name} twice")
        else:
            libraries[request.library.name] = request
    return tuple(components), tuple(libraries.values())


def version_matches(version: str, pin: str | None) -> bool:
    """Whether a library version (``9.27.0.42``) falls under a prefix pin (``9.27``)."""
    if pin is None:
        return True
    wanted = [int(p) for p in pin.split(".")]
    have = [int(p) for p in re.findall(r"\d+", version)[: len(wanted)]]
    return have == wanted


def cuda_major(release: str) -> int:
    """The CUDA major of a release label (``13.0.1`` → 13)."""
    head = release.split(".", 1)[0]
    if not head.isdigit() or len(head) > 3:
        raise UsageError(f"{release!r} is not a CUDA release")
    return int(head)
