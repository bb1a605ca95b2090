"""Which proxy a URL goes through, read from the environment as curl reads it.

``https_proxy``/``HTTPS_PROXY`` for https URLs, ``http_proxy`` for http URLs
(the upper-case ``HTTP_PROXY`` is ignored when ``REQUEST_METHOD`` is set, as a
CGI request could have set it: "httpoxy"), then ``all_proxy``/``ALL_PROXY``;
the lower-case spelling wins.  A proxy written without a scheme
(``proxy:3128``) is an HTTP proxy; one cudaup cannot speak to (``socks5://``)
is refused when a URL would go through it, never bypassed.  Credentials in a
proxy URL (``http://user:secret@proxy:3128``) are sent as
``Proxy-Authorization`` and never printed.

``no_proxy``/``NO_PROXY`` lists the hosts reached directly, separated by commas
or spaces: ``*`` (every host), a domain (``example.com`` and ``.example.com``
both match it and every host below it), an IP address, a CIDR block
(``10.0.0.0/8``, ``127.0.0.0/8``, ``fd00::/8``: it matches IP addresses written in
the URL, never names, which are not resolved for this), and any of those with
``:PORT`` to match that port only.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import SplitResult, unquote, urlsplit

from cudaup.errors import UsageError

_DEFAULT_PORTS = {"http": 80, "https": 443}
_Address = ipaddress.IPv4Address | ipaddress.IPv6Address
_Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True, slots=True)
class Proxy:
    """One proxy: where it is (without credentials), the variable that named it, and
    the ``Proxy-Authorization`` user and password its URL carried."""

    url: str
    variable: str
    username: str | None = None
    password: str | None = None

    @property
    def basic_auth(self) -> str | None:
        """``user:password`` for urllib3's ``make_headers(proxy_basic_auth=...)``."""
        if self.username is None:
            return None
        return f"{self.username}:{self.password or ''}"


@dataclass(frozen=True, slots=True)
class _Rule:
    """One ``no_proxy`` entry."""

    domain: str | None = None
    address: _Address | None = None
    network: _Network | None = None
    port: int | None = None

    def matches(self, host: str, address: _Address | None, port: int) -> bool:
        if self.port is not None and self.port != port:
            return False
        if self.network is not None:
            return address is not None and address in self.network
        if self.address is not None:
            return address is not None and address == self.address
        assert self.domain is not None
        return host == self.domain or host.endswith("." + self.domain)


def _address(text: str) -> _Address | None:
    try:
        return ipaddress.ip_address(text.strip("[]"))
    except ValueError:
        return None


def _rule(entry: str) -> _Rule | None:
    """One ``no_proxy`` entry as a rule; None for one that can match nothing."""
    entry = entry.strip().lower()
    port: int | None = None
    if "/" in entry:
        try:
            return _Rule(network=ipaddress.ip_network(entry.strip("[]"), strict=False))
        except ValueError:
            return None
    if (found := _address(entry)) is not None:
        return _Rule(address=found)
    head, colon, tail = entry.rpartition(":")
    if colon and tail.isdigit():
        entry, port = head, int(tail)
        if (found := _address(entry)) is not None:
            return _Rule(address=found, port=port)
    domain = entry.removeprefix("*").lstrip(".").rstrip(".")
    return _Rule(domain=domain, port=port) if domain else None


@dataclass(frozen=True, slots=True)
class ProxySettings:
    """The proxies of one environment, and the hosts that bypass them."""

    #: per scheme ("http", "https", "all"): the proxy, or why it cannot be used
    proxies: Mapping[str, Proxy | UsageError]
    #: ``no_proxy`` is ``*``: nothing goes through a proxy
    bypass_all: bool = False
    rules: tuple[_Rule, ...] = ()
    #: the ``no_proxy`` text, for the verbose log
    no_proxy: str = ""

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ProxySettings:
        proxies: dict[str, Proxy | UsageError] = {}
        for scheme in ("http", "https", "all"):
            names = [f"{scheme}_proxy", f"{scheme.upper()}_PROXY"]
            if scheme == "http" and "REQUEST_METHOD" in env:
                names.pop()  # httpoxy: a CGI request's Proxy header arrives as HTTP_PROXY
            name = next((n for n in names if env.get(n, "").strip()), None)
            if name is not None:
                try:
                    proxies[scheme] = _parse_proxy(env[name].strip(), name)
                except UsageError as exc:  # raised when a URL would go through it
                    proxies[scheme] = exc
        name = next((n for n in ("no_proxy", "NO_PROXY") if n in env), None)
        text = env.get(name, "") if name else ""
        entries = [e for e in text.replace(" ", ",").split(",") if e.strip()]
        rules = tuple(rule for e in entries if (rule := _rule(e)) is not None)
        return cls(proxies, any(e.strip() == "*" for e in entries), rules, text)

    def bypassed(self, url: str) -> bool:
        """Whether ``no_proxy`` sends ``url`` directly."""
        if self.bypass_all:
            return True
        parts = urlsplit(url)
        host = (parts.hostname or "").lower().rstrip(".")
        port = _port(parts)
        address = _address(host)
        return any(rule.matches(host, address, port) for rule in self.rules)

    def for_url(self, url: str) -> Proxy | None:
        """The proxy ``url`` goes through, or None to connect directly; raises
        :class:`UsageError` when that proxy is one cudaup cannot use."""
        scheme = urlsplit(url).scheme
        proxy = self.proxies.get(scheme) or self.proxies.get("all")
        if proxy is None or self.bypassed(url):
            return None
        if isinstance(proxy, UsageError):
            raise proxy
        return proxy


def _port(parts: SplitResult) -> int:
    try:
        port = parts.port
    except ValueError:
        port = None
    return port if port is not None else _DEFAULT_PORTS.get(parts.scheme, 0)


def _parse_proxy(text: str, variable: str) -> Proxy:
    """``text`` (a proxy URL from ``variable``) as a :class:`Proxy`; refused when cudaup
    cannot speak to it."""
    if "://" not in text:
        text = "http://" + text
    parts = urlsplit(text)
    try:
        port = parts.port
    except ValueError:
        port = -1
    unusable = not text.isascii() or not text.isprintable()  # bytes that are no text
    if unusable or parts.scheme not in _DEFAULT_PORTS or not parts.hostname or port == -1:
        shown = _without_credentials(parts)
        raise UsageError(
            f"{variable}={shown} is not an http:// or https:// proxy URL, the kinds cudaup "
            f"can use (unset it, or add the host to no_proxy)"
        )
    return Proxy(
        _without_credentials(parts),
        variable,
        unquote(parts.username) if parts.username is not None else None,
        unquote(parts.password) if parts.password is not None else None,
    )


def _without_credentials(parts: SplitResult) -> str:
    host = parts.netloc.rsplit("@", 1)[-1]
    return f"{parts.scheme}://{host}"
