"""A hostile NVIDIA mirror, end to end: ``cudaup install`` from a server whose manifest
names paths outside the store, or is broken in every way a parser can be broken.

Each case runs the real CLI against a loopback server inside a sandboxed filesystem
(:mod:`tests.sandbox`), snapshotted before and after: the install is refused with exit
8, the message names the document's URL, the field and the value, and nothing
outside the cache changed.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cudaup.config import Settings
from cudaup.errors import EXIT_CODES, SourceFormatError
from cudaup.net.http import HttpClient
from cudaup.resolve.sources import NvidiaSource
from tests.faultserver import FaultServer
from tests.helpers import run_cli
from tests.sandbox import Sandbox, describe, sandbox  # noqa: F401 - fixture

LABEL = "99.0.1"
MANIFEST_PATH = f"/compute/cuda/redist/redistrib_{LABEL}.json"
TOP = f"cuda_nvcc-linux-x86_64-{LABEL}-archive"
RELATIVE = f"cuda_nvcc/linux-x86_64/{TOP}.tar.xz"


def tiny_archive() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz") as archive:
        for name, data, mode in (
            ("LICENSE", b"license\n", 0o644),
            ("bin/nvcc", b"#!/bin/sh\necho nvcc\n", 0o755),
        ):
            info = tarfile.TarInfo(f"{TOP}/{name}")
            info.size, info.mode = len(data), mode
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


ARCHIVE = tiny_archive()


def manifest(key: str = "cuda_nvcc", **archive: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "relative_path": RELATIVE,
        "sha256": hashlib.sha256(ARCHIVE).hexdigest(),
        "md5": hashlib.md5(ARCHIVE).hexdigest(),
        "size": str(len(ARCHIVE)),
    }
    entry.update(archive)
    return {
        "release_date": "2030-01-01",
        "release_label": LABEL,
        "release_product": "cuda",
        key: {
            "name": "CUDA NVCC",
            "license": "CUDA Toolkit",
            "version": LABEL,
            "linux-x86_64": entry,
        },
    }


def install(
    server: FaultServer, body: bytes, monkeypatch: pytest.MonkeyPatch, capsys: Any, *extra: str
) -> Any:
    server.add(MANIFEST_PATH, body)
    server.add("/compute/cuda/redist/" + RELATIVE, ARCHIVE)
    monkeypatch.setenv("CUDAUP_NVIDIA_DOWNLOAD_URL", server.url)
    monkeypatch.setenv("CUDAUP_NVIDIA_ARCHIVE_URL", server.url)
    return run_cli(
        capsys, "install", LABEL, "--channel", "redist", "--all",
        "--platform", "linux-x86_64", "-q", *extra,
    )  # fmt: skip


def deep(depth: int) -> bytes:
    return b'{"cuda_nvcc": ' + b"[" * depth + b"]" * depth + b"}"


HOSTILE: list[tuple[str, bytes, str]] = [
    # (id, manifest bytes, what the message must say besides the URL)
    (
        "key-climbs-to-tmp",
        json.dumps(manifest("../../../../tmp/x")).encode(),
        "component key '../../../../tmp/x'",
    ),
    ("key-with-slash", json.dumps(manifest("cuda/nvcc")).encode(), "component key 'cuda/nvcc'"),
    (
        "relative-path-absolute",
        json.dumps(manifest(relative_path="/srv/data/keep.txt")).encode(),
        "relative_path '/srv/data/keep.txt'",
    ),
    (
        "relative-path-dotdot",
        json.dumps(manifest(relative_path="cuda_nvcc/../../../../srv/data/x.tar.xz")).encode(),
        "relative_path 'cuda_nvcc/../../../../srv/data/x.tar.xz'",
    ),
    (
        "relative-path-backslash",
        json.dumps(manifest(relative_path="cuda_nvcc\\..\\..\\x.tar.xz")).encode(),
        "relative_path 'cuda_nvcc\\\\..\\\\..\\\\x.tar.xz'",
    ),
    ("size-5000-digits", json.dumps(manifest(size="1" * 5000)).encode(), "size '1111"),
    ("size-over-a-pebibyte", json.dumps(manifest(size=2**60)).encode(), f"size {2**60}"),
    (
        "size-5000-digit-number",
        json.dumps(manifest()).replace('"size": "', '"size": 1' + "0" * 4999 + ', "x": "').encode(),
        "is not valid JSON",
    ),
    ("nested-100000-deep", deep(100_000), "nested too deeply"),
    ("byte-order-mark", b"\xef\xbb\xbf" + json.dumps(manifest()).encode(), "byte-order mark"),
    ("invalid-utf8", json.dumps(manifest()).encode().replace(b"CUDA NVCC", b"\xff\xfe"), "UTF-8"),
    (
        "version-not-a-string",
        json.dumps(manifest()).replace(f'"version": "{LABEL}"', '"version": 5').encode(),
        "cuda_nvcc version 5",
    ),
    (
        "archive-not-an-object",
        json.dumps({"cuda_nvcc": {"version": "1", "linux-x86_64": ["x"]}}).encode(),
        "expected an object",
    ),
    ("not-an-object", b"[1, 2, 3]", "is not a JSON object"),
    (
        "component-is-a-list",
        json.dumps({**manifest(), "cuda_nvcc": [manifest()["cuda_nvcc"]]}).encode(),
        "field 'cuda_nvcc'",
    ),
    (
        "component-without-version",
        json.dumps({**manifest(), "x_top": {"linux-x86_64": {"y": 1}}}).encode(),
        "component 'x_top' has no version",
    ),
]


@pytest.mark.parametrize(("body", "says"), [h[1:] for h in HOSTILE], ids=[h[0] for h in HOSTILE])
def test_a_hostile_manifest_is_refused_and_changes_nothing(
    sandbox: Sandbox,  # noqa: F811 - fixture
    fault_server: FaultServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    body: bytes,
    says: str,
) -> None:
    real_tmp_x = describe(Path("/tmp/x"))
    before = sandbox.snapshot()
    result = install(fault_server, body, monkeypatch, capsys)
    assert result.code == EXIT_CODES["source-format"], result.err
    assert f"{fault_server.url}{MANIFEST_PATH}" in result.err and says in result.err, result.err
    assert "internal error" not in result.err and result.err.count("\n") == 1
    after = sandbox.snapshot()
    assert sandbox.changed_outside(before, after, [sandbox.cache]) == set()
    assert not (sandbox.home / "toolkits").exists() or not any(
        (sandbox.home / "toolkits").iterdir()
    )
    assert describe(Path("/tmp/x")) == real_tmp_x  # the literal path of issue #11


def test_the_json_error_object_names_the_refusal(
    sandbox: Sandbox,  # noqa: F811 - fixture
    fault_server: FaultServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    body = json.dumps(manifest("../../../../tmp/x")).encode()
    result = install(fault_server, body, monkeypatch, capsys, "--json")
    error = result.json()["error"]
    assert error["kind"] == "source-format" and error["exit_code"] == 8
    assert "component key '../../../../tmp/x'" in error["message"]


def test_the_same_manifest_with_safe_names_installs_inside_the_store(
    sandbox: Sandbox,  # noqa: F811 - fixture
    fault_server: FaultServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The control: the harness sees writes, and they are all in the store and cache."""
    before = sandbox.snapshot()
    result = install(fault_server, json.dumps(manifest()).encode(), monkeypatch, capsys)
    assert result.code == 0, result.err
    after = sandbox.snapshot()
    changed = sandbox.changed(before, after)
    assert "opt/cudaup/home/toolkits/99.0.1/licenses/cuda_nvcc/LICENSE" in changed
    assert sandbox.changed_outside(before, after, [sandbox.cache, sandbox.home]) == set()


