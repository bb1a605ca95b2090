"""The verbose log (``cudaup -v``): one hook in the HTTP client, read here as records."""

from __future__ import annotations

import http.server
import logging
import re
from pathlib import Path

import pytest

from cudaup.config import Settings
from cudaup.errors import HostUnreachableError
from cudaup.net.backoff import NO_WAIT
from cudaup.net.http import HttpClient
from cudaup.net.response_cache import HttpCache
from tests.net.test_http import ScriptedServer, reply


def client(tmp_path: Path, retries: int = 3) -> HttpClient:
    return HttpClient(Settings.from_env(cache_dir=tmp_path / "c"), backoff=NO_WAIT, retries=retries)


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "cudaup.http"]


def test_requests_cache_hits_and_revalidations(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def etagged(request: http.server.BaseHTTPRequestHandler) -> None:
        if request.headers.get("If-None-Match") == '"v1"':
            reply(304, ETag='"v1"')(request)
        else:
            reply(200, b"listing", ETag='"v1"')(request)

    caplog.set_level(logging.INFO, logger="cudaup")
    with ScriptedServer({"/l": etagged}) as server:
        url = server.url + "/l"
        http = client(tmp_path)
        http.get(url, cache="listing")
        http.get(url, cache="listing")
        meta = next((tmp_path / "c" / "http").rglob("*.json"))
        entry = HttpCache(tmp_path / "c").lookup(url)
        assert entry is not None
        meta.write_text(meta.read_text().replace(str(entry.stored_at), str(entry.stored_at - 7200)))
        http.get(url, cache="listing")
    log = lines(caplog)
    assert re.fullmatch(rf"GET {url} → 200 \(\d+\.\d\d s\)", log[0])
    assert log[1] == f"cache: {url} (HTTP 200) is 0 s old, fresh for 3600 s: not asked"
    assert log[2] == f"cache: {url} is 7200 s old, past its 3600 s"
    assert log[3] == f"cache: revalidating {url} (its ETag or Last-Modified)"
    assert re.fullmatch(rf"GET {url} → 304 .*", log[4])
    assert log[5] == f"cache: {url} has not changed (304): the cached copy is used"
    assert len(log) == 6


def test_redirects_and_retries_say_why(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    answers = iter([reply(503, Retry_After="0"), reply(200, b"B")])

    def flaky(request: http.server.BaseHTTPRequestHandler) -> None:
        next(answers)(request)

    caplog.set_level(logging.INFO, logger="cudaup")
    with ScriptedServer({"/a": reply(302, Location="/b"), "/b": flaky}) as server:
        assert client(tmp_path).get(server.url + "/a").body == b"B"
    log = lines(caplog)
    assert f"redirect: {server.url}/a → 302 → {server.url}/b" in log
    assert f"retry 1 of {server.url}/b in 0.0 s: HTTP 503" in log
    assert [line.split(" → ")[1][:3] for line in log if line.startswith("GET ")] == [
        "302",
        "503",
        "200",
    ]


def test_a_refused_connection_is_logged_and_unreachable(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="cudaup")
    with pytest.raises(HostUnreachableError, match=r"cannot reach 127\.0\.0\.1:9 \(") as caught:
        client(tmp_path, retries=1).get("http://127.0.0.1:9/x")
    assert not caught.value.public  # not NVIDIA's or PyPI's: a mirror cannot stand in
    log = lines(caplog)
    assert log[0].startswith("GET http://127.0.0.1:9/x failed: ") and "refused" in log[0]
    assert log[1].startswith("retry 1 of http://127.0.0.1:9/x in 0.0 s: ")


def test_debug_shows_headers_but_never_secrets(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login mirror password s3cret\n")
    monkeypatch.setenv("NETRC", str(netrc))
    caplog.set_level(logging.DEBUG, logger="cudaup")
    with ScriptedServer({"*": reply(200, b"ok", X_Served_By="loopback")}) as server:
        client(tmp_path).get(server.url + "/x", accept="application/json")
    text = "\n".join(lines(caplog))
    assert "Authorization: (hidden)" in text and "s3cret" not in text
    assert "bWlycm9y" not in text  # nor its base64
    assert "Accept: application/json" in text and "X-Served-By: loopback" in text


def test_silent_without_a_handler(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A library user who configures no logging sees nothing (not even Python's
    last-resort handler)."""
    with ScriptedServer({"*": reply(200, b"ok")}) as server:
        client(tmp_path).get(server.url + "/x")
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""
