"""The upgrade's ``kernels`` step: the new environment still carries kernels for every GPU.

Run on the work tree before the swap.  The GPUs are the driver's (or ``--gpu``'s
targets where no GPU is present; with neither the step is skipped and says so).
Only the distributions the upgrade changes are judged: one it leaves alone keeps
the binaries it had.  A changed CUDA package whose new build runs on none of
them is refused with exit 20 (:class:`~cudaup.errors.GpuUnsupportedError`),
naming the package and the GPU; the upgrade is then undone as for any failed step.
PTX whose JIT cannot be judged (the driver's CUDA version is not known) is named
in the answer, not counted as a kernel.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from packaging.utils import canonicalize_name

from cudaup.binaries.coverage import Gpu, check_coverage, environment_packages
from cudaup.core.compat import CompatTable
from cudaup.core.driver import DriverInfo
from cudaup.core.gpus import parse_gpu
from cudaup.errors import GpuUnsupportedError
from cudaup.machine.doctor import gpus_of
from cudaup.upgrade.environment import Environment


def check_kernels(
    after: Environment, changed: Iterable[str], driver: DriverInfo, asked: Sequence[str]
) -> tuple[str, str]:
    """``(status, detail)`` of the step: ``ok`` or ``skipped``; a GPU left without
    kernels raises :class:`GpuUnsupportedError`."""
    gpus = [Gpu(text, parse_gpu(text)) for text in asked] or gpus_of(driver.gpus)
    if not gpus:
        return "skipped", "no GPU found and no --gpu given: the new kernels were not checked"
    cuda = driver.cuda_version
    if cuda is None and driver.version is not None:
        cuda = CompatTable.load().reported_cuda(driver.version)
    names = {canonicalize_name(n) for n in changed}
    sites = {d.site for d in after.distributions.values()} | {after.purelib}
    packages = [
        p for p in environment_packages(sorted(sites)) if canonicalize_name(p.name) in names
    ]
    results = check_coverage(packages, gpus, (cuda.major, cuda.minor) if cuda else None)
    for result in results:
        for package, reason in result.missing:
            raise GpuUnsupportedError(
                f"the upgrade leaves {result.gpu.label} without kernels: the new {package} "
                f"has {reason}"
            )
    unknown = sorted({f"{p} on {r.gpu.label}" for r in results for p, _ in r.unknown})
    checked = ", ".join(g.label for g in gpus)
    detail = f"{len(packages)} changed CUDA package(s) carry kernels for {checked}"
    return "ok", detail + (
        f"; not known (PTX, driver unknown): {'; '.join(unknown)}" if unknown else ""
    )