@pytest.mark.parametrize(
    "unknown",
    [{"x_top": {"y": 1}}, {"x_top": {}}, {"x_count": 3, "x_note": None}, {"release_x": [1]}],
    ids=["object", "empty-object", "scalars", "release-list"],
)
def test_fields_a_later_format_adds_are_ignored(
    sandbox: Sandbox,  # noqa: F811 - fixture
    fault_server: FaultServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    unknown: dict[str, Any],
) -> None:
    """An object with neither a component field nor a platform is not a component."""
    before = sandbox.snapshot()
    result = install(fault_server, json.dumps({**manifest(), **unknown}).encode(), monkeypatch,
                     capsys)  # fmt: skip
    assert result.code == 0, result.err
    assert (sandbox.home / "toolkits/99.0.1/bin/nvcc").is_file()
    after = sandbox.snapshot()
    assert sandbox.changed_outside(before, after, [sandbox.cache, sandbox.home]) == set()


@pytest.mark.parametrize(
    ("path", "body", "fetch", "says"),
    [
        ("/compute/cuda/redist/", b"<li>\xff</li>", "listing", "is not UTF-8"),
        ("/compute/cuda/redist/", b"<" * (10 * 2**20 + 1), "listing", "is larger than"),
        (
            "/compute/cuda/99.0.1/docs/sidebar/md5sum.txt",
            b"\xef\xbb\xbf" + b"8c56e3cb1ab74370aafed5a4600bc5bc  x.run\n",
            "md5sums",
            "byte-order mark",
        ),
        (
            "/compute/cuda/99.0.1/docs/sidebar/md5sum.txt",
            b"8c56e3cb1ab74370aafed5a4600bc5bc  local_installers/..\n",
            "md5sums",
            "file name '..'",
        ),
        (
            "/cuda-99-0-1-download-archive",
            b'<div data-react-props="' + b"[" * 100_000 + b'"></div>',
            "archive_page",
            "nested too deeply",
        ),
    ],
    ids=["listing-not-utf8", "listing-oversized", "md5sum-bom", "md5sum-dotdot", "page-deep"],
)
def test_every_document_refusal_names_its_url(
    fault_server: FaultServer, path: str, body: bytes, fetch: str, says: str
) -> None:
    fault_server.add(path, body)
    settings = Settings.from_env(download_url=fault_server.url, archive_url=fault_server.url)
    source = NvidiaSource(HttpClient(settings))
    calls: dict[str, Callable[[], object]] = {
        "listing": source.listing,
        "md5sums": lambda: source.md5sums(LABEL),
        "archive_page": lambda: source.archive_page(LABEL),
    }
    with pytest.raises(SourceFormatError) as caught:
        calls[fetch]()
    assert f"{fault_server.url}{path}" in str(caught.value) and says in str(caught.value)


def test_a_bom_before_html_is_allowed(fault_server: FaultServer) -> None:
    listing = b"\xef\xbb\xbf<li><a href='redistrib_13.0.1.json'>redistrib_13.0.1.json</a></li>"
    fault_server.add("/compute/cuda/redist/", listing)
    settings = Settings.from_env(download_url=fault_server.url)
    assert [r.label for r in NvidiaSource(HttpClient(settings)).listing()] == ["13.0.1"]
