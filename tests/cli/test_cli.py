"""The command line end to end: output, --json shapes, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cudaup.errors import EXIT_CODES
from tests.fakenvidia.server import FakeNvidiaServer
from tests.fakenvidia.site import Site
from tests.helpers import point_env_at, require_tool, run_cli

WRONG_GUESS = "https://developer.download.nvidia.com/compute/cuda/13.0.1/local_installers/cuda_13.0.1_570.124.06_linux.run"


@pytest.fixture
def nvidia(monkeypatch: pytest.MonkeyPatch, fake_nvidia: FakeNvidiaServer) -> FakeNvidiaServer:
    point_env_at(monkeypatch, fake_nvidia)
    return fake_nvidia


def test_resolve_json_shape(nvidia: FakeNvidiaServer, capsys: pytest.CaptureFixture[str]) -> None:
    result = run_cli(capsys, "resolve", "13.0", "--platform", "linux-sbsa", "--json")
    assert result.code == 0, result.err
    document = result.json()
    assert document["schema"] == 1
    assert document["release"] == {
        "version": "13.0.3",
        "label": "CUDA 13.0 Update 3",
        "date": document["release"]["date"],
        "driver": "580.126.20",
        "preview": False,
    }
    [artifact] = document["artifacts"]
    for key in (
        "filename",
        "url",
        "size",
        "md5",
        "sha256",
        "component",
        "component_version",
        "platform",
        "channel",
        "driver",
        "sources",
        "verified",
    ):
        assert key in artifact
    assert artifact["filename"] == "cuda_13.0.3_580.126.20_linux_sbsa.run"
    assert artifact["md5"] == "567c4b2f052a09241f06585f4ee75785" and artifact["size"] == 4071904076
    assert artifact["verified"] is True and artifact["channel"] == "installer"


def test_resolve_human_output_is_short(
    nvidia: FakeNvidiaServer, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run_cli(capsys, "resolve", "13.0.1", "--platform", "linux-x86_64")
    assert result.code == 0
    assert "CUDA 13.0 Update 1 (13.0.1)" in result.out and "bundles driver 580.82.07" in result.out
    assert "cuda_13.0.1_580.82.07_linux.run  4.0 GiB" in result.out
    assert "8c56e3cb1ab74370aafed5a4600bc5bc" in result.out
    assert len(result.out.splitlines()) < 12


def test_resolve_redist_cli(nvidia: FakeNvidiaServer, capsys: pytest.CaptureFixture[str]) -> None:
    result = run_cli(
        capsys,
        "resolve",
        "cu130",
        "--channel",
        "redist",
        "--components",
        "nvcc,cudart",
        "--platform",
        "linux-x86_64",
        "--json",
    )
    assert result.code == 0, result.err
    assert [a["component"] for a in result.json()["artifacts"]] == ["cuda_nvcc", "cuda_cudart"]


def test_the_wrong_driver_url_is_explained(
    nvidia: FakeNvidiaServer, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run_cli(capsys, "probe", WRONG_GUESS)
    assert result.code == EXIT_CODES["remote-file-missing"] == 6
    assert (
        "404: no such file in release 13.0.1; that release's Linux x86_64 runfile is "
        "cuda_13.0.1_580.82.07_linux.run (it bundles driver 580.82.07)"
    ) in result.out
    # the probe went to the configured base, not to NVIDIA
    assert result.out.startswith(nvidia.download_url)
    assert result.out.count("404: no such file") == 1 and result.err == ""  # said once


def test_probe_needs_a_full_url(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_cli(capsys, "probe", "developer.download.nvidia.com/compute/cuda/x.run")
    assert result.code == EXIT_CODES["usage"]
    assert result.err == (
        "cudaup: error: probe takes a full URL (https://host/path), not "
        "'developer.download.nvidia.com/compute/cuda/x.run'\n"
    )


def test_probe_json_and_existing_file(
    nvidia: FakeNvidiaServer, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run_cli(capsys, "probe", WRONG_GUESS, "--json")
    document = result.json()
    assert document["status"] == 404 and not document["exists"]
    assert document["suggestion"]["filename"] == "cuda_13.0.1_580.82.07_linux.run"
    assert document["suggestion"]["md5"] == "8c56e3cb1ab74370aafed5a4600bc5bc"
    good = WRONG_GUESS.replace("570.124.06", "580.82.07")
    result = run_cli(capsys, "probe", good, "--json")
    assert result.code == 0 and result.json()["size"] == 4302469087
    assert result.json()["md5"] == "8c56e3cb1ab74370aafed5a4600bc5bc"


def test_probe_of_a_release_that_does_not_exist(
    nvidia: FakeNvidiaServer, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run_cli(capsys, "probe", WRONG_GUESS.replace("13.0.1", "12.7.0"))
    assert result.code == 6
    assert "there is no CUDA release 12.7.0; nearest releases: 12.6.3 and 12.8.0" in result.out


@pytest.mark.parametrize(
    ("argv", "kind", "message"),
    [
        (
            ["resolve", "12.7", "--platform", "linux-x86_64"],
            "release-not-found",
            "there is no CUDA 12.7.x; nearest: 12.6.3 and 12.8.0",
        ),
        (
            ["resolve", "13.4.0", "--platform", "linux-x86_64"],
            "artifact-not-found",
            "has no standalone installer for linux-x86_64",
        ),
        (["resolve", "thirteen"], "usage", "is not a CUDA version request"),
        (["resolve", "13.0", "--platform", "macos"], "usage", "unknown platform 'macos'"),
        (
            ["resolve", "13.0", "--components", "nvcc", "--platform", "linux-x86_64"],
            "usage",
            "--components applies to",
        ),
    ],
)
def test_errors_are_one_sentence_with_a_documented_code(
    nvidia: FakeNvidiaServer,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    kind: str,
    message: str,
) -> None:
    result = run_cli(capsys, *argv)
    assert result.code == EXIT_CODES[kind]
    assert message in result.err
    assert len(result.err.strip().splitlines()) == 1 and "Traceback" not in result.err
    as_json = run_cli(capsys, *argv, "--json")
    assert as_json.json()["error"]["kind"] == kind


def test_debug_shows_the_traceback(nvidia: FakeNvidiaServer) -> None:
    from cudaup.cli import main
    from cudaup.errors import ReleaseNotFoundError

    with pytest.raises(ReleaseNotFoundError):
        main(["resolve", "12.7", "--platform", "linux-x86_64", "--debug"])


def test_unreachable_nvidia_is_a_network_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDAUP_NVIDIA_DOWNLOAD_URL", "http://127.0.0.1:9")  # discard port: refused
    monkeypatch.setenv("CUDAUP_NVIDIA_ARCHIVE_URL", "http://127.0.0.1:9")
    import time

    monkeypatch.setattr(time, "sleep", lambda _s: None)
    result = run_cli(capsys, "resolve", "13.0", "--platform", "linux-x86_64")
    assert result.code == EXIT_CODES["network"]
    assert "cannot reach 127.0.0.1:9" in result.err


def test_versions(
    nvidia: FakeNvidiaServer, capsys: pytest.CaptureFixture[str], fake_nvidia_site: Site
) -> None:
    result = run_cli(capsys, "versions", "--json")
    releases = {r["version"]: r for r in result.json()["releases"]}
    assert "12.7.0" not in releases
    assert releases["13.0.1"]["driver"] == "580.82.07"
    assert releases["13.0.1"]["installer_platforms"] == [
        "linux-x86_64",
        "linux-sbsa",
        "windows-x86_64",
    ]
    assert releases["13.4.0"]["preview"] is True
    assert releases["13.4.0"]["installer_platforms"] == ["windows-x86_64", "windows-arm64"]
    assert releases["13.4.1"]["driver"] is None
    assert "linux-aarch64" in releases["12.8.0"]["redist_platforms"]
    assert set(releases) >= {r.version for r in fake_nvidia_site.catalog}
    human = run_cli(capsys, "versions")
    assert "CUDA 13.4 Developer Preview" in human.out and "CUDA 13.0 Update 1" in human.out


def test_versions_offline_has_the_live_shape(capsys: pytest.CaptureFixture[str]) -> None:
    document = run_cli(capsys, "versions", "--offline", "--json").json()
    releases = document["releases"]
    assert document["snapshot"]  # its date
    assert [r["version"] for r in releases][:2] == ["13.4.1", "13.4.0"]  # newest first
    by_version = {r["version"]: r for r in releases}
    assert by_version["13.0.1"]["driver"] == "580.82.07"
    assert by_version["13.0.1"]["label"] == "CUDA 13.0 Update 1"
    # what the snapshot does not know is null, never an empty answer
    assert by_version["13.0.1"]["redist_platforms"] is None and by_version["13.0.1"]["date"] is None
    human = run_cli(capsys, "versions", "--offline")
    header, first = human.out.splitlines()[:2]
    assert header.startswith("version   label") and first.startswith("13.4.1    CUDA 13.4 Update 1")
    assert "offline snapshot of" in human.out


def test_offline_snapshot(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_cli(
        capsys, "resolve", "13.0.1", "--platform", "linux-x86_64", "--offline", "--json"
    )
    assert result.code == 0, result.err
    document = result.json()
    [artifact] = document["artifacts"]
    assert artifact["md5"] == "8c56e3cb1ab74370aafed5a4600bc5bc" and artifact["verified"] is False
    assert artifact["sources"][0]["kind"].startswith("offline snapshot of ")
    assert any("offline" in note for note in document["notes"])


def test_version_is_fast_path() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "cudaup", "--version"], capture_output=True, text=True, check=True
    )
    assert out.stdout.startswith("cudaup ")
    modules = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from cudaup.cli.parser import build_parser; build_parser(); print(sorted(sys.modules))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "urllib3" not in modules and "packaging" not in modules
    assert (
        "'ssl'" not in modules and "'concurrent.futures'" not in modules
    )  # loaded when going online


def _cudaup_script() -> str:
    return str(Path(sys.executable).parent / "cudaup")


def test_a_closed_pipe_is_not_a_bug() -> None:
    """`cudaup … | head -1`: the reader is gone before cudaup writes (its read end is closed
    before cudaup starts), so every write fails with EPIPE."""
    reader, writer = os.pipe()
    os.close(reader)
    try:
        done = subprocess.run(
            [_cudaup_script(), "completions", "bash"],
            stdout=writer,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
        )
    finally:
        os.close(writer)
    assert done.returncode == EXIT_CODES["output-closed"]
    assert done.stderr == ""  # no traceback, no "Exception ignored" from the final flush


def test_a_terminal_that_cannot_print_the_marks(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONIOENCODING": "ascii", "CUDAUP_CACHE_DIR": str(tmp_path)}
    done = subprocess.run(
        [_cudaup_script(), "resolve", "13.0.1", "--offline", "--platform", "linux-x86_64"],
        capture_output=True,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    text = done.stdout.decode("ascii")  # nothing but ASCII came out
    assert "x cuda_13.0.1_580.82.07_linux.run" in text and "- bundles driver 580.82.07" in text


def _without_privileges() -> list[str]:
    """Run as this user without root's power to write anywhere (CAP_DAC_OVERRIDE): a
    directory's mode then binds, as it does for every other user."""
    if os.geteuid() != 0:
        return []
    setpriv = require_tool("setpriv", "util-linux")
    return [setpriv, "--bounding-set=-all", "--inh-caps=-all", "--ambient-caps=-all"]


