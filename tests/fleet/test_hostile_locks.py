"""A tampered ``cuda.lock.toml``, end to end: ``install --lock`` and ``mirror`` refuse it.

Each case runs the real CLI on a lock that is valid but for one field, inside a
sandboxed filesystem (:mod:`tests.sandbox`) snapshotted before and after: a value
that would choose a path is refused with exit 7, a broken document with exit 8,
the message names the field and the value, and nothing in the sandbox changed.
The same lock unmodified installs and mirrors (the control).
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import io
import urllib.request
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import tomli_w
from hypothesis import given, settings
from hypothesis import strategies as st

from cudaup.config import Settings
from cudaup.errors import EXIT_CODES, CudaupError, IntegrityError, SourceFormatError
from cudaup.fleet.lockfile import mirror_path, read_lock
from cudaup.fleet.mirror import lock_origins, origins
from tests.fakenvidia import FakeNvidiaServer
from tests.fakenvidia.site import DOWNLOAD_HOST, Site
from tests.faultserver import FaultServer
from tests.helpers import point_env_at, run_cli
from tests.sandbox import Sandbox, describe, sandbox  # noqa: F401 - fixture

NVCC_URL = DOWNLOAD_HOST + "/compute/cuda/redist/cuda_nvcc/linux-x86_64/x.tar.xz"


def good_lock(site: Site) -> dict[str, Any]:
    """A lock of 13.0.1's cudart for linux-x86_64, as ``cudaup lock`` writes it."""
    version = site.releases["13.0.1"].components["cuda_cudart"]
    archive = next(
        a
        for a in site.archives.values()
        if a.component == "cuda_cudart"
        and a.platform == "linux-x86_64"
        and a.version == version
        and a.genuine
    )
    return {
        "lock-version": 1,
        "created-by": "cudaup test",
        "request": "13.0.1",
        "toolkits": [
            {
                "platform": "linux-x86_64",
                "release": "13.0.1",
                "label": "13.0 Update 1",
                "channel": "redist",
                "components": ["cuda_cudart"],
                "files": [
                    {
                        "component": "cuda_cudart",
                        "version": version,
                        "url": archive.url,
                        "size": archive.size,
                        "sha256": archive.sha256,
                        "md5": archive.md5,
                    }
                ],
                "sources": [{"url": DOWNLOAD_HOST + "/compute/cuda/redist/redistrib_13.0.1.json"}],
            }
        ],
    }


Edit = Callable[[dict[str, Any]], None]


