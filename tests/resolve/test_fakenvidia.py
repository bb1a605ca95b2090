"""Self-check of the fake NVIDIA site and server (tests/fakenvidia)."""

from __future__ import annotations

import hashlib
import html
import http.client
import io
import json
import re
import tarfile
import zipfile
from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.fakenvidia import (
    FakeNvidiaServer,
    Site,
    SiteOptions,
    build_site,
    variant_options,
)
from tests.fakenvidia.fixtures import MakeFakeNvidia
from tests.fakenvidia.site import (
    ARCHIVE_INDEX_PATH,
    CUDA_DOWNLOADS_PATH,
    FUTURE_DRIVER,
    FUTURE_LABEL,
    PREVIEW_SHA256,
    REDIST_DIR,
    VirtualFile,
    decode_react_props,
    nvidia_url_to_path,
    sample_bytes,
)

INSTALLER_13_0_1 = "/download/compute/cuda/13.0.1/local_installers/cuda_13.0.1_580.82.07_linux.run"
SIZE_13_0_1 = 4302469087
WRONG_GUESS = "/download/compute/cuda/13.0.1/local_installers/cuda_13.0.1_570.124.06_linux.run"
DRIVER_ARCHIVE = (
    REDIST_DIR + "nvidia_driver/linux-x86_64/nvidia_driver-linux-x86_64-580.82.07-archive.tar.xz"
)
# The fixtures (fake_nvidia, fake_nvidia_site, ...) come from tests/conftest.py, which imports
# tests.fakenvidia.fixtures.

# The name pattern of today's installers: cuda_<release>_<driver>_linux[_sbsa].run.
TODAYS_NAMES = re.compile(
    r"^cuda_(\d+\.\d+\.\d+)(?:_(\d+\.\d+(?:\.\d+)?))?_(linux(?:_sbsa|_ppc64le)?\.run"
    r"|windows(?:_x86_64|_arm64)?(?:_network)?\.exe|win10(?:_network)?\.exe)$"
)


class Reply:
    def __init__(self, status: int, headers: Mapping[str, str], body: bytes) -> None:
        self.status = status
        self.headers = {name.lower(): value for name, value in headers.items()}
        self.body = body

    @property
    def text(self) -> str:
        return self.body.decode("utf-8")


def fetch(
    server: FakeNvidiaServer,
    path: str,
    headers: Mapping[str, str] | None = None,
    method: str = "GET",
) -> Reply:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        connection.request(method, path, headers=dict(headers or {}))
        response = connection.getresponse()
        body = response.read()
        return Reply(response.status, dict(response.getheaders()), body)
    finally:
        connection.close()


# -- the default site over HTTP -------------------------------------------------------------


def test_listing_names_every_manifest(fake_nvidia: FakeNvidiaServer) -> None:
    reply = fetch(fake_nvidia, "/download/compute/cuda/redist/")
    assert reply.status == 200
    assert reply.headers["content-type"].startswith("text/html")
    labels = re.findall(r"href='redistrib_(\d+\.\d+\.\d+)\.json'", reply.text)
    assert "11.8.0" in labels
    assert "13.0.1" in labels
    assert "13.4.1" in labels
    assert "13.4.0" not in labels
    assert "12.7.0" not in labels
    assert len(labels) == len(set(labels)) == 38  # 37 catalog labels without 13.4.0, plus 11.8.0
    assert "<ul class='directorycontents'>" in reply.text
    assert "<li><span class='dir'><a href='cuda_nvcc/'>cuda_nvcc/</a></span></li>" in reply.text
    assert re.search(
        r"<span class='file'><a href='redistrib_12\.8\.0\.json'>redistrib_12\.8\.0\.json</a>"
        r"</span> <span class='size'>[^<]+</span> <span class='date'>2025-01-23 00:00:00</span>",
        reply.text,
    )
    sub = fetch(fake_nvidia, "/download/compute/cuda/redist/cuda_nvcc/linux-x86_64/")
    assert "cuda_nvcc-linux-x86_64-13.0.88-archive.tar.xz" in sub.text


