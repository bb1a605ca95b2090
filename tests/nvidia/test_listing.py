from __future__ import annotations

import pytest

from cudaup.errors import SourceFormatError
from cudaup.nvidia.listing import parse_redist_listing
from tests.nvidia.samples import sample


def test_reconstructed_listing_gives_labels_newest_first_with_dates() -> None:
    releases = parse_redist_listing(sample("redist-directory-listing.reconstructed.html").decode())
    assert [r.label for r in releases] == ["13.0.1", "13.0.0", "12.9.1", "12.8.0", "11.8.0"]
    assert releases[1].date == "2025-08-04"


@pytest.mark.parametrize("quote", ["'", '"'])
def test_quotes_duplicates_and_neighbours(quote: str) -> None:
    q = quote
    html = (
        f"<ul class={q}directorycontents{q}>"
        f"<li><span class={q}dir{q}><a href={q}cuda_nvcc/{q}>cuda_nvcc/</a></span></li>"
        f"<li><a href={q}redistrib_12.10.0.json{q}>redistrib_12.10.0.json</a> <span class={q}date{q}>2026-01-02 00:00:00</span></li>"
        f"<li><a href={q}redistrib_12.9.0.json{q}>redistrib_12.9.0.json</a></li>"
        f"<li><a href={q}redistrib_12.9.0.json{q}>redistrib_12.9.0.json</a></li>"
        f"<li><a href={q}redistrib_12.9.0.json.asc{q}>redistrib_12.9.0.json.asc</a></li>"
        f"<li><a href={q}redistrib_9.9.9.json.sha256{q}>x</a></li>"
        "</ul>"
    )
    releases = parse_redist_listing(html)
    # numeric order: 12.10 is newer than 12.9; the .asc/.sha256 neighbours are not releases
    assert [r.label for r in releases] == ["12.10.0", "12.9.0"]
    assert releases[0].date == "2026-01-02"


def test_a_non_html_answer_is_a_format_error() -> None:
    with pytest.raises(SourceFormatError):
        parse_redist_listing("Service Unavailable")


def test_release_numbers_too_long_to_be_releases_are_not_listed() -> None:
    html = (
        f"<li><a href='redistrib_{'9' * 5000}.0.0.json'>x</a></li>"
        "<li><a href='redistrib_1234567.0.json'>x</a></li>"
        "<li><a href='redistrib_13.0.1.json'>redistrib_13.0.1.json</a></li>"
    )
    assert [r.label for r in parse_redist_listing(html)] == ["13.0.1"]


def test_comments_are_not_the_listing_even_unclosed() -> None:
    html = (
        "<li><a href='redistrib_13.0.1.json'>x</a></li><!-- <a href='redistrib_9.0.0.json'>"
        "--><li><a href='redistrib_13.0.2.json'>x</a></li>"
        "<!-- <li><a href='redistrib_8.0.0.json'>x</a></li>"
    )
    assert [r.label for r in parse_redist_listing(html)] == ["13.0.2", "13.0.1"]


@pytest.mark.parametrize(
    ("hostile", "labels"),
    [
        ("<a a=" * 40_000, ["1.0.0"]),
        ('<a x="' * 40_000, ["1.0.0"]),
        ("<!--" * 100_000, []),  # the link is inside the unclosed comment
        ("<a href='" + "/x" * 100_000, ["1.0.0"]),
    ],
    ids=["unquoted-values", "unclosed-quotes", "unclosed-comments", "long-href"],
)
def test_hostile_markup_is_parsed_in_linear_time(hostile: str, labels: list[str]) -> None:
    """Milliseconds now; the earlier patterns took quadratic time on the first and third
    (about two minutes each at this size, hours at 10 MB)."""
    found = parse_redist_listing(hostile + "<li><a href='redistrib_1.0.0.json'>x</a>")
    assert [r.label for r in found] == labels


def test_oversized_listing_names_its_url() -> None:
    with pytest.raises(SourceFormatError, match="^https://m/ is larger than"):
        parse_redist_listing("<" * (10 * 1024 * 1024 + 1), "https://m/")
