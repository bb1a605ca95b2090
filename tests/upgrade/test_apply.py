"""The plan's lock as pinned requirements, and uv's failures as cudaup's errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from cudaup.errors import (
    ExternalToolError,
    InsufficientSpaceError,
    IntegrityError,
    NetworkError,
    PermissionDeniedError,
    SourceFormatError,
)
from cudaup.upgrade.apply import pinned_requirements, uv_failure

SHA = "ab" * 32


def _lock(tmp_path: Path, body: str) -> Path:
    lock = tmp_path / "pylock.toml"
    lock.write_text('lock-version = "1.0"\ncreated-by = "uv"\n' + body)
    return lock


def test_every_wheel_hash_is_required(tmp_path: Path) -> None:
    lock = _lock(
        tmp_path,
        f"""
[[packages]]
name = "torch"
version = "2.11.0+cu130"
marker = "sys_platform == 'linux'"
sdist = {{ url = "https://x/torch.tar.gz", hashes = {{ sha256 = "{"cd" * 32}" }} }}
wheels = [
  {{ url = "https://x/a.whl", hashes = {{ sha256 = "{SHA}" }} }},
  {{ url = "https://x/b.whl", hashes = {{ sha256 = "{"EF" * 32}" }} }},
]
""",
    )
    assert pinned_requirements(lock) == (
        f'torch==2.11.0+cu130; sys_platform == "linux" --hash=sha256:{SHA} --hash=sha256:{"ef" * 32}\n'
    )


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("", "lists no packages"),
        ("packages = [1]\n", "is not a table"),
        ('[[packages]]\nname = "../x"\nversion = "1"\n', "is not a pinned project"),
        ('[[packages]]\nname = "x"\nversion = "not a version"\n', "cannot be pinned"),
        ('[[packages]]\nname = "x"\nversion = "1"\nmarker = "nonsense ="\n', "cannot be pinned"),
        (
            '[[packages]]\nname = "x"\nversion = "1"\nwheels = [{ url = "u" }]\n',
            "has no wheel with a sha256",
        ),
        (
            '[[packages]]\nname = "x"\nversion = "1"\nwheels = [{ url = "u", hashes = { sha256 = "short" } }]\n',
            "has no wheel with a sha256",
        ),
        ("[[packages]\n", "is not valid TOML"),
    ],
)
def test_a_lock_cudaup_cannot_pin_is_refused(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(SourceFormatError, match=message):
        pinned_requirements(_lock(tmp_path, body))


@pytest.mark.parametrize(
    ("err", "kind", "words"),
    [
        (
            "error: Failed to download `six==1.16.0`\n  cause: Hash mismatch for `six==1.16.0`\n",
            IntegrityError,
            "Hash mismatch",
        ),
        (
            "error: Request failed after 3 retries\n  cause: tcp connect error\n  cause: Connection refused (os error 111)\n",
            NetworkError,
            "Connection refused",
        ),
        (
            "error: Failed to install: x.whl\n  cause: failed to write to file `/w/x`: No space left on device (os error 28)\n",
            InsufficientSpaceError,
            "it needs more room",
        ),
        (
            "error: failed to create directory `/w/lib`: Permission denied (os error 13)\n",
            PermissionDeniedError,
            "Permission denied",
        ),
        ("error: the wheel is invalid\n", ExternalToolError, "the wheel is invalid"),
    ],
)
def test_uv_failures_become_cudaups_errors(
    tmp_path: Path, err: str, kind: type[Exception], words: str
) -> None:
    error = uv_failure("install the plan", err, tmp_path)
    assert isinstance(error, kind) and words in str(error)
