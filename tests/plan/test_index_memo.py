"""The index memo: real uv through it, against a loopback index that counts requests."""

from __future__ import annotations

import http.client
import http.server
import json
import re
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

import cudaup.net.deadline as deadline_module
from cudaup.config import Settings
from cudaup.errors import EXIT_CODES, NetworkError
from cudaup.net.deadline import Lookups
from cudaup.net.http import HttpClient
from cudaup.plan import index_memo, memo_server
from cudaup.plan.index_memo import IndexMemo
from cudaup.plan.page_rewrite import Rewritten, rewrite_html, rewrite_json
from cudaup.plan.ramp import Ramp
from cudaup.plan.uv import CompileJob, UvRunner, write_local_index
from tests.helpers import run_cli
from tests.plan import world
from tests.plan.builders import PURE, wheel
from tests.plan.pyindex import JSON, IndexServer

PLATFORM = "x86_64-manylinux_2_39"
ACCEPT = f"{JSON}, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01"


def _publish(server: IndexServer, *, html_only: bool = False) -> None:
    server.root("pypi", html_only=html_only)
    server.add("pypi", *wheel("alpha", "1.0", ["beta>=1"], tag=PURE))
    server.add("pypi", *wheel("beta", "1.0", tag=PURE))
    server.add("pypi", *wheel("beta", "2.0", tag=PURE))


@pytest.fixture
def http_client(tmp_path: Path) -> HttpClient:
    return HttpClient(Settings.from_env(cache_dir=tmp_path / "cache"), retries=1)


