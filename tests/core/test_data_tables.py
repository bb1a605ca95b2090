"""Consistency of the shipped data tables (see ``src/cudaup/data/README.md``).

``release_components.json`` (component versions per release, from PyPI's
``cuda-toolkit`` pins) and ``architectures.tsv`` (which releases compile for
which GPU) are generated or curated by hand; these checks catch a bad refresh.
"""

from __future__ import annotations

import csv
import io
import json
import re
from importlib import resources
from typing import Any

import pytest
from packaging.version import InvalidVersion, Version

DATA = resources.files("cudaup").joinpath("data")
ARCH_COLUMNS = [
    "compute_capability",
    "sm",
    "architecture",
    "first_release",
    "last_release",
    "source",
]


def _line(release: str) -> tuple[int, int]:
    major, minor = release.split(".")
    return int(major), int(minor)


@pytest.fixture(scope="module")
def components() -> dict[str, Any]:
    table: dict[str, Any] = json.loads(DATA.joinpath("release_components.json").read_text())
    return table


@pytest.fixture(scope="module")
def releases(components: dict[str, Any]) -> dict[str, dict[str, str]]:
    found: dict[str, dict[str, str]] = components["releases"]
    return found


@pytest.fixture(scope="module")
def arch_lines() -> list[list[str]]:
    text = DATA.joinpath("architectures.tsv").read_text()
    return list(csv.reader(io.StringIO(text), delimiter="\t"))


@pytest.fixture(scope="module")
def arch_rows(arch_lines: list[list[str]]) -> list[dict[str, str]]:
    header, *body = arch_lines
    return [dict(zip(header, line, strict=True)) for line in body]


# --- release_components.json -------------------------------------------------


def test_components_header(components: dict[str, Any]) -> None:
    assert components["schema"] == 1
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", components["generated"])
    assert "cuda-toolkit" in components["source"]


def test_release_labels_are_x_y_z(releases: dict[str, dict[str, str]]) -> None:
    assert releases
    bad = [label for label in releases if not re.fullmatch(r"\d+\.\d+\.\d+", label)]
    assert not bad, f"release labels not X.Y.Z: {bad}"


def test_known_releases_present(releases: dict[str, dict[str, str]]) -> None:
    assert any(label.startswith("12.8.") for label in releases)
    for label in ("13.0.1", "13.0.2", "13.0.3"):
        assert label in releases


def test_known_13_0_facts(releases: dict[str, dict[str, str]]) -> None:
    # One component version belongs to several releases: 13.0.2 and 13.0.3 share nvcc and cudart.
    assert releases["13.0.1"]["cuda_cudart"] == "13.0.88"
    assert releases["13.0.2"]["cuda_cudart"] == "13.0.96"
    assert releases["13.0.3"]["cuda_cudart"] == "13.0.96"
    for label in ("13.0.1", "13.0.2", "13.0.3"):
        assert releases[label]["cuda_nvcc"] == "13.0.88", label


def test_agrees_with_verbatim_redist_manifests(releases: dict[str, dict[str, str]]) -> None:
    # The fakenvidia excerpts are verbatim NVIDIA manifests: where PyPI has the
    # same component for the same release, the versions must be equal.
    assert releases["12.8.0"]["cuda_nvcc"] == "12.8.61"
    assert releases["12.8.0"]["cuda_cudart"] == "12.8.57"
    assert releases["13.0.0"]["cuda_nvcc"] == "13.0.48"
    assert releases["13.0.0"]["cuda_cudart"] == "13.0.48"


def test_component_keys_look_like_nvidia_keys(releases: dict[str, dict[str, str]]) -> None:
    bad = {
        (label, key)
        for label, comps in releases.items()
        for key in comps
        if not re.fullmatch(r"(cuda_|lib)[a-z0-9_]+", key)
    }
    assert not bad, f"not NVIDIA redist keys: {sorted(bad)}"