def test_a_directory_the_user_may_not_write(tmp_path: Path) -> None:
    locked = tmp_path / "project"
    locked.mkdir()
    locked.chmod(0o555)
    env = {**os.environ, "CUDAUP_HOME": str(tmp_path / "home")}
    done = subprocess.run(
        [*_without_privileges(), _cudaup_script(), "--json", "pin", "12.8"],
        cwd=locked,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == EXIT_CODES["permission-denied"], done.stderr
    assert f"permission denied: {locked / '.cuda-version'}" in done.stderr
    assert json.loads(done.stdout)["error"]["kind"] == "permission-denied"
    assert not (locked / ".cuda-version").exists()


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["install", "13.0", "--chanel", "pypi"],
         "unrecognized arguments: --chanel pypi; did you mean --channel?"),
        (["--jsn", "versions"], "unrecognized arguments: --jsn; did you mean --json?"),
        (["resolve", "13.0", "--zzzz"], "unrecognized arguments: --zzzz"),
        (["install", "--channel", "pypx"],
         "install: argument --channel: invalid choice: 'pypx' (choose from 'auto', "
         "'installer', 'redist', 'pypi')"),
    ],
)  # fmt: skip
def test_a_mistyped_command_line_is_named_once_with_the_nearest_option(
    capsys: pytest.CaptureFixture[str], argv: list[str], says: str
) -> None:
    done = run_cli(capsys, *argv)
    assert done.code == EXIT_CODES["usage"]
    assert done.err == f"cudaup: error: {says}\n"  # "cudaup" once


def test_the_readme_documents_every_area_cache_info_shows() -> None:
    from cudaup.util.cachedir import AREAS

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("### `cudaup cache dir|info|prune|clean`", 1)[1].split("\n### ", 1)[0]
    assert [area for area in AREAS if f"`{area}/`" not in section] == []


def test_the_offline_snapshot_names_13_4_0_a_developer_preview(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Its installers are on NVIDIA's preview host, as the live listing says."""
    resolved = run_cli(
        capsys, "--json", "resolve", "13.4.0", "--offline", "--platform", "windows-x86_64"
    ).json()["release"]
    assert (resolved["label"], resolved["preview"]) == ("CUDA 13.4 Developer Preview", True)
    listed = {r["version"]: r for r in run_cli(capsys, "--json", "versions", "--offline").json()[
        "releases"]}  # fmt: skip
    assert (listed["13.4.0"]["label"], listed["13.4.0"]["preview"]) == (
        "CUDA 13.4 Developer Preview", True,
    )  # fmt: skip
    assert (listed["13.4.1"]["label"], listed["13.4.1"]["preview"]) == (
        "CUDA 13.4 Update 1", False,
    )  # fmt: skip