@pytest.fixture
def memo(http_client: HttpClient) -> Iterator[IndexMemo]:
    with IndexMemo(http_client) as running:
        yield running


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def _fail_on(server: IndexServer, path: str, how: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``path`` on ``server`` answers 500, or closes the connection without an answer."""
    served = server.handle

    def failing(request: http.server.BaseHTTPRequestHandler, body: bool) -> None:
        if request.path.split("?")[0] != path:
            served(request, body)
        elif how == "500":
            request.send_response(500)
            request.send_header("Content-Length", "0")
            request.end_headers()
        else:
            request.close_connection = True

    monkeypatch.setattr(server, "handle", failing)


@pytest.mark.parametrize("html_only", [False, True], ids=["pep691-json", "pep503-html"])
def test_a_second_resolution_reads_nothing_upstream(
    index_server: IndexServer, memo: IndexMemo, tmp_path: Path, html_only: bool
) -> None:
    _publish(index_server, html_only=html_only)
    job = CompileJob(("alpha",), (), (3, 12), PLATFORM, (), index_server.url("pypi"))
    # Two runners, two uv caches: only the memo can spare the second its requests.
    first = UvRunner(tmp_path / "uv-1", tmp_path, 30.0, memo=memo).compile(job)
    asked = [(r.method, r.path) for r in index_server.requests()]
    assert ("GET", "/pypi/files/beta-2.0-py3-none-any.whl.metadata") in asked  # PEP 658 too
    second = UvRunner(tmp_path / "uv-2", tmp_path, 30.0, memo=memo).compile(job)
    assert len(index_server.requests()) == len(asked)
    assert memo.upstream_requests == len(asked)
    for answer in (first, second):
        assert answer.closure is not None
        beta = answer.closure.get("beta")
        assert beta is not None and str(beta.version) == "2.0"
        # What the plan reads back names the upstream index, not the memo.
        assert beta.index_url == index_server.url("pypi")


def test_uv_keeps_what_the_memo_read_for_the_rest_of_the_plan(
    index_server: IndexServer, memo: IndexMemo, tmp_path: Path
) -> None:
    """The memo answers alike for the whole plan, and says so (``max-age``): uv runs
    sharing the plan's uv cache then ask it nothing they asked before."""
    _publish(index_server)
    runner = UvRunner(tmp_path / "uv", tmp_path, 30.0, memo=memo)
    job = CompileJob(("alpha",), (), (3, 12), PLATFORM, (), index_server.url("pypi"))
    assert runner.compile(job).ok
    asked = memo.served
    assert asked > 0
    answer = runner.compile(job)
    assert answer.closure is not None and memo.served == asked


def test_identical_requests_share_one_upstream_request(
    index_server: IndexServer, memo: IndexMemo, monkeypatch: pytest.MonkeyPatch
) -> None:
    _publish(index_server)
    gate, arrived = threading.Event(), threading.Event()
    served = index_server.handle

    def held(request: http.server.BaseHTTPRequestHandler, body: bool) -> None:
        arrived.set()
        gate.wait(30)
        served(request, body)

    monkeypatch.setattr(index_server, "handle", held)
    page = memo.local(index_server.url("pypi")) + "/alpha/"
    answers: list[tuple[int, bytes]] = []
    threads = [
        threading.Thread(target=lambda: answers.append(_get(page, {"Accept": ACCEPT})))
        for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    assert arrived.wait(30)
    _wait_for(lambda: memo.coalesced == 7)  # the other seven wait on the first
    gate.set()
    for thread in threads:
        thread.join(30)
    assert len(answers) == 8 and len(set(answers)) == 1 and answers[0][0] == 200
    assert index_server.sent_for("/pypi/alpha/") == 1
    # A different Accept is a different answer (HTML, not JSON): asked for once more.
    status, body = _get(page, {"Accept": "text/html"})
    assert status == 200 and b"<a href=" in body and index_server.sent_for("/pypi/alpha/") == 2


def test_it_forwards_only_what_it_was_given(
    index_server: IndexServer, memo: IndexMemo, http_client: HttpClient
) -> None:
    _publish(index_server)
    index = memo.local(index_server.url("pypi"))
    base = index.removesuffix("/i/0")
    upstream = index_server.base.removeprefix("http://")
    wheel_path = f"/f/http/{upstream}/pypi/files/alpha-1.0-py3-none-any.whl"
    # A file the memo has not seen on a page is not forwarded, even on the index's host.
    assert _get(base + wheel_path)[0] == 404
    status, page = _get(index + "/alpha/", {"Accept": JSON})
    assert status == 200
    (entry,) = json.loads(page)["files"]
    assert entry["url"] == base + wheel_path  # rewritten to the memo; hashes untouched
    assert (
        entry["hashes"]["sha256"]
        == index_server.roots["pypi"].pages["alpha"][0]["hashes"]["sha256"]
    )
    status, body = _get(base + wheel_path)
    assert status == 200 and body == index_server.files["/pypi/files/alpha-1.0-py3-none-any.whl"]
    asked = len(index_server.requests())
    port = memo.port
    token = base.rsplit("/", 1)[1]
    refused = [
        f"/{token}/f/https/pypi.example/x.whl",  # a host no page named
        f"/{token}/i/7/alpha/",  # an index it was not given
        f"/{token}/i/0/../../etc/passwd",
        f"/{token}/f/http/{upstream}/pypi/files/../../pypi/alpha/",
        "/not-the-token/i/0/alpha/",
        "/i/0/alpha/",
        "/",
    ]
    for path in refused:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        connection.request("GET", path)
        assert connection.getresponse().status == 404, path
        connection.close()
    assert len(index_server.requests()) == asked  # nothing of it went upstream


def test_a_listed_file_is_forwarded_quoted_or_not(memo: IndexMemo) -> None:
    """uv may quote what a page did not, or the reverse: a file a page listed is the
    memo's to forward either way, whether that page escaped any of its URLs or none."""
    memo.local("https://pypi.example/simple")  # started: its token is handed out
    listed = {
        "alpha": "https://files.example/p/alpha-1.0+local-py3-none-any.whl",
        "beta": "https://files.example/p/beta-1.0%2Blocal-py3-none-any.whl",
    }
    for project, url in listed.items():
        memo._allow(Rewritten(b"", [url]), f"https://pypi.example/simple/{project}/")
    files = f"/{memo._token}/f/https/files.example/p"
    for name in ("alpha-1.0+local", "alpha-1.0%2Blocal", "beta-1.0+local", "beta-1.0%2Blocal"):
        assert memo._target(f"{files}/{name}-py3-none-any.whl") is not None, name
    assert memo._target(f"{files}/gamma-1.0-py3-none-any.whl") is None


def test_ranges_are_kept_and_large_bodies_stream_through(
    index_server: IndexServer, http_client: HttpClient
) -> None:
    _publish(index_server)
    path = "/pypi/files/alpha-1.0-py3-none-any.whl"
    whole = index_server.files[path]
    with IndexMemo(http_client, limit=len(whole) - 1) as memo:
        _get(memo.local(index_server.url("pypi")) + "/alpha/", {"Accept": JSON})
        url = memo.local(index_server.url("pypi")).removesuffix("/i/0") + "/f/http/"
        url += index_server.base.removeprefix("http://") + path
        for _ in range(2):
            assert _get(url, {"Range": "bytes=-22"}) == (206, whole[-22:])
        assert index_server.sent_for(path) == 1  # the range is kept
        for _ in range(2):
            assert _get(url) == (200, whole)
        assert index_server.sent_for(path) == 3  # too large to keep: streamed each time


@pytest.mark.parametrize("how", ["500", "closed"])
def test_an_upstream_failure_is_cudaups_network_error(
    index_server: IndexServer,
    memo: IndexMemo,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    how: str,
) -> None:
    _publish(index_server)
    _fail_on(index_server, "/pypi/beta/", how, monkeypatch)
    runner = UvRunner(tmp_path / "uv", tmp_path, 30.0, memo=memo)
    job = CompileJob(("alpha",), (), (3, 12), PLATFORM, (), index_server.url("pypi"))
    with pytest.raises(NetworkError) as raised:
        runner.compile(job)
    message = str(raised.value)
    assert f"{index_server.url('pypi')}/beta/" in message
    assert memo.local(index_server.url("pypi")) not in message and "/i/0" not in message


@pytest.fixture
def world_env(
    index_server: IndexServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> IndexServer:
    world.build(index_server)
    index_server.add("pypi", *wheel("alpha", "1.0", ["beta>=1"], tag=PURE))
    index_server.add("pypi", *wheel("beta", "1.0", tag=PURE))
    index_server.root("nvidia").down = True
    monkeypatch.setenv("CUDAUP_PYPI_URL", index_server.url("pypi"))
    monkeypatch.setenv("CUDAUP_NVIDIA_DOWNLOAD_URL", index_server.url("nvidia"))
    monkeypatch.setenv("CUDAUP_CACHE_DIR", str(tmp_path / "cache"))
    return index_server


TARGET = ("--driver", "590.48.01", "--python", "3.12", "--platform", "linux-x86_64")


@pytest.mark.parametrize("how", ["500", "closed"])
def test_a_plan_whose_index_fails_under_uv_exits_with_the_network_code(
    world_env: IndexServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    how: str,
) -> None:
    # alpha's own page answers (the survey reads it); beta's, which only uv reads, fails.
    _fail_on(world_env, "/pypi/beta/", how, monkeypatch)
    result = run_cli(capsys, "plan", "alpha", "--index", "pypi", *TARGET, "--json")
    assert result.code == EXIT_CODES["network"] == 5, result.err
    error = json.loads(result.out)["error"] if result.out.strip() else json.loads(result.err)
    assert f"{world_env.url('pypi')}/beta/" in error["message"]
    _only_upstream_ports(world_env, result.out + result.err)


def test_the_memo_lives_for_one_plan(
    world_env: IndexServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[IndexMemo] = []
    enter = IndexMemo.__enter__

    def spied(self: IndexMemo) -> IndexMemo:
        opened.append(self)
        return enter(self)

    monkeypatch.setattr(IndexMemo, "__enter__", spied)
    result = run_cli(capsys, "plan", "servellm", "--index", "pypi", *TARGET, "--json")
    assert result.code == 0, result.err
    (memo,) = opened
    assert memo.upstream_requests > 0  # uv read the index through it
    _only_upstream_ports(world_env, result.out + result.err)
    document: dict[str, Any] = result.json()
    assert f"--default-index {world_env.url('pypi')}" in document["uv"]
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", memo.port), timeout=5).close()
    assert not [t for t in threading.enumerate() if t.name.startswith("cudaup-index-memo")]
    # Warm, the plan's answers are kept: no uv runs, and no server starts.
    again = run_cli(capsys, "plan", "servellm", "--index", "pypi", *TARGET, "--json")
    assert again.code == 0 and again.json()["uv"] == document["uv"]
    assert len(opened) == 2 and opened[1].port == 0 and opened[1].upstream_requests == 0


def test_the_memos_address_is_handed_out_before_its_server_is_made(
    index_server: IndexServer, http_client: HttpClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """uv may start as soon as the port listens: a request sent while the server is
    still being made (its modules loading) waits in the backlog and is answered; a memo
    closed before its server was made closes cleanly."""
    _publish(index_server)
    release = threading.Event()
    made = memo_server.server_on

    def held(listener: socket.socket, memo: IndexMemo) -> http.server.ThreadingHTTPServer:
        assert release.wait(30), "the test never let the server be made"
        return made(listener, memo)

    monkeypatch.setattr(index_memo, "server_on", held)
    with IndexMemo(http_client) as memo:
        local = memo.local(index_server.url("pypi"))  # returns while the server is held back
        path = local.split(str(memo.port), 1)[1]
        connection = http.client.HTTPConnection("127.0.0.1", memo.port, timeout=30)
        connection.request("GET", f"{path}/alpha/")  # connected and sent: in the backlog
        assert index_server.requests() == []
        release.set()
        response = connection.getresponse()
        assert response.status == 200 and b"alpha-1.0" in response.read()
        connection.close()
    release.clear()
    with IndexMemo(http_client) as closed_early:
        closed_early.local(index_server.url("pypi"))
        threading.Timer(0.2, release.set).start()  # close() waits for the server, then stops it
    assert not [t for t in threading.enumerate() if t.name.startswith("cudaup-index-memo")]


def test_closing_does_not_wait_for_the_servers_next_look(
    index_server: IndexServer, http_client: HttpClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server's loop looks for a stop between waits; closing wakes it instead of
    waiting for the next look (an hour here: a close that waited would not return)."""
    _publish(index_server)
    monkeypatch.setattr(index_memo, "POLL_INTERVAL", 3600.0)
    memo = IndexMemo(http_client)
    local = memo.local(index_server.url("pypi"))
    assert _get(f"{local}/alpha/")[0] == 200  # served: the loop is in its wait
    closing = threading.Thread(target=memo.close, daemon=True)
    closing.start()
    closing.join(60)
    assert not closing.is_alive(), "close() waited for the server loop's next look"
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", memo.port), timeout=5).close()
    assert not [t for t in threading.enumerate() if t.name.startswith("cudaup-index-memo")]


def _only_upstream_ports(server: IndexServer, text: str) -> None:
    """Every loopback URL in ``text`` is the upstream's: the memo's port never shows."""
    ports = set(re.findall(r"127\.0\.0\.1:(\d+)", text))
    assert ports <= {str(server.server.server_address[1])}, ports


def _wait_for(condition: Callable[[], bool], deadline: float = 30.0) -> None:
    end = time.monotonic() + deadline
    while not condition():
        assert time.monotonic() < end, "the state never came"
        time.sleep(0.01)


def test_pages_are_rewritten_with_hashes_and_attributes_as_sent(memo: IndexMemo) -> None:
    page_url = "https://pypi.example/simple/alpha/"
    memo.local("https://pypi.example/simple")
    sha = "0" * 64
    page = (
        f'<a href="https://files.example/p/alpha-1.0-py3-none-any.whl#sha256={sha}" '
        'data-core-metadata="sha256=1" data-requires-python="&gt;=3.10">alpha-1.0</a>\n'
        f"<a href='../../p/alpha-0.9.tar.gz#sha256={sha}'>alpha-0.9</a>\n"
        '<a href="mailto:someone@example">not a file</a>\n'
    ).encode()
    rewritten = rewrite_html(page, page_url, memo._base).body.decode()
    base = memo.local("https://pypi.example/simple").removesuffix("/i/0")
    assert f'href="{base}/f/https/files.example/p/alpha-1.0-py3-none-any.whl#sha256={sha}"' in (
        rewritten
    )
    # A relative href is resolved against the upstream page, not the memo's.
    assert f'href="{base}/f/https/pypi.example/p/alpha-0.9.tar.gz#sha256={sha}"' in rewritten
    assert 'data-core-metadata="sha256=1" data-requires-python="&gt;=3.10"' in rewritten
    assert 'href="mailto:someone@example"' in rewritten  # not a file the memo forwards
    document = {
        "meta": {"api-version": "1.1"},
        "files": [
            {"url": "https://files.example/p/alpha-1.0.tar.gz", "hashes": {"sha256": sha}},
            {"url": "../../p/alpha-0.8.tar.gz", "hashes": {}, "yanked": '"url": "x"'},
        ],
    }
    answer = json.loads(rewrite_json(json.dumps(document).encode(), page_url, memo._base).body)
    assert [f["url"] for f in answer["files"]] == [
        f"{base}/f/https/files.example/p/alpha-1.0.tar.gz",
        f"{base}/f/https/pypi.example/p/alpha-0.8.tar.gz",
    ]
    assert answer["files"][0]["hashes"] == {"sha256": sha} and answer["meta"] == document["meta"]
    assert answer["files"][1]["yanked"] == '"url": "x"'
    # What leaves the plan names the upstream again.
    assert memo.upstream_text(rewritten).count("https://files.example/p/alpha-1.0") == 1


def test_uvs_command_line_does_not_show_the_memo(
    index_server: IndexServer, memo: IndexMemo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The memo's secret path reaches uv by its environment (the owner's and root's to
    read), never by its command line (every local user's, through ``ps``)."""
    _publish(index_server)
    seen: list[tuple[list[str], dict[str, str]]] = []
    real_run = UvRunner._run

    def recorded(
        self: UvRunner, argv: list[str], environment: dict[str, str], *rest: Any
    ) -> tuple[int, str, str]:
        seen.append((argv, environment))
        return real_run(self, argv, environment, *rest)

    monkeypatch.setattr(UvRunner, "_run", recorded)
    local = write_local_index(tmp_path / "a dir", {}, "test")
    job = CompileJob(("alpha",), (), (3, 12), PLATFORM, (local,), index_server.url("pypi"))
    assert UvRunner(tmp_path / "uv", tmp_path, 30.0, memo=memo).compile(job).ok
    ((argv, environment),) = seen
    assert not [a for a in argv if "127.0.0.1" in a]
    assert environment["UV_DEFAULT_INDEX"] == memo.local(index_server.url("pypi"))
    assert environment["UV_INDEX"] == local and "%20" in local  # one URL, quoted


@pytest.mark.pypi
@pytest.mark.slow
def test_live_pypi_through_the_memo_resolves_as_directly(memo: IndexMemo, tmp_path: Path) -> None:
    """On the live PyPI the memo's answer is uv's own, and a second run asks it nothing."""
    job = CompileJob(("requests",), (), (3, 12), PLATFORM, (), "https://pypi.org/simple")
    direct = UvRunner(tmp_path / "uv-direct", tmp_path, 30.0).compile(job)
    first = UvRunner(tmp_path / "uv-1", tmp_path, 30.0, memo=memo).compile(job)
    asked = memo.upstream_requests
    second = UvRunner(tmp_path / "uv-2", tmp_path, 30.0, memo=memo).compile(job)
    assert asked > 0 and memo.upstream_requests == asked
    assert direct.closure is not None and first.closure is not None
    assert second.closure is not None
    expected = {(p.name, p.version, p.index_url) for p in direct.closure}
    assert {(p.name, p.version, p.index_url) for p in first.closure} == expected
    assert {(p.name, p.version, p.index_url) for p in second.closure} == expected


def test_a_heads_answer_is_read_before_its_connection_is_used_again(
    index_server: IndexServer, http_client: HttpClient
) -> None:
    """A HEAD's answer left unread stays its connection's in http.client (until the answer
    object is collected), and the next request over it fails once sent ("Connection
    aborted.", ResponseNotReady): in the memo, whose handler holds the answer while it
    answers uv and another thread takes the connection, 9-11 backoff waits a cold plan."""
    _publish(index_server)
    url = index_server.url("pypi") + "/files/beta-1.0-py3-none-any.whl"
    with IndexMemo(http_client) as memo:
        head = http_client.open("HEAD", url, retry=False)
        answer = memo._kept_body(head, "HEAD", url)
        assert answer is not None and answer.status == 200
        again = http_client.open("HEAD", url, retry=False)  # the same kept connection
        assert again.status == 200 and head.status == 200  # the first one still held
        again.drain_conn()
        again.release_conn()
    assert [r.method for r in index_server.requests("/pypi/files/")] == ["HEAD", "HEAD"]


def _pages_at_once(base: str, count: int) -> list[int]:
    """The statuses of pages ``p0`` … asked from the memo at ``base`` all at once."""
    answers: list[tuple[int, bytes]] = []
    threads = [
        threading.Thread(
            target=lambda n=n: answers.append(_get(f"{base}/p{n}/", {"Accept": ACCEPT}))
        )
        for n in range(count)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return [status for status, _ in answers]


def test_connections_to_a_host_count_as_open_once_connected_not_once_answered(
    index_server: IndexServer, memo: IndexMemo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Twelve different pages asked at once, upstream holding every answer until eight
    requests are in at the same time (waited for): the memo opens connections two at a
    time, each counted as open once connected, so the next two open while the first
    are still unanswered.  Counted at the answer instead, only two would ever be in and
    the wait would end at its timeout."""
    index_server.root("pypi")
    for n in range(12):
        index_server.add("pypi", *wheel(f"p{n}", "1.0", tag=PURE))
    served, inside = index_server.handle, threading.Condition()
    state = {"in": 0, "most": 0}

    def held(request: http.server.BaseHTTPRequestHandler, body: bool) -> None:
        with inside:
            state["in"] += 1
            state["most"] = max(state["most"], state["in"])
            inside.notify_all()
            inside.wait_for(lambda: state["most"] >= 8, timeout=15)
            state["in"] -= 1
        served(request, body)

    monkeypatch.setattr(index_server, "handle", held)
    base = memo.local(index_server.url("pypi"))
    assert _pages_at_once(base, 12) == [200] * 12
    assert state["most"] >= 8


def test_each_upstream_host_is_looked_up_once_for_the_plan(
    index_server: IndexServer, memo: IndexMemo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Twelve pages at once from an index named ``localhost``: the memo opens several
    connections to it, and the name is looked up once for them all (the real lookup,
    counted); each connection is made to the address found."""
    index_server.root("pypi")
    for n in range(12):
        index_server.add("pypi", *wheel(f"p{n}", "1.0", tag=PURE))
    lookups: list[str] = []
    real = socket.getaddrinfo

    def counted(host: Any, *rest: Any, **named: Any) -> Any:
        if host == "localhost":
            lookups.append(host)
        return real(host, *rest, **named)

    monkeypatch.setattr(socket, "getaddrinfo", counted)
    upstream = index_server.url("pypi").replace("127.0.0.1", "localhost")
    base = memo.local(upstream)
    assert _pages_at_once(base, 12) == [200] * 12
    assert lookups == ["localhost"]


def test_a_request_handed_a_kept_connection_frees_its_opening_place_at_once() -> None:
    """Two requests find every connection busy and count as opening one (the most at
    once), then the pool hands each a kept connection: a third starts while they are
    still answered, instead of waiting for them to end."""
    ramp = Ramp(48, Lookups())
    held, started = threading.Event(), threading.Event()
    inside: list[str] = []

    def request(name: str, kept: bool) -> None:
        with ramp.slot():
            if kept:  # what the pool does when it hands this request a kept connection
                deadline_module._current.connected(False)
            inside.append(name)
            if name == "third":
                started.set()
            assert held.wait(30)

    threads = [threading.Thread(target=request, args=(n, True)) for n in ("first", "second")]
    for thread in threads:
        thread.start()
    _wait_for(lambda: len(inside) == 2)
    third = threading.Thread(target=request, args=("third", False))
    third.start()
    assert started.wait(30), "the third request waited for the first two to be answered"
    held.set()
    for thread in [*threads, third]:
        thread.join(30)


def _chunked_beside_a_length(
    server: IndexServer, path: str, stated: int, sent: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``path`` on ``server`` answers ``sent`` chunked, with a ``Content-Length`` of
    ``stated`` beside the chunking (RFC 9112 6.3: the chunking is the framing)."""
    served = server.handle

    def lying(request: http.server.BaseHTTPRequestHandler, body: bool) -> None:
        if request.path.split("?")[0] != path:
            served(request, body)
            return
        request.send_response(200)
        request.send_header("Content-Type", "application/octet-stream")
        request.send_header("Content-Length", str(stated))
        request.send_header("Transfer-Encoding", "chunked")
        request.end_headers()
        for start in range(0, len(sent), 64 * 1024):
            chunk = sent[start : start + 64 * 1024]
            request.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        request.wfile.write(b"0\r\n\r\n")

    monkeypatch.setattr(server, "handle", lying)


@pytest.mark.parametrize(
    "stated", [10, 4096], ids=["stated-below-the-limit", "stated-above-the-limit"]
)
def test_a_length_beside_chunking_neither_frames_nor_bounds_what_is_passed_on(
    index_server: IndexServer,
    http_client: HttpClient,
    monkeypatch: pytest.MonkeyPatch,
    stated: int,
) -> None:
    """An upstream that sends ``Content-Length`` beside chunked transfer: the chunks frame
    the body.  Passing the stated length on to uv (above the memo's limit: the body
    streamed) framed uv's answer by it, so the bytes past it, here a whole forged
    answer, were read by uv as the answer to its next request on that connection; below
    the limit the memo read the whole chunked body, of any size, into memory before
    refusing it for its length.  Now the body is passed on whole, without the length,
    the connection closed after it, as RFC 9112 asks of an intermediary."""
    _publish(index_server)
    path = "/pypi/files/alpha-1.0-py3-none-any.whl"
    forged = b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nforged"
    body = b"w" * 4096 + forged + b"z" * (2 * 1024 * 1024)
    _chunked_beside_a_length(index_server, path, stated, body, monkeypatch)
    with IndexMemo(http_client, limit=1024) as memo:
        _get(memo.local(index_server.url("pypi")) + "/alpha/", {"Accept": JSON})
        local = urlsplit(memo.local(index_server.url("pypi")))
        files = local.path.removesuffix("/i/0") + "/f/http/"
        connection = http.client.HTTPConnection(local.netloc, timeout=30)
        try:
            connection.request("GET", files + index_server.base.removeprefix("http://") + path)
            answer = connection.getresponse()
            assert (answer.status, answer.getheader("Content-Length")) == (200, None)
            assert answer.read() == body
            assert answer.will_close  # the body ends where the connection does
        finally:
            connection.close()