def test_excerpt_manifests_are_byte_identical(fake_nvidia: FakeNvidiaServer) -> None:
    for label in ("12.8.0", "13.0.0"):
        reply = fetch(fake_nvidia, f"{REDIST_DIR}redistrib_{label}.json")
        assert reply.status == 200
        assert reply.headers["content-type"] == "application/json"
        assert reply.body == sample_bytes(f"redistrib_{label}.excerpt.json")


def test_excerpt_archives_have_the_manifest_size(fake_nvidia: FakeNvidiaServer) -> None:
    manifest = json.loads(sample_bytes("redistrib_13.0.0.excerpt.json"))
    entry = manifest["libcublas"]["linux-sbsa"]
    reply = fetch(fake_nvidia, REDIST_DIR + entry["relative_path"], method="HEAD")
    assert reply.status == 200
    assert reply.headers["content-length"] == entry["size"]


def test_synthesized_manifest_format(fake_nvidia_site: Site) -> None:
    body = fake_nvidia_site.body(f"{REDIST_DIR}redistrib_13.0.1.json")
    manifest = json.loads(body)
    assert body == (json.dumps(manifest, indent=4) + "\n").encode()
    assert list(manifest)[:3] == ["release_date", "release_label", "release_product"]
    assert list(manifest)[3:] == sorted(list(manifest)[3:])
    assert manifest["release_label"] == "13.0.1"
    nvcc = manifest["cuda_nvcc"]
    assert list(nvcc)[:4] == ["name", "license", "license_path", "version"]
    assert list(nvcc["linux-x86_64"]) == ["relative_path", "sha256", "md5", "size"]
    assert isinstance(nvcc["linux-x86_64"]["size"], str)
    assert manifest["nvidia_driver"]["version"] == "580.82.07"
    assert manifest["nvidia_driver"]["license"] == "NVIDIA Driver"
    assert set(manifest["nvidia_driver"]) >= {"linux-x86_64", "linux-sbsa"}
    assert "linux-aarch64" not in nvcc
    versions = {
        label: (
            fake_nvidia_site.manifests[label]["cuda_nvcc"]["version"],
            fake_nvidia_site.manifests[label]["cuda_cudart"]["version"],
        )
        for label in ("13.0.1", "13.0.2", "13.0.3")
    }
    assert versions == {
        "13.0.1": ("13.0.88", "13.0.88"),
        "13.0.2": ("13.0.88", "13.0.96"),
        "13.0.3": ("13.0.88", "13.0.96"),
    }
    assert "nvidia_driver" not in fake_nvidia_site.manifests["13.4.1"]
    assert "linux-aarch64" in fake_nvidia_site.manifests["12.6.3"]["cuda_cudart"]
    assert fake_nvidia_site.manifests["11.8.0"]["nvidia_driver"]["version"] == "520.61.05"
    assert fake_nvidia_site.releases["11.8.0"].installers == ()
    dates = [
        fake_nvidia_site.manifests[label]["release_date"] for label in fake_nvidia_site.manifests
    ]
    assert dates == sorted(dates)


