"""Settings: the hosts cudaup talks to, its home and cache, and how fresh answers must be.

One cascade, resolved once into a frozen object: defaults, then ``CUDAUP_*``
environment variables, then command-line flags.  A mirror (``--mirror URL``)
is one root for every NVIDIA host and its ``simple/`` index for PyPI; a host
given on its own still wins over the mirror.

Two settings are read where they apply, not here, because every shim reads them and a
shim must not import this module (``pathlib`` and ``dataclasses`` cost milliseconds on
each compiler call): ``CUDAUP_TOOLKIT`` (:mod:`cudaup.switch.shim`) and
``CUDAUP_SAFE_DIRECTORIES``, the pins' and toolkits' directories a user trusts though
another user owns or may write them (:data:`cudaup.util.trust.SAFE_DIRECTORIES_ENV`).
"""

from __future__ import annotations

import math
import os
import re
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
#: The most bytes one download may have (curl's ``--max-filesize``).  CUDA's largest
#: file, its runfile installer, is about 5 GB: three times that leaves room for years
#: of growth, while a body that never ends stops after a bounded write.
DEFAULT_MAX_SIZE = 16 * 2**30


def _user_dir(kind: str) -> Path:
    """The user's ``cache`` or ``data`` directory for cudaup, as the platform names it."""
    import platformdirs  # noqa: PLC0415 - only needed when no override is given

    return Path(getattr(platformdirs, f"user_{kind}_dir")("cudaup", appauthor=False))


def _default_cache_dir() -> Path:
    return _user_dir("cache")


def home_dir(env: Mapping[str, str] | None = None) -> Path:
    """cudaup's home (the store, shims, the default): ``CUDAUP_HOME``, else the user data dir."""
    env = os.environ if env is None else env
    home = _home(env)
    return home if home is not None else _user_dir("data")


def _home(env: Mapping[str, str]) -> Path | None:
    """``CUDAUP_HOME``, refused when it holds a control character: the home is printed
    into shell lines (``cudaup env``, the shims), where a newline starts a command."""
    home = env.get("CUDAUP_HOME")
    if not home:
        return None
    if not home.isprintable():
        raise UsageError(
            f"CUDAUP_HOME={home!r} holds a control character (a newline, a tab, an escape); "
            "cudaup prints its home into shell lines: name a directory without one"
        )
    return Path(home)


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
    max_size: int = DEFAULT_MAX_SIZE
    #: what ``install`` brings when no components are named (``CUDAUP_PROFILE``)
    profile: str = "default"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: object) -> Settings:
        """Defaults, overridden by ``CUDAUP_*`` variables, overridden by ``overrides``.

        An override of ``None`` means "not given" and keeps the lower layer.
        """
        env = os.environ if env is None else env
        cache = env.get("CUDAUP_CACHE_DIR")
        home = _home(env)
        max_size = env.get("CUDAUP_MAX_SIZE", "").strip()
        settings = cls(
            download_url=env.get("CUDAUP_NVIDIA_DOWNLOAD_URL") or DEFAULT_DOWNLOAD_URL,
            archive_url=env.get("CUDAUP_NVIDIA_ARCHIVE_URL") or DEFAULT_ARCHIVE_URL,
            prerelease_url=env.get("CUDAUP_NVIDIA_PRERELEASE_URL") or DEFAULT_PRERELEASE_URL,
            pypi_url=env.get("CUDAUP_PYPI_URL") or DEFAULT_PYPI_URL,
            cache_dir=Path(cache) if cache else None,
            home=home,
            speed_limit=int(
                _number(env, "CUDAUP_SPEED_LIMIT", DEFAULT_SPEED_LIMIT, zero=True, most=2.0**53)
            ),
            speed_time=_number(env, "CUDAUP_SPEED_TIME", DEFAULT_SPEED_TIME),
            stall_timeout=_number(env, "CUDAUP_STALL_TIMEOUT", DEFAULT_STALL_TIMEOUT),
            max_size=parse_size(max_size, "CUDAUP_MAX_SIZE") if max_size else DEFAULT_MAX_SIZE,
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
        for url in settings.source_urls:
            if not url.isascii() or not url.isprintable():
                # Bytes that are no text (a non-UTF-8 argument), or a URL no request can carry.
                raise UsageError(
                    f"{url!a} is not a URL cudaup "
                    "can ask (a mirror, index or NVIDIA URL: ASCII, no control characters; "
                    "percent-encode the rest)"
                )
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


#: The most seconds a setting may name: a wait longer than ~31 years is no limit at
#: all, and the clocks the waits use refuse one past ~292 (``threading.TIMEOUT_MAX``).
MOST_SECONDS = 1e9


def _number(
    env: Mapping[str, str],
    name: str,
    default: float,
    *,
    zero: bool = False,
    most: float = MOST_SECONDS,
) -> float:
    """A non-negative number of seconds or bytes from ``env``, at most ``most``; ``zero``
    allows 0 (off)."""
    text = env.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero) or value > most:
        least = "0 (off) or more" if zero else "more than 0"
        raise UsageError(f"{name}={text!r} is not a number of {least}, up to {most:g}")
    return value


_SIZE = re.compile(r"(\d{1,15})(?:\.(\d{1,6}))?\s*([KMGT]?)(?:I?B)?", re.IGNORECASE)


def parse_size(text: str, name: str) -> int:
    """``16G``, ``500MiB``, ``1.5g`` or a plain count as bytes (units are binary, as
    curl's are); ``name`` (the flag or variable) is named when ``text`` is not a size."""
    match = _SIZE.fullmatch(text.strip())
    if match is None:
        raise UsageError(
            f"{name}={text!r} is not a size (bytes, or a number with K, M, G or T: 16G, 500M)"
        )
    whole, fraction, unit = match[1], match[2] or "", match[3].upper()
    scale = 1 << 10 * " KMGT".index(unit or " ")
    size: int = int(whole) * scale + int(fraction or "0") * scale // 10 ** len(fraction)
    if size <= 0:
        raise UsageError(f"{name}={text!r} is not a size of 1 byte or more")
    return size
