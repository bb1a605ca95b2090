from __future__ import annotations

import html
import json
from typing import Any

import pytest

from cudaup.errors import SourceFormatError
from cudaup.nvidia.archive_page import parse_archive_index, parse_archive_page, title_label
from tests.nvidia.samples import sample

RUNFILE = "https://developer.download.nvidia.com/compute/cuda/13.0.1/local_installers/cuda_13.0.1_580.82.07_linux.run"


def _page(payload: Any, quote: str = '"') -> str:
    encoded = html.escape(json.dumps(payload), quote=True)
    if quote == "'":
        encoded = encoded.replace("&#x27;", "&#39;")
    return (
        "<html><head><script src='/app.js'></script></head><body>"
        f'<div data-react-class="NestedOptionSelector" data-react-props={quote}{encoded}{quote}></div>'
        "</body></html>"
    )


def test_reconstructed_sample_payload() -> None:
    payload = json.loads(sample("download-archive-react-props.reconstructed.json"))
    page = parse_archive_page(_page(payload))
    assert title_label(page.title) == "13.0.1"
    [linux] = page.for_platform("linux-x86_64")
    assert linux.url == RUNFILE
    assert linux.md5 == "8c56e3cb1ab74370aafed5a4600bc5bc" and linux.size == 4302469087
    [sbsa] = page.for_platform("linux-sbsa")  # "arm64-sbsa/Native/..." key
    assert sbsa.filename == "cuda_13.0.1_580.82.07_linux_sbsa.run"
    [win] = page.for_platform("windows-x86_64")  # the network installer is not standalone
    assert win.filename == "cuda_13.0.1_windows.exe"
    assert page.platforms == ("linux-x86_64", "linux-sbsa", "windows-x86_64")


def _entry(details: str, **fields: Any) -> dict[str, Any]:
    return {"details": details, **fields}


@pytest.mark.parametrize("placement", ["pageData", "top", "deep"])
def test_releases_found_wherever_they_sit(placement: str) -> None:
    releases = {
        "Linux/x86_64/Ubuntu/24.04/runfile_local": _entry(
            f'<a id="targetDownloadButtonHref" href="{RUNFILE}">Download</a>'
        )
    }
    payloads: dict[str, dict[str, Any]] = {
        "pageData": {"releases": releases, "structure": {}},
        "top": {"pageData": {"header": {}}, "releases": releases, "structure": {}},
        "deep": {"props": {"data": {"options": {"releases": releases}}}},
    }
    payload = payloads[placement]
    page = parse_archive_page(_page(payload, quote="'"))
    assert page.downloads[0].url == RUNFILE


def test_checksums_inside_details_and_attribute_order() -> None:
    details = (
        '<a href="https://developer.download.nvidia.com/compute/cuda/13.0.1/patches/1/p.run">patch</a>'
        f"<p>MD5: 8c56e3cb1ab74370aafed5a4600bc5bc</p><p>Size: 4,302,469,087 bytes</p>"
        f'<a class="btn" href="{RUNFILE}" id="targetDownloadButtonHref">Download (4.0 GB)</a>'
    )
    page = parse_archive_page(
        _page({"pageData": {"releases": {"Linux/x86_64/RHEL/9/runfile_local": _entry(details)}}})
    )
    [download] = page.downloads
    assert (download.url, download.md5, download.size) == (
        RUNFILE,
        "8c56e3cb1ab74370aafed5a4600bc5bc",
        4302469087,
    )


def test_no_button_falls_back_to_first_non_patch_link() -> None:
    details = (
        '<span class="cudaBash">wget https://developer.download.nvidia.com/compute/cuda/12.0.0/patches/x.run</span>'
        f'<span class="cudaBash">wget {RUNFILE}</span>'
    )
    page = parse_archive_page(
        _page({"releases": {"Linux/x86_64/Ubuntu/22.04/runfile_local": _entry(details)}})
    )
    assert page.downloads[0].url == RUNFILE and page.downloads[0].md5 is None


def test_keys_map_to_platforms_and_other_types_are_skipped() -> None:
    releases = {
        "Linux/aarch64-jetson/Native/Ubuntu/22.04/deb_local": _entry("<p>apt</p>"),
        "Linux/x86_64/Ubuntu/24.04/deb_network": _entry("<span>wget keyring</span>"),
        "Windows/arm64/11/exe_local": _entry(
            '<a id="targetDownloadButtonHref" href="https://packages.nvidia.com/prerelease/cuda/13.4.0/local_installers/cuda_13.4.0_windows_arm64.exe">x</a>'
        ),
    }
    page = parse_archive_page(_page({"pageData": {"releases": releases}}))
    assert [d.platform for d in page.downloads] == ["windows-arm64"]


