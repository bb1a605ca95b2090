"""Where a redirect may lead: the one list of hosts, and the rule that reads it.

A redirect that stays on its origin (scheme, host and port) is followed, except
https→http.  A redirect to another host is followed only on the same scheme, and
only to the host of a configured base (``Settings.download_url``, ``archive_url``,
``prerelease_url``, ``pypi_url``: a ``--mirror`` sets these) or to a host below.
Anything else is refused with both hosts named, so a compromised or misconfigured
server cannot send cudaup to fetch from anywhere it likes.  The README's hosts
section lists the same entries.
"""

from __future__ import annotations

from urllib.parse import SplitResult, urlsplit

from cudaup.config import Settings
from cudaup.errors import NetworkError

#: Hosts a redirect may lead to besides the configured bases.  An entry starting with
#: a dot covers every host below that domain.
REDIRECT_HOSTS: tuple[str, ...] = (
    # NVIDIA's own domain: its download CDN (developer.download.nvidia.com) and pages.
    ".nvidia.com",
    # PyPI's file host: the index on pypi.org links every wheel there.
    "files.pythonhosted.org",
    # GitHub's release-asset hosts: github.com/.../releases/download/... redirects there,
    # and the shipped package indexes (FlashInfer, SGLang) link wheels on GitHub releases.
    "release-assets.githubusercontent.com",
    "objects.githubusercontent.com",
)

_DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin(parts: SplitResult) -> tuple[str, str, int | None]:
    host = (parts.hostname or "").lower()
    return parts.scheme, host, parts.port or _DEFAULT_PORTS.get(parts.scheme)


def _listed(host: str) -> bool:
    return any(
        host == entry.lstrip(".") or (entry.startswith(".") and host.endswith(entry))
        for entry in REDIRECT_HOSTS
    )


def _named(parts: SplitResult) -> str:
    return parts.netloc.rsplit("@", 1)[-1] or "(no host)"


def check_redirect(settings: Settings, current: str, target: str) -> None:
    """Raise :class:`NetworkError` unless a redirect from ``current`` to ``target`` may
    be followed (see the module docstring)."""
    here, there = urlsplit(current), urlsplit(target)
    if here.scheme == "https" and there.scheme != "https":
        raise NetworkError(f"refusing a redirect from {current} down to {target}")
    if there.scheme not in _DEFAULT_PORTS:
        raise NetworkError(f"refusing a redirect from {current} to {target}: not an HTTP URL")
    scheme, host, port = _origin(there)
    _, old_host, old_port = _origin(here)
    default_ports = port == _DEFAULT_PORTS[scheme] and old_port == _DEFAULT_PORTS.get(here.scheme)
    if host == old_host and (port == old_port or default_ports):
        return  # the same host (an http→https upgrade included)
    if scheme == here.scheme:
        bases = {_origin(urlsplit(base)) for base in settings.source_urls}
        if (scheme, host, port) in bases or _listed(host):
            return
    raise NetworkError(
        f"refusing a redirect from {_named(here)} to {_named(there)} ({target}): a redirect "
        "may change host only on the same scheme, to a configured source or a host on "
        "cudaup's list (README: Hosts, proxies and the cache)"
    )