def test_tiny_archive_matches_its_manifest(fake_nvidia: FakeNvidiaServer, tmp_path: Path) -> None:
    manifest = json.loads(fetch(fake_nvidia, f"{REDIST_DIR}redistrib_13.0.1.json").body)
    for component in ("cuda_nvcc", "cuda_cudart", "nvidia_driver"):
        for platform, entry in manifest[component].items():
            if not isinstance(entry, dict):
                continue
            url = "https://developer.download.nvidia.com/compute/cuda/redist/"
            url += entry["relative_path"]
            reply = fetch(
                fake_nvidia, fake_nvidia.local_url(url).removeprefix(fake_nvidia.base_url)
            )
            assert reply.status == 200, entry["relative_path"]
            assert hashlib.sha256(reply.body).hexdigest() == entry["sha256"]
            assert hashlib.md5(reply.body).hexdigest() == entry["md5"]
            assert str(len(reply.body)) == entry["size"]
            if component == "nvidia_driver":
                continue
            top = entry["relative_path"].rsplit("/", 1)[-1].removesuffix(".tar.xz")
            if platform.startswith("windows"):
                names = zipfile.ZipFile(io.BytesIO(reply.body)).namelist()
                assert all(name.startswith(top.removesuffix(".zip") + "/") for name in names)
                continue
            with tarfile.open(fileobj=io.BytesIO(reply.body), mode="r:xz") as archive:
                assert {m.name.split("/")[0] for m in archive.getmembers()} == {top}
                archive.extractall(tmp_path / platform / component, filter="data")
    nvcc = tmp_path / "linux-x86_64/cuda_nvcc/cuda_nvcc-linux-x86_64-13.0.88-archive/bin/nvcc"
    assert nvcc.stat().st_mode & 0o111
    assert "V13.0.88" in nvcc.read_text()
    lib = tmp_path / "linux-sbsa/cuda_cudart/cuda_cudart-linux-sbsa-13.0.88-archive/lib"
    assert (lib / "libcudart.so.13").resolve().name == "libcudart.so.13.0.88"


def test_md5sum_13_0_1_is_the_sample(fake_nvidia: FakeNvidiaServer) -> None:
    reply = fetch(fake_nvidia, "/download/compute/cuda/13.0.1/docs/sidebar/md5sum.txt")
    assert reply.status == 200
    assert reply.body == sample_bytes("md5sum-13.0.1.reconstructed.txt")
    assert fetch(fake_nvidia, "/download/compute/cuda/13.4.0/docs/sidebar/md5sum.txt").status == 404


def test_head_installer(fake_nvidia: FakeNvidiaServer) -> None:
    reply = fetch(fake_nvidia, INSTALLER_13_0_1, method="HEAD")
    assert reply.status == 200
    assert reply.headers["content-length"] == str(SIZE_13_0_1)
    assert reply.body == b""
    assert reply.headers["accept-ranges"] == "bytes"
    assert reply.headers["etag"].startswith('"')
    assert reply.headers["last-modified"].endswith("GMT")
    again = fetch(fake_nvidia, INSTALLER_13_0_1, method="HEAD")
    assert again.headers["etag"] == reply.headers["etag"]


def test_range_requests_slice_the_full_content(fake_nvidia: FakeNvidiaServer) -> None:
    full = fetch(fake_nvidia, DRIVER_ARCHIVE)
    assert full.status == 200
    size = len(full.body)
    assert size > 70_000  # crosses the 64 KiB block boundary
    cases = {
        "bytes=10-99": (10, 99),
        "bytes=65530-65545": (65530, 65545),
        f"bytes={size - 7}-": (size - 7, size - 1),
        "bytes=-100": (size - 100, size - 1),
        f"bytes=5-{size + 1000}": (5, size - 1),
        f"bytes=-{size + 10}": (0, size - 1),
    }
    for header, (first, last) in cases.items():
        part = fetch(fake_nvidia, DRIVER_ARCHIVE, {"Range": header})
        assert part.status == 206, header
        assert part.headers["content-range"] == f"bytes {first}-{last}/{size}"
        assert part.headers["content-length"] == str(last - first + 1)
        assert part.body == full.body[first : last + 1], header
    tail = fetch(fake_nvidia, INSTALLER_13_0_1, {"Range": f"bytes={SIZE_13_0_1 - 87}-"})
    assert tail.status == 206
    assert (
        tail.headers["content-range"] == f"bytes {SIZE_13_0_1 - 87}-{SIZE_13_0_1 - 1}/{SIZE_13_0_1}"
    )
    assert len(tail.body) == 87


