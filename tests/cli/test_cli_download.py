"""``cudaup download`` end to end: resolved releases and bare URLs."""

from __future__ import annotations

import hashlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from cudaup.errors import EXIT_CODES
from cudaup.net import backoff
from tests.fakenvidia.server import FakeNvidiaServer
from tests.fakenvidia.site import Site
from tests.faultserver import Fault, FaultServer, payload
from tests.helpers import point_env_at, run_cli

BODY = payload(3 * 1024 * 1024, seed=11)


def test_download_a_release_channel(
    fake_nvidia: FakeNvidiaServer,
    fake_nvidia_site: Site,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    point_env_at(monkeypatch, fake_nvidia)
    result = run_cli(
        capsys,
        "download",
        "cu130",
        "--channel",
        "redist",
        "--components",
        "nvcc,cudart",
        "--platform",
        "linux-x86_64",
        "-o",
        str(tmp_path),
        "--json",
    )
    assert result.code == 0, result.err
    files = result.json()["files"]
    assert [Path(f["path"]).name for f in files] == [
        "cuda_nvcc-linux-x86_64-13.0.88-archive.tar.xz",
        "cuda_cudart-linux-x86_64-13.0.96-archive.tar.xz",
    ]
    for entry in files:
        info = next(
            a
            for a in fake_nvidia_site.archives.values()
            if a.relative_path.endswith(Path(entry["path"]).name)
        )
        assert (
            hashlib.sha256(Path(entry["path"]).read_bytes()).hexdigest()
            == info.sha256
            == entry["checksum"]["digest"]
        )
    human = run_cli(
        capsys,
        "download",
        "cu130",
        "--channel",
        "redist",
        "--components",
        "nvcc",
        "--platform",
        "linux-x86_64",
        "-o",
        str(tmp_path),
    )
    assert "sha256 verified" in human.out and "already here" in human.out


def test_download_a_bare_url_with_md5(
    fault_server: FaultServer, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    fault_server.add("/cuda.run", BODY)
    md5 = hashlib.md5(BODY).hexdigest()
    result = run_cli(
        capsys, "download", fault_server.url + "/cuda.run", "--md5", md5, "-o", str(tmp_path / "dl")
    )
    assert result.code == 0, result.err
    assert (tmp_path / "dl/cuda.run").read_bytes() == BODY
    assert "md5 verified" in result.out
    assert "cuda.run: starting" in result.err  # plain progress lines when stdout is not a terminal


def test_bare_url_without_checksum_is_refused(
    fault_server: FaultServer, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    fault_server.add("/cuda.run", BODY)
    result = run_cli(capsys, "download", fault_server.url + "/cuda.run", "-o", str(tmp_path))
    assert result.code == EXIT_CODES["usage"]  # an option left out: the user's to fix
    assert result.err.strip() == (
        "cudaup: error: a bare URL needs the checksum to check it against: --sha256 HEX or "
        f"--md5 HEX\ncudaup: hint: --allow-unverified downloads {fault_server.url}/cuda.run unchecked"
    )
    assert fault_server.requests() == [] and fault_server.requests(method="HEAD") == []
    # --json: the hint is a field of its own, not words in the message
    as_json = run_cli(
        capsys, "--json", "download", fault_server.url + "/cuda.run", "-o", str(tmp_path)
    )
    assert as_json.code == EXIT_CODES["usage"]
    assert as_json.json() == {
        "schema": 1,
        "error": {
            "kind": "usage",
            "message": "a bare URL needs the checksum to check it against: --sha256 HEX or "
            "--md5 HEX",
            "exit_code": EXIT_CODES["usage"],
            "hint": f"--allow-unverified downloads {fault_server.url}/cuda.run unchecked",
        },
    }
    assert as_json.err == result.err
    quiet = run_cli(
        capsys,
        "download",
        fault_server.url + "/cuda.run",
        "-o",
        str(tmp_path),
        "--allow-unverified",
        "--quiet",
    )
    assert quiet.code == 0 and quiet.err == "" and "NOT verified" in quiet.out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--md5", "xyz"], "--md5 takes 32 hex digits"),
        (["--connections", "17", "--allow-unverified"], "--connections must be between 1 and 16"),
    ],
)
def test_bad_options(
    fault_server: FaultServer,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    argv: list[str],
    message: str,
) -> None:
    fault_server.add("/cuda.run", BODY)
    result = run_cli(capsys, "download", fault_server.url + "/cuda.run", "-o", str(tmp_path), *argv)
    assert result.code == EXIT_CODES["usage"] and message in result.err


def test_checksum_flags_belong_to_urls(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    result = run_cli(capsys, "download", "13.0.1", "--md5", "0" * 32, "-o", str(tmp_path))
    assert result.code == EXIT_CODES["usage"] and "bare URL" in result.err


def test_output_that_is_a_file_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    existing = tmp_path / "notes.txt"
    existing.write_text("keep me\n")
    result = run_cli(
        capsys,
        "download",
        "https://example.invalid/x.run",
        "--sha256",
        "0" * 64,
        "-o",
        str(existing),
    )
    assert result.code == EXIT_CODES["usage"]
    assert f"{existing} is a file" in result.err
    assert existing.read_text() == "keep me\n"


def _interrupted(server: FaultServer, tmp_path: Path, fault: Fault) -> tuple[int, str]:
    """Start `cudaup download` of a throttled file, press Ctrl-C once bytes have
    arrived in the part file, and return the exit code and stderr."""
    server.add("/cuda.run", BODY, fault)
    out = tmp_path / "dl"
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "cudaup"), "download", server.url + "/cuda.run",
         "--sha256", hashlib.sha256(BODY).hexdigest(), "-o", str(out), "--connections", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "CUDAUP_CACHE_DIR": str(tmp_path / "cache")},
    )  # fmt: skip
    part = out / "cuda.run.part"
    deadline = time.monotonic() + 60
    while not (part.exists() and server.sent("/cuda.run") > 64 * 1024):
        assert time.monotonic() < deadline and process.poll() is None, process.communicate()
        time.sleep(0.02)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    return process.returncode, err


