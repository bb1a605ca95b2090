"""The plan tests' fixtures: package indexes on loopback."""

from tests.plan.pyindex import index_server  # noqa: F401 - fixture
