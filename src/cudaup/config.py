"""Settings: the hosts cudaup talks to, its home and cache, and how fresh answers must be.

One cascade, resolved once into a frozen object: defaults, then ``CUDAUP_*``
environment variables, then command-line flags.  A mirror (``--mirror URL``)
is one root for every NVIDIA host and its ``simple/`` index for PyPI; a host
given on its own still wins over the mirror.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from cudaup.errors import UsageError

DEFAULT_DOWNLOAD_URL = "https://developer.download.nvidia.com"
DEFAULT_ARCHIVE_URL = "https://developer.nvidia.com"
DEFAULT_PRERELEASE_URL = "https://packages.nvidia.com"
DEFAULT_PYPI_URL = "https://pypi.org/simple"
#: A download connection slower than this many bytes per second ...
DEFAULT_SPEED_LIMIT = 10 * 1024
#: ... for this many seconds is dropped and asked again (curl's --speed-limit/--speed-time).
DEFAULT_SPEED_TIME = 30.0
#: A download that receives less than one such window's worth at the floor (300 KiB) in
#: this many seconds, with a request out, fails: the server stalled.
DEFAULT_STALL_TIMEOUT = 60.0


def _user_dir(kind: str) -> Path:
    """The user's ``cache`` or ``data`` directory for cudaup, as the platform names it."""
    import platformdirs  # noqa: PLC0415 - only needed when no override is given

    return Path(getattr(platformdirs, f"user_{kind}_dir")("cudaup", appauthor=False))


def _default_cache_dir() -> Path:
    return _user_dir("cache")


def home_dir(env: Mapping[str, str] | None = None) -> Path:
    """cudaup's home (the store, shims, the default): ``CUDAUP_HOME``, else the user data dir."""
    env = os.environ if env is None else env
    home = env.get("CUDAUP_HOME")
    return Path(home) if home else _user_dir("data")


@dataclass(frozen=True, slots=True)
class Settings:
    download_url: str = DEFAULT_DOWNLOAD_URL
    archive_url: str = DEFAULT_ARCHIVE_URL
    prerelease_url: str = DEFAULT_PRERELEASE_URL
    pypi_url: str = DEFAULT_PYPI_URL
    cache_dir: Path | None = None
    home: Path | None = None
    refresh: bool = False
    offline: bool = False
    probe: bool = True
    timeout: float = 30.0
    workers: int = 8
    speed_limit: int = DEFAULT_SPEED_LIMIT
    speed_time: float = DEFAULT_SPEED_TIME
    stall_timeout: float = DEFAULT_STALL_TIMEOUT
    #: what ``install`` brings when no components are named (``CUDAUP_PROFILE``)
    profile: str = "default"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: object) -> Settings:
        """Defaults, overridden by ``CUDAUP_*`` variables, overridden by ``overrides``.

        An override of ``None`` means "not given" and keeps the lower layer.
        """
        env = os.environ if env is None else env
        cache = env.get("CUDAUP_CACHE_DIR")
        home = env.get("CUDAUP_HOME")
        settings = cls(
            download_url=env.get("CUDAUP_NVIDIA_DOWNLOAD_URL") or DEFAULT_DOWNLOAD_URL,
            archive_url=env.get("CUDAUP_NVIDIA_ARCHIVE_URL") or DEFAULT_ARCHIVE_URL,
            prerelease_url=env.get("CUDAUP_NVIDIA_PRERELEASE_URL") or DEFAULT_PRERELEASE_URL,
            pypi_url=env.get("CUDAUP_PYPI_URL") or DEFAULT_PYPI_URL,
            cache_dir=Path(cache) if cache else None,
            home=Path(home) if home else None,
            speed_limit=int(_number(env, "CUDAUP_SPEED_LIMIT", DEFAULT_SPEED_LIMIT, zero=True)),
            speed_time=_number(env, "CUDAUP_SPEED_TIME", DEFAULT_SPEED_TIME),
            stall_timeout=_number(env, "CUDAUP_STALL_TIMEOUT", DEFAULT_STALL_TIMEOUT),
            profile=env.get("CUDAUP_PROFILE", "").strip() or "default",
        )
        mirror = overrides.pop("mirror", None)
        if isinstance(mirror, str) and mirror:
            root = mirror.rstrip("/")
            for host in ("download_url", "archive_url", "prerelease_url"):
                overrides[host] = overrides.get(host) or root
            overrides["pypi_url"] = overrides.get("pypi_url") or root + "/simple"
        given = {k: v for k, v in overrides.items() if v is not None}
        settings = replace(settings, **given)  # type: ignore[arg-type]
        return replace(
            settings,
            download_url=settings.download_url.rstrip("/"),
            archive_url=settings.archive_url.rstrip("/"),
            prerelease_url=settings.prerelease_url.rstrip("/"),
            pypi_url=settings.pypi_url.rstrip("/"),
        )

    @property
    def source_urls(self) -> tuple[str, str, str, str]:
        """The configured bases: a redirect may lead to their hosts."""
        return self.download_url, self.archive_url, self.prerelease_url, self.pypi_url

    @property
    def cache_root(self) -> Path:
        return self.cache_dir if self.cache_dir is not None else _default_cache_dir()

    @property
    def home_root(self) -> Path:
        """cudaup's home: the store, the shims, the default (see :func:`home_dir`)."""
        return self.home if self.home is not None else home_dir({})

    @property
    def user_indexes(self) -> Path:
        """The user's index table, which extends the shipped ``data/indexes.toml``."""
        return self.home_root / "indexes.toml"

    def rewrite(self, url: str) -> str:
        """Move a URL on one of NVIDIA's default hosts onto the configured base.

        NVIDIA's pages always name their own hosts; with a mirror configured,
        every such URL must go to the mirror instead.
        """
        for default, configured in (
            (DEFAULT_DOWNLOAD_URL, self.download_url),
            (DEFAULT_ARCHIVE_URL, self.archive_url),
            (DEFAULT_PRERELEASE_URL, self.prerelease_url),
        ):
            for scheme_variant in (default, default.replace("https://", "http://", 1)):
                if url == scheme_variant or url.startswith(scheme_variant + "/"):
                    return configured + url[len(scheme_variant) :]
        return url

    def canonical(self, url: str) -> str:
        """The inverse of :meth:`rewrite`: a URL on a configured base, on NVIDIA's own host.

        Locks record canonical URLs, so one lock serves every mirror.
        """
        for default, configured in (
            (DEFAULT_DOWNLOAD_URL, self.download_url),
            (DEFAULT_ARCHIVE_URL, self.archive_url),
            (DEFAULT_PRERELEASE_URL, self.prerelease_url),
        ):
            if configured != default and (url == configured or url.startswith(configured + "/")):
                return default + url[len(configured) :]
        return url

    def is_prerelease_url(self, url: str) -> bool:
        return url.startswith(self.prerelease_url + "/")


def _number(env: Mapping[str, str], name: str, default: float, *, zero: bool = False) -> float:
    """A non-negative number of seconds or bytes from ``env``; ``zero`` allows 0 (off)."""
    text = env.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero):
        least = "0 (off) or more" if zero else "more than 0"
        raise UsageError(f"{name}={text!r} is not a number of {least}")
    return value
