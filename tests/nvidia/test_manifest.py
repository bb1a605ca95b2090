from __future__ import annotations

import json

import pytest

from cudaup.errors import SourceFormatError
from cudaup.nvidia.manifest import parse_manifest
from tests.nvidia.samples import sample


def test_real_13_0_0_manifest() -> None:
    manifest = parse_manifest(sample("redistrib_13.0.0.excerpt.json"))
    assert (manifest.label, manifest.date, manifest.product) == ("13.0.0", "2025-08-04", "cuda")
    assert manifest.driver_version == "580.65.06"
    nvcc = manifest.components["cuda_nvcc"]
    assert nvcc.version == "13.0.48"
    archive = nvcc.archive_for("linux-x86_64")
    assert archive is not None
    assert archive.size == 26732376
    assert archive.sha256 == "cc5ff4a00d3be7c6c86ff740de7672e142ec87fea74e7e46b1b142b59fd2ac51"
    assert archive.filename == "cuda_nvcc-linux-x86_64-13.0.48-archive.tar.xz"
    assert "linux-aarch64" not in manifest.platforms  # 13.x has no Jetson archives
    # driver_assistant uses platform key linux-all but a source/ path: read, never rebuilt
    assistant = manifest.components["driver_assistant"].archive_for("linux-all")
    assert assistant is not None and assistant.relative_path.startswith("driver_assistant/source/")


def test_real_12_8_0_manifest_has_jetson() -> None:
    manifest = parse_manifest(sample("redistrib_12.8.0.excerpt.json"))
    assert manifest.driver_version == "570.86.10"
    assert "linux-aarch64" in manifest.platforms
    assert manifest.components["cuda_compat"].platforms == ("linux-aarch64",)


def _doc(**archive: object) -> bytes:
    entry = {
        "relative_path": "cuda_nvcc/linux-x86_64/cuda_nvcc-linux-x86_64-1.0-archive.tar.xz",
        "sha256": "a" * 64,
        "md5": "b" * 32,
        "size": "10",
    }
    entry.update(archive)  # type: ignore[arg-type]
    return json.dumps(
        {
            "release_date": "2020-01-01",
            "cuda_nvcc": {"name": "n", "version": "1.0", "linux-x86_64": entry},
        }
    ).encode()


def test_old_manifest_without_label_and_integer_size() -> None:
    manifest = parse_manifest(_doc(size=10))
    assert manifest.label is None and manifest.components["cuda_nvcc"].archives[0].size == 10


def test_variants_and_unknown_fields() -> None:
    doc = {
        "release_label": "9.1.0",
        "release_product": "cudnn",
        "future_field": [1, 2],  # scalars: a field of a later format
        "cudnn": {
            "name": "cuDNN",
            "version": "9.1.0",
            "cuda_variant": ["12"],
            "linux-x86_64": {
                "cuda12": {
                    "relative_path": "cudnn/linux-x86_64/cudnn-9.1.0_cuda12-archive.tar.xz",
                    "sha256": "c" * 64,
                    "size": "5",
                }
            },
        },
    }
    manifest = parse_manifest(json.dumps(doc).encode())
    archive = manifest.components["cudnn"].archive_for("linux-x86_64")
    assert archive is not None and archive.variant == "cuda12" and archive.md5 is None


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"relative_path": "../../etc/passwd"}, "relative_path '../../etc/passwd' in cuda_nvcc"),
        ({"relative_path": "/abs/x.tar.xz"}, "relative_path '/abs/x.tar.xz' in cuda_nvcc"),
        ({"relative_path": "https://evil.example/x.tar.xz"}, "relative_path 'https:"),
        ({"relative_path": "c:\\x.tar.xz"}, "relative_path"),
        ({"relative_path": "a/\x1b[2J.tar.xz"}, "control characters"),
        ({"relative_path": ["a"]}, "relative_path \\['a'\\] .* not a string"),
        ({"relative_path": None}, "missing relative_path"),
        ({"sha256": "abc"}, "sha256"),
        ({"sha256": None}, "sha256"),
        ({"md5": "zz"}, "md5"),
        ({"size": "-1"}, "size '-1'"),
        ({"size": True}, "size True"),
        ({"size": None}, "size None"),
        ({"size": "1" * 5000}, "size '1111"),
        ({"size": 2**50 + 1}, f"size {2**50 + 1}"),
        ({"size": 1.5}, "size 1.5"),
    ],
)
def test_hostile_or_broken_entries_are_rejected(change: dict[str, object], message: str) -> None:
    with pytest.raises(SourceFormatError, match=message):
        parse_manifest(_doc(**change))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'{"a": {"version": "1"}, "a": {"version": "2"}}', "duplicate key"),
        (b"\xef\xbb\xbf{}", "byte-order mark"),
        (b'{"release_label": "1.0.0", "cuda_nvcc": {', "not valid JSON"),
        (b"[1, 2]", "not a JSON object"),
        (b" " * (10 * 1024 * 1024 + 1), "larger than 10485760 bytes"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (b'{"cuda_nvcc": {"version": "1", "x-y": {"size": ' + b"9" * 5000 + b"}}}", "not valid"),
        (b'{"cuda_nvcc": {"version": "\xff"}}', "not UTF-8"),
        (b'{"cuda_nvcc": {"version": 13}}', "cuda_nvcc version 13 .* not a string"),
        (b'{"cuda_nvcc": {"version": "1\\u001b[2J"}}', "control characters"),
        (b'{"cuda_nvcc": {"name": "x"}}', "component 'cuda_nvcc' has no version"),
    ],
)
def test_broken_documents(data: bytes, message: str) -> None:
    with pytest.raises(SourceFormatError, match=message):
        parse_manifest(data)


@pytest.mark.parametrize(
    "key",
    ["../../../../tmp/x", "cuda/nvcc", "cuda\\nvcc", "..", ".hidden", "-rf", "a b", "x" * 129],
)
def test_component_keys_that_are_not_plain_names_are_refused(key: str) -> None:
    document = json.loads(_doc())
    document[key] = document.pop("cuda_nvcc")
    url = "https://mirror.example/compute/cuda/redist/redistrib_1.0.0.json"
    with pytest.raises(SourceFormatError, match=r"^component key .* in https://mirror\.example/"):
        parse_manifest(json.dumps(document).encode(), url)


def test_refusals_name_the_document_they_came_from() -> None:
    url = "https://mirror.example/compute/cuda/redist/redistrib_1.0.0.json"
    with pytest.raises(SourceFormatError, match=f"in {url} is refused"):
        parse_manifest(_doc(relative_path="../x"), url)
    with pytest.raises(SourceFormatError, match=f"^duplicate key 'a' in {url}$"):
        parse_manifest(b'{"a": 1, "a": 2}', url)


@pytest.mark.parametrize(
    "value", [[], [{"version": "13.0.48"}], ["13.0.48"]], ids=["empty", "objects", "scalars"]
)
def test_a_component_given_as_a_list_is_refused_naming_the_field(value: list[object]) -> None:
    doc = {"release_label": "13.0.1", "cuda_nvcc": value}
    with pytest.raises(SourceFormatError, match="field 'cuda_nvcc' in u is a list"):
        parse_manifest(json.dumps(doc).encode(), "u")
    with pytest.raises(SourceFormatError, match="field 'x_future' in u is a list"):
        parse_manifest(json.dumps({"x_future": [{"version": "1"}]}).encode(), "u")