def test_component_versions_parse(releases: dict[str, dict[str, str]]) -> None:
    bad = []
    for label, comps in releases.items():
        assert comps, f"{label} has no components"
        for key, version in comps.items():
            try:
                Version(version)
            except InvalidVersion:
                bad.append((label, key, version))
            if version.endswith(".*") or version.startswith("="):
                bad.append((label, key, version))
    assert not bad, f"unparsable component versions: {bad}"


def test_nvcc_major_minor_matches_release(releases: dict[str, dict[str, str]]) -> None:
    # nvcc is versioned with the toolkit line (13.0.x ships nvcc 13.0.*).
    for label, comps in releases.items():
        if "cuda_nvcc" in comps:
            assert Version(comps["cuda_nvcc"]).release[:2] == _line(label.rsplit(".", 1)[0]), label


# --- architectures.tsv ---------------------------------------------------------


def test_arch_header_and_field_count(arch_lines: list[list[str]]) -> None:
    header, *body = arch_lines
    assert header == ARCH_COLUMNS
    assert body
    bad = [(n, line) for n, line in enumerate(body, start=2) if len(line) != 6]
    assert not bad, f"rows without 6 fields: {bad}"


def test_compute_capabilities_unique(arch_rows: list[dict[str, str]]) -> None:
    ccs = [row["compute_capability"] for row in arch_rows]
    assert len(ccs) == len(set(ccs))
    sms = [row["sm"] for row in arch_rows]
    assert len(sms) == len(set(sms))


def test_sm_name_matches_compute_capability(arch_rows: list[dict[str, str]]) -> None:
    for row in arch_rows:
        major, minor = row["compute_capability"].split(".")
        assert row["sm"] == f"sm_{int(major)}{int(minor)}", row


def test_release_fields(arch_rows: list[dict[str, str]]) -> None:
    for row in arch_rows:
        first, last = row["first_release"], row["last_release"]
        assert re.fullmatch(r"\d+\.\d+", first), row
        assert last == "" or re.fullmatch(r"\d+\.\d+", last), row
        if last:
            assert _line(first) <= _line(last), row
        assert row["architecture"].strip(), row
        assert row["source"].strip(), row


def test_cuda_13_cut(arch_rows: list[dict[str, str]]) -> None:
    # CUDA 13.0 dropped offline compilation below compute capability 7.5.
    for row in arch_rows:
        cc = _line(row["compute_capability"])
        last = row["last_release"]
        if cc < (7, 5):
            assert last and _line(last) < (13, 0), row
        else:
            assert not last or _line(last) >= (12, 9), row
    by_sm = {row["sm"]: row for row in arch_rows}
    for sm in ("sm_50", "sm_52", "sm_53", "sm_60", "sm_61", "sm_62", "sm_70", "sm_72"):
        assert by_sm[sm]["last_release"] == "12.9", sm
    assert by_sm["sm_75"]["last_release"] == ""


def test_key_architecture_facts(arch_rows: list[dict[str, str]]) -> None:
    by_sm = {row["sm"]: row for row in arch_rows}
    assert by_sm["sm_35"]["last_release"] == "11.8"  # CUDA 12.0 removed Kepler
    assert by_sm["sm_37"]["last_release"] == "11.8"
    expected_first = {
        "sm_86": "11.1",
        "sm_87": "11.4",
        "sm_89": "11.8",
        "sm_90": "11.8",
        "sm_100": "12.8",
        "sm_101": "12.8",
        "sm_120": "12.8",
        "sm_103": "12.9",
        "sm_121": "12.9",
        "sm_110": "13.0",
    }
    for sm, first in expected_first.items():
        assert by_sm[sm]["first_release"] == first, sm
    # Thor: sm_101 up to 12.9, renamed sm_110 in 13.0.
    assert by_sm["sm_101"]["last_release"] == "12.9"
    assert by_sm["sm_110"]["last_release"] == ""


def test_unverified_values_say_why(arch_rows: list[dict[str, str]]) -> None:
    for row in arch_rows:
        for match in re.finditer(r"unverified:?(.*?)(?:;|$)", row["source"]):
            assert match.group(1).strip(), row
