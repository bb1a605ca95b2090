"""Package-index reading: PEP 691/503 parsing, metadata three ways, wheel choice.

The local index tests run offline against a loopback server; the ``pypi``
tests ask the live PyPI (run in CI).
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import packaging.utils
import pytest
from hypothesis import given
from hypothesis import strategies as st
from packaging.requirements import Requirement
from packaging.version import Version

from cudaup.config import Settings
from cudaup.core import wheels
from cudaup.core.wheels import wheel_fits
from cudaup.errors import IntegrityError
from cudaup.net.http import HttpClient
from cudaup.resolve import pypi
from cudaup.resolve.choose import choose_wheel, requirements_for
from cudaup.resolve.pypi import (
    DistFile,
    PackageIndex,
    files_of_version,
    parse_simple_html,
    parse_simple_json,
)
from cudaup.resolve.resolver import Resolver
from tests.net.test_http import ScriptedServer, reply

METADATA = (
    "Metadata-Version: 2.4\nName: cuda-toolkit\nVersion: 13.0.1\nProvides-Extra: all\nProvides-Extra: nvcc\n"
    "Requires-Dist: nvidia-cuda-nvcc==13.0.88.*; (sys_platform == 'linux' or sys_platform == 'win32') and extra == 'all'\n"
    "Requires-Dist: nvidia-cufile==1.15.1.6.*; (sys_platform == 'linux') and extra == 'all'\n"
    "Requires-Dist: nvidia-cuda-nvcc==13.0.88.*; (sys_platform == 'linux' or sys_platform == 'win32') and extra == 'nvcc'\n"
)


def make_wheel(metadata: str, padding: int = 0) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        if padding:
            archive.writestr("cuda_toolkit/blob.bin", b"\0" * padding)
        archive.writestr("cuda_toolkit-13.0.1.dist-info/METADATA", metadata)
        archive.writestr("cuda_toolkit-13.0.1.dist-info/WHEEL", "Wheel-Version: 1.0\n")
    return buffer.getvalue()


def test_parse_pep691_json() -> None:
    document = {
        "meta": {"api-version": "1.1"},
        "name": "cuda-toolkit",
        "files": [
            {"filename": "cuda_toolkit-13.0.3.0-py2.py3-none-any.whl", "url": "../../packages/a/cuda_toolkit-13.0.3.0-py2.py3-none-any.whl",
             "hashes": {"sha256": "ab" * 32}, "requires-python": None, "size": 2706, "yanked": False},
            {"filename": "cuda_toolkit-13.4.0rc1-py2.py3-none-any.whl", "url": "https://files.example/x.whl", "hashes": {},
             "core-metadata": {"sha256": "cd" * 32}, "yanked": "broken"},
        ],
        "versions": ["13.0.3"],
    }  # fmt: skip
    files = parse_simple_json(
        json.dumps(document).encode(), "https://pypi.org/simple/cuda-toolkit/"
    )
    assert files[0].url == "https://pypi.org/packages/a/cuda_toolkit-13.0.3.0-py2.py3-none-any.whl"
    assert (
        str(files[0].version) == "13.0.3.0" and files[0].size == 2706 and not files[0].core_metadata
    )
    assert files[0].yank_reason is None and files[1].yank_reason == "broken"
    assert files[0].metadata_sha256 is None and files[1].metadata_sha256 == "cd" * 32
    assert (
        files[1].yanked
        and files[1].core_metadata
        and files[1].version is not None
        and files[1].version.is_prerelease
    )


def test_parse_pep503_html_with_cross_host_links() -> None:
    page = (
        '<html><body><a href="/whl/cu130/torch-2.9.1%2Bcu130-cp312-cp312-manylinux_2_28_x86_64.whl#sha256='
        + "ef" * 32
        + '" '
        'data-requires-python="&gt;=3.10" data-dist-info-metadata="sha256='
        + "01"
        * 32
        + '">torch</a>'
        '<a href="https://github.com/sgl-project/whl/releases/download/v0.3.21/sgl_kernel-0.3.21+cu130-cp310-abi3-manylinux2014_x86_64.whl" data-yanked="">y</a>'
        "</body></html>"
    )
    files = parse_simple_html(page, "https://download.pytorch.org/whl/cu130/torch/")
    assert files[0].filename == "torch-2.9.1+cu130-cp312-cp312-manylinux_2_28_x86_64.whl"
    assert files[0].url.startswith("https://download.pytorch.org/whl/cu130/")
    assert (
        files[0].sha256 == "ef" * 32
        and files[0].requires_python == ">=3.10"
        and files[0].core_metadata
    )
    assert files[0].metadata_sha256 == "01" * 32 and files[1].metadata_sha256 is None
    assert files[1].yanked and str(files[1].version) == "0.3.21+cu130"
    assert files[1].yank_reason is None  # data-yanked="": yanked, no reason given


@pytest.mark.parametrize("right", [True, False])
def test_a_metadata_file_is_checked_against_the_sha256_the_index_gives(
    tmp_path: Path, right: bool
) -> None:
    """PEP 714's ``core-metadata`` hash: metadata that decides what is resolved is used
    only when it is the file the index vouched for (a mirror of the files out of sync
    with its index, or tampering, is exit 7)."""
    served = METADATA.encode()
    vouched = hashlib.sha256(served if right else served + b"\n").hexdigest()
    routes = {"/w.whl.metadata": reply(200, served)}
    with ScriptedServer(routes) as server:
        index = PackageIndex(HttpClient(Settings.from_env(cache_dir=tmp_path)), server.url)
        file = DistFile("cuda_toolkit-13.0.1-py2.py3-none-any.whl", server.url + "/w.whl",
                        None, None, None, False, True, metadata_sha256=vouched)  # fmt: skip
        if right:
            assert index.metadata(file).version == Version("13.0.1")
        else:
            with pytest.raises(IntegrityError) as caught:
                index.metadata(file)
            assert caught.value.exit_code == 7
            found = hashlib.sha256(served).hexdigest()
            assert str(caught.value) == (
                f"{server.url}/w.whl.metadata: sha256 mismatch: the index says {vouched}, the "
                f"file served is {found}; the index and the host of its files disagree (a "
                "mirror out of sync, or tampering)"
            )


@pytest.mark.parametrize("how", ["pep658", "whole-wheel", "range-read"])
def test_metadata_three_ways(tmp_path: Path, how: str) -> None:
    wheel = make_wheel(METADATA, padding=5 * 1024 * 1024 if how == "range-read" else 0)

    def ranged(request: object) -> None:
        from http.server import BaseHTTPRequestHandler

        assert isinstance(request, BaseHTTPRequestHandler)
        header = request.headers.get("Range")
        if header:
            start, end = _span(header, len(wheel))
            reply(206, wheel[start : end + 1], Content_Range=f"bytes {start}-{end}/{len(wheel)}")(
                request
            )
        else:
            reply(200, wheel)(request)

    routes = {"/w.whl": ranged, "/w.whl.metadata": reply(200, METADATA.encode())}
    with ScriptedServer(routes) as server:
        index = PackageIndex(HttpClient(Settings.from_env(cache_dir=tmp_path)), server.url)
        file = DistFile("cuda_toolkit-13.0.1-py2.py3-none-any.whl", server.url + "/w.whl",
                        hashlib.sha256(wheel).hexdigest(), len(wheel), None, False, how == "pep658")  # fmt: skip
        metadata = index.metadata(file)
        paths = [hit[1] for hit in server.hits]
    assert str((metadata.requires_dist or [])[0]).startswith("nvidia-cuda-nvcc==13.0.88.*")
    if how == "pep658":
        assert paths == ["/w.whl.metadata"]
    elif how == "whole-wheel":
        assert paths == ["/w.whl"]
    else:
        assert all(hit[2].get("Range") for hit in server.hits) and len(paths) <= 4
        spans = [_span(h[2]["Range"], len(wheel)) for h in server.hits]
        fetched = sum(end - start + 1 for start, end in spans)
        assert fetched < len(wheel) / 20  # read the central directory, not the 5 MB


def test_a_wheel_read_whole_for_its_metadata_is_checked_against_its_sha256(
    tmp_path: Path,
) -> None:
    """A small wheel's metadata is read from the whole wheel: that wheel must be the one
    the index vouched for (its metadata decides which wheels an install takes), as the
    wheel's own download would be, even when it comes from the cache."""
    wheel = make_wheel(METADATA)
    other = make_wheel(METADATA.replace("13.0.88", "13.0.99"))
    served = {"body": other}

    def whole(request: BaseHTTPRequestHandler) -> None:  # what it serves now, not before
        reply(200, served["body"])(request)

    with ScriptedServer({"/w.whl": whole}) as server:
        index = PackageIndex(HttpClient(Settings.from_env(cache_dir=tmp_path)), server.url)
        vouched = hashlib.sha256(wheel).hexdigest()
        file = DistFile("cuda_toolkit-13.0.1-py2.py3-none-any.whl", server.url + "/w.whl",
                        vouched, len(wheel), None, False, False)  # fmt: skip
        with pytest.raises(IntegrityError) as caught:
            index.metadata(file)
        found = hashlib.sha256(other).hexdigest()
        assert caught.value.exit_code == 7
        assert str(caught.value) == (
            f"{server.url}/w.whl: sha256 mismatch: the index says {vouched}, the file served "
            f"is {found}; the index and the host of its files disagree (a mirror out of "
            "sync, or tampering)"
        )
        served["body"] = wheel
        assert str((index.metadata(file).requires_dist or [])[0]).startswith(
            "nvidia-cuda-nvcc==13.0.88.*"
        )