def test_pages_without_payload() -> None:
    with pytest.raises(SourceFormatError, match="data-react-props"):
        parse_archive_page("<html>Access Denied</html>")
    with pytest.raises(SourceFormatError, match="releases"):
        parse_archive_page(_page({"pageData": {"header": {"title": "x"}}}))


def test_title_labels() -> None:
    assert title_label("CUDA Toolkit 12.8 Downloads") == "12.8.0"
    assert title_label("CUDA Toolkit 13.0 Update 2 Downloads") == "13.0.2"
    assert title_label("CUDA Toolkit 12.6.3 Downloads") == "12.6.3"
    assert title_label(None) is None


def test_archive_index() -> None:
    text = (
        '<p><a href="https://developer.nvidia.com/cuda-13-4-0-download-archive">CUDA Toolkit 13.4 Developer Preview</a> (May 2026)</p>'
        '<p><a href="https://developer.nvidia.com/cuda-13-0-1-download-archive">CUDA Toolkit 13.0.1</a> (August 2025), '
        '<a href="https://docs.nvidia.com/cuda/archive/13.0.1/">Versioned Online Documentation</a></p>'
    )
    entries = parse_archive_index(text)
    assert [(e.label, e.preview) for e in entries] == [("13.4.0", True), ("13.0.1", False)]


PAGE_URL = "https://mirror.example/cuda-13-0-1-download-archive"
KEY = "Linux/x86_64/Ubuntu/24.04/runfile_local"


def _button(href: str, **fields: Any) -> str:
    releases = {KEY: _entry(f'<a id="targetDownloadButtonHref" href="{href}">x</a>', **fields)}
    return _page({"pageData": {"releases": releases}})


@pytest.mark.parametrize(
    ("page", "says"),
    [
        (_button(RUNFILE.rsplit("/", 1)[0] + "/.."), "installer file name '..'"),
        (_button("javascript:alert(1)//x.run"), "download URL 'javascript:alert(1)//x.run'"),
        (_button(RUNFILE, size=-5), "size -5"),
        (_button(RUNFILE, size="9" * 5000), "size '9999"),
        (_button(RUNFILE, size=2**60), f"size {2**60}"),
        (_page({"releases": {KEY: _entry("<p>Size: " + "9" * 30 + " bytes</p>" + RUNFILE)}}), "size '9999"),
        ('<div data-react-props="' + "[" * 100_000 + '"></div>', "nested too deeply"),
        ('<div data-react-props="{&quot;a&quot;: ' + "1" * 5000 + '}"></div>', "not valid JSON"),
        ('<div data-react-props="{&quot;a&quot;: NaN}"></div>', "not valid JSON"),
        ("<" * (10 * 1024 * 1024 + 1), "larger than"),
    ],
    ids=[
        "name-dotdot", "not-http", "negative-size", "size-5000-digits", "size-over-a-pebibyte",
        "size-in-text-too-long", "nested-100000-deep", "number-5000-digits", "nan", "oversized",
    ],
)  # fmt: skip
def test_hostile_pages_are_refused_naming_the_page(page: str, says: str) -> None:
    with pytest.raises(SourceFormatError) as caught:
        parse_archive_page(page, PAGE_URL)
    assert PAGE_URL in str(caught.value) and says in str(caught.value)


def test_releases_nested_as_deep_as_json_allows_are_still_found() -> None:
    """The search is a loop: a payload nested 900 deep (json's limit is about 1000)
    would overflow a recursive search started from inside the parser."""
    node: dict[str, Any] = {"releases": {KEY: _entry(f'<a href="{RUNFILE}">x</a>')}}
    for _ in range(900):
        node = {"n": node}
    assert parse_archive_page(_page(node)).downloads[0].url == RUNFILE


@pytest.mark.parametrize(
    "details", ["<a " * 300_000, "<" * 1_000_000, "<a href='" * 100_000], ids=["a", "lt", "href"]
)
def test_hostile_details_are_scanned_in_linear_time(details: str) -> None:
    releases = {KEY: _entry(details + f'<a id="targetDownloadButtonHref" href="{RUNFILE}">')}
    assert parse_archive_page(_page({"releases": releases})).downloads[0].url == RUNFILE


def test_index_release_numbers_are_bounded() -> None:
    text = f'<a href="/cuda-{"1" * 5000}-0-0-download-archive">CUDA Toolkit x</a>'
    assert parse_archive_index(text + "<a " * 100_000) == []
