"""The index memo reads a wheel's metadata ahead of uv: real uv, a loopback index without
PEP 658 metadata, whose log says which ranges went upstream."""

from __future__ import annotations

import contextlib
import http.server
import io
import random
import threading
import time
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.tags import Tag
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

from cudaup.config import Settings
from cudaup.net.http import HttpClient
from cudaup.net.ranged_file import RangedFile
from cudaup.plan import read_ahead
from cudaup.plan.index_memo import IndexMemo
from cudaup.plan.read_ahead import AHEAD, older_wheels
from cudaup.plan.result import PlanTarget
from cudaup.plan.uv import CompileJob, UvRunner
from tests.plan import world
from tests.plan.builders import PURE, X86, shared_object, wheel
from tests.plan.pyindex import IndexServer

PLATFORM = "x86_64-manylinux_2_39"
#: Enough members that the central directory lies outside the tail read ahead, and
#: METADATA's local header before it.
MANY = {f"alpha/module_{n:05d}_named_at_length_to_fill_the_directory.py": b"" for n in range(3000)}


@pytest.fixture
def memo(tmp_path: Path) -> Iterator[IndexMemo]:
    client = HttpClient(Settings.from_env(cache_dir=tmp_path / "cache"), retries=1)
    with IndexMemo(client) as running:
        yield running


def _publish(server: IndexServer, alpha_members: dict[str, bytes] | None = None) -> bytes:
    server.root("pypi")
    name, body = wheel("alpha", "1.0", ["beta>=1"], tag=PURE, shared=alpha_members)
    server.add("pypi", name, body, pep658=False)
    server.add("pypi", *wheel("beta", "2.0", tag=PURE), pep658=False)
    return body


def _resolve(server: IndexServer, memo: IndexMemo, tmp_path: Path) -> dict[str, str]:
    job = CompileJob(("alpha",), (), (3, 12), PLATFORM, (), server.url("pypi"))
    answer = UvRunner(tmp_path / "uv", tmp_path, 30.0, memo=memo).compile(job)
    assert answer.closure is not None
    return {package.name: str(package.version) for package in answer.closure}


def _ranges(server: IndexServer, path: str) -> list[str | None]:
    return [r.range for r in server.requests(path) if r.method == "GET"]


def test_a_small_wheels_metadata_costs_uv_one_range_upstream(
    index_server: IndexServer, memo: IndexMemo, tmp_path: Path
) -> None:
    """The tail read at uv's HEAD holds the whole wheel: it answers the HEAD (the size its
    206 gave), and every range uv then asks for; upstream sees that one range, no HEAD."""
    _publish(index_server)
    assert _resolve(index_server, memo, tmp_path) == {"alpha": "1.0", "beta": "2.0"}
    for path in ("/pypi/files/alpha-1.0-py3-none-any.whl", "/pypi/files/beta-2.0-py3-none-any.whl"):
        assert [(r.method, r.range) for r in index_server.requests(path)] == [
            ("GET", f"bytes=-{AHEAD}")
        ]
    assert memo.answered_ahead >= 2  # uv read each by range: from what was read ahead


def test_a_large_directory_and_metadata_are_read_ahead_too(
    index_server: IndexServer, memo: IndexMemo, tmp_path: Path
) -> None:
    """The central directory lies before the tail, METADATA far before it: the tail says
    where both are, and uv's ranges of them are answered from the blocks read after it."""
    body = _publish(index_server, MANY)
    assert len(body) > 4 * AHEAD
    assert _resolve(index_server, memo, tmp_path) == {"alpha": "1.0", "beta": "2.0"}
    path = "/pypi/files/alpha-1.0-py3-none-any.whl"
    upstream = _ranges(index_server, path)
    assert upstream[0] == f"bytes=-{AHEAD}" and len(upstream) == 3, upstream  # tail, CD, METADATA
    assert memo.answered_ahead >= 3


