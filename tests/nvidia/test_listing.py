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
