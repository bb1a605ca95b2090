"""Fixtures of the command-line tests that live with the package they exercise: the
upgrade command's loopback world and the environments built in it."""

from tests.upgrade.conftest import make_env, uv_cache, world  # noqa: F401 - fixtures
