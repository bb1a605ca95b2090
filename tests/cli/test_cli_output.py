"""What the command line adds around an answer: hints that help, the verbose log."""

from __future__ import annotations

import hashlib
import re
import socket
from pathlib import Path
from typing import Any

import pytest

from cudaup.cli.failure import hint_for
from cudaup.errors import (
    EXIT_CODES,
    HostUnreachableError,
    IntegrityError,
    NetworkError,
    VerificationFailedError,
)
from tests.fakenvidia.server import FakeNvidiaServer
from tests.faultserver import Fault, FaultServer, payload
from tests.helpers import point_env_at, run_cli

BODY = payload(1024 * 1024, seed=3)
OFFLINE_HINT = "--offline answers from cudaup's shipped snapshot"
MIRROR_HINT = "--mirror URL fetches from a mirror"


@pytest.mark.parametrize(
    ("argv", "public", "hint"),
    [
        (["resolve", "13.0"], True, f"no network here? {MIRROR_HINT}; {OFFLINE_HINT}"),
        (["compat", "13.0"], False, f"no network here? {OFFLINE_HINT}"),
        (["install", "13.0", "--all"], True, f"no network here? {MIRROR_HINT}"),
        (["install", "13.0", "--all"], False, None),  # the user's own host: nothing helps
        (["resolve", "13.0", "--mirror", "http://m"], True, f"no network here? {OFFLINE_HINT}"),
        (["--offline", "versions"], True, f"no network here? {MIRROR_HINT}"),
    ],
)
def test_hints_only_where_they_help(argv: list[str], public: bool, hint: str | None) -> None:
    unreachable = HostUnreachableError("cannot reach h", "https://h/x", public=public)
    assert hint_for(unreachable, argv) == hint
    # any other network error: a stall, a refused redirect, a 503, a proxy
    assert hint_for(NetworkError("stalled"), argv) is None
    # an error's own hint is worded as it is
    assert hint_for(NetworkError("stalled", hint="retry later"), argv) == "retry later"


def test_the_error_object_keeps_hint_and_details_apart_from_the_message() -> None:
    plain = IntegrityError("sizes disagree")
    assert plain.to_json() == {"kind": "integrity", "message": "sizes disagree", "exit_code": 7}
    hinted = IntegrityError(
        "no checksum is known for a.run", hint="--allow-unverified downloads it"
    )
    assert str(hinted) == "no checksum is known for a.run"
    assert hinted.to_json()["hint"] == "--allow-unverified downloads it"
    failed = VerificationFailedError("torch does not import", "import", "torch")
    assert failed.to_json()["details"] == {"step": "import", "package": "torch"}
    assert "hint" not in failed.to_json()


