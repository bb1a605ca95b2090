"""pytest fixtures for the fake NVIDIA site.

Use them from ``tests/conftest.py`` with ``from tests.fakenvidia.fixtures import *`` or
``pytest_plugins = ["tests.fakenvidia.fixtures"]``.

* ``fake_nvidia_site`` (session): the default :class:`Site`.
* ``fake_nvidia`` (session): a running server on the default site, shared by all tests; its log
  accumulates, so a test that counts requests calls ``fake_nvidia.clear_log()`` first.
* ``fake_nvidia_fresh`` (function): a server of its own on the default site, with an empty log.
* ``make_fake_nvidia`` (function): a factory ``make_fake_nvidia(options=None, **overrides)``
  that starts a server for ``SiteOptions`` (``options`` updated by ``overrides``, e.g.
  ``make_fake_nvidia(md5sum_separator=" ")``) or for a ``Site`` given as ``options``; every
  server it started stops when the test ends.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any, Protocol

import pytest

from .server import FakeNvidiaServer
from .site import Site, SiteOptions, build_site


class MakeFakeNvidia(Protocol):
    """Type of the ``make_fake_nvidia`` fixture."""

    def __call__(
        self, options: SiteOptions | Site | None = None, /, **overrides: Any
    ) -> FakeNvidiaServer: ...


@pytest.fixture(scope="session")
def fake_nvidia_site() -> Site:
    return build_site()


@pytest.fixture(scope="session")
def fake_nvidia(fake_nvidia_site: Site) -> Iterator[FakeNvidiaServer]:
    with FakeNvidiaServer(fake_nvidia_site) as server:
        yield server


@pytest.fixture
def fake_nvidia_fresh(fake_nvidia_site: Site) -> Iterator[FakeNvidiaServer]:
    with FakeNvidiaServer(fake_nvidia_site) as server:
        yield server


@pytest.fixture
def make_fake_nvidia() -> Iterator[MakeFakeNvidia]:
    started: list[FakeNvidiaServer] = []

    def make(options: SiteOptions | Site | None = None, /, **overrides: Any) -> FakeNvidiaServer:
        if isinstance(options, Site):
            if overrides:
                raise TypeError("overrides apply to SiteOptions, not to a built Site")
            site = options
        else:
            site = build_site(dataclasses.replace(options or SiteOptions(), **overrides))
        server = FakeNvidiaServer(site).start()
        started.append(server)
        return server

    yield make
    for server in started:
        server.stop()


__all__ = [
    "MakeFakeNvidia",
    "fake_nvidia",
    "fake_nvidia_fresh",
    "fake_nvidia_site",
    "make_fake_nvidia",
]
