"""A project page read again is taken from its digest, and only from one that is its own.

The digest (the parsed files, kept beside the cached answer) is bound to the page's
bytes by their SHA-256 and checked as the answer is: one that speaks for other bytes,
is torn or damaged, of another format, or writable by others is not used, the page is
parsed again, and the files are the same as a first read's.  Pages come from a loopback
index (tests/plan/pyindex.py) as PyPI serves them, JSON and HTML."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from cudaup.config import Settings
from cudaup.net.http import HttpClient
from cudaup.resolve.pypi import DIGEST_FORMAT, DistFile, PackageIndex
from tests.plan.pyindex import IndexServer

WHEEL = "demo-1.0-py3-none-any.whl"


def _served(server: IndexServer, *, html_only: bool) -> str:
    server.root("pypi", html_only=html_only)
    server.add("pypi", WHEEL, b"wheel bytes", requires_python=">=3.9", pep658=False)
    server.add("pypi", "demo-2.0-py3-none-any.whl", b"newer", yanked="broken build", pep658=False)
    server.add("pypi", "demo-2.0.tar.gz", b"sdist", hashed=False)
    return server.url("pypi")


def _index(server: IndexServer, tmp_path: Path, *, refresh: bool = False) -> PackageIndex:
    settings = Settings.from_env(cache_dir=tmp_path / "cache", refresh=refresh)
    return PackageIndex(HttpClient(settings), server.url("pypi"))


def _digest_file(tmp_path: Path) -> Path:
    [path] = (tmp_path / "cache" / "http").rglob("*.files")
    return path


def _split(path: Path) -> tuple[dict[str, object], dict[str, object]]:
    header, _, payload = path.read_bytes().partition(b"\n")
    return json.loads(header), json.loads(payload)


def _rewrite(path: Path, header: dict[str, object], document: dict[str, object]) -> None:
    """Write a digest as cudaup writes one: the header's size and SHA-256 match."""
    payload = json.dumps(document).encode()
    header = {**header, "size": len(payload), "sha256": hashlib.sha256(payload).hexdigest()}
    path.write_bytes(json.dumps(header).encode() + b"\n" + payload)


def _field(files: list[DistFile], name: str = WHEEL) -> str | None:
    return next(f.requires_python for f in files if f.filename == name)


@pytest.mark.parametrize("html_only", [False, True], ids=["json", "html"])
def test_a_page_read_again_is_its_digest_and_the_same_files(
    index_server: IndexServer, tmp_path: Path, html_only: bool
) -> None:
    _served(index_server, html_only=html_only)
    first = _index(index_server, tmp_path).files("demo")
    digest = _digest_file(tmp_path)
    again = _index(index_server, tmp_path).files("demo")
    assert again == first and len(first) == 3
    # The second read took the digest: one written as cudaup writes them is believed.
    header, document = _split(digest)
    columns = document["files"]
    assert isinstance(columns, dict) and columns["requires_python"][0] == ">=3.9"
    columns["requires_python"][0] = ">=3.10"
    _rewrite(digest, header, document)
    assert _field(_index(index_server, tmp_path).files("demo")) == ">=3.10"


def _damage_payload(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data.replace(b">=3.9", b">=3.8"))  # same size, other bytes


def _forged(path: Path, header: dict[str, object] | None = None, **document: object) -> None:
    """A digest written as cudaup writes one, but for a field changed (so that one used
    shows) and ``header``'s and ``document``'s fields replaced."""
    kept_header, kept = _split(path)
    columns = kept["files"]
    assert isinstance(columns, dict)
    columns["requires_python"][0] = ">=3.8"
    _rewrite(path, {**kept_header, **(header or {})}, {**kept, **document})


def _bad_value(column: str, value: object, at: int = 0) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        header, document = _split(path)
        columns = document["files"]
        assert isinstance(columns, dict)
        columns["requires_python"][0] = ">=3.8"
        columns[column][at] = value
        _rewrite(path, header, document)

    return damage


def _short_column(path: Path) -> None:
    header, document = _split(path)
    columns = document["files"]
    assert isinstance(columns, dict)
    columns["requires_python"][0] = ">=3.8"
    columns["yank_reason"].pop()
    _rewrite(path, header, document)


def _a_directory(path: Path) -> None:
    path.unlink()
    path.mkdir()


def _torn(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-10])


DAMAGE: dict[str, Callable[[Path], object]] = {
    "payload-changed": _damage_payload,
    "torn": _torn,
    "another-body": lambda path: _forged(path, {"source_sha256": "0" * 64}),
    "another-kind": lambda path: _forged(path, {"kind": "pages"}),
    "another-url": lambda path: _forged(path, {"url": "https://elsewhere.example/simple/demo/"}),
    "another-format": lambda path: _forged(path, format=DIGEST_FORMAT + 1),
    "another-page": lambda path: _forged(path, page="https://elsewhere.example/simple/demo/"),
    "size-as-text": _bad_value("size", "11"),
    "size-as-bool": _bad_value("size", True),
    "size-negative": _bad_value("size", -1),
    "size-beyond-a-pebibyte": _bad_value("size", 2**51),
    "yanked-as-text": _bad_value("yanked", "no"),
    "sha256-not-hex": _bad_value("sha256", "z" * 64),
    "sha256-upper-case": _bad_value("sha256", "AB" * 32),
    "name-refused": _bad_value("filename", "../demo-1.0-py3-none-any.whl"),
    "name-with-a-separator": _bad_value("filename", "a/demo-1.0-py3-none-any.whl", at=1),
    "a-column-short": _short_column,
    "a-column-missing": lambda path: _forged(path, files={"filename": [WHEEL]}),
    "rows-not-columns": lambda path: _forged(path, files=[[WHEEL]]),
    "not-json": lambda path: path.write_bytes(b"\xff\n\xff"),
    "no-header": lambda path: path.write_bytes(b"{}"),
    "writable-by-others": lambda path: path.chmod(0o666),
    "a-directory": _a_directory,
}


@pytest.mark.parametrize("damage", DAMAGE.values(), ids=DAMAGE.keys())
def test_a_digest_that_is_not_the_pages_own_is_not_used(
    index_server: IndexServer, tmp_path: Path, damage: Callable[[Path], object]
) -> None:
    _served(index_server, html_only=False)
    first = _index(index_server, tmp_path).files("demo")
    damage(_digest_file(tmp_path))
    asked = len(index_server.requests())
    again = _index(index_server, tmp_path).files("demo")
    assert again == first and _field(again) == ">=3.9"
    assert len(index_server.requests()) == asked  # the cached answer, parsed again


def test_a_page_that_changed_is_parsed_and_its_digest_replaced(
    index_server: IndexServer, tmp_path: Path
) -> None:
    _served(index_server, html_only=False)
    _index(index_server, tmp_path).files("demo")
    index_server.roots["pypi"].pages["demo"][0]["requires-python"] = ">=3.11"
    changed = _index(index_server, tmp_path, refresh=True).files("demo")
    assert _field(changed) == ">=3.11"
    _, document = _split(_digest_file(tmp_path))
    columns = document["files"]
    assert isinstance(columns, dict) and columns["requires_python"][0] == ">=3.11"
    assert _field(_index(index_server, tmp_path).files("demo")) == ">=3.11"
