"""``plan --gpu``: whether the planned wheels, as published, carry kernels for the GPUs.

For each package of the plan's closure, the wheel an installer would pick for the
target is read by range requests (:func:`cudaup.binaries.remote.read_remote_wheel`:
its directory, then only the members that can hold device code), and the rule of
:mod:`cudaup.core.gpus` is applied.  Pure wheels carry no kernels and are not judged.
A wheel larger than :data:`MAX_WHEEL` is not read, and an index or a wheel that cannot
be read is named: "not read" is an answer, never "covered".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from cudaup.binaries.coverage import Gpu, check_coverage
from cudaup.binaries.remote import read_remote_wheel
from cudaup.errors import CudaupError
from cudaup.net.http import HttpClient
from cudaup.plan.result import PlanResult
from cudaup.plan.survey import best_wheel, is_pure
from cudaup.resolve.pypi import PackageIndex

Status = Literal["covered", "missing", "unknown", "not-read"]
#: the largest wheel ``--gpu`` reads (its binaries are read whole, compressed)
MAX_WHEEL = 256 << 20


@dataclass(frozen=True, slots=True)
class WheelKernels:
    package: str
    status: Status
    detail: str
    bytes_read: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "package": self.package,
            "status": self.status,
            "detail": self.detail,
            "bytes_read": self.bytes_read,
        }


def published_kernels(
    result: PlanResult, http: HttpClient, default_index: str, gpus: Sequence[Gpu]
) -> list[WheelKernels]:
    """Per package of the plan and GPU, what its published wheel carries."""
    answers: list[WheelKernels] = []
    if not gpus:
        return answers
    cuda = result.target.reported
    driver_cuda = (cuda.major, cuda.minor) if cuda else None
    for resolved in sorted(result.closure, key=lambda r: r.name):
        name = resolved.name
        try:
            files = result.pages.get(name) or tuple(
                PackageIndex(http, resolved.index_url or default_index).files(name)
            )
        except CudaupError as exc:
            answers.append(WheelKernels(name, "not-read", f"its index could not be read: {exc}"))
            continue
        wheel = best_wheel(files, resolved.version, result.target.python, result.target.platform)
        if wheel is None:
            answers.append(WheelKernels(name, "not-read", f"no wheel of {resolved} for the target"))
            continue
        if is_pure(wheel):
            continue
        if wheel.size is not None and wheel.size > MAX_WHEEL:
            answers.append(
                WheelKernels(
                    name,
                    "not-read",
                    f"{wheel.filename} is {wheel.size >> 20} MiB, more than --gpu reads",
                )
            )
            continue
        try:
            package = read_remote_wheel(http, wheel.url)
        except CudaupError as exc:
            answers.append(WheelKernels(name, "not-read", f"{wheel.filename}: {exc}"))
            continue
        if not package.files:
            continue  # no device code: not a CUDA package
        for coverage in check_coverage([package], gpus, driver_cuda):
            label = coverage.gpu.label
            status: Status
            if coverage.covered:
                status, detail = "covered", f"{wheel.filename} carries kernels for {label}"
            elif coverage.missing:
                status, detail = "missing", f"{label}: {coverage.missing[0][1]}"
            else:
                status, detail = "unknown", f"{label}: {coverage.unknown[0][1]}"
            answers.append(WheelKernels(name, status, detail, package.read))
    return answers
