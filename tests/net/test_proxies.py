"""Proxies as curl reads them: the variables, NO_PROXY's forms, and the errors that
name the proxy rather than the host behind it, against real loopback proxies."""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest

from cudaup.config import Settings
from cudaup.errors import EXIT_CODES, HostUnreachableError, NetworkError, UsageError
from cudaup.net.backoff import NO_WAIT
from cudaup.net.http import HttpClient
from cudaup.net.proxies import ProxySettings
from tests.helpers import run_cli
from tests.net.test_http import ScriptedServer, reply

PROXY = {"http_proxy": "http://proxy.example:3128", "https_proxy": "http://proxy.example:3128"}


def routed(env: dict[str, str], url: str) -> str | None:
    proxy = ProxySettings.from_env(env).for_url(url)
    return proxy.url if proxy is not None else None


@pytest.mark.parametrize(
    ("no_proxy", "url", "direct"),
    [
        ("127.0.0.0/8", "http://127.0.0.1:8080/x", True),  # CIDR, as curl and requests
        ("127.0.0.0/8", "http://127.1.2.3/x", True),
        ("127.0.0.0/8", "http://10.0.0.1/x", False),
        ("10.0.0.0/8, 192.168.0.0/16", "https://192.168.4.2/x", True),  # spaces after commas
        ("fd00::/8", "http://[fd12::1]:80/x", True),
        ("::1", "http://[::1]:8080/x", True),
        ("127.0.0.0/8", "http://localhost/x", False),  # names are not resolved for this
        ("example.com", "https://example.com/x", True),
        ("example.com", "https://cdn.example.com/x", True),  # and every host below it
        ("example.com", "https://notexample.com/x", False),
        (".example.com", "https://example.com/x", True),  # a leading dot: the same
        (".example.com", "https://a.b.example.com/x", True),
        ("*.example.com", "https://a.example.com/x", True),
        ("EXAMPLE.com", "https://Cdn.Example.COM./x", True),  # case and a trailing dot
        ("example.com:8443", "https://example.com:8443/x", True),  # a port: that port only
        ("example.com:8443", "https://example.com/x", False),
        ("example.com:443", "https://example.com/x", True),  # the scheme's default port
        ("127.0.0.1:8080", "http://127.0.0.1:8080/x", True),
        ("127.0.0.1:8080", "http://127.0.0.1:9090/x", False),
        ("[::1]:8080", "http://[::1]:8080/x", True),
        ("*", "https://anything.example/x", True),
        ("", "https://example.com/x", False),
        ("10.0.0.0/33, nonsense/, :", "https://example.com/x", False),  # ignored, not fatal
    ],
)
def test_no_proxy_forms(no_proxy: str, url: str, direct: bool) -> None:
    assert (routed({**PROXY, "no_proxy": no_proxy}, url) is None) is direct


def test_which_variable_chooses_the_proxy() -> None:
    assert routed({"HTTPS_PROXY": "http://up:1"}, "https://x/") == "http://up:1"
    # the lower-case spelling wins, as in curl
    assert routed({"HTTPS_PROXY": "http://up:1", "https_proxy": "http://low:2"}, "https://x/") == (
        "http://low:2"
    )
    assert routed({"https_proxy": "http://p:1"}, "http://x/") is None  # per scheme
    assert routed({"ALL_PROXY": "http://all:3"}, "http://x/") == "http://all:3"
    assert routed({"all_proxy": "proxy.internal:3128"}, "https://x/") == (
        "http://proxy.internal:3128"  # no scheme: an HTTP proxy, as curl assumes
    )
    # httpoxy: inside a CGI request, HTTP_PROXY may come from a client's Proxy header
    assert routed({"HTTP_PROXY": "http://evil:1", "REQUEST_METHOD": "GET"}, "http://x/") is None
    assert routed({"NO_PROXY": "x", **PROXY}, "http://x/") is None  # upper-case NO_PROXY
    assert routed({"no_proxy": "", "NO_PROXY": "x", **PROXY}, "http://x/") is not None


def test_credentials_are_used_never_shown() -> None:
    proxy = ProxySettings.from_env({"https_proxy": "http://me%40corp:s%3Acret@p:3128"}).for_url(
        "https://x/"
    )
    assert proxy is not None
    assert proxy.url == "http://p:3128" and proxy.basic_auth == "me@corp:s:cret"


@pytest.mark.parametrize("value", ["socks5://127.0.0.1:1080", "http://p:notaport", "http://"])
def test_a_proxy_cudaup_cannot_use_is_refused_by_name(value: str) -> None:
    settings = ProxySettings.from_env({"https_proxy": value, "no_proxy": "pypi.org"})
    with pytest.raises(UsageError, match=r"^https_proxy=.* is not an http:// or https:// proxy"):
        settings.for_url("https://developer.download.nvidia.com/")
    # only when a URL would go through it: never bypassed, never in the way of others
    assert settings.for_url("https://pypi.org/simple/") is None
    assert settings.for_url("http://developer.download.nvidia.com/") is None