def test_a_range_the_blocks_do_not_hold_goes_upstream(
    index_server: IndexServer, memo: IndexMemo, tmp_path: Path
) -> None:
    """Asked directly: a range inside a block is its bytes, one outside goes upstream."""
    body = _publish(index_server, MANY)
    _resolve(index_server, memo, tmp_path)
    path = "/pypi/files/alpha-1.0-py3-none-any.whl"
    url = f"{memo.local(index_server.url('pypi')).removesuffix('/i/0')}/f/http/"
    url += index_server.base.removeprefix("http://") + path
    asked = len(_ranges(index_server, path))
    for start, last in ((len(body) - 100, len(body) + 50), (1000, 2000)):
        request = urllib.request.Request(url, headers={"Range": f"bytes={start}-{last}"})
        with urllib.request.urlopen(request, timeout=30) as response:
            assert response.status == 206
            assert response.read() == body[start : last + 1]
            assert response.headers["Content-Range"] == (
                f"bytes {start}-{min(last, len(body) - 1)}/{len(body)}"
            )
    # the tail's bytes came from the memo; bytes 1000-2000 (no block) from upstream, once
    assert _ranges(index_server, path)[asked:] == ["bytes=1000-2000"]


def test_an_upstream_that_ignores_ranges_is_read_by_uv_as_before(
    index_server: IndexServer, memo: IndexMemo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The read ahead is refused (a 200 for a suffix: it would be the whole file) and
    answers nothing; uv's own requests go upstream and resolve as they would have."""
    _publish(index_server)
    served = index_server.handle
    ignored: list[str] = []

    def no_suffixes(request: http.server.BaseHTTPRequestHandler, body: bool) -> None:
        spec = request.headers.get("Range") or ""
        if spec.startswith("bytes=-"):
            ignored.append(spec)
            del request.headers["Range"]
        served(request, body)

    monkeypatch.setattr(index_server, "handle", no_suffixes)
    assert _resolve(index_server, memo, tmp_path) == {"alpha": "1.0", "beta": "2.0"}
    assert memo.answered_ahead == 0
    path = "/pypi/files/alpha-1.0-py3-none-any.whl"
    assert ignored == [f"bytes=-{AHEAD}"] * 2  # one tail of each wheel, answered whole
    assert "HEAD" in [r.method for r in index_server.requests(path)]  # uv's own, forwarded
    assert len(_ranges(index_server, path)) > 1  # and so are its ranges


def test_the_versions_a_second_round_backtracks_through_are_read_ahead(
    index_server: IndexServer, tmp_path: Path
) -> None:
    """On 13.0, dsl 2.0 pulls in dsl-libs-cu12 (a 12.x name): the first round's read-back
    excludes it by name, and the second backtracks dsl.  Its older versions were read
    ahead as soon as the first round was read back: uv's HEAD and ranges of dsl 1.0 and
    1.5 are answered by the memo, and upstream saw one tail of each, nothing else."""
    world.build(index_server)
    for version, requires in (("1.0", []), ("1.5", []), ("2.0", ["dsl-libs-cu12==2.0"])):
        index_server.add("pypi", *wheel("dsl", version, requires, tag=PURE), pep658=False)
    index_server.add("pypi", *wheel("dsl-libs-cu12", "2.0", tag=PURE), pep658=False)
    result = world.plan(index_server, tmp_path, ["torch==2.11.0", "dsl"], only=("pypi",))
    assert result.line == (13, 0)
    assert {p.name: p.version for p in result.packages}["dsl"] == "1.5"
    for older in ("1.5", "1.0"):
        path = f"/pypi/files/dsl-{older}-py3-none-any.whl"
        assert [(r.method, r.range) for r in index_server.requests(path)] == [
            ("GET", f"bytes=-{AHEAD}")
        ]
    # the version the first round took was uv's own: its tail, read at uv's HEAD
    newest = index_server.requests("/pypi/files/dsl-2.0-py3-none-any.whl")
    assert [(r.method, r.range) for r in newest] == [("GET", f"bytes=-{AHEAD}")]


def _publish_walk(server: IndexServer) -> None:
    """gamma 1.9 … 1.3 require delta>=2, gamma 1.2 … 1.0 nothing; delta 1.0 and 2.0."""
    server.root("pypi")
    for minor in range(10):
        requires = ["delta>=2"] if minor >= 3 else []
        server.add("pypi", *wheel("gamma", f"1.{minor}", requires, tag=PURE), pep658=False)
    for version in ("1.0", "2.0"):
        server.add("pypi", *wheel("delta", version, tag=PURE), pep658=False)


def _resolve_walk(server: IndexServer, memo: IndexMemo, tmp_path: Path) -> dict[str, str]:
    """``gamma`` with ``delta==1.0``: uv walks gamma down from 1.9 to 1.2."""
    job = CompileJob(("gamma", "delta==1.0"), (), (3, 12), PLATFORM, (), server.url("pypi"))
    answer = UvRunner(tmp_path / "uv", tmp_path, 30.0, memo=memo).compile(job)
    assert answer.closure is not None
    return {package.name: str(package.version) for package in answer.closure}


def test_a_project_uv_walks_down_is_read_ahead_of_its_steps(
    index_server: IndexServer, memo: IndexMemo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """gamma 1.9 down to 1.3 each require delta>=2, which delta==1.0 forbids: uv reads
    their metadata one version after another.  Its HEAD of 1.8, after 1.9's, shows it
    walking gamma down, and the next versions are read ahead at once: upstream is held
    from answering that HEAD until their tails are asked for (the state the test needs,
    waited for), and then sees nothing else of them, uv's HEADs and ranges answered by
    the memo.  Without the walk read ahead, that wait ends at its timeout with no tail
    asked for, and each version has uv's HEAD upstream."""
    _publish_walk(index_server)
    walked = [f"/pypi/files/gamma-1.{minor}-py3-none-any.whl" for minor in range(7, 1, -1)]
    served, logged = index_server.handle, threading.Condition()

    def tails_asked() -> bool:
        return all(_ranges(index_server, path) for path in walked)

    def holding(request: http.server.BaseHTTPRequestHandler, body: bool) -> None:
        if request.command == "HEAD" and request.path.endswith("/gamma-1.8-py3-none-any.whl"):
            with logged:
                logged.wait_for(tails_asked, timeout=15)
        served(request, body)
        with logged:
            logged.notify_all()

    monkeypatch.setattr(index_server, "handle", holding)
    assert _resolve_walk(index_server, memo, tmp_path) == {"gamma": "1.2", "delta": "1.0"}
    for path in walked:
        assert [(r.method, r.range) for r in index_server.requests(path)] == [
            ("GET", f"bytes=-{AHEAD}")
        ], path
    assert memo.walked_ahead >= len(walked)


def test_a_projects_later_tails_are_read_long_enough_to_hold_its_metadata(
    index_server: IndexServer, memo: IndexMemo, tmp_path: Path
) -> None:
    """The same walk, each gamma wheel's central directory beyond the 64 KiB tail and its
    METADATA before it.  The first version uv reads (1.9) costs three ranges upstream
    (tail, directory, member) and shows how far from the end METADATA lies; every later
    version's tail is read that long (a quarter more), and holds all uv asks of it: one
    range upstream each, where each cost three."""
    index_server.root("pypi")
    for minor in range(10):
        requires = ["delta>=2"] if minor >= 3 else []
        built = wheel("gamma", f"1.{minor}", requires, tag=PURE, shared=MANY)
        index_server.add("pypi", *built, pep658=False)
    for version in ("1.0", "2.0"):
        index_server.add("pypi", *wheel("delta", version, tag=PURE), pep658=False)
    assert _resolve_walk(index_server, memo, tmp_path) == {"gamma": "1.2", "delta": "1.0"}
    first = _ranges(index_server, "/pypi/files/gamma-1.9-py3-none-any.whl")
    assert first[0] == f"bytes=-{AHEAD}" and len(first) == 3, first
    for minor in range(8, 1, -1):
        ranges = _ranges(index_server, f"/pypi/files/gamma-1.{minor}-py3-none-any.whl")
        assert len(ranges) == 1 and ranges[0] is not None, (minor, ranges)
        assert int(ranges[0].removeprefix("bytes=-")) > AHEAD
    assert memo.answered_ahead >= 3 * 8


#: Stored between a far gamma wheel's METADATA and its directory, where RECORD lies.
FILLER = 300 * 1024


def _far_metadata_wheel(version: str, requires: list[str]) -> tuple[str, bytes]:
    """gamma's wheel laid out as a big one is: its small directory within the tail read
    ahead, its METADATA ``FILLER`` bytes before (a RECORD that does not compress)."""
    buffer, info = io.BytesIO(), f"gamma-{version}.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: gamma\nVersion: {version}\n"
    metadata += "".join(f"Requires-Dist: {r}\n" for r in requires)
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("gamma/__init__.py", "")
        archive.writestr(f"{info}/METADATA", metadata)
        archive.writestr(f"{info}/WHEEL", f"Wheel-Version: 1.0\nTag: {PURE}\n")
        archive.writestr(f"{info}/RECORD", random.Random(version).randbytes(FILLER))
    return f"gamma-{version}-{PURE}.whl", buffer.getvalue()


def test_a_far_metadata_is_read_ahead_then_each_later_tail_holds_it(
    index_server: IndexServer, memo: IndexMemo, tmp_path: Path
) -> None:
    """The walk again, each gamma wheel's directory within the 64 KiB tail and METADATA
    300 KiB before it.  1.9's tail says where METADATA is, which is read next (the memo
    once took a tail that held the directory for one that did not, and read nothing
    more: uv asked for the member itself).  Every later version's tail is read long
    enough to hold its METADATA, one range upstream each, and only what uv asks of it
    is kept in memory: the bytes between the member and the directory are dropped."""
    index_server.root("pypi")
    bodies = {}
    for minor in range(10):
        requires = ["delta>=2"] if minor >= 3 else []
        name, bodies[minor] = _far_metadata_wheel(f"1.{minor}", requires)
        index_server.add("pypi", name, bodies[minor], pep658=False)
    for version in ("1.0", "2.0"):
        index_server.add("pypi", *wheel("delta", version, tag=PURE), pep658=False)
    assert _resolve_walk(index_server, memo, tmp_path) == {"gamma": "1.2", "delta": "1.0"}
    with zipfile.ZipFile(io.BytesIO(bodies[9])) as archive:
        entry = archive.getinfo("gamma-1.9.dist-info/METADATA")
    start = entry.header_offset
    last = start + 30 + len(entry.filename) + entry.compress_size + read_ahead.SLACK - 1
    assert _ranges(index_server, f"/pypi/files/gamma-1.9-{PURE}.whl") == [
        f"bytes=-{AHEAD}",
        f"bytes={start}-{last}",
    ]
    for minor in range(8, 1, -1):
        ranges = _ranges(index_server, f"/pypi/files/gamma-1.{minor}-{PURE}.whl")
        assert len(ranges) == 1 and ranges[0] is not None, (minor, ranges)
        assert int(ranges[0].removeprefix("bytes=-")) > FILLER
    # Each version keeps its last 64 KiB and its member (with SLACK): ~130 KiB.  The
    # eight tails read long, each held whole, would be more than 8 * FILLER.
    assert memo.ahead.held < 8 * FILLER, memo.ahead.held


def test_a_walk_through_large_wheels_is_left_to_uv(
    index_server: IndexServer, memo: IndexMemo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same walk, with every wheel above the size a walk reads ahead (the limit made
    small): nothing is read ahead for it, each version's tail is read when uv asks for
    it, and the version uv never reaches (1.1) is not read at all."""
    monkeypatch.setattr(read_ahead, "WALK_MOST_BYTES", 100)
    _publish_walk(index_server)
    assert _resolve_walk(index_server, memo, tmp_path) == {"gamma": "1.2", "delta": "1.0"}
    assert memo.walked_ahead == 0
    for minor in range(9, 1, -1):
        path = f"/pypi/files/gamma-1.{minor}-py3-none-any.whl"
        assert _ranges(index_server, path)[:1] == [f"bytes=-{AHEAD}"], path
    assert index_server.requests("/pypi/files/gamma-1.1-py3-none-any.whl") == []


def test_the_wheel_read_ahead_of_a_walk_is_the_one_most_like_uvs() -> None:
    """Pure: for each older version, the wheel with uv's tags, else the one sharing the
    interpreter, ABI, platform family and architecture; no pre-release; none alike, none."""

    def listed(filename: str) -> tuple[Version, frozenset[Tag], str]:
        _name, version, _build, tags = parse_wheel_filename(filename)
        return version, tags, f"https://files.example/{filename}"

    names = [
        "numpy-2.1.0-cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl",
        "numpy-2.1.0-cp312-cp312-musllinux_1_2_x86_64.whl",
        "numpy-2.1.0-cp312-cp312-manylinux_2_27_aarch64.manylinux_2_28_aarch64.whl",
        "numpy-2.0.0-cp312-cp312-musllinux_1_1_x86_64.whl",
        "numpy-2.0.0-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
        "numpy-1.9.0rc1-cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl",
        "numpy-1.8.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
        "numpy-1.7.0-cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl",
    ]
    wheels = [listed(name) for name in names]
    asked = parse_wheel_filename(
        "numpy-2.2.0-cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl"
    )
    found = older_wheels(wheels, asked[1], asked[3], 3)
    assert [url.rsplit("/", 1)[1] for url in found] == [names[0], names[4]]  # 1.8.0: none alike
    assert older_wheels(wheels, asked[1], asked[3], 5)[-1].endswith(names[7])


def test_the_next_round_starts_while_a_requested_wheel_is_read(
    index_server: IndexServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On 13.0 the first round's names exclude dsl-libs-cu12 at once; kern, requested and
    silent, is then read from its wheel.  The second round (dsl-libs-cu12 excluded) is
    already decided unless kern contradicts the line, so its uv run starts while kern's
    wheel is read: upstream holds that read until such a run has started (waited for,
    not slept).  kern fits, so the round started ahead is the one used: the same
    answer, one uv run of that round in all."""
    world.build(index_server)
    for version, requires in (("1.0", []), ("1.5", []), ("2.0", ["dsl-libs-cu12==2.0"])):
        index_server.add("pypi", *wheel("dsl", version, requires, tag=PURE), pep658=False)
    index_server.add("pypi", *wheel("dsl-libs-cu12", "2.0", tag=PURE), pep658=False)
    library = shared_object(["libc.so.6"], "kern_ops.so", code=64 * 1024)
    kern = wheel("kern", "1.0", shared={"kern/kern_ops.so": library})
    index_server.add("pypi", *kern)  # PEP 658: uv reads its metadata file, never the wheel
    excluding, rounds = threading.Event(), []
    run = UvRunner._run

    def counted(runner: UvRunner, argv: list[str], *rest: Any) -> tuple[int, str, str]:
        if "dsl-libs-cu12<0" in Path(argv[5]).read_text().split():
            rounds.append(argv)
            excluding.set()
        return run(runner, argv, *rest)

    served, held = index_server.handle, []

    def holding(request: http.server.BaseHTTPRequestHandler, body: bool) -> None:
        if request.path == f"/pypi/files/{kern[0]}":
            held.append(excluding.wait(timeout=15))
        served(request, body)

    monkeypatch.setattr(UvRunner, "_run", counted)
    monkeypatch.setattr(index_server, "handle", holding)
    result = world.plan(index_server, tmp_path, ["torch==2.11.0", "dsl", "kern"], only=("pypi",))
    assert result.line == (13, 0)
    assert {p.name: p.version for p in result.packages}["dsl"] == "1.5"
    assert held and all(held)  # every read of kern's wheel began after that run started
    assert len(rounds) == 1


def test_exact_pins_are_read_ahead_as_uv_will_ask_for_them(
    index_server: IndexServer, memo: IndexMemo, tmp_path: Path
) -> None:
    """``alpha==1.0``: before uv runs, the memo reads alpha's page as uv asks for it and
    the tail of the 1.0 wheel uv picks for the target (the x86 one, not the pure one nor
    another version's); uv's own requests of that page and HEAD then send nothing
    upstream, and the plan's answer is uv's as before."""
    index_server.root("pypi")
    for version, tag in (("1.0", PURE), ("1.0", X86), ("0.9", X86)):
        index_server.add("pypi", *wheel("alpha", version, ["beta>=1"], tag=tag), pep658=False)
    index_server.add("pypi", *wheel("beta", "2.0", tag=PURE), pep658=False)
    target = PlanTarget((3, 12), "linux-x86_64", None, None)
    pins = [Requirement("Alpha==1.0")]
    futures = read_ahead.pins_ahead(memo, pins, index_server.url("pypi"), target)
    for future in futures:
        future.result(timeout=30)  # done once the tail is being read: wait for it to be
    chosen = f"/pypi/files/alpha-1.0-{X86}.whl"
    deadline = time.monotonic() + 30
    while not _ranges(index_server, chosen):
        assert time.monotonic() < deadline, "the pinned wheel's tail was never read"
        time.sleep(0.01)
    assert len([r for r in index_server.requests("/pypi/alpha/") if r.method == "GET"]) == 1
    assert _ranges(index_server, chosen) == [f"bytes=-{AHEAD}"]
    assert _ranges(index_server, "/pypi/files/alpha-1.0-py3-none-any.whl") == []
    assert _ranges(index_server, f"/pypi/files/alpha-0.9-{X86}.whl") == []
    job = CompileJob(("alpha==1.0",), (), (3, 12), PLATFORM, (), index_server.url("pypi"))
    answer = UvRunner(tmp_path / "uv", tmp_path, 30.0, memo=memo).compile(job)
    assert answer.closure is not None
    alpha = answer.closure.get("alpha")
    assert alpha is not None and str(alpha.version) == "1.0"
    assert len([r for r in index_server.requests("/pypi/alpha/") if r.method == "GET"]) == 1
    assert [r.method for r in index_server.requests(chosen)] == ["GET"]  # no HEAD of uv's
    assert memo.answered_ahead >= 1


def test_closing_with_reads_still_queued_ends_what_waits_for_them(
    memo: IndexMemo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every worker but one busy, the last waiting for a read still queued (a round's
    wheels): the memo closing cancels that read, and what waited for its start goes on,
    so the close ends instead of waiting for it forever."""
    hold, busy = threading.Event(), threading.Semaphore(0)
    ahead = memo.ahead
    real_slot = ahead._slot

    @contextlib.contextmanager
    def held(url: str) -> Iterator[None]:
        busy.release()
        assert hold.wait(30)
        with real_slot(url):
            yield

    monkeypatch.setattr(ahead, "_slot", held)
    unreachable = "http://127.0.0.1:9/files/alpha-{}-py3-none-any.whl"
    for n in range(read_ahead.WORKERS - 1):
        ahead.start(unreachable.format(n))
    for _ in range(read_ahead.WORKERS - 1):
        assert busy.acquire(timeout=30)
    waiting = ahead.later(lambda: [unreachable.format("queued")])
    assert waiting is not None
    closing = threading.Thread(target=memo.close)
    closing.start()
    queued = unreachable.format("queued")
    try:
        waiting.result(timeout=30)  # the queued read was cancelled: its start is over
        # ... and its tail, reserved when it was queued, holds nothing: a request of uv's
        # that came meanwhile goes upstream instead of waiting for it forever.
        found: list[object] = []
        asking = threading.Thread(
            target=lambda: found.extend([ahead.answer(queued, "bytes=0-10"), ahead.size(queued)]),
            daemon=True,
        )
        asking.start()
        asking.join(30)
        assert found == [None, None], "a cancelled read's reserved tail was waited for"
    finally:
        hold.set()
    closing.join(30)
    assert not closing.is_alive()


@pytest.mark.parametrize("compress", [zipfile.ZIP_DEFLATED, zipfile.ZIP_STORED])
def test_a_wheels_metadata_is_taken_from_what_was_read_ahead(
    index_server: IndexServer, memo: IndexMemo, compress: int
) -> None:
    """What a plan of pins reads of a pinned wheel before uv answers: its METADATA, from
    the tail, directory and member blocks read ahead (no request of its own), inflated
    and checked as zipfile checks it; a wheel not read ahead has none to give."""
    index_server.root("pypi")
    name, body = wheel("alpha", "1.0", ["beta==2.0"], tag=PURE, shared=MANY, compress=compress)
    url = index_server.add("pypi", name, body, pep658=False)
    with zipfile.ZipFile(io.BytesIO(body)) as archive:
        expected = archive.read("alpha-1.0.dist-info/METADATA")
    assert memo.ahead.metadata(url) is None  # never read ahead
    memo.ahead.start(url)
    assert memo.ahead.metadata(url) == expected
    found = memo.ahead.requirements(canonicalize_name("Alpha"), Version("1.0"))
    assert found == (name, [Requirement("beta==2.0")])
    assert memo.ahead.requirements(canonicalize_name("alpha"), Version("2.0")) is None
    path = f"/pypi/files/{name}"
    assert len(_ranges(index_server, path)) == 3  # tail, directory, member: no more asked


@pytest.mark.parametrize("members", [None, MANY], ids=["in-the-tail", "before-the-tail"])
def test_a_wheels_end_read_ahead_opens_its_archive_without_a_request(
    index_server: IndexServer, memo: IndexMemo, tmp_path: Path, members: dict[str, bytes] | None
) -> None:
    """What a plan's read-back opens a wheel from: its end as read ahead for uv, from
    the central directory on (held by the tail, or by the directory's block joined to
    it), byte for byte the wheel's; the archive then opens without a request.  A wheel
    not read ahead has none."""
    index_server.root("pypi")
    name, body = wheel("alpha", "1.0", ["beta==2.0"], tag=PURE, shared=members)
    url = index_server.add("pypi", name, body, pep658=False)
    assert memo.ahead.end_of(url) is None  # never read ahead
    memo.ahead.start(url)
    assert memo.ahead.metadata(url) is not None  # waits for the reads ahead to end
    end = memo.ahead.end_of(url)
    assert end is not None
    start, data, size = end
    assert size == len(body) and data == body[start:]
    with zipfile.ZipFile(io.BytesIO(body)) as archive:
        assert start <= archive.start_dir  # the whole directory
        names = archive.namelist()
    asked = len(_ranges(index_server, f"/pypi/files/{name}"))
    client = HttpClient(Settings.from_env(cache_dir=tmp_path / "other"), retries=1)
    with zipfile.ZipFile(RangedFile(client, url, end=end)) as opened:
        assert opened.namelist() == names
    assert len(_ranges(index_server, f"/pypi/files/{name}")) == asked


def test_a_damaged_metadata_read_ahead_is_not_taken(
    index_server: IndexServer, memo: IndexMemo
) -> None:
    """A member whose bytes do not match its CRC-32 (stored, one letter changed) gives
    nothing: the plan then waits for uv's own answer."""
    index_server.root("pypi")
    name, body = wheel("alpha", "1.0", ["beta==2.0"], tag=PURE, compress=zipfile.ZIP_STORED)
    assert body.count(b"Requires-Dist: beta==2.0") == 1
    damaged = body.replace(b"Requires-Dist: beta==2.0", b"Requires-Dist: beta==3.0")
    url = index_server.add("pypi", name, damaged, pep658=False)
    memo.ahead.start(url)
    assert memo.ahead.metadata(url) is None


def test_a_metadata_that_does_not_inflate_is_not_taken(
    index_server: IndexServer, memo: IndexMemo
) -> None:
    """A deflated member whose bytes are not deflate data gives nothing, not an error."""
    index_server.root("pypi")
    name, body = wheel("alpha", "1.0", ["beta==2.0"], tag=PURE)
    with zipfile.ZipFile(io.BytesIO(body)) as archive:
        member = archive.getinfo("alpha-1.0.dist-info/METADATA")
    start = member.header_offset + 30 + len(member.filename.encode()) + len(member.extra)
    broken = body[:start] + b"\xff" * member.compress_size + body[start + member.compress_size :]
    url = index_server.add("pypi", name, broken, pep658=False)
    memo.ahead.start(url)
    assert memo.ahead.metadata(url) is None
    assert memo.ahead.requirements(canonicalize_name("alpha"), Version("1.0")) is None
