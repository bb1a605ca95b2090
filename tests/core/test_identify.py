from __future__ import annotations

from cudaup.core.identify import identify, shipped_table

TABLE = {
    "13.0.1": {"cuda_nvcc": "13.0.88", "cuda_cudart": "13.0.88", "libcublas": "13.0.2.14"},
    "13.0.2": {"cuda_nvcc": "13.0.88", "cuda_cudart": "13.0.96", "libcublas": "13.1.0.3"},
    "13.0.3": {"cuda_nvcc": "13.0.88", "cuda_cudart": "13.0.96", "libcublas": "13.1.0.3"},
    "12.8.1": {"cuda_nvcc": "12.8.93", "cuda_cudart": "12.8.90"},
}


def test_one_component_gives_a_range() -> None:
    identity = identify({"cuda_nvcc": "13.0.88"}, TABLE)
    assert identity.candidates == ("13.0.3", "13.0.2", "13.0.1")
    assert identity.describe() == "13.0.1, 13.0.2 or 13.0.3"
    assert identity.exact is None and identity.line == "13.0"


def test_more_components_narrow_it() -> None:
    identity = identify({"cuda_nvcc": "13.0.88", "cuda_cudart": "13.0.96"}, TABLE)
    assert identity.describe() == "13.0.2 or 13.0.3"
    assert identify({"cuda_nvcc": "13.0.88", "cuda_cudart": "13.0.88"}, TABLE).exact == "13.0.1"


def test_four_part_library_versions_match_by_prefix() -> None:
    assert identify({"libcublas": "13.0.2"}, TABLE).exact == "13.0.1"  # from libcublas.so.13.0.2
    assert identify({"libcublas": "13.0.2.14"}, TABLE).exact == "13.0.1"


def test_date_based_cuda_version_only_fixes_the_line() -> None:
    identity = identify({"cuda_nvcc": "13.0.88"}, TABLE, declared="13.0.20251002")
    assert identity.candidates == ("13.0.3", "13.0.2", "13.0.1")
    assert identify({"cuda_nvcc": "13.0.88"}, TABLE, declared="13.0.2").exact == "13.0.2"


def test_unknown_versions_keep_the_line() -> None:
    identity = identify({"cuda_nvcc": "13.5.40"}, TABLE)
    assert identity.candidates == () and identity.describe() == "13.5.x (release not identified)"
    assert identify({}, TABLE).describe() == "unknown release"
    # a package's own version is a release label even when the table lacks it
    assert identify({"cuda_nvcc": "12.4.131"}, TABLE, declared="12.4.1").exact == "12.4.1"


def test_shipped_table_knows_the_real_13_0_facts() -> None:
    table = shipped_table()
    assert (
        identify({"cuda_nvcc": "13.0.88", "cuda_cudart": "13.0.96"}, table).describe()
        == "13.0.2 or 13.0.3"
    )
    assert identify({"cuda_nvcc": "13.0.88", "cuda_cudart": "13.0.88"}, table).exact == "13.0.1"