def test_a_socks_proxy_with_credentials_is_named_without_them() -> None:
    settings = ProxySettings.from_env({"ALL_PROXY": "socks5h://user:pw@127.0.0.1:1080"})
    with pytest.raises(UsageError) as caught:
        settings.for_url("https://pypi.org/simple/")
    assert "pw" not in str(caught.value) and "ALL_PROXY=socks5h://127.0.0.1:1080" in str(
        caught.value
    )


def _client(tmp_path: Path) -> HttpClient:
    return HttpClient(Settings.from_env(cache_dir=tmp_path / "c"), backoff=NO_WAIT, retries=1)


def _closed_port() -> int:
    """A loopback port nothing listens on: connecting to it is refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_cidr_no_proxy_reaches_loopback_directly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with (
        ScriptedServer({"*": reply(200, b"via proxy")}) as proxy,
        ScriptedServer({"*": reply(200, b"direct")}) as origin,
    ):
        monkeypatch.setenv("http_proxy", proxy.url)
        monkeypatch.setenv("no_proxy", "10.0.0.0/8,127.0.0.0/8")
        assert _client(tmp_path).get(origin.url + "/file").body == b"direct"
        assert not proxy.hits
        port = origin.server.server_address[1]
        monkeypatch.setenv("no_proxy", f"127.0.0.1:{port + 1}")  # another port: proxied
        assert _client(tmp_path).get(origin.url + "/file").body == b"via proxy"
        monkeypatch.setenv("no_proxy", f"127.0.0.1:{port}")
        assert _client(tmp_path).get(origin.url + "/file").body == b"direct"


def test_proxy_credentials_are_sent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with ScriptedServer({"*": reply(200, b"ok")}) as proxy:
        port = proxy.server.server_address[1]
        monkeypatch.setenv("http_proxy", f"http://mirror:s3cret@127.0.0.1:{port}")
        monkeypatch.setenv("no_proxy", "")
        assert _client(tmp_path).get("http://origin.internal/x").body == b"ok"
        [(_, path, headers)] = proxy.hits
        assert path == "http://origin.internal/x"
        sent = {name.lower(): value for name, value in headers.items()}
        assert sent["proxy-authorization"] == "Basic bWlycm9yOnMzY3JldA=="


def test_an_unreachable_proxy_is_named_not_the_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = _closed_port()
    monkeypatch.setenv("HTTPS_PROXY", f"http://user:hunter2@127.0.0.1:{port}")
    monkeypatch.setenv("no_proxy", "")
    with pytest.raises(NetworkError) as caught:
        _client(tmp_path).get("https://developer.download.nvidia.com/compute/cuda/redist/")
    message = str(caught.value)
    assert message.startswith(
        f"cannot reach the proxy http://127.0.0.1:{port} (HTTPS_PROXY) for "
        "https://developer.download.nvidia.com/compute/cuda/redist/ ("
    )
    assert "refused" in message and "hunter2" not in message
    assert not isinstance(caught.value, HostUnreachableError)  # the proxy, not NVIDIA


def test_a_proxy_that_refuses_the_tunnel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A proxy that answers CONNECT with an error (this one does not implement it)."""
    with ScriptedServer({"*": reply(200, b"")}) as proxy:
        monkeypatch.setenv("https_proxy", proxy.url)
        monkeypatch.setenv("no_proxy", "")
        with pytest.raises(NetworkError) as caught:
            _client(tmp_path).get("https://pypi.org/simple/")
    assert str(caught.value).startswith(
        f"the proxy {proxy.url} (https_proxy) would not connect to pypi.org for "
        "https://pypi.org/simple/ (501 "
    )


def test_an_unreachable_proxy_through_the_cli_is_exit_5(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    port = _closed_port()
    monkeypatch.setenv("http_proxy", f"127.0.0.1:{port}")
    monkeypatch.setenv("no_proxy", "localhost")
    monkeypatch.setenv("CUDAUP_NVIDIA_DOWNLOAD_URL", "http://download.internal")
    monkeypatch.setenv("CUDAUP_NVIDIA_ARCHIVE_URL", "http://archive.internal")
    result = run_cli(capsys, "resolve", "13.0.1", "--platform", "linux-x86_64", "--json")
    assert result.code == EXIT_CODES["network"] == 5
    error = result.json()["error"]
    # (the first of the documents resolution asks for at once to fail)
    assert re.match(
        rf"cannot reach the proxy http://127\.0\.0\.1:{port} \(http_proxy\) for "
        r"http://(download|archive)\.internal/\S+ \(.*Connection refused\)$",
        error["message"],
    ), error["message"]
    # no "--mirror": the proxy is what failed (and --offline: resolve answers offline)
    assert result.err.endswith(f"{error['message']}\n")


def test_a_socks_proxy_through_the_cli_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ALL_PROXY", "socks5://127.0.0.1:1080")
    result = run_cli(capsys, "versions")
    assert result.code == EXIT_CODES["usage"]
    assert "ALL_PROXY=socks5://127.0.0.1:1080 is not an http:// or https:// proxy" in result.err
