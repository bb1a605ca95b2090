"""``plan --export``: the plan as a PEP 751 ``pylock.toml``, written by uv.

The lock is the plan's own resolution: the same requirements (extras and
markers as asked), the same line constraints and per-line indexes, and every
package of the plan's closure pinned, so uv writes exactly what ``plan``
printed, with the wheels' URLs and hashes.
"""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path

from cudaup.config import Settings
from cudaup.errors import CudaupError, PermissionDeniedError, SourceFormatError
from cudaup.plan.result import PlanResult
from cudaup.plan.uv import UvRunner, write_local_index
from cudaup.util.atomic import atomic_write
from cudaup.util.cachedir import CacheLayout


def export_pylock(result: PlanResult, destination: Path, settings: Settings) -> Path:
    """Write a PEP 751 ``pylock.toml`` of the plan's closure to ``destination``."""
    with tempfile.TemporaryDirectory(prefix="cudaup-export-") as work:
        folder = Path(work)
        indexes = list(result.job.indexes)
        if result.pages:
            local = write_local_index(folder / "line", result.pages, "the plan's per-line indexes")
            indexes = [local, *(i for i in indexes if not i.startswith("file:"))]
        pins = [f"{p.name}=={p.version}" for p in result.closure]
        job = replace(
            result.job, constraints=(*result.job.constraints, *pins), indexes=tuple(indexes)
        )
        lock = folder / "pylock.toml"  # uv insists on this name (or pylock.NAME.toml)
        runner = UvRunner(CacheLayout(settings.cache_root).plan_dir("uv"), folder, settings.timeout)
        answer = runner.compile(job, pylock=lock)
        if not answer.ok or not lock.is_file():
            raise SourceFormatError(
                f"uv could not lock the plan it resolved: {answer.reason or 'no lock written'}"
            )
        text = lock.read_text(encoding="utf-8")
    if "file:" in text:
        # uv names no index in the lock today; a local path in it would be a lie to any reader.
        raise CudaupError("uv's lock names a local path; it was not written")
    try:
        atomic_write(destination, text)
    except PermissionError as exc:
        raise PermissionDeniedError(f"cannot write {destination} ({exc.strerror})") from None
    return destination
