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
