"""The HTTP edge: cache and validators, retries, redirects, TLS, proxies, netrc."""

from __future__ import annotations

import http.server
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cudaup.config import Settings
from cudaup.errors import NetworkError, UsageError
from cudaup.net import tls
from cudaup.net.backoff import NO_WAIT, Backoff
from cudaup.net.http import HttpClient
from cudaup.net.response_cache import HttpCache
from tests.helpers import require_tool

Handler = Callable[[http.server.BaseHTTPRequestHandler], None]


class ScriptedServer:
    """A loopback server whose answers per path are Python functions."""

    def __init__(
        self,
        routes: dict[str, Handler],
        tls: ssl.SSLContext | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        self.routes = routes
        self.hits: list[tuple[str, str, dict[str, str]]] = []
        owner = self

        class _Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                owner.hits.append((self.command, self.path, dict(self.headers.items())))
                route = owner.routes.get(self.path.split("?")[0]) or owner.routes.get("*")
                if route is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                route(self)

            do_HEAD = do_GET

        self.server = http.server.ThreadingHTTPServer((host, 0), _Handler)
        self.host = host
        self.server.daemon_threads = True
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.scheme = "https" if tls else "http"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.server.server_address[1]}"

    def __enter__(self) -> ScriptedServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def reply(status: int, body: bytes = b"", **headers: str) -> Handler:
    def handler(request: http.server.BaseHTTPRequestHandler) -> None:
        request.send_response(status)
        for name, value in headers.items():
            request.send_header(name.replace("_", "-"), value)
        request.send_header("Content-Length", str(len(body)))
        request.end_headers()
        if request.command != "HEAD":
            request.wfile.write(body)

    return handler


def client(tmp_path: Path, *, refresh: bool = False) -> HttpClient:
    settings = Settings.from_env(cache_dir=tmp_path / "c", refresh=refresh)
    return HttpClient(settings, backoff=NO_WAIT)


def test_cache_fresh_then_conditional_revalidation(tmp_path: Path) -> None:
    def etagged(request: http.server.BaseHTTPRequestHandler) -> None:
        if request.headers.get("If-None-Match") == '"v1"':
            reply(304, ETag='"v1"')(request)
        else:
            reply(200, b"listing", ETag='"v1"')(request)

    with ScriptedServer({"/l": etagged}) as server:
        http = client(tmp_path)
        assert http.get(server.url + "/l", cache="listing").body == b"listing"
        assert http.get(server.url + "/l", cache="listing").from_cache
        assert len(server.hits) == 1
        # age the entry past its TTL: the next read revalidates with If-None-Match
        cache = HttpCache(tmp_path / "c")
        entry = cache.lookup(server.url + "/l")
        assert entry is not None
        meta = next((tmp_path / "c" / "http").rglob("*.json"))
        meta.write_text(
            meta.read_text().replace(str(entry.stored_at), str(entry.stored_at - 10**6))
        )
        response = http.get(server.url + "/l", cache="listing")
        assert response.body == b"listing" and server.hits[-1][2].get("If-None-Match") == '"v1"'
        assert len(server.hits) == 2
        # --refresh bypasses the cache entirely
        client(tmp_path, refresh=True).get(server.url + "/l", cache="listing")
        assert len(server.hits) == 3 and "If-None-Match" not in server.hits[-1][2]


def test_404_is_remembered_briefly(tmp_path: Path) -> None:
    with ScriptedServer({}) as server:
        http = client(tmp_path)
        assert http.get(server.url + "/missing", cache="manifest").status == 404
        assert http.get(server.url + "/missing", cache="manifest").status == 404
        assert len(server.hits) == 1


def test_retries_5xx_and_honours_retry_after(tmp_path: Path) -> None:
    answers = iter([reply(503, Retry_After="1"), reply(502), reply(200, b"ok")])
    slept: list[float] = []

    def scripted(request: http.server.BaseHTTPRequestHandler) -> None:
        next(answers)(request)

    with ScriptedServer({"*": scripted}) as server:
        http = HttpClient(
            Settings.from_env(cache_dir=tmp_path), backoff=Backoff(sleep=slept.append)
        )
        assert http.get(server.url + "/x").body == b"ok"
    assert len(slept) == 2 and slept[0] == 1.0


def test_gives_up_with_the_url_after_retries(tmp_path: Path) -> None:
    with ScriptedServer({"*": reply(503)}) as server:
        with pytest.raises(NetworkError, match="HTTP 503"):
            client(tmp_path).get(server.url + "/x")
        assert len(server.hits) == 4


def test_other_4xx_is_returned_at_once(tmp_path: Path) -> None:
    with ScriptedServer({"*": reply(403)}) as server:
        assert client(tmp_path).get(server.url + "/x").status == 403
        assert len(server.hits) == 1


