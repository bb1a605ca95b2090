"""Reading the libraries a wheel links with range requests, cached by (URL, sha256)."""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import io
import json
import os
import threading
import zipfile
from pathlib import Path

import pytest

from cudaup.config import Settings
from cudaup.errors import CudaupError, NetworkError, SourceFormatError
from cudaup.net.http import HttpClient
from cudaup.plan.wheels import PREFIX_LIMIT, WheelFacts
from cudaup.resolve.pypi import DistFile
from cudaup.util.parallel import Stop
from tests.plan.builders import ABI3, shared_object, wheel
from tests.plan.pyindex import IndexServer

BIG = 3 * 1024 * 1024
WAIT = 30.0  # far past any read here: reaching it means a read was never ended


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


def test_a_stopped_read_ends_at_once_its_range_under_way_cut_off(
    index_server: IndexServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A line whose search is over has its wheel reads stopped: the range under way is cut
    off while the server still holds its answer (it is not sent again, though the client
    retries and its connection was a kept one), nothing is kept, and the error says why.
    The plan's answer waits for its lines: a warm plan waited 0.1 s, every time, for an
    older line's range whose answer nobody wanted any more."""
    filename, body = _sgl_kernel(12)
    file = _file(index_server, filename, body)
    other_name, other_body = _sgl_kernel(13)
    other = _file(index_server, other_name.replace("0.3.21", "0.3.20"), other_body)
    path = f"/pypi/files/{filename}"
    stop, asked, answer = Stop(), threading.Event(), threading.Event()
    served = index_server.handle

    def holding_the_answer(request: http.server.BaseHTTPRequestHandler, body: bool) -> None:
        if request.path == path:
            asked.set()
            assert answer.wait(WAIT)  # the client must not wait for this
        served(request, body)

    monkeypatch.setattr(index_server, "handle", holding_the_answer)
    settings = Settings.from_env(cache_dir=tmp_path / "cache")
    http = HttpClient(settings, retries=2)
    facts = WheelFacts(http, tmp_path / "cache" / "plan" / "wheels")
    facts.libraries(other)  # its connection is kept: the stopped request goes over it
    before = http.requests_sent
    failure: list[BaseException] = []

    def read() -> None:
        try:
            facts.libraries(file, stop=stop)
        except BaseException as exc:  # asserted below
            failure.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert asked.wait(WAIT)
    stop.set()
    reader.join(WAIT)
    try:
        assert not reader.is_alive(), "the read waited for the answer it no longer wanted"
        assert len(failure) == 1 and isinstance(failure[0], CudaupError)
        assert "stopped: its answer is no longer wanted" in str(failure[0])
    finally:
        answer.set()
    assert http.requests_sent == before + 1  # not sent again
    stop.clear()
    linked = facts.libraries(file, stop=stop)  # nothing was kept: read again, whole
    assert "libcudart.so.12" in linked.libraries and linked.complete


def test_a_read_stopped_before_it_starts_asks_for_nothing(
    index_server: IndexServer, tmp_path: Path
) -> None:
    filename, body = _sgl_kernel(12)
    file = _file(index_server, filename, body)
    stop = Stop()
    stop.set()
    with pytest.raises(CudaupError, match="stopped: its answer is no longer wanted"):
        _facts(tmp_path).libraries(file, stop=stop)
    assert index_server.requests(f"/pypi/files/{filename}") == []


def test_a_read_waits_for_its_turn_only_to_fetch_and_holds_no_lock_meanwhile(
    index_server: IndexServer, tmp_path: Path
) -> None:
    """An older line's read waits for its turn before it goes to the network
    (``before_fetch``), never for facts that are kept, and without the wheel's lock: a newer
    line reading the same wheel meanwhile is not kept waiting, and the waiting read then
    finds its facts."""
    filename, body = _sgl_kernel(12)
    file = _file(index_server, filename, body)
    path = f"/pypi/files/{filename}"
    facts = _facts(tmp_path)
    waiting, go = threading.Event(), threading.Event()
    found: list[object] = []

    def turn() -> None:
        waiting.set()
        assert go.wait(WAIT)

    older = threading.Thread(
        target=lambda: found.append(facts.libraries(file, through=True, before_fetch=turn)),
        daemon=True,
    )
    older.start()
    assert waiting.wait(WAIT)
    read: list[object] = []  # the older one waits for its turn meanwhile
    newer = threading.Thread(
        target=lambda: read.append(facts.libraries(file, through=True)), daemon=True
    )
    newer.start()
    newer.join(WAIT)
    go.set()
    assert read, "the newer line's read waited for the older line's turn"
    served = len(index_server.requests(path))
    older.join(WAIT)
    assert found == read and "libcudart.so.12" in getattr(read[0], "libraries", ())
    assert len(index_server.requests(path)) == served  # found read, not read again
    asked: list[bool] = []
    facts.libraries(file, through=True, before_fetch=lambda: asked.append(True))
    assert asked == []  # kept: no turn to wait for


def test_a_read_opens_the_archive_from_the_end_read_already(
    index_server: IndexServer, tmp_path: Path
) -> None:
    """Handed the wheel's end read already (the index memo's, from its directory on), the
    read asks for no tail; without it, the tail comes first."""
    filename, body = _sgl_kernel(12)
    file = _file(index_server, filename, body)
    with zipfile.ZipFile(io.BytesIO(body)) as archive:
        start = archive.start_dir
    asked: list[str] = []

    def read(url: str) -> tuple[int, bytes, int]:
        asked.append(url)
        return start, body[start:], len(body)

    linked = _facts(tmp_path).libraries(file, read=read)
    assert "libcudart.so.12" in linked.libraries and asked == [file.url]
    ranges = [r.range for r in index_server.requests(f"/pypi/files/{filename}")]
    assert ranges and not any(str(r).startswith("bytes=-") for r in ranges), ranges


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
    with pytest.raises(SourceFormatError, match="not a readable wheel \\(File is not a zip file"):
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
        with pytest.raises(
            SourceFormatError, match="another range than asked|not a readable wheel"
        ):
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


@pytest.mark.parametrize("compress", [zipfile.ZIP_DEFLATED, zipfile.ZIP_STORED])
def test_a_dynamic_section_deep_in_a_huge_object(
    index_server: IndexServer, tmp_path: Path, compress: int
) -> None:
    """libmxnet.so: code in the first segment, strings past any prefix, .dynamic at the end."""
    needed = ["libcudart.so.11.0", "libnvrtc.so.11.2", "libcudnn.so.8"]
    library = shared_object(
        needed, "libmxnet.so", code=2 * 1024 * 1024, symbols=PREFIX_LIMIT + 4096, old_layout=True
    )
    name, body = wheel(
        "mxnet-cu112", "1.9.1", tag=ABI3, shared={"mxnet/libmxnet.so": library}, compress=compress
    )
    linked = _facts(tmp_path).libraries(_file(index_server, name, body))
    assert set(needed) <= set(linked.libraries) and "libdecoy.so.9" not in linked.libraries
    assert linked.complete and linked.members_read == ("mxnet/libmxnet.so",)
    evidence = linked.evidence("mxnet-cu112", "1.9.1")
    assert evidence is not None and evidence.cuda() == "CUDA 11.x"
    served = index_server.requests(f"/pypi/files/{name}")
    assert all(r.range for r in served) and len(served) < 20  # ranges grow, never the whole file
    if compress == zipfile.ZIP_STORED:  # read exactly: the headers, .dynamic, the names
        assert sum(_length(r.range) for r in served) < 1024 * 1024 < len(body)


def _length(spec: str | None) -> int:
    assert spec is not None
    first, last = spec.removeprefix("bytes=").split("-")
    return int(last) + 1 if not first else int(last) - int(first) + 1


def test_every_signal_a_wheel_carries(index_server: IndexServer, tmp_path: Path) -> None:
    facts = _facts(tmp_path)
    plain = shared_object(["libc.so.6"], "libtriton.so", code=8192)
    # triton: a bundled toolchain, no line of its own.
    name, body = wheel(
        "triton",
        "3.3.0",
        shared={
            "triton/_C/libtriton.so": plain,
            "triton/backends/nvidia/bin/ptxas": b"\x7fELF" + bytes(100),
            "triton/backends/nvidia/include/cuda.h": b"#define CUDA_VERSION 12080\n",
        },
    )
    found = facts.libraries(_file(index_server, name, body)).evidence("triton", "3.3.0")
    assert found is not None and found.kind == "any" and found.fits((12, 6)) and found.fits((13, 0))
    assert "triton/backends/nvidia/bin/ptxas" in found.how
    # paddle: its version module says the line (the big object is not read).
    big = shared_object(["libc.so.6"], "libpaddle.so", code=BIG)
    version_py = "full_version     = '2.6.2'\ncuda_version     = '11.8'\ncudnn_version = '8.6.0'\n"
    name, body = wheel(
        "paddlepaddle-gpu",
        "2.6.2",
        shared={"paddle/base/libpaddle.so": big, "paddle/version/__init__.py": version_py.encode()},
    )
    linked = facts.libraries(_file(index_server, name, body))
    found = linked.evidence("paddlepaddle-gpu", "2.6.2")
    assert found is not None and found.line == (11, 8) and linked.members_read == ()
    assert found.how == "paddle/version/__init__.py says cuda_version     = '11.8'"
    # bitsandbytes: one object per runtime; the set of runtimes is the set of lines.
    objects = {
        f"bitsandbytes/libbitsandbytes_cuda{tag}.so": shared_object(
            [f"libcudart.so.{'11.0' if tag < 120 else '12'}"], f"b{tag}.so", code=1024
        )
        for tag in (117, 118, 120, 121, 126, 128)
    }
    objects["bitsandbytes/libbitsandbytes_cpu.so"] = plain
    name, body = wheel("bitsandbytes", "0.45.5", shared=objects)
    found = facts.libraries(_file(index_server, name, body)).evidence("bitsandbytes", "0.45.5")
    assert found is not None and found.cuda() == "CUDA 11.7-11.8, 12.0-12.1, 12.6 and 12.8"
    assert found.fits((12, 8)) and found.fits((11, 7)) and not found.fits((12, 9))
    # cuda-bindings: links no runtime, dlopens libnvrtc.so.12 (a string in the binary).
    loader = shared_object(["libc.so.6"], "cynvrtc.so", code=4096) + b"\x00libnvrtc.so.12\x00"
    name, body = wheel("cuda-bindings", "12.8.0", shared={"cuda/bindings/cynvrtc.so": loader})
    linked = facts.libraries(_file(index_server, name, body))
    found = linked.evidence("cuda-bindings", "12.8.0")
    assert found is not None and found.cuda() == "CUDA 12.x"
    assert found.how == "loads libnvrtc.so.12 by name" and linked.loaded == ("libnvrtc.so.12",)
    # Nothing at all: no evidence (the planner decides what a silent wheel is).
    name, body = wheel("quiet", "1.0", shared={"quiet/_q.so": plain})
    assert facts.libraries(_file(index_server, name, body)).evidence("quiet", "1.0") is None


def test_a_member_that_inflates_past_its_size_is_refused(
    index_server: IndexServer, tmp_path: Path
) -> None:
    """The directory says how big a member is; inflating to other bytes is a lie, refused
    (its CRC fails; inflation goes in bounded chunks, so a thousandfold member stays small)."""
    library = shared_object(
        ["libcudart.so.12"], "libops.so", code=1024, symbols=PREFIX_LIMIT + 4096, old_layout=True
    )
    name, body = wheel("liar", "1.0", tag=ABI3, shared={"liar/libops.so": library})
    directory = body.rfind(b"PK\x01\x02", 0, body.rfind(b"liar/libops.so"))
    assert directory > 0
    # The central directory entry's uncompressed size (offset 24) claims 1 MiB.
    lying = body[: directory + 24] + (1024 * 1024).to_bytes(4, "little") + body[directory + 28 :]
    with pytest.raises(
        SourceFormatError, match="is not the 1048576 bytes its directory entry gives"
    ):
        _facts(tmp_path).libraries(_file(index_server, name, lying))


def test_a_bundled_library_that_loads_cublas_by_name(
    index_server: IndexServer, tmp_path: Path
) -> None:
    """ctranslate2's shape: its extension module links only the library auditwheel bundled
    beside it, which links no CUDA runtime (CUDA's is linked in) and dlopens
    ``libcublas.so.12`` from deep in its read-only data: a CUDA 12 build.  Its small
    objects name nothing, so its bundled libraries are read through, smallest first, but
    the CPU ones (libgomp, which here names ``libcublas.so.11`` and is smaller): for a
    request's own wheel and for a meta-package's child (faster-whisper's ctranslate2)."""
    ext = shared_object(["libctranslate2-a7a60d30.so.4.8.5", "libc.so.6"], "_ext.so", code=8192)
    bundled = shared_object(["libc.so.6"], "libctranslate2.so.4", code=2 * BIG)
    bundled += b"\x00libcuda.so.1\x00libcublas.so.12\x00" + os.urandom(64 * 1024)
    gomp = shared_object(["libc.so.6"], "libgomp.so.1", code=2 * 1024 * 1024, seed=3)
    gomp += b"\x00libcublas.so.11\x00"
    name, body = wheel(
        "ctranslate2",
        "4.8.5",
        shared={
            "ctranslate2/_ext.so": ext,
            "ctranslate2.libs/libctranslate2-a7a60d30.so.4.8.5": bundled,
            "ctranslate2.libs/libgomp-e985bcbb.so.1.0.0": gomp,
        },
    )
    file = _file(index_server, name, body)
    for linked in _facts(tmp_path).libraries(file), _facts(tmp_path).libraries(file, through=True):
        found = linked.evidence("ctranslate2", "4.8.5")
        assert found is not None and found.cuda() == "CUDA 12.x" and not found.fits((13, 0))
        assert found.how == "loads libcublas.so.12 by name"
    # The same wheel without the name: read through, still nothing (the planner decides).
    quiet = bundled.replace(b"libcublas.so.12", b"libquiet.so.12\x00")
    shared = {
        "ctranslate2/_ext.so": ext,
        "ctranslate2.libs/libctranslate2-a7a60d30.so.4.8.5": quiet,
    }
    name, body = wheel("ctranslate2", "4.8.4", shared=shared)
    linked = _facts(tmp_path).libraries(_file(index_server, name, body), through=True)
    assert linked.evidence("ctranslate2", "4.8.4") is None


def test_a_larger_object_of_its_own_is_read_through_for_a_request_only(
    index_server: IndexServer, tmp_path: Path
) -> None:
    """An extension module too large to read whole (ctranslate2's own ``_ext….so`` is 68 MB)
    is read through for a request's own wheel, not for a meta-package's child: reading
    flashinfer-python's children's so cost tens of megabytes a plan."""
    ext = shared_object(["libc.so.6"], "_big.so", code=2 * 1024 * 1024, seed=4)
    ext += b"\x00libcublas.so.12\x00"
    name, body = wheel("bigown", "1.0", shared={"bigown/_big.so": ext})
    file = _file(index_server, name, body)
    assert _facts(tmp_path).libraries(file).evidence("bigown", "1.0") is None  # a child's
    found = _facts(tmp_path).libraries(file, through=True).evidence("bigown", "1.0")
    assert found is not None and found.cuda() == "CUDA 12.x"


def test_a_library_read_through_stops_at_the_read_budget(
    index_server: IndexServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bundled library whose name lies past the budget: the reading stops there, says
    nothing of it, and costs no more than the budget (and the ranges in flight)."""
    from cudaup.net import ranged_file
    from cudaup.plan import wheels

    ext = shared_object(["libheavy-0a1b2c3d.so.1", "libc.so.6"], "_ext.so", code=8192)
    heavy = shared_object(["libc.so.6"], "libheavy.so.1", code=6 * 1024 * 1024, seed=5)
    heavy += b"\x00libcublas.so.12\x00"
    name, body = wheel(
        "heavy",
        "1.0",
        shared={"heavy/_ext.so": ext, "heavy.libs/libheavy-0a1b2c3d.so.1": heavy},
    )
    monkeypatch.setattr(wheels, "READ_BUDGET", 2 * 1024 * 1024)
    linked = _facts(tmp_path).libraries(_file(index_server, name, body), through=True)
    assert linked.evidence("heavy", "1.0") is None and linked.loaded == ()
    served = sum(_length(r.range) for r in index_server.requests(f"/pypi/files/{name}"))
    assert served < 2 * 1024 * 1024 + ranged_file.STREAM_CHUNK + ranged_file.CHUNK


def test_a_read_budget_bounds_what_one_wheel_costs(
    index_server: IndexServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the budget the streamed object's answer is what was read, said incomplete."""
    from cudaup.net import ranged_file
    from cudaup.plan import wheels

    library = shared_object(
        ["libcudart.so.12"], "libops.so", code=1024, symbols=PREFIX_LIMIT + 4096, old_layout=True
    )
    name, body = wheel("costly", "1.0", tag=ABI3, shared={"costly/libops.so": library})
    monkeypatch.setattr(wheels, "READ_BUDGET", 2 * 1024 * 1024)
    linked = _facts(tmp_path).libraries(_file(index_server, name, body))
    assert not linked.complete and "libcudart.so.12" not in linked.libraries
    assert "not all of them to the end of their string tables" in linked.describe()
    served = sum(_length(r.range) for r in index_server.requests(f"/pypi/files/{name}"))
    assert served < 2 * 1024 * 1024 + ranged_file.STREAM_CHUNK + ranged_file.CHUNK


def test_small_objects_read_whole_come_in_a_few_ranges(
    index_server: IndexServer, tmp_path: Path
) -> None:
    # cuda-python 12.6's shape: many small objects, none linking a CUDA runtime, one
    # loading it by name; each is read whole, and one range after another cost a round
    # trip each (1.1 s of a live plan).  Members next to each other come as one range.
    objects = {
        f"cuda/_lib/mod{i}.so": shared_object(["libc.so.6"], f"mod{i}.so", code=200_000, seed=i)
        for i in range(8)
    }
    objects["cuda/_lib/mod7.so"] += b"\x00libnvrtc.so.12\x00"
    name, body = wheel("cuda-python", "12.6.2", shared=objects)
    assert len(body) > 8 * 200_000
    linked = _facts(tmp_path).libraries(_file(index_server, name, body))
    assert linked.loaded == ("libnvrtc.so.12",) and len(linked.members_read) == 4
    served = index_server.requests(f"/pypi/files/{name}")
    # The tail, the four objects whose links are read, the other four: three ranges.
    assert len(served) == 3 and all(r.range for r in served), [r.range for r in served]


def test_a_directory_that_claims_a_huge_compressed_size_costs_no_big_prefetch(
    index_server: IndexServer, tmp_path: Path
) -> None:
    # A small object whose directory entry claims 2 GB of compressed bytes: the prefetch
    # would take its word and ask for the rest of the wheel (a 24 MiB data file here).
    small = shared_object(["libc.so.6"], "mod.so", code=4096) + b"\x00libnvrtc.so.12\x00"
    name, body = wheel(
        "cuda-python",
        "12.6.2",
        shared={"cuda/mod.so": small, "cuda/data.bin": os.urandom(24 << 20)},
    )
    entry = body.index(b"PK\x01\x02")  # the central directory's first entry
    while body[entry + 46 : entry + 46 + len(b"cuda/mod.so")] != b"cuda/mod.so":
        entry = body.index(b"PK\x01\x02", entry + 4)
    body = body[: entry + 20] + (0x7FFF_FFF0).to_bytes(4, "little") + body[entry + 24 :]
    with contextlib.suppress(SourceFormatError):  # zipfile may see the entries overlap
        _facts(tmp_path).libraries(_file(index_server, name, body))
    served = sum(_length(r.range) for r in index_server.requests(f"/pypi/files/{name}"))
    assert served < 4 * 1024 * 1024 < len(body)
