"""The HTTP cache uses an entry only when it is exactly what cudaup wrote there.

A cached manifest vouches for the checksums of everything installed from it, so a
corrupt, torn or planted entry must be a miss (fetched again), never trusted and
never a crash."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from cudaup.config import Settings
from cudaup.net.backoff import NO_WAIT
from cudaup.net.http import HttpClient
from cudaup.net.response_cache import HttpCache
from tests.net.test_http import ScriptedServer, reply

URL = "https://developer.download.nvidia.com/compute/cuda/redist/redistrib_13.0.1.json"
BODY = b'{"release_label": "13.0.1"}'


def _entry(tmp_path: Path) -> tuple[HttpCache, Path, Path]:
    cache = HttpCache(tmp_path / "c")
    cache.store(URL, 200, '"v1"', None, BODY)
    [meta] = (tmp_path / "c" / "http").rglob("*.json")
    return cache, meta, meta.with_suffix(".body")


def test_an_entry_round_trips(tmp_path: Path) -> None:
    cache, _, _ = _entry(tmp_path)
    entry = cache.lookup(URL)
    assert entry is not None and entry.body == BODY and entry.etag == '"v1"'


def _rewrite_meta(change: Callable[[dict[str, object]], object]) -> Callable[[Path, Path], object]:
    def damage(meta: Path, body: Path) -> None:
        document = json.loads(meta.read_text())
        replaced = change(document)
        meta.write_text(json.dumps(document if replaced is None else replaced))

    return damage


def _body_a_link(meta: Path, body: Path) -> None:
    body.unlink()
    body.symlink_to(meta)


def _meta_a_directory(meta: Path, body: Path) -> None:
    meta.unlink()
    meta.mkdir()


def _body_a_fifo(meta: Path, body: Path) -> None:
    body.unlink()
    os.mkfifo(body)


DAMAGE: dict[str, Callable[[Path, Path], object]] = {
    "meta-nested-deep": lambda meta, body: meta.write_text("[" * 100_000),
    "meta-not-json": lambda meta, body: meta.write_bytes(b"\xff\x00"),
    "meta-a-list": _rewrite_meta(lambda d: [d]),
    "meta-huge-int": lambda meta, body: meta.write_text('{"status": ' + "1" * 5000 + "}"),
    "status-text": _rewrite_meta(lambda d: d.update(status="200")),
    "status-bool": _rewrite_meta(lambda d: d.update(status=True)),
    "stored-at-null": _rewrite_meta(lambda d: d.update(stored_at=None)),
    "etag-a-list": _rewrite_meta(lambda d: d.update(etag=["x"])),
    "no-digest": _rewrite_meta(lambda d: d.pop("sha256")),
    "other-url": _rewrite_meta(lambda d: d.update(url=URL + "x")),
    "body-same-size-other-bytes": lambda meta, body: body.write_bytes(BODY.replace(b"1", b"2")),
    "body-torn": lambda meta, body: body.write_bytes(BODY[:-3]),
    "body-a-link": _body_a_link,
    "body-writable-by-others": lambda meta, body: body.chmod(0o666),
    "meta-writable-by-group": lambda meta, body: meta.chmod(0o664),
    "body-owned-by-another-user": lambda meta, body: os.chown(body, 65534, 65534),
    "meta-a-directory": _meta_a_directory,
    "body-a-fifo": _body_a_fifo,
}


@pytest.mark.parametrize("damage", DAMAGE.values(), ids=DAMAGE.keys())
def test_a_damaged_or_planted_entry_is_a_miss(
    tmp_path: Path, damage: Callable[[Path, Path], object]
) -> None:
    cache, meta, body = _entry(tmp_path)
    damage(meta, body)
    assert cache.lookup(URL) is None


def test_a_tampered_cached_document_is_fetched_again(tmp_path: Path) -> None:
    """Through the client: the poisoned body is never returned; the server's is."""
    with ScriptedServer({"/m.json": reply(200, BODY, ETag='"v1"')}) as server:
        http = HttpClient(Settings.from_env(cache_dir=tmp_path / "c"), backoff=NO_WAIT)
        url = server.url + "/m.json"
        assert http.get(url, cache="manifest").body == BODY
        assert http.get(url, cache="manifest").from_cache and len(server.hits) == 1
        [body] = (tmp_path / "c" / "http").rglob("*.body")
        body.write_bytes(BODY.replace(b"13.0.1", b"66.6.6"))  # same size, other checksums
        again = http.get(url, cache="manifest")
        assert again.body == BODY and not again.from_cache and len(server.hits) == 2
