"""Fleets: the ``cuda.lock.toml`` document, building and checking locks, static
mirrors, and installing exactly what a lock names."""

from typing import TYPE_CHECKING

from cudaup.core.lazy import exports

if TYPE_CHECKING:
    from cudaup.fleet.apply import install_locked
    from cudaup.fleet.build import BuiltLock, LockCheck, build_lock, check_lock
    from cudaup.fleet.lockfile import LockedToolkit, LockFile, read_lock
    from cudaup.fleet.mirror import MirrorReport, build_mirror

__all__ = [
    "BuiltLock",
    "LockCheck",
    "LockFile",
    "LockedToolkit",
    "MirrorReport",
    "build_lock",
    "build_mirror",
    "check_lock",
    "install_locked",
    "read_lock",
]
# Each name loads its module when first asked for.
__getattr__ = exports(
    __name__,
    {
        "LockFile": "cudaup.fleet.lockfile",
        "LockedToolkit": "cudaup.fleet.lockfile",
        "read_lock": "cudaup.fleet.lockfile",
        "BuiltLock": "cudaup.fleet.build",
        "build_lock": "cudaup.fleet.build",
        "check_lock": "cudaup.fleet.build",
        "LockCheck": "cudaup.fleet.build",
        "MirrorReport": "cudaup.fleet.mirror",
        "build_mirror": "cudaup.fleet.mirror",
        "install_locked": "cudaup.fleet.apply",
    },
)
