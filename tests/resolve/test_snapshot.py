"""The shipped offline snapshot is read like any document: checked on load, never a crash."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cudaup.core.versions import parse_request
from cudaup.errors import SourceFormatError
from cudaup.resolve.snapshot import OfflineCatalog

WHERE = "the snapshot under test"
URL = "https://developer.download.nvidia.com/compute/cuda/13.0.1/local_installers/cuda_13.0.1_580.82.07_linux.run"


def _document(**changes: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "platform": "linux-x86_64",
        "filename": URL.rsplit("/", 1)[-1],
        "url": URL,
        "size": 4302469087,
        "md5": "8c56e3cb1ab74370aafed5a4600bc5bc",
        "driver": "580.82.07",
    }
    entry.update(changes)
    return {"generated": "2026-01-01", "releases": {"13.0.1": [entry]}}


def test_the_shipped_snapshot_loads_and_answers() -> None:
    snapshot = OfflineCatalog.load()
    assert len(snapshot.releases) > 10
    resolution = snapshot.resolve(parse_request("13.0.1"), "linux-x86_64")
    assert resolution.artifacts[0].filename.endswith(".run")


def test_a_good_document_parses() -> None:
    snapshot = OfflineCatalog.parse(json.dumps(_document()).encode(), WHERE)
    assert snapshot.releases["13.0.1"][0]["size"] == 4302469087


@pytest.mark.parametrize(
    ("document", "says"),
    [
        (_document(url=URL.rsplit("/", 1)[0] + "/.."), "url '"),
        (_document(filename="../../x.run"), "filename '../../x.run' is not the URL's"),
        (_document(size="12"), "size '12'"),
        (_document(size=2**60), f"size {2**60}"),
        (_document(md5=None), "md5"),
        (_document(platform="vax"), "unknown platform 'vax'"),
        (_document(driver="5\x1b[2J"), "control characters"),
        ({"generated": "x", "releases": {"../13.0.1": []}}, "release '../13.0.1'"),
        ({"generated": "x", "releases": {"13.0.1": {}}}, "is not a list"),
        ({"generated": "x", "releases": {"13.0.1": ["x"]}}, "is not an object"),
        ({"generated": "x", "releases": []}, "has no 'releases' object"),
        ({"releases": {}}, "generated None"),
    ],
)
def test_a_damaged_snapshot_is_refused(document: Any, says: str) -> None:
    with pytest.raises(SourceFormatError) as caught:
        OfflineCatalog.parse(json.dumps(document).encode(), WHERE)
    assert WHERE in str(caught.value) and says in str(caught.value)


@pytest.mark.parametrize(
    "data", [b"[" * 100_000, b"\xef\xbb\xbf{}", b"{\xff}", b'{"a": ' + b"1" * 5000 + b"}"]
)
def test_an_undecodable_snapshot_is_refused(data: bytes) -> None:
    with pytest.raises(SourceFormatError, match=WHERE):
        OfflineCatalog.parse(data, WHERE)
