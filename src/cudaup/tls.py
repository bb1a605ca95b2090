"""The TLS context for every HTTPS connection, built once per process.

Loading the system's CA certificates takes 25-30 ms, and OpenSSL does it
without holding the GIL, so a command that will go online asks for it early
(:func:`warm_up`) and the certificates load while its modules import.
"""

from __future__ import annotations

import os
import ssl
import threading
from concurrent.futures import Future

_lock = threading.Lock()
_contexts: dict[tuple[str, str], Future[ssl.SSLContext]] = {}


def _key() -> tuple[str, str]:
    # SSL_CERT_FILE/SSL_CERT_DIR (as curl, pip and uv honour them) add trust anchors.
    return os.environ.get("SSL_CERT_FILE", ""), os.environ.get("SSL_CERT_DIR", "")


def _build(cafile: str, capath: str) -> ssl.SSLContext:
    context = ssl.create_default_context()
    if cafile or capath:
        context.load_verify_locations(cafile=cafile or None, capath=capath or None)
    return context


def _future(background: bool) -> Future[ssl.SSLContext]:
    key = _key()
    with _lock:
        future = _contexts.get(key)
        if future is not None:
            return future
        future = _contexts[key] = Future()

    def build() -> None:
        try:
            future.set_result(_build(*key))
        except BaseException as exc:  # handed to whoever asks for the context
            future.set_exception(exc)

    if background:
        threading.Thread(target=build, daemon=True, name="cudaup-tls").start()
    else:
        build()
    return future


def warm_up() -> None:
    """Start loading the certificates in the background."""
    _future(background=True)


def default_context() -> ssl.SSLContext:
    """The shared context (contexts are safe to share between threads and connections)."""
    return _future(background=False).result()