def test_unsatisfiable_and_ignored_ranges(fake_nvidia: FakeNvidiaServer) -> None:
    size = fake_nvidia.site.resources[DRIVER_ARCHIVE].size
    for header in (f"bytes={size}-", f"bytes={size + 5}-{size + 9}", "bytes=-0"):
        reply = fetch(fake_nvidia, DRIVER_ARCHIVE, {"Range": header})
        assert reply.status == 416, header
        assert reply.headers["content-range"] == f"bytes */{size}"
    for header in ("bytes=9-3", "items=0-5", "bytes=0-1,5-6"):
        assert fetch(fake_nvidia, DRIVER_ARCHIVE, {"Range": header}).status == 200


def test_if_range(fake_nvidia: FakeNvidiaServer) -> None:
    head = fetch(fake_nvidia, DRIVER_ARCHIVE, method="HEAD")
    etag, modified = head.headers["etag"], head.headers["last-modified"]
    stale = fetch(fake_nvidia, DRIVER_ARCHIVE, {"Range": "bytes=0-9", "If-Range": '"other"'})
    assert stale.status == 200
    assert len(stale.body) == int(head.headers["content-length"])
    old_date = "Mon, 01 Jan 2018 00:00:00 GMT"
    assert (
        fetch(fake_nvidia, DRIVER_ARCHIVE, {"Range": "bytes=0-9", "If-Range": old_date}).status
        == 200
    )
    for validator in (etag, modified):
        fresh = fetch(fake_nvidia, DRIVER_ARCHIVE, {"Range": "bytes=0-9", "If-Range": validator})
        assert fresh.status == 206
        assert len(fresh.body) == 10


def test_conditional_get(fake_nvidia: FakeNvidiaServer) -> None:
    path = f"{REDIST_DIR}redistrib_13.0.1.json"
    first = fetch(fake_nvidia, path)
    etag, modified = first.headers["etag"], first.headers["last-modified"]
    not_modified = fetch(fake_nvidia, path, {"If-None-Match": etag})
    assert not_modified.status == 304
    assert not_modified.body == b""
    assert not_modified.headers["etag"] == etag
    assert fetch(fake_nvidia, path, {"If-None-Match": '"nope"'}).status == 200
    assert fetch(fake_nvidia, path, {"If-Modified-Since": modified}).status == 304
    old = "Sat, 01 Jan 2000 00:00:00 GMT"
    assert fetch(fake_nvidia, path, {"If-Modified-Since": old}).status == 200
    # If-None-Match wins over If-Modified-Since.
    both = {"If-None-Match": '"nope"', "If-Modified-Since": modified}
    assert fetch(fake_nvidia, path, both).status == 200


def test_not_found_and_redirect(fake_nvidia: FakeNvidiaServer) -> None:
    reply = fetch(fake_nvidia, WRONG_GUESS)
    assert reply.status == 404
    assert reply.headers["content-type"].startswith("text/html")
    assert b"Not Found" in reply.body
    assert reply.headers["content-length"] == str(len(reply.body))
    head = fetch(fake_nvidia, WRONG_GUESS, method="HEAD")
    assert head.status == 404
    assert head.body == b""
    assert fetch(fake_nvidia, "/download/compute/cuda/redist/redistrib_13.4.0.json").status == 404
    assert fetch(fake_nvidia, "/download/compute/cuda/12.7.0/docs/sidebar/md5sum.txt").status == 404
    moved = fetch(fake_nvidia, "/download/compute/cuda/redist")
    assert moved.status == 301
    assert moved.headers["location"] == "/download/compute/cuda/redist/"


def test_keep_alive_and_log(fake_nvidia_fresh: FakeNvidiaServer) -> None:
    server = fake_nvidia_fresh
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        for path in (INSTALLER_13_0_1, WRONG_GUESS, INSTALLER_13_0_1):
            connection.request("HEAD", path, headers={"X-Probe": "1"})
            connection.getresponse().read()
        connection.request("GET", DRIVER_ARCHIVE, headers={"range": "bytes=0-0"})
        assert connection.getresponse().read() == fake_nvidia_fresh.site.body(DRIVER_ARCHIVE)[:1]
    finally:
        connection.close()
    assert server.count() == 4
    assert server.count("/download/compute/cuda/13.0.1/") == 3
    assert server.count(method="HEAD") == 3
    method, path, headers = server.log[-1]
    assert (method, path) == ("GET", DRIVER_ARCHIVE)
    assert headers["Range"] == "bytes=0-0"
    assert server.log[0].headers["x-probe"] == "1"
    server.clear_log()
    assert server.log == []


