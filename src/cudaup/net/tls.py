"""The TLS context for every HTTPS connection, built once per process.

Loading the system's CA certificates takes 25-30 ms, and OpenSSL does it
without holding the GIL, so a command that will go online asks for it early
(:func:`warm_up`) and the certificates load while its modules import.
"""

from __future__ import annotations

import os
import ssl
import sys
import threading

from cudaup.errors import UsageError

_lock = threading.Lock()
_builds: dict[tuple[str, str], _Build] = {}


class _Build:
    """One context being built (in this thread or another); :meth:`result` waits for it."""

    def __init__(self, cafile: str, capath: str) -> None:
        self._done = threading.Event()
        self._context: ssl.SSLContext | None = None
        self._error: BaseException | None = None
        self._where = (cafile, capath)

    def run(self) -> None:
        cafile, capath = self._where
        try:
            context = ssl.create_default_context()
            # OpenSSL's default paths are SSL_CERT_FILE's and SSL_CERT_DIR's where set: a
            # file it read already is not parsed again (~20 ms for a system's bundle).
            if cafile and _loaded_by_default(context):
                cafile = ""
            if cafile or capath:
                try:
                    context.load_verify_locations(cafile=cafile or None, capath=capath or None)
                except (OSError, ssl.SSLError) as exc:
                    raise _unusable(cafile, capath, exc) from None
            self._context = context
        except BaseException as exc:  # handed to whoever asks for the context
            self._error = exc
        finally:
            self._done.set()

    def result(self) -> ssl.SSLContext:
        self._done.wait()
        if self._error is not None:
            raise self._error
        assert self._context is not None
        return self._context


def _loaded_by_default(context: ssl.SSLContext) -> bool:
    """Whether ``context``'s default paths loaded SSL_CERT_FILE's certificates already.

    OpenSSL reads the file that variable names in place of its own default file (it says
    which variable it reads) and skips, without a word, one it cannot use; so outside
    Windows, whose system stores are loaded besides, any certificate in a new default
    context came from that file, and none means the file must be read again to say why.
    """
    if sys.platform == "win32" or ssl.get_default_verify_paths().openssl_cafile_env != (
        "SSL_CERT_FILE"
    ):
        return False
    stats = context.cert_store_stats()
    return stats["x509"] + stats["crl"] > 0


def _unusable(cafile: str, capath: str, exc: OSError | ssl.SSLError) -> UsageError:
    """What a trust setting that OpenSSL refused means; the file is read first, so it is
    the one to blame when both are set."""
    name, value = ("SSL_CERT_FILE", cafile) if cafile else ("SSL_CERT_DIR", capath)
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return UsageError(
        f"{name}={value} gives no CA certificates cudaup can use ({reason}); point it at "
        "CA certificates in PEM form, or unset it"
    )


def _build(background: bool) -> _Build:
    # SSL_CERT_FILE/SSL_CERT_DIR (as curl, pip and uv honour them) name the trust anchors,
    # each in place of OpenSSL's default file or directory.
    key = os.environ.get("SSL_CERT_FILE", ""), os.environ.get("SSL_CERT_DIR", "")
    with _lock:
        build = _builds.get(key)
        if build is not None:
            return build
        build = _builds[key] = _Build(*key)
    if background:
        # Not a daemon: a command that ends before it needs TLS (an error, a plain-HTTP
        # host) must not exit while OpenSSL is still loading, or OpenSSL's exit handlers
        # free what the loading thread uses (a crash, now and then).  The wait at exit is
        # what the load has left, tens of milliseconds at most.
        threading.Thread(target=build.run, daemon=False, name="cudaup-tls").start()
    else:
        build.run()
    return build


def warm_up() -> None:
    """Start loading the certificates in the background."""
    _build(background=True)


def default_context() -> ssl.SSLContext:
    """The shared context (contexts are safe to share between threads and connections)."""
    return _build(background=False).result()
