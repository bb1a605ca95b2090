"""The shared TLS context: built once per trust setting, in the background when warmed up."""

from __future__ import annotations

import ssl
import subprocess
import sys
from pathlib import Path

import pytest

from cudaup.errors import UsageError
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
    with pytest.raises(UsageError, match=r"SSL_CERT_FILE=/nonexistent/ca\.pem gives no CA"):
        tls.default_context()  # the error reaches the caller, not a background thread's log
    monkeypatch.delenv("SSL_CERT_FILE")
    assert tls.default_context() is default


def test_a_usable_ssl_cert_file_is_read_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """OpenSSL's default paths read SSL_CERT_FILE already (in place of its own default
    file): reading it again cost ~20 ms of every first HTTPS request where it is set."""
    # Three of the system's own (the suite reaches PyPI over TLS: there are some).
    certificates = ssl.create_default_context().get_ca_certs(binary_form=True)[:3]
    assert certificates
    bundle = tmp_path / "ca.pem"
    bundle.write_text("".join(ssl.DER_cert_to_PEM_cert(der) for der in certificates))
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    read: list[object] = []
    load = ssl.SSLContext.load_verify_locations

    def counted(self: ssl.SSLContext, *args: object, **kwargs: object) -> None:
        read.append(kwargs.get("cafile", args[0] if args else None))
        load(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counted)
    context = tls.default_context()
    assert [c for c in read if c] == []
    assert context.get_ca_certs(binary_form=True) == certificates  # those, and only those


def test_trust_anchors_that_are_not_certificates_are_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    garbage = tmp_path / "ca.pem"
    garbage.write_text("not a certificate\n")
    monkeypatch.setenv("SSL_CERT_FILE", str(garbage))
    with pytest.raises(UsageError) as caught:
        tls.default_context()
    assert str(caught.value).startswith(f"SSL_CERT_FILE={garbage} gives no CA certificates")
    assert caught.value.exit_code == 2
    monkeypatch.setattr(tls, "_builds", {})
    tls.warm_up()  # in the background: the error still reaches whoever asks
    with pytest.raises(UsageError, match="gives no CA certificates"):
        tls.default_context()


def test_a_process_that_ends_while_the_certificates_load_waits_for_them() -> None:
    """Exiting while OpenSSL loads in another thread crashed the process now and then
    (its exit handlers freed what the loading thread used): exit waits for the load."""
    script = (
        "import ssl, time\n"
        "real = ssl.create_default_context\n"
        "def slow():\n"
        "    time.sleep(0.3)\n"
        "    context = real()\n"
        "    print('loaded', flush=True)\n"
        "    return context\n"
        "ssl.create_default_context = slow\n"
        "from cudaup.net import tls\n"
        "tls.warm_up()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0 and done.stdout == "loaded\n", done
