"""``install --lock``: exactly what a lock names for this platform, no decisions."""

from __future__ import annotations

from pathlib import Path

from cudaup.config import Settings
from cudaup.core.model import Release, Resolution
from cudaup.core.platforms import is_linux
from cudaup.download import Progress
from cudaup.errors import UsageError
from cudaup.fleet.lockfile import mirror_url, read_lock, rewrite_urls
from cudaup.fleet.mirror import lock_origins, origins
from cudaup.install.installer import InstallOptions, InstallResult, materialize
from cudaup.install.store import Store
from cudaup.net.http import HttpClient


def install_locked(
    lock_path: Path,
    options: InstallOptions,
    *,
    settings: Settings,
    store: Store,
    mirror: str | None = None,
    http: HttpClient | None = None,
    progress: Progress | None = None,
) -> InstallResult:
    """Install exactly what a lock names for this platform: no decisions, verified bytes.

    With ``mirror``, every file comes from the mirror instead of its origin (same paths).
    A lock whose hashes do not match the bytes fails in the download, before the store
    is touched.
    """

    if not is_linux(options.platform):
        raise UsageError("cudaup installs toolkits on Linux")
    lock = read_lock(lock_path)
    lock.check_hosts(lock_origins(settings, mirror))  # before anything is fetched
    locked = lock.for_platform(options.platform)
    roots = origins(settings)
    if mirror:
        locked = rewrite_urls(locked, lambda url: mirror_url(url, mirror, roots))
    else:
        locked = rewrite_urls(locked, settings.rewrite)
    release = Release(locked.release, locked.label, None, locked.driver)
    resolution = Resolution(
        str(lock_path), options.platform, locked.channel, release, tuple(locked.artifacts())
    )
    http = http or HttpClient(settings)
    notes = [f"from the lock {lock_path}" + (f" via the mirror {mirror}" if mirror else "")]
    return materialize(
        resolution,
        None,
        options,
        settings=settings,
        store=store,
        http=http,
        progress=progress,
        notes=notes,
    )
