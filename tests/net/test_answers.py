"""Answers no retry mends, and bodies no decoder reads: the HTTP client against
:class:`~tests.faultserver.FaultServer`.

A TLS certificate that is refused, response headers too long to read (one line of
1 MB, header lines that never end) or not ended within the stall limit (dribbled a
byte at a time) fail at the first try: every retry would meet them again.  Every request asks for ``Accept-Encoding: identity``; a document a server
encodes anyway is decoded, and one whose body is not what its ``Content-Encoding``
says (or whose encoding is unknown) is exit 8 naming the URL, never an internal error.
Each case runs through the library and, for a manifest, through ``cudaup resolve``.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import time
from pathlib import Path
from typing import Any

import pytest

from cudaup.config import Settings
from cudaup.errors import EXIT_CODES, NetworkError, SourceFormatError
from cudaup.net.backoff import Backoff
from cudaup.net.http import HttpClient
from tests.faultserver import Fault, FaultServer, self_signed
from tests.helpers import CliResult, run_cli
from tests.resolve.test_hostile_sources import LABEL, MANIFEST_PATH, manifest
from tests.sandbox import Sandbox, sandbox  # noqa: F401 - fixture

DOCUMENT = json.dumps({"a": list(range(2000))}).encode()
#: the client's 3 retries, each after a recorded wait
ATTEMPTS = 4


def client(tmp_path: Path, slept: list[float], **settings: Any) -> HttpClient:
    configured = Settings.from_env(cache_dir=tmp_path / "cache")
    return HttpClient(
        dataclasses.replace(configured, **settings), backoff=Backoff(sleep=slept.append)
    )


def test_every_request_asks_for_the_bytes_as_they_are(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    fault_server.add("/doc", DOCUMENT)
    http = client(tmp_path, [])
    http.get(fault_server.url + "/doc")
    raw = http.open("GET", fault_server.url + "/doc", {"Range": "bytes=0-9"})
    raw.read()
    raw.release_conn()
    http.head(fault_server.url + "/doc")
    assert [r.accept_encoding for r in fault_server.log] == ["identity"] * 3


def test_a_range_is_read_as_sent_whatever_its_encoding_says(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    """A wheel's bytes are parsed and hashed as the server holds them: never decoded."""
    fault_server.add("/doc", DOCUMENT, Fault(headers={"Content-Encoding": "gzip"}))
    raw = client(tmp_path, []).open("GET", fault_server.url + "/doc", {"Range": "bytes=0-9"})
    assert raw.status == 206 and raw.read() == DOCUMENT[:10]
    raw.release_conn()


def test_a_document_encoded_anyway_is_decoded(fault_server: FaultServer, tmp_path: Path) -> None:
    fault_server.add("/doc", gzip.compress(DOCUMENT), Fault(headers={"Content-Encoding": "gzip"}))
    assert client(tmp_path, []).get(fault_server.url + "/doc").body == DOCUMENT


def test_a_decoded_document_is_bounded_by_its_decoded_size(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    bomb = gzip.compress(b"\0" * (64 * 1024 * 1024))  # 64 MiB from about 64 KiB
    fault_server.add("/doc", bomb, Fault(headers={"Content-Encoding": "gzip"}))
    with pytest.raises(SourceFormatError) as caught:
        client(tmp_path, []).get(fault_server.url + "/doc", max_bytes=1024 * 1024)
    assert str(caught.value) == (
        f"{fault_server.url}/doc is larger than 1048576 bytes; refusing to read it"
    )


@pytest.mark.parametrize(
    ("encoding", "says"),
    [
        ("gzip", "answered with Content-Encoding: gzip but its body cannot be decoded as such ("),
        ("deflate", "answered with Content-Encoding: deflate but its body cannot be decoded"),
        ("x-unheard-of", "answered with Content-Encoding: x-unheard-of, which cudaup cannot"),
    ],
)
def test_a_body_that_is_not_what_its_encoding_says_is_the_servers_fault(
    fault_server: FaultServer, tmp_path: Path, encoding: str, says: str
) -> None:
    fault_server.add("/doc", DOCUMENT, Fault(headers={"Content-Encoding": encoding}))
    slept: list[float] = []
    with pytest.raises(SourceFormatError) as caught:
        client(tmp_path, slept).get(fault_server.url + "/doc")
    assert str(caught.value).startswith(f"{fault_server.url}/doc {says}"), caught.value
    assert caught.value.exit_code == 8
    assert len(fault_server.requests("/doc")) == 1 and slept == []  # the answer, not the link


def test_a_refused_certificate_fails_at_the_first_try(tmp_path: Path) -> None:
    with FaultServer(tls=self_signed(tmp_path)) as server:
        server.add("/doc", DOCUMENT)
        slept: list[float] = []
        with pytest.raises(NetworkError) as caught:
            client(tmp_path, slept).get(server.url + "/doc")
        host = server.url.removeprefix("https://")
        assert str(caught.value) == (
            f"the TLS certificate of {host} was refused (certificate verify failed: "
            f"self-signed certificate) for {server.url}/doc; not retried, as it would be "
            "refused again (SSL_CERT_FILE or SSL_CERT_DIR adds a CA you trust)"
        )
        assert server.accepted == 1 and slept == [] and server.requests() == []


def test_a_trusted_certificate_is_the_control(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FaultServer(tls=self_signed(tmp_path)) as server:
        server.add("/doc", DOCUMENT)
        monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "cert.pem"))
        assert client(tmp_path, []).get(server.url + "/doc").body == DOCUMENT


