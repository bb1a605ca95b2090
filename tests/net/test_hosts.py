"""Where a redirect may lead: its own host, a configured source, or a host on the list."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cudaup.config import Settings
from cudaup.errors import NetworkError
from cudaup.net.backoff import NO_WAIT
from cudaup.net.hosts import REDIRECT_HOSTS, check_redirect
from cudaup.net.http import HttpClient
from tests.net.test_http import ScriptedServer, reply

MIRROR = Settings.from_env({}, mirror="http://mirror.example:8080")
DEFAULT = Settings.from_env({})


@pytest.mark.parametrize(
    ("settings", "current", "target"),
    [
        (DEFAULT, "https://a.example/x", "https://a.example/y"),  # the same host
        (DEFAULT, "http://a.example/x", "https://a.example/x"),  # an upgrade on the same host
        (DEFAULT, "https://a.example/x", "https://A.EXAMPLE:443/y"),  # spelled otherwise
        (DEFAULT, "https://developer.nvidia.com/x", "https://developer.download.nvidia.com/y"),
        (DEFAULT, "https://a.example/x", "https://us.download.nvidia.com/y"),  # below .nvidia.com
        (DEFAULT, "https://pypi.org/simple/x/", "https://files.pythonhosted.org/p/x.whl"),
        (DEFAULT, "https://a.example/x", "https://pypi.org/simple/"),  # a configured base
        (DEFAULT, "https://github.com/o/r/releases/download/v1/x.whl",
         "https://release-assets.githubusercontent.com/x"),
        (MIRROR, "http://a.example/x", "http://mirror.example:8080/x"),  # the mirror
    ],
)  # fmt: skip
def test_followed(settings: Settings, current: str, target: str) -> None:
    check_redirect(settings, current, target)


@pytest.mark.parametrize(
    ("settings", "current", "target", "words"),
    [
        (DEFAULT, "https://a.example/x", "http://a.example/x", "down to http://a.example/x"),
        (DEFAULT, "https://a.example/x", "https://b.example/x", "from a.example to b.example"),
        (DEFAULT, "https://a.example/x", "https://a.example:8443/x", "to a.example:8443"),
        (DEFAULT, "https://a.example/x", "https://evilnvidia.com/x", "to evilnvidia.com"),
        (DEFAULT, "https://a.example/x", "https://nvidia.com.evil.example/x", "evil.example"),
        # another host on another scheme, even upward, is not followed
        (DEFAULT, "http://a.example/x", "https://files.pythonhosted.org/x", "same scheme"),
        (DEFAULT, "http://a.example/x", "ftp://developer.download.nvidia.com/x", "not an HTTP"),
        (DEFAULT, "https://a.example/x", "ftp://a.example/x", "down to ftp://a.example/x"),
        # the mirror's host, but another port
        (MIRROR, "http://a.example/x", "http://mirror.example:9090/x", "mirror.example:9090"),
    ],
)
def test_refused(settings: Settings, current: str, target: str, words: str) -> None:
    with pytest.raises(NetworkError, match=re.escape(words)) as caught:
        check_redirect(settings, current, target)
    assert caught.value.exit_code == 5


def test_the_list_is_documented_in_the_readme() -> None:
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    for entry in REDIRECT_HOSTS:
        assert f"`{entry.lstrip('.')}`" in readme, entry


def test_a_redirect_to_another_loopback_host_is_refused_unless_configured(tmp_path: Path) -> None:
    with (
        ScriptedServer({"/f": reply(200, b"from b")}, host="127.0.0.2") as other,
        ScriptedServer({"/f": reply(302, Location=other.url + "/f")}) as origin,
    ):
        plain = HttpClient(Settings.from_env(cache_dir=tmp_path), backoff=NO_WAIT)
        with pytest.raises(NetworkError) as caught:
            plain.get(origin.url + "/f")
        here, there = origin.url.split("//")[1], other.url.split("//")[1]
        assert str(caught.value).startswith(f"refusing a redirect from {here} to {there} (")
        assert other.hits == []  # never asked
        # the same host configured as a source (a mirror, say): followed
        configured = Settings.from_env(cache_dir=tmp_path, download_url=other.url)
        response = HttpClient(configured, backoff=NO_WAIT).get(origin.url + "/f")
        assert response.body == b"from b" and response.url == other.url + "/f"