def test_urls(fake_nvidia: FakeNvidiaServer) -> None:
    base = f"http://127.0.0.1:{fake_nvidia.port}"
    assert fake_nvidia.download_url == base + "/download"
    assert fake_nvidia.archive_url == base + "/www"
    assert fake_nvidia.prerelease_url == base + "/packages"
    assert nvidia_url_to_path("https://developer.nvidia.com/cuda-toolkit-archive") == (
        ARCHIVE_INDEX_PATH
    )
    assert nvidia_url_to_path("https://example.com/x") is None


# -- archive pages --------------------------------------------------------------------------


def test_sample_archive_page_decodes(fake_nvidia: FakeNvidiaServer) -> None:
    reply = fetch(fake_nvidia, "/www/cuda-13-0-1-download-archive?target_os=Linux")
    assert reply.status == 200
    match = re.search(r'data-react-props="([^"]+)"', reply.text)
    assert match is not None
    assert "&quot;" in match.group(1)
    payload = json.loads(html.unescape(match.group(1)))
    assert payload["pageData"]["header"]["title"] == "CUDA Toolkit 13.0 Update 1 Downloads"
    details = payload["pageData"]["releases"]["Linux/x86_64/Ubuntu/24.04/runfile_local"]["details"]
    url = (
        "https://developer.download.nvidia.com/compute/cuda/13.0.1/local_installers/"
        "cuda_13.0.1_580.82.07_linux.run"
    )
    assert f'<a id="targetDownloadButtonHref" href="{url}">' in details
    assert "127.0.0.1" not in reply.text


def test_generated_archive_page(fake_nvidia_site: Site) -> None:
    page = fake_nvidia_site.body("/www/cuda-12-8-0-download-archive").decode()
    payload = decode_react_props(page)
    assert payload == fake_nvidia_site.react_props["12.8.0"]
    data = payload["pageData"]
    assert data["header"]["title"] == "CUDA Toolkit 12.8 Downloads"
    assert "structure" in data
    releases = data["releases"]
    row = fake_nvidia_site.installer("12.8.0", "linux-amd64")
    for key in (
        "Linux/x86_64/Ubuntu/24.04/runfile_local",
        "Linux/x86_64/Ubuntu/22.04/runfile_local",
    ):
        assert f'href="{row.url}"' in releases[key]["details"]
        assert releases[key]["md5"] == row.md5
        assert releases[key]["size"] == str(row.size)
    sbsa = fake_nvidia_site.installer("12.8.0", "linux-arm64")
    assert sbsa.url in releases["Linux/arm64-sbsa/Native/Ubuntu/24.04/runfile_local"]["details"]
    assert (
        "targetDownloadButtonHref"
        not in releases["Linux/x86_64/Ubuntu/24.04/deb_network"]["details"]
    )
    assert "Windows/arm64/11/exe_local" not in releases
    assert "network_installers/cuda_12.8.0_windows_network.exe" in str(releases)
    assert "&#39;" in page  # an apostrophe in the Windows instructions
    newest = decode_react_props(fake_nvidia_site.body("/www/cuda-13-4-1-download-archive").decode())
    arm = fake_nvidia_site.installer("13.4.1", "windows-arm64")
    assert arm.url in newest["pageData"]["releases"]["Windows/arm64/11/exe_local"]["details"]
    assert fake_nvidia_site.body(CUDA_DOWNLOADS_PATH) == fake_nvidia_site.body(
        "/www/cuda-13-4-1-download-archive"
    )