def test_ctrl_c_says_resume_only_when_something_was_kept(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    code, err = _interrupted(fault_server, tmp_path, Fault(rate=256 * 1024))
    assert code == 130
    assert err.splitlines()[-1] == (
        "cudaup: interrupted; run the same command again to resume (kept: the partial cuda.run)"
    )
    assert (tmp_path / "dl/cuda.run.part").exists()
    assert (tmp_path / "dl/cuda.run.part.json").exists()
    fault_server.resources["/cuda.run"].faults.clear()
    again = subprocess.run(
        [str(Path(sys.executable).parent / "cudaup"), "download", fault_server.url + "/cuda.run",
         "--sha256", hashlib.sha256(BODY).hexdigest(), "-o", str(tmp_path / "dl"), "-q"],
        capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "CUDAUP_CACHE_DIR": str(tmp_path / "cache")},
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    # the resume point in the same binary units as the rest of the line
    assert re.search(r", resumed at \d+\.\d (KiB|MiB)$", again.stdout.strip()), again.stdout


def test_ctrl_c_against_a_server_that_ignores_ranges_says_start_over(
    fault_server: FaultServer, tmp_path: Path
) -> None:
    code, err = _interrupted(fault_server, tmp_path, Fault(rate=256 * 1024, ignore_range=True))
    assert code == 130
    assert "cuda.run: the partial file was deleted: a later run cannot resume" in err
    assert err.splitlines()[-1] == (
        "cudaup: interrupted; cuda.run: the partial download was deleted (a later run cannot "
        "resume it); run the same command again to start over"
    )
    assert "resume (kept" not in err and not (tmp_path / "dl/cuda.run.part").exists()


@pytest.mark.parametrize("how", ["env", "--mirror"])
def test_a_url_on_nvidias_host_goes_to_the_configured_base_or_mirror(
    fault_server: FaultServer, capsys: pytest.CaptureFixture[str], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, how: str,
) -> None:  # fmt: skip
    fault_server.add("/compute/cuda/13.0.1/local_installers/cuda.run", BODY)
    sha = hashlib.sha256(BODY).hexdigest()
    url = "https://developer.download.nvidia.com/compute/cuda/13.0.1/local_installers/cuda.run"
    if how == "env":
        monkeypatch.setenv("CUDAUP_NVIDIA_DOWNLOAD_URL", fault_server.url)
        flags: list[str] = []
    else:
        flags = ["--mirror", fault_server.url]
    done = run_cli(capsys, *flags, "--json", "download", url, "--sha256", sha, "-o", str(tmp_path))
    assert done.code == 0, done.err
    [result] = done.json()["files"]
    assert result["url"] == fault_server.url + "/compute/cuda/13.0.1/local_installers/cuda.run"
    assert (tmp_path / "cuda.run").read_bytes() == BODY
    assert fault_server.requests("/compute/cuda/13.0.1/local_installers/cuda.run")


def test_nvidias_host_out_of_reach_names_the_mirror(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No base configured and NVIDIA's host unreachable (here: the test's network guard,
    or no DNS): the error says a --mirror gets round it.  A host that answers does not."""
    monkeypatch.setattr(backoff, "DEFAULT", backoff.Backoff(base=0.01, cap=0.01))
    url = "https://developer.download.nvidia.com/compute/cuda/13.0.1/local_installers/cuda.run"
    out = tmp_path / "out"
    done = run_cli(capsys, "download", url, "--sha256", "0" * 64, "-o", str(out))
    assert done.code == EXIT_CODES["network"], done.err
    assert url in done.err
    assert done.err.rstrip().endswith(
        "cudaup: hint: no network here? --mirror URL fetches from a mirror"
    )
    assert not out.exists() or list(out.iterdir()) == []


def test_an_http_error_from_a_host_that_answers_names_no_mirror(
    fault_server: FaultServer, capsys: pytest.CaptureFixture[str], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setattr(backoff, "DEFAULT", backoff.Backoff(base=0.01, cap=0.01))
    fault_server.add("/f.run", BODY, Fault(status=503))
    done = run_cli(
        capsys, "download", fault_server.url + "/f.run", "--sha256", "0" * 64, "-o", str(tmp_path)
    )
    assert done.code == EXIT_CODES["network"], done.err
    assert "--mirror" not in done.err


def test_a_wrong_checksum_from_the_user_is_blamed_on_the_value_given(
    fault_server: FaultServer, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    fault_server.add("/cuda.run", BODY)
    wrong = "ab" * 32
    done = run_cli(
        capsys, "download", fault_server.url + "/cuda.run", "--sha256", wrong, "-o", str(tmp_path),
        "-q",
    )  # fmt: skip
    assert done.code == EXIT_CODES["integrity"]
    digest = hashlib.sha256(BODY).hexdigest()
    assert done.err.strip() == (
        f"cudaup: error: cuda.run: sha256 mismatch: expected {wrong}, got {digest}; the "
        "download was deleted (the --sha256 given is not this file's: check it, and the URL)"
    )
    assert not (tmp_path / "cuda.run").exists() and not (tmp_path / "cuda.run.part").exists()


# -- a host whose name does not resolve --------------------------------------------------------
NVIDIA_FILE = (
    "https://developer.download.nvidia.com/compute/cuda/redist/cuda_cudart/linux-x86_64/"
    "cuda_cudart-linux-x86_64-13.0.96-archive.tar.xz"
)


def _failed_requests(log: str, host: str) -> list[str]:
    """The verbose log's lines for requests to ``host`` that failed (one per try)."""
    return [line for line in log.splitlines() if f"://{host}/" in line and " failed: " in line]


def test_a_name_that_does_not_resolve_is_tried_twice_not_seven_times(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The configured base names a host no resolver knows (``.invalid``, RFC 6761): the
    download of an NVIDIA URL goes there (rewritten as ``probe`` does), fails to resolve,
    is retried once, and ends in one sentence naming the host (exit 5)."""
    host = "developer.download.nvidia.invalid"
    monkeypatch.setenv("CUDAUP_NVIDIA_DOWNLOAD_URL", f"https://{host}")
    monkeypatch.setenv("CUDAUP_CACHE_DIR", str(tmp_path / "cache"))
    done = run_cli(
        capsys, "--json", "-v", "download", NVIDIA_FILE, "--sha256", "0" * 64,
        "-o", str(tmp_path / "out"),
    )  # fmt: skip
    assert done.code == EXIT_CODES["network"], done.err
    assert len(_failed_requests(done.err, host)) == 2
    message = done.json()["error"]["message"]
    assert message.startswith(f"cannot reach {host} (Failed to resolve '{host}'")
    assert message.endswith(f", twice) for https://{host}/compute/cuda/redist/cuda_cudart/"
                            "linux-x86_64/cuda_cudart-linux-x86_64-13.0.96-archive.tar.xz")  # fmt: skip
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
    # a document (the release listing) is tried twice too, by the one HTTP client
    listed = run_cli(capsys, "-v", "versions")
    assert listed.code == EXIT_CODES["network"], listed.err
    assert len(_failed_requests(listed.err, host)) == 2


def test_nvidias_own_host_out_of_reach_names_the_mirror(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """NVIDIA's default host resolves wherever these tests have a network, so its DNS
    failure is stood in for (only that name's lookup fails); the hint names ``--mirror``."""
    for name in ("CUDAUP_NVIDIA_DOWNLOAD_URL", "CUDAUP_NVIDIA_ARCHIVE_URL", "CUDAUP_PYPI_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CUDAUP_CACHE_DIR", str(tmp_path / "cache"))
    lookup = socket.getaddrinfo

    def no_nvidia(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "developer.download.nvidia.com":
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return lookup(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", no_nvidia)
    done = run_cli(
        capsys, "-v", "download", NVIDIA_FILE, "--sha256", "0" * 64, "-o", str(tmp_path / "out")
    )
    assert done.code == EXIT_CODES["network"], done.err
    assert len(_failed_requests(done.err, "developer.download.nvidia.com")) == 2
    error, hint = done.err.strip().splitlines()[-2:]
    assert error.startswith("cudaup: error: cannot reach developer.download.nvidia.com (")
    assert hint == "cudaup: hint: no network here? --mirror URL fetches from a mirror"
    # through a mirror, the mirror's own failure gets no hint to use a mirror
    mirrored = run_cli(
        capsys, "download", NVIDIA_FILE, "--sha256", "0" * 64, "-o", str(tmp_path / "out"),
        "--mirror", "https://mirror.invalid",
    )  # fmt: skip
    assert mirrored.code == EXIT_CODES["network"], mirrored.err
    assert "cannot reach mirror.invalid (" in mirrored.err and "--mirror URL" not in mirrored.err