def _span(header: str, size: int) -> tuple[int, int]:
    """A ``Range`` header's first and last byte (``bytes=a-b``, or the suffix ``bytes=-n``)."""
    first, last = header.removeprefix("bytes=").split("-")
    if not first:
        return size - int(last), size - 1
    return int(first), min(int(last), size - 1)


def test_requirements_for_extras_and_platforms() -> None:
    requires = [
        Requirement(line.split(": ", 1)[1])
        for line in METADATA.splitlines()
        if line.startswith("Requires-Dist")
    ]
    assert [r.name for r in requirements_for(requires, ["all"], "linux-x86_64")] == [
        "nvidia-cuda-nvcc",
        "nvidia-cufile",
    ]
    assert [r.name for r in requirements_for(requires, ["all"], "windows-x86_64")] == [
        "nvidia-cuda-nvcc"
    ]
    assert [r.name for r in requirements_for(requires, ["nvcc"], "linux-sbsa")] == [
        "nvidia-cuda-nvcc"
    ]


def _file(name: str, yanked: bool = False) -> DistFile:
    return DistFile(name, "https://f/" + name, None, None, None, yanked, False)


def test_choose_wheel_prefix_pins_platform_and_yanked() -> None:
    files = [
        _file("nvidia_cuda_nvcc-13.0.88-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"),
        _file("nvidia_cuda_nvcc-13.0.88.1-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"),
        _file("nvidia_cuda_nvcc-13.0.88.2-py3-none-manylinux2014_x86_64.whl", yanked=True),
        _file("nvidia_cuda_nvcc-13.0.89-py3-none-manylinux2014_x86_64.whl"),
        _file(
            "nvidia_cuda_nvcc-13.0.88.1-py3-none-manylinux2014_aarch64.manylinux_2_17_aarch64.whl"
        ),
        _file("nvidia_cuda_nvcc-13.0.88.1-py3-none-win_amd64.whl"),
    ]
    pin = Requirement("nvidia-cuda-nvcc==13.0.88.*")
    chosen = {
        p: choose_wheel(files, pin, p)
        for p in ("linux-x86_64", "linux-sbsa", "windows-x86_64", "windows-arm64")
    }
    assert chosen["linux-x86_64"] is not None and chosen["linux-x86_64"].filename.startswith(
        "nvidia_cuda_nvcc-13.0.88.1-py3-none-manylinux2014_x86_64"
    )
    assert chosen["linux-sbsa"] is not None and "aarch64" in chosen["linux-sbsa"].filename
    assert chosen["windows-x86_64"] is not None and chosen["windows-x86_64"].filename.endswith(
        "win_amd64.whl"
    )
    assert chosen["windows-arm64"] is None
    assert not wheel_fits("x-1.0-cp312-cp312-musllinux_1_2_x86_64.whl", "linux-x86_64")


