"""Reading the libraries a wheel links with range requests, cached by (URL, sha256)."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import pytest

from cudaup.config import Settings
from cudaup.errors import NetworkError, SourceFormatError
from cudaup.net.http import HttpClient
from cudaup.plan.wheels import WheelFacts
from cudaup.resolve.pypi import DistFile
from tests.plan.builders import ABI3, shared_object, wheel
from tests.plan.pyindex import IndexServer

BIG = 3 * 1024 * 1024


def _file(server: IndexServer, filename: str, body: bytes, *, sha: bool = True) -> DistFile:
    url = server.add("pypi", filename, body, pep658=False)
    digest = hashlib.sha256(body).hexdigest() if sha else None
    return DistFile(filename, url, digest, len(body), None, False, False)


def _facts(tmp_path: Path) -> WheelFacts:
    settings = Settings.from_env(cache_dir=tmp_path / "cache")
    return WheelFacts(HttpClient(settings, retries=0), tmp_path / "cache" / "plan" / "wheels")


def _sgl_kernel(major: int) -> tuple[str, bytes]:
    ops = shared_object([f"libcudart.so.{major}", "libc10.so"], "common_ops.so", code=BIG)
    helper = shared_object(["libc.so.6"], "helper.so", code=4096, seed=2)
    return wheel(
        "sgl-kernel",
        "0.3.21",
        tag=ABI3,
        shared={"sgl_kernel/common_ops.abi3.so": ops, "sgl_kernel/helper.abi3.so": helper},
    )


def test_reads_only_the_start_of_the_members(index_server: IndexServer, tmp_path: Path) -> None:
    filename, body = _sgl_kernel(12)
    file = _file(index_server, filename, body)
    linked = _facts(tmp_path).libraries(file)
    assert "libcudart.so.12" in linked.libraries and linked.complete
    assert linked.members_total == 2
    served = index_server.requests(f"/pypi/files/{filename}")
    assert served and all(r.range for r in served)
    assert len(body) > BIG and len(served) <= 4  # the tail, and one chunk per member read


def test_a_warm_read_asks_nothing_and_a_bad_entry_is_read_again(
    index_server: IndexServer, tmp_path: Path
) -> None:
    filename, body = _sgl_kernel(13)
    file = _file(index_server, filename, body)
    first = _facts(tmp_path).libraries(file)
    before = len(index_server.requests())
    again = _facts(tmp_path).libraries(file)  # a new process: only the disk cache
    assert again == first and len(index_server.requests()) == before
    for entry in (tmp_path / "cache" / "plan" / "wheels").rglob("*.json"):
        document = json.loads(entry.read_text())
        document["fact"]["libraries"] = "libcudart.so.12"  # not a list: not trusted
        entry.write_text(json.dumps(document))
    assert _facts(tmp_path).libraries(file) == first
    assert len(index_server.requests()) > before
    # The same URL with other bytes (another sha256) is another fact.
    changed = DistFile(filename, file.url, "0" * 64, file.size, None, False, False)
    assert _facts(tmp_path).libraries(changed) == first
    # No sha256 from the index: never cached on disk.
    unhashed = DistFile(filename, file.url, None, file.size, None, False, False)
    count = len(index_server.requests())
    _facts(tmp_path).libraries(unhashed)
    _facts(tmp_path).libraries(unhashed)
    assert len(index_server.requests()) > count + 2


def test_bundled_runtime_and_no_shared_objects(index_server: IndexServer, tmp_path: Path) -> None:
    vendored = shared_object([], "libcudart-1a2b3c4d.so.12", code=1024)
    name, body = wheel(
        "kern", "1.0", tag=ABI3, shared={"kern.libs/libcudart-1a2b3c4d.so.12": vendored}
    )
    linked = _facts(tmp_path).libraries(_file(index_server, name, body))
    assert linked.libraries == ("libcudart-1a2b3c4d.so.12",) and linked.members_total == 0
    name, body = wheel("plain", "1.0", tag=ABI3)
    linked = _facts(tmp_path).libraries(_file(index_server, name, body))
    assert linked.libraries == () and "ships no shared object" in linked.describe()


def test_what_a_server_or_a_file_gets_wrong(index_server: IndexServer, tmp_path: Path) -> None:
    filename, body = _sgl_kernel(12)
    facts = _facts(tmp_path)
    garbage = _file(
        index_server, "garbage-1.0-cp312-cp312-manylinux_2_28_x86_64.whl", bytes(200_000)
    )
    with pytest.raises(SourceFormatError, match="end-of-directory"):
        facts.libraries(garbage)
    truncated = _file(
        index_server, "cut-1.0-cp312-cp312-manylinux_2_28_x86_64.whl", body[: len(body) // 2]
    )
    with pytest.raises(SourceFormatError):
        facts.libraries(truncated)
    missing = DistFile(
        filename, index_server.url("pypi") + "/files/gone.whl", "a" * 64, None, None, False, False
    )
    with pytest.raises(SourceFormatError, match="HTTP 404"):
        facts.libraries(missing)
    index_server.root("down").down = True
    down = DistFile(
        filename, index_server.url("down") + "/files/x.whl", "b" * 64, None, None, False, False
    )
    with pytest.raises(NetworkError):
        facts.libraries(down)


def test_a_server_that_ignores_ranges(tmp_path: Path) -> None:
    from tests.faultserver import Fault, FaultServer

    filename, body = _sgl_kernel(12)
    with FaultServer() as server:
        server.add("/w.whl", body, Fault(ignore_range=True))
        file = DistFile(filename, server.url + "/w.whl", "c" * 64, len(body), None, False, False)
        with pytest.raises(SourceFormatError, match="does not honour Range"):
            _facts(tmp_path).libraries(file)
        server.add("/shifted.whl", body, Fault(wrong_range=True))
        shifted = DistFile(
            filename, server.url + "/shifted.whl", "d" * 64, None, None, False, False
        )
        with pytest.raises(SourceFormatError, match="another range than asked|end-of-directory"):
            _facts(tmp_path).libraries(shifted)


def test_zip_members_that_are_not_elf(index_server: IndexServer, tmp_path: Path) -> None:
    name, body = wheel(
        "odd",
        "1.0",
        tag=ABI3,
        shared={"odd/_x.so": b"INPUT(-lfoo)\n" * 10},
        compress=zipfile.ZIP_STORED,
    )
    linked = _facts(tmp_path).libraries(_file(index_server, name, body))
    assert linked.libraries == () and linked.members_read == ("odd/_x.so",)
