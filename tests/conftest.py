"""Test-wide fixtures: an isolated cache per test and no stray network.

Every test gets its own ``CUDAUP_CACHE_DIR`` and ``CUDAUP_HOME``, and no other
``CUDAUP_*`` variable (nor a proxy) from the developer's shell.  Connections to anything but loopback
are refused unless the test is marked ``pypi`` (the live-PyPI tests).  Under CI a skip is a
failure (``tests/cipolicy.py``).  The heaviest tests are marked ``slow``
(:func:`pytest_collection_modifyitems`): ``pytest -m 'not slow'`` leaves them out.
"""

from __future__ import annotations

import ipaddress
import os
import signal
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cipolicy import pytest_runtest_makereport  # noqa: F401 - hook
from tests.fakenvidia.fixtures import *  # noqa: F403 - fixtures: fake_nvidia, make_fake_nvidia, ...
from tests.faultserver import fault_server  # noqa: F401 - fixture
from tests.plan.pyindex import index_server  # noqa: F401 - fixture
from tests.toolchain import pypi_toolkit  # noqa: F401 - fixture

_real_connect = socket.socket.connect

#: Fixtures whose tests are ``slow`` without saying so: each builds a Python environment
#: with uv (``tests/upgrade/conftest.py``).  The Action, Ansible and nginx tests carry
#: the mark themselves; a test marked ``pypi`` talks to the live index, so it is slow too.
SLOW_FIXTURES = frozenset({"make_env", "uv_cache"})


def pytest_configure(config: pytest.Config) -> None:
    """Ctrl-C works as in a terminal, however the suite was started.

    A shell without job control starts a background command (``.ci/run &``, ``nohup``)
    with SIGINT ignored, and what is ignored stays ignored across ``exec``: Python then
    installs no KeyboardInterrupt, and every test of what a Ctrl-C does (in this process
    or in a ``cudaup`` it starts) would wait for an interrupt that never comes.  A handler
    is reset by ``exec``, so the processes the tests start get the default again.
    """
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``slow`` what costs most, so that ``pytest -m 'not slow'`` stays quick."""
    for item in items:
        uses = set(getattr(item, "fixturenames", ()))
        if uses & SLOW_FIXTURES or item.get_closest_marker("pypi") is not None:
            item.add_marker(pytest.mark.slow)


def _loopback_only(self: socket.socket, address: Any) -> Any:
    host = address[0] if isinstance(address, tuple) else None
    if host is not None:
        try:
            if not ipaddress.ip_address(host).is_loopback:
                raise OSError(f"test tried to reach {host}; only loopback is allowed offline")
        except ValueError:
            pass  # a hostname: only reachable after getaddrinfo, which gave an IP above
    return _real_connect(self, address)


@pytest.fixture(autouse=True)
def _isolated(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    for name in [n for n in os.environ if n.startswith("CUDAUP_")]:
        monkeypatch.delenv(name)
    for name in (
        "HTTPS_PROXY",
        "HTTP_PROXY",
        "https_proxy",
        "http_proxy",
        "ALL_PROXY",
        "all_proxy",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CUDAUP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CUDAUP_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    if request.node.get_closest_marker("pypi") is None:
        monkeypatch.setattr(socket.socket, "connect", _loopback_only)
    yield