# -- live PyPI ---------------------------------------------------------------------
@pytest.mark.pypi
def test_live_pypi_13_0_1_nvcc_cudart(tmp_path: Path) -> None:
    resolution = Resolver(Settings.from_env(cache_dir=tmp_path)).resolve(
        "13.0.1", platform="linux-x86_64", channel="pypi", components=["nvcc", "cuda_cudart"]
    )
    found = {a.component: a for a in resolution.artifacts}
    assert set(found) == {"cuda_nvcc", "cuda_cudart"}
    # the meta-package pins nvcc and cudart 13.0.88 for 13.0.1 (prefix pins)
    assert found["cuda_nvcc"].component_version is not None and found[
        "cuda_nvcc"
    ].component_version.startswith("13.0.88")
    assert found["cuda_cudart"].component_version is not None and found[
        "cuda_cudart"
    ].component_version.startswith("13.0.88")
    for artifact in resolution.artifacts:
        assert artifact.sha256 is not None and len(artifact.sha256) == 64
        assert artifact.url.startswith("https://") and artifact.verified and artifact.size
        assert artifact.filename.endswith(".whl") and "x86_64" in artifact.filename


@pytest.mark.pypi
def test_live_pypi_13_0_2_moves_cudart_and_sbsa_wheels(tmp_path: Path) -> None:
    resolution = Resolver(Settings.from_env(cache_dir=tmp_path)).resolve(
        "13.0.2", platform="linux-sbsa", channel="pypi", components=["cudart"]
    )
    [cudart] = resolution.artifacts
    assert cudart.component_version is not None and cudart.component_version.startswith("13.0.96")
    assert "aarch64" in cudart.filename