@pytest.mark.parametrize(
    ("fault", "says"),
    [
        (
            Fault(headers={"X-Big": "a" * 2**20}),
            "(got more than 65536 bytes when reading header line)",
        ),
        (Fault(hang="endless-headers"), "(got more than 100 headers)"),
    ],
    ids=["1-MB-header", "endless-headers"],
)
def test_headers_too_long_to_read_fail_at_the_first_try(
    fault_server: FaultServer, tmp_path: Path, fault: Fault, says: str
) -> None:
    fault_server.add("/doc", DOCUMENT, fault)
    slept: list[float] = []
    with pytest.raises(NetworkError) as caught:
        client(tmp_path, slept).get(fault_server.url + "/doc")
    host = fault_server.url.removeprefix("http://")
    assert str(caught.value) == (
        f"{host} sent response headers too long to read {says} for {fault_server.url}/doc; "
        "not retried, as the server would send them again"
    )
    assert len(fault_server.requests("/doc")) == 1 and slept == []


@pytest.mark.parametrize("tls", [False, True], ids=["http", "https"])
def test_headers_dribbled_a_byte_at_a_time_end_at_the_stall_limit_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tls: bool
) -> None:
    context = self_signed(tmp_path) if tls else None
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "cert.pem"))  # trusted, when made
    with FaultServer(tls=context) as server:
        # a byte every 0.25 s: no socket timeout (30 s per read) ever fires
        server.add("/doc", DOCUMENT, Fault(hang="dribble"))
        slept: list[float] = []
        started = time.monotonic()
        with pytest.raises(NetworkError) as caught:
            client(tmp_path, slept, stall_timeout=1.0).get(server.url + "/doc")
        host = server.url.split("://")[1]
        assert str(caught.value) == (
            f"the server stalled: {host} sent no complete response headers in 1 s for "
            f"{server.url}/doc; not retried, as the stall limit (CUDAUP_STALL_TIMEOUT) is spent"
        )
        assert len(server.requests("/doc")) == 1 and slept == []
        # far below one try's socket timeout: the deadline ended it, not the timeout
        assert time.monotonic() - started < 20


def test_a_document_that_breaks_off_is_asked_again_then_named(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    fault_server.add("/doc", DOCUMENT, Fault(drop_after=100))
    slept: list[float] = []
    with pytest.raises(NetworkError) as caught:
        client(tmp_path, slept).get(fault_server.url + "/doc")
    host = fault_server.url.removeprefix("http://")
    short = len(DOCUMENT) - 100
    assert str(caught.value) == (
        f"{host} did not answer in full (the connection broke 100 bytes into the body, "
        f"{short} bytes short) for {fault_server.url}/doc"
    )
    assert len(fault_server.requests("/doc")) == ATTEMPTS and len(slept) == ATTEMPTS - 1
    fault_server.add("/doc", DOCUMENT, Fault(times=1, drop_after=100))
    assert client(tmp_path, []).get(fault_server.url + "/doc").body == DOCUMENT


# ---------------------------------------------------------------------------
# A manifest through the command line
# ---------------------------------------------------------------------------
def resolve(server: FaultServer, capsys: pytest.CaptureFixture[str], *extra: str) -> CliResult:
    return run_cli(
        capsys, "resolve", LABEL, "--channel", "redist", "--components", "nvcc",
        "--platform", "linux-x86_64", "--download-url", server.url, "--no-probe", *extra,
    )  # fmt: skip


def test_cli_a_manifest_whose_gzip_is_not_gzip_is_exit_8_naming_it(
    sandbox: Sandbox,  # noqa: F811 - fixture
    fault_server: FaultServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    body = json.dumps(manifest()).encode()
    fault_server.add(MANIFEST_PATH, body, Fault(headers={"Content-Encoding": "gzip"}))
    before = sandbox.snapshot()
    run = resolve(fault_server, capsys, "--json")
    assert run.code == EXIT_CODES["source-format"], run.err
    url = fault_server.url + MANIFEST_PATH
    [line] = run.err.splitlines()
    assert line.startswith(f"cudaup: error: {url} answered with Content-Encoding: gzip but ")
    assert run.json()["error"]["kind"] == "source-format"
    assert sandbox.changed_outside(before, sandbox.snapshot(), [sandbox.cache]) == set()
    assert [r.accept_encoding for r in fault_server.requests(MANIFEST_PATH)] == ["identity"]
    # the same manifest, gzip-encoded for real, resolves
    fault_server.add(
        MANIFEST_PATH, gzip.compress(body), Fault(headers={"Content-Encoding": "gzip"})
    )
    run = resolve(fault_server, capsys, "--refresh")
    assert run.code == 0, run.err


def test_cli_a_manifest_whose_headers_never_end_stalls_once(
    sandbox: Sandbox,  # noqa: F811 - fixture
    fault_server: FaultServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fault_server.add(MANIFEST_PATH, json.dumps(manifest()).encode(), Fault(hang="dribble"))
    monkeypatch.setenv("CUDAUP_STALL_TIMEOUT", "1")
    before = sandbox.snapshot()
    run = resolve(fault_server, capsys)
    assert run.code == EXIT_CODES["network"], run.err
    assert run.err.splitlines()[-1].startswith(
        f"cudaup: error: the server stalled: {fault_server.url.removeprefix('http://')} sent "
        f"no complete response headers in 1 s for {fault_server.url}{MANIFEST_PATH}"
    )
    assert len(fault_server.requests(MANIFEST_PATH)) == 1
    assert sandbox.changed_outside(before, sandbox.snapshot(), [sandbox.cache]) == set()