def test_redirects_followed_and_loops_stopped(tmp_path: Path) -> None:
    with ScriptedServer(
        {
            "/a": reply(302, Location="/b"),
            "/b": reply(200, b"B"),
            "/loop": reply(301, Location="/loop"),
        }
    ) as server:
        http = client(tmp_path)
        response = http.get(server.url + "/a")
        assert response.body == b"B" and response.url.endswith("/b")
        with pytest.raises(NetworkError, match="more than 10 redirects"):
            http.get(server.url + "/loop")


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    openssl = require_tool("openssl", "openssl")
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


@pytest.fixture
def tls_server(certificate: tuple[Path, Path]) -> Iterator[ScriptedServer]:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*certificate)
    routes = {"/ok": reply(200, b"secure"), "/down": reply(302, Location="http://127.0.0.1:9/x")}
    with ScriptedServer(routes, tls=context) as server:
        yield server


def test_tls_is_verified_and_ssl_cert_file_honoured(
    tmp_path: Path,
    tls_server: ScriptedServer,
    certificate: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    with pytest.raises(NetworkError, match="CERTIFICATE_VERIFY_FAILED|certificate verify failed"):
        HttpClient(Settings.from_env(cache_dir=tmp_path), retries=0).get(tls_server.url + "/ok")
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate[0]))
    assert client(tmp_path).get(tls_server.url + "/ok").body == b"secure"


def test_plain_http_never_loads_the_ca_certificates(
    tmp_path: Path, tls_server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plain-HTTP mirror is asked without waiting for the trust store; the first https
    request builds it, and a broken SSL_CERT_FILE is then a usage error (exit 2)."""
    monkeypatch.setattr(tls, "_builds", {})
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "missing.pem"))  # unusable if loaded
    http_client = client(tmp_path)
    with ScriptedServer({"/ok": reply(200, b"plain")}) as plain:
        assert http_client.get(plain.url + "/ok").body == b"plain"
    assert tls._builds == {}
    with pytest.raises(UsageError, match=r"SSL_CERT_FILE=.*missing\.pem gives no CA") as caught:
        http_client.get(tls_server.url + "/ok")
    assert caught.value.exit_code == 2 and tls_server.hits == []


def test_https_to_http_downgrade_is_refused(
    tmp_path: Path,
    tls_server: ScriptedServer,
    certificate: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate[0]))
    with pytest.raises(NetworkError, match="refusing a redirect from https://.* down to http://"):
        client(tmp_path).get(tls_server.url + "/down")


def test_proxy_and_no_proxy_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def proxied(request: http.server.BaseHTTPRequestHandler) -> None:
        reply(200, b"via proxy " + request.path.encode())(request)

    with (
        ScriptedServer({"*": proxied}) as proxy,
        ScriptedServer({"*": reply(200, b"direct")}) as origin,
    ):
        monkeypatch.setenv("http_proxy", proxy.url)
        monkeypatch.setenv("no_proxy", "")
        response = client(tmp_path).get(origin.url + "/file")
        assert response.body == b"via proxy " + (origin.url + "/file").encode()
        assert proxy.hits and not origin.hits
        monkeypatch.setenv("no_proxy", "127.0.0.1")
        assert client(tmp_path).get(origin.url + "/file").body == b"direct"


def test_netrc_credentials_for_the_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login mirror password s3cret\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    with ScriptedServer({"*": reply(200, b"ok")}) as server:
        client(tmp_path).get(server.url + "/x")
        assert server.hits[0][2]["Authorization"] == "Basic bWlycm9yOnMzY3JldA=="


def test_oversized_documents_are_refused(tmp_path: Path) -> None:
    from cudaup.errors import SourceFormatError

    with (
        ScriptedServer({"*": reply(200, b"x" * 2000)}) as server,
        pytest.raises(SourceFormatError, match="larger than 1000 bytes"),
    ):
        client(tmp_path).get(server.url + "/big", max_bytes=1000)


def test_a_stated_length_beside_chunking_does_not_lift_the_limit(tmp_path: Path) -> None:
    """A document of a stated length is read whole, in one call; one whose length is
    stated beside chunked transfer (which HTTP forbids, and urllib3 then ignores the
    length) is read as it comes and still refused past the limit, whatever it stated."""
    from cudaup.errors import SourceFormatError

    def lying(request: http.server.BaseHTTPRequestHandler) -> None:
        request.send_response(200)
        request.send_header("Content-Length", "10")
        request.send_header("Transfer-Encoding", "chunked")
        request.end_headers()
        for _ in range(4):
            request.wfile.write(b"%x\r\n%s\r\n" % (1000, b"x" * 1000))
        request.wfile.write(b"0\r\n\r\n")

    with ScriptedServer({"/lying": lying, "*": reply(200, b"y" * 3000)}) as server:
        assert client(tmp_path).get(server.url + "/said", max_bytes=3000).body == b"y" * 3000
        with pytest.raises(SourceFormatError, match="larger than 2500 bytes"):
            client(tmp_path).get(server.url + "/lying", max_bytes=2500)


def test_cache_survives_a_read_only_directory(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    cache = HttpCache(blocker)
    cache.store("http://x/", 200, None, None, b"body")  # must not raise
    assert cache.lookup("http://x/") is None
    assert time.time() > 0