@pytest.mark.pypi
def test_live_pypi_four_part_versions_and_12_x_names(tmp_path: Path) -> None:
    resolver = Resolver(Settings.from_env(cache_dir=tmp_path))
    resolution = resolver.resolve(
        "13.0.3", platform="linux-x86_64", channel="pypi", components=["nvcc"]
    )
    assert resolution.release.version == "13.0.3"  # PyPI spells it 13.0.3.0
    old = resolver.resolve("12.8", platform="linux-x86_64", channel="pypi", components=["cudart"])
    assert old.artifacts[0].filename.startswith("nvidia_cuda_runtime_cu12-12.8.")
    assert old.artifacts[0].component == "cuda_cudart"


_VERSIONS = ["2.5.5", "2.5.5.0", "2.5.5-1", "v2.5.5", "2.5.5+cu128", "2.5.5_x", "2.6.0rc1", "1"]
_FIELD = st.sampled_from(["numpy", "numpy_x", "a__b", "", *_VERSIONS, "1abc", "cp312", "any"])
_WHEEL = st.builds(
    lambda name, version, build, tags: "-".join([name, version, *build, *tags]) + ".whl",
    st.sampled_from(["numpy", "numpy_x", "a__b", ""]),
    st.sampled_from(_VERSIONS),
    st.sampled_from([[], ["1"], ["1abc"], ["x"]]),
    st.sampled_from([["cp312", "cp312", "manylinux_2_27_x86_64"], ["py3", "none", "any"]]),
)
_SDIST = st.builds(
    lambda name, version, suffix: f"{name}-{version}{suffix}",
    st.sampled_from(["numpy", "a-b", ""]),
    st.sampled_from(_VERSIONS),
    st.sampled_from([".tar.gz", ".zip", ".egg"]),
)
_ANY = st.builds(
    lambda fields, suffix: "-".join(fields) + suffix,
    st.lists(_FIELD, min_size=1, max_size=7),
    st.sampled_from([".whl", ".tar.gz", ".zip", ".exe"]),
)