def test_preview_release(fake_nvidia: FakeNvidiaServer) -> None:
    site = fake_nvidia.site
    info = site.releases["13.4.0"]
    assert info.preview
    assert info.manifest_path is None and info.md5sum_path is None
    payload = decode_react_props(fetch(fake_nvidia, "/www/cuda-13-4-0-download-archive").text)
    releases = payload["pageData"]["releases"]
    assert set(releases) == {"Windows/x86_64/11/exe_local", "Windows/arm64/11/exe_local"}
    assert "https://packages.nvidia.com/prerelease/cuda/13.4.0/local_installers/" in str(releases)
    sums = fetch(fake_nvidia, "/packages/prerelease/cuda/13.4.0/local_installers/sha256sum.txt")
    assert sums.text == "".join(f"{digest}  {name}\n" for name, digest in PREVIEW_SHA256.items())
    for row in info.installers:
        head = fetch(fake_nvidia, row.path, method="HEAD")
        assert row.path.startswith("/packages/prerelease/cuda/13.4.0/local_installers/")
        assert head.headers["content-length"] == str(row.size)


def test_archive_index(fake_nvidia: FakeNvidiaServer) -> None:
    text = fetch(fake_nvidia, ARCHIVE_INDEX_PATH).text
    links = re.findall(
        r'<a href="https://developer\.nvidia\.com/cuda-(\d+)-(\d+)-(\d+)-download-archive">'
        r"(CUDA Toolkit [^<]+)</a>",
        text,
    )
    labels = [".".join(parts[:3]) for parts in links]
    assert labels[0] == "13.4.1"
    assert labels[-1] == "12.0.0"
    assert len(labels) == 38
    assert ("13", "4", "0", "CUDA Toolkit 13.4 Developer Preview") in links
    assert ("12", "8", "0", "CUDA Toolkit 12.8.0") in links
    assert "CUDA Toolkit 12.8.0</a> (January 2025)" in text


# -- the site as data -----------------------------------------------------------------------


def test_catalog_installers_are_served(fake_nvidia_site: Site) -> None:
    assert len(fake_nvidia_site.catalog) == 114
    for row in fake_nvidia_site.catalog:
        resource = fake_nvidia_site.resource_for_url(row.url)
        assert isinstance(resource, VirtualFile), row.url
        assert resource.size == row.size
    assert all(TODAYS_NAMES.match(row.filename) for row in fake_nvidia_site.catalog)
    assert fake_nvidia_site.releases["13.4.1"].driver is None
    assert fake_nvidia_site.releases["12.3.2"].driver == "545.23.08"


def test_virtual_file_ranges_are_consistent() -> None:
    virtual = VirtualFile(200_000, seed="x")
    whole = virtual.read()
    assert len(whole) == 200_000
    assert virtual.read(65_000, 140_000) == whole[65_000:140_000]
    assert b"".join(virtual.iter_chunks(1, 199_999)) == whole[1:199_999]
    assert VirtualFile(200_000, seed="y").read(0, 64) != whole[:64]


def test_builds_are_deterministic() -> None:
    from tests.fakenvidia.site import _Builder, _tiny_archive

    again = _Builder(SiteOptions()).build()
    default = build_site()
    assert again.resources.keys() == default.resources.keys()
    for path, resource in default.resources.items():
        assert again.resources[path].etag == resource.etag, path
    for info in list(default.archives.values())[-6:]:
        if info.genuine and info.component != "nvidia_driver":
            fresh = _tiny_archive.__wrapped__(
                info.relative_path, info.component, info.platform, info.version
            )
            assert hashlib.sha256(fresh).hexdigest() == info.sha256, info.relative_path