def _set(path: str, value: object) -> Edit:
    """An edit of the lock document: ``toolkits.0.files.0.url`` = value."""

    def edit(document: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = document
        for key in parents:
            node = node[int(key)] if key.isdigit() else node[key]
        node[int(last) if last.isdigit() else last] = value

    return edit


#: (id, edit, exit kind, what the message says)
TAMPERED: list[tuple[str, Edit, str, str]] = [
    (
        "release-climbs-to-srv-data",
        _set("toolkits.0.release", "../../../../srv/data"),
        "integrity",
        "release '../../../../srv/data'",
    ),
    (
        "release-with-dotdot-inside",
        _set("toolkits.0.release", "13.0.1/../../x"),
        "integrity",
        "release '13.0.1/../../x'",
    ),
    (
        "label-with-escape-codes",
        _set("toolkits.0.label", "\x1b]0;owned\x07"),
        "integrity",
        "label '\\x1b]0;owned\\x07'",
    ),
    (
        "component-list-climbs",
        _set("toolkits.0.components", ["../x"]),
        "integrity",
        "component '../x'",
    ),
    (
        "file-component-climbs",
        _set("toolkits.0.files.0.component", "../x"),
        "integrity",
        "component '../x'",
    ),
    (
        "url-ends-in-dotdot",
        _set("toolkits.0.files.0.url", DOWNLOAD_HOST + "/compute/cuda/redist/.."),
        "integrity",
        "url 'https://developer.download.nvidia.com/compute/cuda/redist/..'",
    ),
    (
        "url-climbs-out-of-the-mirror",
        _set("toolkits.0.files.0.url", DOWNLOAD_HOST + "/compute/../../../srv/data/keep.txt"),
        "integrity",
        "/compute/../../../srv/data/keep.txt'",
    ),
    (
        "url-climbs-percent-encoded",
        _set("toolkits.0.files.0.url", DOWNLOAD_HOST + "/compute/%2e%2e/%2E%2E/srv/x.tar.xz"),
        "integrity",
        "/compute/%2e%2e/%2E%2E/srv/x.tar.xz'",
    ),
    (
        "url-not-http",
        _set("toolkits.0.files.0.url", "file:///srv/data/keep.txt"),
        "integrity",
        "url 'file:///srv/data/keep.txt'",
    ),
    (
        "source-url-climbs",
        _set("toolkits.0.sources.0.url", DOWNLOAD_HOST + "/../../srv/data/keep.txt"),
        "integrity",
        "sources[0]",
    ),
    (
        "pylock-name-climbs",
        _set(
            "wheels",
            [{"platform": "linux-x86_64", "pylock": "../../srv/data/pylock.x.toml"}],
        ),
        "integrity",
        "pylock '../../srv/data/pylock.x.toml'",
    ),
    (
        "pylock-not-a-pep751-name",
        _set("wheels", [{"platform": "linux-x86_64", "pylock": "keep.txt"}]),
        "integrity",
        "pylock 'keep.txt'",
    ),
    (
        "url-on-another-host",
        _set("toolkits.0.files.0.url", "https://evil.example/compute/cuda/redist/x.tar.xz"),
        "integrity",
        "toolkits[0].files[0] is refused: its host evil.example:443 is neither one of the origins",
    ),
    (
        "source-url-on-another-host",
        _set("toolkits.0.sources.0.url", "http://evil.example:8080/redistrib_13.0.1.json"),
        "integrity",
        "toolkits[0].sources[0] is refused: its host evil.example:8080",
    ),
    ("size-over-a-pebibyte", _set("toolkits.0.files.0.size", 2**60), "source-format", "size"),
    ("size-negative", _set("toolkits.0.files.0.size", -1), "source-format", "size -1"),
    ("toolkits-not-a-list", _set("toolkits", "x"), "source-format", "'toolkits' must be an array"),
    ("url-not-a-string", _set("toolkits.0.files.0.url", 5), "source-format", "'url'"),
    ("platform-unknown", _set("toolkits.0.platform", "vax"), "source-format", "'vax'"),
    ("lock-version-true", _set("lock-version", True), "source-format", "lock-version True"),
]

#: (id, raw document change, what the message says): broken TOML, exit 8.
BROKEN: list[tuple[str, Callable[[bytes], bytes], str]] = [
    ("byte-order-mark", lambda text: b"\xef\xbb\xbf" + text, "byte-order mark"),
    ("invalid-utf8", lambda text: text.replace(b"13.0 Update 1", b"\xff\xfe"), "not UTF-8"),
    (
        "size-5000-digits",
        lambda text: text.replace(b"size = ", b"size = 1" + b"0" * 4999 + b"\nx = "),
        "is not valid TOML",
    ),
    ("nested-100000-deep", lambda text: text + b"deep = " + b"[" * 100_000, "nested too deeply"),
    ("not-toml", lambda text: text + b"\n[[toolkits]\n", "is not valid TOML"),
]


def commands(box: Sandbox) -> list[tuple[str, ...]]:
    return [
        ("install", "--lock", "cuda.lock.toml", "--platform", "linux-x86_64", "-q"),
        ("mirror", "cuda.lock.toml", str(box.root / "mirror"), "-q"),
    ]


def _refused(
    box: Sandbox, capsys: pytest.CaptureFixture[str], body: bytes, kind: str, says: str
) -> None:
    (box.work / "cuda.lock.toml").write_bytes(body)
    for argv in commands(box):
        real_srv_data = describe(Path("/srv/data"))
        before = box.snapshot()
        result = run_cli(capsys, *argv)
        assert result.code == EXIT_CODES[kind], (argv, result.err)
        assert says in result.err and "cuda.lock.toml" in result.err, (argv, result.err)
        assert "internal error" not in result.err
        assert box.changed(before, box.snapshot()) == set(), argv
        assert describe(Path("/srv/data")) == real_srv_data


@pytest.mark.parametrize(
    ("edit", "kind", "says"), [t[1:] for t in TAMPERED], ids=[t[0] for t in TAMPERED]
)
def test_a_tampered_lock_is_refused_and_changes_nothing(
    sandbox: Sandbox,  # noqa: F811 - fixture
    fake_nvidia: FakeNvidiaServer,
    fake_nvidia_site: Site,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    edit: Edit,
    kind: str,
    says: str,
) -> None:
    point_env_at(monkeypatch, fake_nvidia)
    document = copy.deepcopy(good_lock(fake_nvidia_site))
    edit(document)
    _refused(sandbox, capsys, tomli_w.dumps(document).encode(), kind, says)


@pytest.mark.parametrize(("change", "says"), [b[1:] for b in BROKEN], ids=[b[0] for b in BROKEN])
def test_a_broken_lock_is_refused_and_changes_nothing(
    sandbox: Sandbox,  # noqa: F811 - fixture
    fake_nvidia: FakeNvidiaServer,
    fake_nvidia_site: Site,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    change: Callable[[bytes], bytes],
    says: str,
) -> None:
    point_env_at(monkeypatch, fake_nvidia)
    body = change(tomli_w.dumps(good_lock(fake_nvidia_site)).encode())
    _refused(sandbox, capsys, body, "source-format", says)


@pytest.fixture
def locked(
    sandbox: Sandbox,  # noqa: F811 - fixture
    fake_nvidia: FakeNvidiaServer,
    fake_nvidia_site: Site,
    monkeypatch: pytest.MonkeyPatch,
) -> Sandbox:
    """The sandbox, with the good lock in its working directory and the origins served."""
    point_env_at(monkeypatch, fake_nvidia)
    (sandbox.work / "cuda.lock.toml").write_text(tomli_w.dumps(good_lock(fake_nvidia_site)))
    return sandbox


def test_the_untampered_lock_installs_and_mirrors_inside_their_roots(
    locked: Sandbox, capsys: pytest.CaptureFixture[str]
) -> None:
    """The control: the same lock and commands work, and write only where they should."""
    before = locked.snapshot()
    install, mirror = commands(locked)
    assert (result := run_cli(capsys, *install)).code == 0, result.err
    assert (result := run_cli(capsys, *mirror)).code == 0, result.err
    after = locked.snapshot()
    assert "opt/cudaup/home/toolkits/13.0.1/include/cuda_runtime.h" in after
    assert any(p.startswith("mirror/compute/cuda/redist/cuda_cudart/") for p in after)
    allowed = [locked.home, locked.cache, locked.root / "mirror"]
    assert locked.changed_outside(before, after, allowed) == set()


@pytest.mark.parametrize("through_a_mirror", [False, True], ids=["origin", "mirror"])
def test_a_lock_naming_another_host_is_refused_though_it_serves_the_right_bytes(
    sandbox: Sandbox,  # noqa: F811 - fixture
    fake_nvidia: FakeNvidiaServer,
    fake_nvidia_site: Site,
    fault_server: FaultServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    through_a_mirror: bool,
) -> None:
    """Issue #20: a lock whose file URL was moved to another host that serves the very
    bytes the lock's hash names was fetched from there and installed.  A lock pins
    hosts too: it is refused, with or without ``--mirror``, before anything is fetched."""
    point_env_at(monkeypatch, fake_nvidia)
    document = good_lock(fake_nvidia_site)
    locked_file = document["toolkits"][0]["files"][0]
    served = fake_nvidia.download_url + urlsplit(locked_file["url"]).path
    with urllib.request.urlopen(served) as response:  # the genuine archive
        body = response.read()
    assert hashlib.sha256(body).hexdigest() == locked_file["sha256"]
    name = locked_file["url"].rsplit("/", 1)[-1]
    fault_server.add(f"/elsewhere/{name}", body)
    locked_file["url"] = f"{fault_server.url}/elsewhere/{name}"
    (sandbox.work / "cuda.lock.toml").write_text(tomli_w.dumps(document))
    argv = [*commands(sandbox)[0], "--json"]
    if through_a_mirror:
        argv += ["--mirror", fake_nvidia.download_url]
    before = sandbox.snapshot()
    result = run_cli(capsys, *argv)
    host = urlsplit(fault_server.url).netloc
    assert result.code == EXIT_CODES["integrity"], result.err
    assert (
        f"url '{locked_file['url']}' in cuda.lock.toml toolkits[0].files[0] is refused: "
        f"its host {host} is neither one of the origins nor the mirror" in result.err
    )
    assert result.json()["error"]["kind"] == "integrity"
    assert fault_server.requests() == []  # nothing was fetched from it
    assert sandbox.changed(before, sandbox.snapshot()) == set()


@pytest.mark.parametrize("planted", ["compute", "simple", "packages"])
def test_a_link_planted_in_the_mirror_is_not_written_through(
    locked: Sandbox, capsys: pytest.CaptureFixture[str], planted: str
) -> None:
    """compute/: the archives would land in the decoy; simple/: the wheel index would be
    written there (issue of round 19: the index's own directory was not checked);
    packages/: the decoy's wheels would be read and listed as the mirror's."""
    mirror = locked.root / "mirror"
    mirror.mkdir()
    wheel = "x-1.0-py3-none-any.whl"
    if planted != "packages":  # a wheel of the mirror's, so that an index is written
        (mirror / "packages").mkdir()
        (mirror / "packages" / wheel).write_bytes(b"a wheel")
    else:
        (locked.decoy / wheel).write_bytes(b"the decoy's wheel")
    (mirror / planted).symlink_to(locked.decoy)
    before = locked.snapshot()
    result = run_cli(capsys, *commands(locked)[1])
    assert result.code == EXIT_CODES["untrusted-path"] and "is a symbolic link" in result.err
    assert locked.changed_outside(before, locked.snapshot(), [locked.cache]) == set()


def _wheel(record: str | None) -> bytes:
    """A wheel of one tool, with ``record`` as its RECORD (None: with no RECORD at all)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("nvidia/cu13/bin/tool", b"#!/bin/sh\n")
        archive.writestr("nvidia_tool-13.0.1.dist-info/METADATA", b"Name: nvidia-tool\n")
        if record is not None:
            archive.writestr("nvidia_tool-13.0.1.dist-info/RECORD", record.encode())
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("record", "code", "says"),
    [
        ("../../x,,\n", "integrity", "RECORD path '../../x'"),
        ("/srv/data/keep.txt,,\n", "integrity", "RECORD path '/srv/data/keep.txt'"),
        (  # a whole RECORD (PEP 376: every file is listed)
            "nvidia/cu13/bin/tool,,\nnvidia_tool-13.0.1.dist-info/METADATA,,\n"
            "nvidia_tool-13.0.1.dist-info/RECORD,,\n",
            None,
            "",
        ),
        (None, "integrity", "it has no <name>.dist-info/RECORD"),  # PEP 427: mandatory
        (
            "nvidia/cu13/bin/tool,,1" + "0" * 5000 + "\n",
            "integrity",
            "size '1000",
        ),
    ],
    ids=["dotdot", "absolute", "control", "no-record", "size-5000-digits"],
)
def test_a_wheel_whose_record_names_paths_outside_is_refused(
    sandbox: Sandbox,  # noqa: F811 - fixture
    fault_server: FaultServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    record: str | None,
    code: str | None,
    says: str,
) -> None:
    monkeypatch.setenv("CUDAUP_PYPI_URL", fault_server.url + "/simple")  # the lock's origin
    body = _wheel(record)
    name = "nvidia_tool-13.0.1-py3-none-manylinux_2_27_x86_64.whl"
    fault_server.add(f"/packages/{name}", body)
    lock = {
        "lock-version": 1,
        "request": "13.0.1",
        "toolkits": [
            {
                "platform": "linux-x86_64", "release": "13.0.1", "channel": "pypi",
                "components": ["tool"],
                "files": [{"component": "tool", "version": "13.0.1", "size": len(body),
                           "url": f"{fault_server.url}/packages/{name}",
                           "sha256": hashlib.sha256(body).hexdigest()}],
            }
        ],
    }  # fmt: skip
    (sandbox.work / "cuda.lock.toml").write_text(tomli_w.dumps(lock))
    before = sandbox.snapshot()
    result = run_cli(capsys, *commands(sandbox)[0])
    after = sandbox.snapshot()
    if code is None:
        assert result.code == 0, result.err
        assert "opt/cudaup/home/toolkits/13.0.1/bin/tool" in after
        return
    assert result.code == EXIT_CODES[code] and says in result.err, result.err
    # The download and its unpacked tree stay in the cache; the store holds only its lock
    # and an empty toolkits/ (the staging directory was removed).
    allowed = [sandbox.cache, sandbox.home / "locks", sandbox.home / "toolkits"]
    assert sandbox.changed_outside(before, after, allowed) == set()
    assert not any((sandbox.home / "toolkits").iterdir())


ORIGINS = [DOWNLOAD_HOST, "http://127.0.0.1:8080/download"]


@pytest.mark.parametrize(
    ("url", "path"),
    [
        (NVCC_URL, "compute/cuda/redist/cuda_nvcc/linux-x86_64/x.tar.xz"),
        ("http://127.0.0.1:8080/download/compute/x.run", "compute/x.run"),
        ("https://files.pythonhosted.org/packages/ab/cd/x-1-py3-none-any.whl", "packages/x-1-py3-none-any.whl"),
    ],
)  # fmt: skip
def test_mirror_paths_are_relative_paths_of_plain_names(url: str, path: str) -> None:
    assert mirror_path(url, ORIGINS) == path


@pytest.mark.parametrize(
    "url",
    [
        DOWNLOAD_HOST + "/compute/../../x.run",
        DOWNLOAD_HOST + "/compute/%2e%2e/x.run",
        DOWNLOAD_HOST + "//x.run",
        "http://127.0.0.1:8080/download/../x.run",
        "https://files.pythonhosted.org/packages/..",
        "https://files.pythonhosted.org/",
        "file:///srv/data/keep.txt",
    ],
)
def test_mirror_paths_that_would_leave_the_mirror_are_refused(url: str) -> None:
    with pytest.raises(IntegrityError, match="is refused"):
        mirror_path(url, ORIGINS)


toml_values = st.recursive(
    st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.text(max_size=30)
    | st.sampled_from(["../x", "13.0.1", "redist", "linux-x86_64", "cuda_nvcc", NVCC_URL,
                       "1" * 5000, "13." + "1" * 4400, "https://evil.example:99999/x"]),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(
        st.sampled_from(["lock-version", "toolkits", "files", "release", "url", "size", "sha256",
                         "component", "components", "channel", "platform", "wheels", "pylock"]),
        inner,
        max_size=6,
    ),
    max_leaves=25,
)  # fmt: skip


@pytest.mark.property
@settings(max_examples=200, deadline=None)
@given(
    st.one_of(
        st.binary(max_size=1024),
        toml_values.map(lambda v: tomli_w.dumps({"x": v}).encode()),
        st.dictionaries(
            st.sampled_from(["lock-version", "toolkits", "wheels", "request"]),
            toml_values,
            max_size=4,
        ).map(lambda d: tomli_w.dumps({**d, "lock-version": 1}).encode()),
    )
)
def test_a_lock_from_anything_reads_or_is_refused(
    tmp_path_factory: pytest.TempPathFactory, data: bytes
) -> None:
    path = tmp_path_factory.mktemp("lock") / "cuda.lock.toml"
    path.write_bytes(data)
    with contextlib.suppress(SourceFormatError, IntegrityError):
        read_lock(path)


#: Every field of a good lock that a value of the wrong kind, or of thousands of digits,
#: could be put in.
FIELDS = ["request", "toolkits.0.release", "toolkits.0.label", "toolkits.0.driver",
          "toolkits.0.platform", "toolkits.0.channel", "toolkits.0.files.0.version",
          "toolkits.0.files.0.url", "toolkits.0.files.0.size", "toolkits.0.files.0.sha256",
          "toolkits.0.files.0.component", "toolkits.0.sources.0.url"]  # fmt: skip
nasty = st.one_of(
    st.integers(min_value=1, max_value=5000).map(lambda n: "1" * n),
    st.integers(min_value=1, max_value=5000).map(lambda n: "13." + "9" * n),
    st.builds(lambda host: f"https://{host}/compute/x.tar.xz", st.text(max_size=20)),
    st.text(max_size=40),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
)


@pytest.mark.property
@settings(max_examples=200, deadline=None)
@given(st.sampled_from(FIELDS), nasty)
def test_any_value_in_any_field_of_a_lock_reads_or_is_refused(
    tmp_path_factory: pytest.TempPathFactory, fake_nvidia_site: Site, field: str, value: object
) -> None:
    """What ``install --lock`` and ``mirror`` do with a lock before fetching anything:
    read it, check its hosts, pick the platform, place each file in a mirror."""
    document = copy.deepcopy(good_lock(fake_nvidia_site))
    _set(field, value)(document)
    path = tmp_path_factory.mktemp("lock") / "cuda.lock.toml"
    path.write_text(tomli_w.dumps(document))
    with contextlib.suppress(CudaupError):
        lock = read_lock(path)
        lock.check_hosts(lock_origins(Settings()))
        for file in lock.for_platform("linux-x86_64").files:
            mirror_path(file.url, origins(Settings()))