def _unreachable(monkeypatch: pytest.MonkeyPatch) -> None:
    """NVIDIA's configured hosts: a loopback port nothing listens on."""
    monkeypatch.setenv("CUDAUP_NVIDIA_DOWNLOAD_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("CUDAUP_NVIDIA_ARCHIVE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("CUDAUP_PYPI_URL", "http://127.0.0.1:9/simple")


def test_an_unreachable_host_of_the_users_choice(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _unreachable(monkeypatch)
    resolved = run_cli(capsys, "resolve", "13.0", "--platform", "linux-x86_64")
    assert resolved.code == EXIT_CODES["network"]
    assert re.fullmatch(
        rf"cudaup: error: cannot reach 127\.0\.0\.1:9 \(.*\) for \S+\n"
        rf"cudaup: hint: no network here\? {OFFLINE_HINT}\n",
        resolved.err,
    ), resolved.err
    locked = run_cli(
        capsys, "lock", "13.0.1", "--channel", "redist", "--components", "nvcc",
        "-o", str(tmp_path / "cuda.lock.toml"),
    )  # fmt: skip
    assert locked.code == EXIT_CODES["network"] and "no network here" not in locked.err


def test_nvidias_own_hosts_out_of_reach(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """No DNS (an air-gapped node): the names of NVIDIA's hosts do not resolve."""

    def no_dns(host: Any, *args: Any, **kwargs: Any) -> Any:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    resolved = run_cli(capsys, "resolve", "13.0", "--platform", "linux-x86_64")
    assert resolved.code == EXIT_CODES["network"]
    assert "Failed to resolve 'developer" in resolved.err
    assert resolved.err.endswith(
        f"\ncudaup: hint: no network here? {MIRROR_HINT}; {OFFLINE_HINT}\n"
    )
    downloaded = run_cli(capsys, "download", "13.0.1", "-o", str(tmp_path))
    assert downloaded.code == EXIT_CODES["network"]
    assert downloaded.err.endswith(f"\ncudaup: hint: no network here? {MIRROR_HINT}\n")


def test_no_hint_for_a_refused_redirect_or_a_stall(
    fault_server: FaultServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    sha = hashlib.sha256(BODY).hexdigest()
    fault_server.add("/away.run", BODY, Fault(redirect="http://elsewhere.example/x.run"))
    away = run_cli(capsys, "download", fault_server.url + "/away.run", "--sha256", sha,
                   "-o", str(tmp_path))  # fmt: skip
    assert away.code == EXIT_CODES["network"] and "refusing a redirect" in away.err
    assert "no network here" not in away.err and "--offline" not in away.err
    monkeypatch.setenv("CUDAUP_STALL_TIMEOUT", "1")
    fault_server.add("/stuck.run", BODY, Fault(hang="headers"))
    stuck = run_cli(capsys, "download", fault_server.url + "/stuck.run", "--sha256", sha,
                    "-o", str(tmp_path))  # fmt: skip
    assert stuck.code == EXIT_CODES["network"] and "stall" in stuck.err
    assert "no network here" not in stuck.err


def test_verbose_before_and_after_the_command(
    fake_nvidia: FakeNvidiaServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    point_env_at(monkeypatch, fake_nvidia)
    argv = ["resolve", "13.0.1", "--platform", "linux-x86_64", "--json"]
    quiet = run_cli(capsys, *argv)
    assert quiet.code == 0 and quiet.err == ""  # no -v: nothing on stderr
    once = run_cli(capsys, "-v", *argv, "--refresh")
    assert once.code == 0 and once.json()["release"]["version"] == "13.0.1"  # stdout clean
    assert re.search(rf"^cudaup: GET {fake_nvidia.download_url}/\S+ → 200 ", once.err, re.M)
    assert "headers:" not in once.err
    cached = run_cli(capsys, *argv, "--verbose")
    assert "fresh for" in cached.err and "not asked" in cached.err
    twice = run_cli(capsys, "-v", *argv, "-v", "--refresh")  # -v … -v is -vv
    assert re.search(r"^cudaup: GET \S+ headers: ", twice.err, re.M)
    assert re.search(r"^cudaup: \S+ answered: .*ETag", twice.err, re.M)
    after = run_cli(capsys, *argv, "-vv", "--refresh")
    assert "answered:" in after.err
    assert run_cli(capsys, *argv).err == ""  # the next run is quiet again


def test_the_downloaders_retries_are_in_the_log(
    fault_server: FaultServer, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # the second request (the first after the probe) breaks off
    fault_server.add("/cuda.run", BODY, Fault(drop_after=100_000, times=1, every=2))
    result = run_cli(
        capsys, "-v", "download", fault_server.url + "/cuda.run", "--sha256",
        hashlib.sha256(BODY).hexdigest(), "-o", str(tmp_path), "--connections", "1", "--quiet",
    )  # fmt: skip
    assert result.code == 0, result.err
    assert re.search(
        rf"^cudaup: retry 1 of {fault_server.url}/cuda\.run in [\d.]+ s: bytes 100000-1048575: "
        r"the connection broke",
        result.err,
        re.M,
    ), result.err
