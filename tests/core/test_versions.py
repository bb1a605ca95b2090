from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st
from packaging.version import Version

from cudaup.core.versions import nearest, nvidia_label, parse_request, release_key
from cudaup.errors import UsageError

LABELS = [
    Version(v)
    for v in ("11.8.0", "12.6.2", "12.6.3", "12.8.0", "12.8.1", "13.0.0", "13.0.1", "13.1.0")
]


@pytest.mark.parametrize(
    ("text", "kind", "parts"),
    [
        ("13.0.1", "exact", (13, 0, 1)),
        ("13.0", "minor", (13, 0)),
        ("13", "major", (13,)),
        ("cu130", "minor", (13, 0)),
        ("CU128", "minor", (12, 8)),
        ("cu92", "minor", (9, 2)),
        ("13.0 Update 1", "exact", (13, 0, 1)),
        ("CUDA 13.0 update 2", "exact", (13, 0, 2)),
        ("12.8 GA", "exact", (12, 8, 0)),
        ("13.0u1", "exact", (13, 0, 1)),
        ("latest", "latest", ()),
        (" v12.6.3 ", "exact", (12, 6, 3)),
        ("cuda-12.8", "minor", (12, 8)),
        ("13.0.3.0", "exact", (13, 0, 3)),
    ],
)
def test_parse_request(text: str, kind: str, parts: tuple[int, ...]) -> None:
    request = parse_request(text)
    assert (request.kind, request.parts) == (kind, parts)


@pytest.mark.parametrize("text", ["", "thirteen", "13.0.1.2", "cu", "13..0", "13.0 Update", "12.x"])
def test_parse_request_rejects_with_the_accepted_forms(text: str) -> None:
    with pytest.raises(UsageError, match="cu130"):
        parse_request(text)


def test_pick_orders_newest_first_and_matches_lines() -> None:
    assert parse_request("12.8").pick(LABELS) == [Version("12.8.1"), Version("12.8.0")]
    assert parse_request("13").pick(LABELS)[0] == Version("13.1.0")
    assert parse_request("latest").pick(LABELS)[0] == Version("13.1.0")
    assert parse_request("cu130").pick(LABELS) == [Version("13.0.1"), Version("13.0.0")]
    assert parse_request("12.7").pick(LABELS) == []
    # PyPI's four-part spelling is the same release
    assert parse_request("13.0.1").matches(Version("13.0.1.0"))
    assert not parse_request("13.0.1").matches(Version("13.0.10"))


def test_nearest_names_neighbours_of_a_missing_line() -> None:
    assert nearest(parse_request("12.7"), LABELS) == (Version("12.6.3"), Version("12.8.0"))
    assert nearest(parse_request("13.0.9"), LABELS) == (Version("13.0.1"), Version("13.1.0"))
    assert nearest(parse_request("14"), LABELS) == (Version("13.1.0"),)
    assert nearest(parse_request("10.2"), LABELS) == (Version("11.8.0"),)


def test_labels_in_nvidia_terms() -> None:
    assert nvidia_label(Version("13.0.1")) == "CUDA 13.0 Update 1"
    assert nvidia_label(Version("12.8.0")) == "CUDA 12.8 GA"
    assert nvidia_label(Version("13.4.0"), preview=True) == "CUDA 13.4 Developer Preview"
    assert release_key(Version("13.0.3.0")) == "13.0.3"
    assert release_key(Version("12.8")) == "12.8.0"


# -- properties ------------------------------------------------------------------
releases = st.tuples(st.integers(0, 30), st.integers(0, 12), st.integers(0, 12))


@pytest.mark.property
@given(releases)
def test_property_every_spelling_of_a_release_means_it(release: tuple[int, int, int]) -> None:
    major, minor, patch = release
    spellings = [
        f"{major}.{minor}.{patch}",
        f"v{major}.{minor}.{patch}",
        f"{major}.{minor} Update {patch}",
    ]
    if patch == 0:
        spellings.append(f"{major}.{minor} GA")
    for text in spellings:
        request = parse_request(text)
        assert request.exact_label == f"{major}.{minor}.{patch}"
        assert request.matches(Version(f"{major}.{minor}.{patch}"))


@pytest.mark.property
@given(st.lists(releases, min_size=1, max_size=30), releases)
def test_property_pick_is_sorted_and_sound(
    pool: list[tuple[int, int, int]], wanted: tuple[int, int, int]
) -> None:
    labels = [Version(".".join(map(str, r))) for r in pool]
    for text in (f"{wanted[0]}", f"{wanted[0]}.{wanted[1]}", "latest"):
        request = parse_request(text)
        picked = request.pick(labels)
        assert picked == sorted(picked, reverse=True)
        assert all(request.matches(v) for v in picked)
        assert set(picked) == {v for v in labels if request.matches(v)}
        if not picked:
            for neighbour in nearest(request, labels):
                assert neighbour in labels and not request.matches(neighbour)


@pytest.mark.property
@given(st.text(max_size=20))
def test_property_parse_never_crashes(text: str) -> None:
    with contextlib.suppress(UsageError):
        parse_request(text)
