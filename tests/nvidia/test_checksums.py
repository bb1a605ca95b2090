from __future__ import annotations

import pytest

from cudaup.errors import SourceFormatError
from cudaup.nvidia.checksums import parse_checksum_file
from tests.nvidia.samples import sample


def test_reconstructed_md5sum_txt() -> None:
    digests = parse_checksum_file(sample("md5sum-13.0.1.reconstructed.txt").decode(), "md5")
    assert digests["cuda_13.0.1_580.82.07_linux.run"] == "8c56e3cb1ab74370aafed5a4600bc5bc"
    assert len(digests) == 3


@pytest.mark.parametrize("separator", [" ", "  ", "\t", " *"])
def test_separator_variants(separator: str) -> None:
    text = f"8C56E3CB1AB74370AAFED5A4600BC5BC{separator}cuda_13.0.1_580.82.07_linux.run\r\n\n"
    assert parse_checksum_file(text, "md5") == {
        "cuda_13.0.1_580.82.07_linux.run": "8c56e3cb1ab74370aafed5a4600bc5bc"
    }


def test_paths_comments_and_wrong_lengths() -> None:
    text = (
        "# checksums\n"
        "b743a3323116bf33404953ef58a9b9a3319368241f6352e933e9461409e9a759  ./local_installers/cuda_13.4.0_windows_x86_64.exe\n"
        "deadbeef  short.exe\n"
    )
    assert parse_checksum_file(text, "sha256") == {
        "cuda_13.4.0_windows_x86_64.exe": "b743a3323116bf33404953ef58a9b9a3319368241f6352e933e9461409e9a759"
    }
    with pytest.raises(SourceFormatError):
        parse_checksum_file("<html>Not Found</html>", "md5")


MD5 = "8c56e3cb1ab74370aafed5a4600bc5bc"
URL = "https://mirror.example/compute/cuda/13.0.1/docs/sidebar/md5sum.txt"


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("..", "'..'"),
        ("local_installers/..", "'..'"),
        ("cuda.run/", "''"),
        ("C:evil.run", "'C:evil.run'"),
        ("a\x1b[2Jb.run", "'a\\\\x1b\\[2Jb.run'"),
        ("x" * 300 + ".run", "'xxxx"),
    ],
)
def test_names_that_are_not_plain_file_names_are_refused(name: str, shown: str) -> None:
    with pytest.raises(SourceFormatError, match=f"^file name {shown}.* in {URL} is refused"):
        parse_checksum_file(f"{MD5}  {name}\n", "md5", URL)


def test_directories_are_dropped_whatever_the_separator() -> None:
    text = f"{MD5}  ..\\..\\windows\\cuda.exe\n{MD5.upper()}  ../../etc/cuda.run\n"
    assert parse_checksum_file(text, "md5") == {"cuda.exe": MD5, "cuda.run": MD5}


def test_an_oversized_file_is_refused() -> None:
    with pytest.raises(SourceFormatError, match=f"^{URL} is larger than"):
        parse_checksum_file(f"{MD5}  x.run\n" * 40_000, "md5", URL)