@pytest.mark.parametrize("options", variant_options(), ids=SiteOptions.describe)
def test_variant_builds(options: SiteOptions) -> None:
    site = build_site(options)
    listing = site.body(REDIST_DIR).decode()
    quote = options.listing_quote
    links = re.findall(rf"href={quote}redistrib_([\d.]+)\.json{quote}", listing)
    assert len(links) == len(site.manifest_labels) * (2 if options.listing_duplicates else 1)
    assert f"class={quote}directorycontents{quote}" in listing

    md5sum = site.get("/download/compute/cuda/13.0.1/docs/sidebar/md5sum.txt")
    if "13.0.1" in options.missing_md5sum:
        assert md5sum is None
        assert site.releases["13.0.1"].md5sum_path is None
    else:
        assert md5sum is not None
        first = md5sum.read().decode().splitlines()[0]
        assert first == "8c56e3cb1ab74370aafed5a4600bc5bc" + options.md5sum_separator + (
            "cuda_13.0.1_580.82.07_linux.run"
        )

    for label, info in site.releases.items():
        if label in options.missing_archive_page or not info.installers:
            assert info.archive_page_path is None
            assert site.get(f"/www/cuda-{label.replace('.', '-')}-download-archive") is None
            continue
        assert info.archive_page_path is not None
        payload = decode_react_props(site.body(info.archive_page_path).decode())
        assert payload == site.react_props[label]
        assert ("structure" in payload["pageData"]) == (options.react_structure == "inside")
        assert ("structure" in payload) == (options.react_structure == "top")
        for row in info.installers:
            keys = [
                k for k, v in payload["pageData"]["releases"].items() if row.url in v["details"]
            ]
            assert keys, row.url
            entry = payload["pageData"]["releases"][keys[0]]
            details = entry["details"]
            assert ("md5" in entry) == (options.react_checksums == "fields")
            assert (f"MD5: {row.md5}" in details) == (options.react_checksums == "details")
            buttons = re.findall(r'id="targetDownloadButtonHref" href="([^"]+)"', details)
            if options.details_patch_link_first:
                assert "/patches/" in buttons[0]
                assert buttons[1] == row.url
            else:
                assert buttons == [row.url]

    future = site.future_release
    if not options.future_release:
        assert future is None
        assert FUTURE_LABEL not in site.releases
        return
    assert future is not None
    assert future.label == FUTURE_LABEL
    assert future.driver == FUTURE_DRIVER
    assert future.components["nvidia_driver"] == FUTURE_DRIVER
    assert f"redistrib_{FUTURE_LABEL}.json" in listing
    assert not any(TODAYS_NAMES.match(row.filename) for row in future.installers)
    for row in future.installers:
        assert row.filename.endswith((".run", ".exe"))
        assert site.resource_for_url(row.url) is not None
    assert future.md5sum_path is not None
    md5_lines = site.body(future.md5sum_path).decode().splitlines()
    assert [line.split()[1] for line in md5_lines] == [r.filename for r in future.installers]
    assert (
        f"cuda-{FUTURE_LABEL.replace('.', '-')}-download-archive"
        in site.body(ARCHIVE_INDEX_PATH).decode()
    )


def test_unknown_label_in_options_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown release labels"):
        build_site(SiteOptions(missing_md5sum=frozenset({"12.7.0"})))


def test_make_fake_nvidia_serves_a_variant(make_fake_nvidia: MakeFakeNvidia) -> None:
    server = make_fake_nvidia(
        md5sum_separator=" ",
        missing_archive_page=frozenset({"13.0.1"}),
        future_release=True,
    )
    text = fetch(server, "/download/compute/cuda/13.0.2/docs/sidebar/md5sum.txt").text
    assert (
        text.splitlines()[0] == "3f092554675f004250d4dfc1d6c3acc9 cuda_13.0.2_580.95.05_linux.run"
    )
    assert fetch(server, "/www/cuda-13-0-1-download-archive").status == 404
    manifest = json.loads(fetch(server, f"{REDIST_DIR}redistrib_{FUTURE_LABEL}.json").body)
    assert manifest["nvidia_driver"]["version"] == FUTURE_DRIVER
    same = make_fake_nvidia(server.site)
    assert same.port != server.port
    assert fetch(same, INSTALLER_13_0_1, method="HEAD").status == 200
