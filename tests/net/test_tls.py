"""The shared TLS context: built once per trust setting, in the background when warmed up."""

from __future__ import annotations

import ssl

import pytest

from cudaup.net import tls


@pytest.fixture(autouse=True)
def fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tls, "_builds", {})
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)


def test_one_context_per_process() -> None:
    first = tls.default_context()
    assert isinstance(first, ssl.SSLContext)
    assert first.verify_mode == ssl.CERT_REQUIRED and first.check_hostname
    assert tls.default_context() is first


def test_warm_up_builds_in_the_background_and_is_then_reused() -> None:
    tls.warm_up()
    [build] = tls._builds.values()
    context = tls.default_context()
    assert build.result() is context


def test_a_changed_ssl_cert_file_gets_its_own_context(monkeypatch: pytest.MonkeyPatch) -> None:
    default = tls.default_context()
    monkeypatch.setenv("SSL_CERT_FILE", "/nonexistent/ca.pem")
    with pytest.raises(FileNotFoundError):
        tls.default_context()  # the error reaches the caller, not a background thread's log
    monkeypatch.delenv("SSL_CERT_FILE")
    assert tls.default_context() is default