@given(
    st.one_of(
        st.lists(st.one_of(_WHEEL, _SDIST, _ANY), max_size=12),
        st.lists(st.one_of(_WHEEL, _SDIST, _ANY), min_size=33, max_size=60).map(tuple),
    ),
    st.sampled_from(["2.5.5", "2.6.0rc1", "1", "2.5.5.post1", "2.5.5+cu128"]),
)
def test_the_files_of_a_version_are_those_whose_whole_name_says_it(
    names: list[str] | tuple[str, ...], wanted: str
) -> None:
    """Reading a name's version field first keeps exactly the files a whole parse keeps:
    non-normalized versions, build tags, broken names and other kinds of file alike, in
    page order, whether the files are scanned (a short list) or sorted by version once (a
    page's tuple)."""
    made = [DistFile(n, "https://x/f", None, None, None, False, False) for n in names]
    files: Sequence[DistFile] = tuple(made) if isinstance(names, tuple) else made
    version = Version(wanted)
    assert files_of_version(files, version) == [f for f in files if f.version == version]


def test_a_page_is_sorted_by_version_once_however_many_versions_are_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A plan asks the same page for hundreds of versions: its names are read once, not
    once per version asked (489 scans took 55-70 ms of a cold plan's CPU)."""
    page = tuple(
        DistFile(f"numpy-1.{minor}.0-cp312-cp312-manylinux_2_28_x86_64.whl", "https://x/f",
                 None, None, None, False, False)
        for minor in range(200)
    )  # fmt: skip
    read: list[str] = []
    field_version = pypi._field_version

    def counted(name: str) -> Version | None:
        read.append(name)
        return field_version(name)

    monkeypatch.setattr(pypi, "_field_version", counted)
    for minor in range(0, 200, 10):
        (found,) = files_of_version(page, Version(f"1.{minor}"))
        assert found is page[minor]
    assert len(read) == len(page)
    assert files_of_version(page, Version("2.0")) == []
    assert len(read) == len(page)


def test_a_wheel_name_is_parsed_once_however_often_it_is_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A plan asks the version and tags of the same wheel names on every line and round,
    and whether they fit the target: each name is parsed once; a name that is no wheel's
    is None, never an error."""
    parsed: list[str] = []
    parse = packaging.utils.parse_wheel_filename

    def counted(name: str) -> object:
        parsed.append(name)
        return parse(name)

    monkeypatch.setattr(wheels, "parse_wheel_filename", counted)
    name = "onceparsed-3.1.4-cp312-cp312-manylinux_2_28_x86_64.whl"
    file = DistFile(name, "https://x/f", None, None, None, False, False)
    for _ in range(3):
        assert file.version == Version("3.1.4")
        parts = wheels.wheel_name(name)
        assert parts is not None and parts[1] == Version("3.1.4")
        assert {str(tag) for tag in parts[3]} == {"cp312-cp312-manylinux_2_28_x86_64"}
        assert wheel_fits(name, "linux-x86_64", (3, 12))
    assert parsed == [name]
    assert wheels.wheel_name("onceparsed-not.a.version!-py3-none-any.whl") is None
    assert wheels.wheel_name("onceparsed-1.0-py3-none.whl") is None
