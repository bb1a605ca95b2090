"""Lock, check, mirror, and install from the mirror behind nginx with the origins gone."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import tomllib
from pathlib import Path

import pytest

from cudaup.download.publish import hash_file
from cudaup.errors import EXIT_CODES
from cudaup.fleet import mirror
from cudaup.fleet.lockfile import read_lock
from tests.fakenvidia import FakeNvidiaServer, build_site
from tests.fakenvidia.fixtures import MakeFakeNvidia
from tests.helpers import CliResult, point_env_at, run_cli
from tests.nginx import Nginx

REFUSED = "http://127.0.0.1:9"  # nothing listens there: every outside host is gone


def tree_digest(root: Path) -> str:
    """A hash of a toolkit tree: paths, link targets, modes and contents (not the record's time)."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        relative = str(path.relative_to(root))
        if path.name == "cudaup-record.json":
            continue
        digest.update(relative.encode())
        if path.is_symlink():
            digest.update(b"->" + str(path.readlink()).encode())
        elif path.is_file():
            digest.update(oct(path.stat().st_mode & 0o777).encode() + path.read_bytes())
    return digest.hexdigest()


def run_lock(
    capsys: pytest.CaptureFixture[str],
    release: str,
    channel: str,
    components: str,
    *platforms: str,
    extra: tuple[str, ...] = (),
) -> CliResult:
    """``cudaup lock RELEASE --channel C --components X --platform P…`` (and ``extra``)."""
    argv = ["lock", release, "--channel", channel, "--components", components]
    for platform in platforms:
        argv += ["--platform", platform]
    return run_cli(capsys, *argv, *extra)


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CUDAUP_SYSTEM_ROOT", str(tmp_path / "root"))
    (tmp_path / "root").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_lock_round_trip_and_check(
    fake_nvidia_fresh: FakeNvidiaServer,
    make_fake_nvidia: MakeFakeNvidia,
    env: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    point_env_at(monkeypatch, fake_nvidia_fresh)
    result = run_lock(
        capsys,
        "13.0.1",
        "redist",
        "nvcc",
        "linux-x86_64",
        "linux-sbsa",
        extra=(
            "-o",
            "cuda.lock.toml",
        ),
    )
    assert result.code == 0, result.err
    text = (env / "cuda.lock.toml").read_text()
    document = tomllib.loads(text)
    assert document["lock-version"] == 1 and [t["platform"] for t in document["toolkits"]] == [
        "linux-sbsa",
        "linux-x86_64",
    ]  # sorted, whatever the order of --platform
    files = document["toolkits"][1]["files"]
    assert {f["component"] for f in files} == {"cuda_nvcc", "cuda_cudart"}  # nvcc brings cudart
    assert all(len(f["sha256"]) == 64 and f["size"] > 0 for f in files)
    lock = read_lock(env / "cuda.lock.toml")
    assert (env / "again.toml").write_text(lock.to_toml()) and read_lock(
        env / "again.toml"
    ) == lock  # round trip
    built = run_lock(
        capsys, "13.0.1", "redist", "nvcc", "linux-x86_64", extra=("-o", "one.toml", "--json")
    )
    assert built.code == 0, built.err
    assert list(built.json()) == ["schema", "lock", "toolkits", "notes"]
    assert (built.json()["lock"], built.json()["toolkits"]) == ("one.toml", 1)
    check = run_cli(capsys, "lock", "--check", "cuda.lock.toml", "--json")
    assert check.code == 0
    assert check.json() == {"schema": 1, "lock": "cuda.lock.toml", "unchanged": True, "changes": []}
    assert list(check.json()) == ["schema", "lock", "unchanged", "changes"]
    tampered = text.replace(files[0]["sha256"], "0" * 64)
    (env / "tampered.toml").write_text(tampered)
    changed = run_cli(capsys, "lock", "--check", "tampered.toml")
    assert changed.code == EXIT_CODES["integrity"] and "changed:" in changed.out
    # Two archives gone at the origin: both are reported, not just the first one met.
    # (A copy of the shared site, so that other tests still find them.)
    resources = dict(fake_nvidia_fresh.site.resources)
    for file in files:
        del resources[fake_nvidia_fresh.local_url(file["url"])[len(fake_nvidia_fresh.base_url) :]]
    origin = make_fake_nvidia(dataclasses.replace(fake_nvidia_fresh.site, resources=resources))
    point_env_at(monkeypatch, origin)
    gone = run_cli(capsys, "lock", "--check", "cuda.lock.toml", "--json")
    assert gone.code == EXIT_CODES["integrity"]
    assert list(gone.json()) == ["schema", "lock", "unchanged", "changes", "error"]
    changes = len(gone.json()["changes"])
    assert gone.json()["error"] == {
        "kind": "integrity",
        "message": f"cuda.lock.toml: the origins no longer serve what the lock names "
        f"({changes} change(s))",
        "exit_code": EXIT_CODES["integrity"],
    }
    reported = [c for c in gone.json()["changes"] if "is no longer served (HTTP 404" in c]
    assert sorted(c.split(":")[1].split()[0] for c in reported) == ["cuda_cudart", "cuda_nvcc"]


def test_the_same_lock_asked_in_another_order_is_the_same_bytes(
    fake_nvidia: FakeNvidiaServer,
    env: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    point_env_at(monkeypatch, fake_nvidia)
    one = run_lock(
        capsys, "13.0.1", "redist", "nvcc,cudart,nvidia_driver", "linux-x86_64", "linux-sbsa",
        extra=("-o", "one.toml"),
    )  # fmt: skip
    two = run_lock(
        capsys, "13.0.1", "redist", "nvidia_driver,cudart,nvcc", "linux-sbsa", "linux-x86_64",
        extra=("-o", "two.toml"),
    )  # fmt: skip
    assert one.code == 0 and two.code == 0, one.err + two.err
    text = (env / "one.toml").read_text()
    assert text == (env / "two.toml").read_text()
    document = tomllib.loads(text)
    assert [t["platform"] for t in document["toolkits"]] == ["linux-sbsa", "linux-x86_64"]
    for toolkit in document["toolkits"]:
        assert toolkit["components"] == sorted(toolkit["components"])
        keys = [(f["component"], f["url"]) for f in toolkit["files"]]
        assert keys == sorted(keys) and len(keys) >= 3
        assert toolkit["sources"] == sorted(toolkit["sources"], key=lambda s: s["url"])


def test_tampered_lock_fails_before_anything_is_written(
    fake_nvidia_fresh: FakeNvidiaServer,
    env: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    point_env_at(monkeypatch, fake_nvidia_fresh)
    monkeypatch.setenv("CUDAUP_HOME", str(env / "home"))
    assert run_lock(capsys, "13.0.1", "redist", "nvcc", "linux-x86_64").code == 0
    lock = (env / "cuda.lock.toml").read_text()
    sha = tomllib.loads(lock)["toolkits"][0]["files"][0]["sha256"]
    (env / "cuda.lock.toml").write_text(lock.replace(sha, "f" * 64))
    result = run_cli(capsys, "install", "--lock", "cuda.lock.toml", "--platform", "linux-x86_64")
    assert result.code == EXIT_CODES["integrity"] and "sha256 mismatch" in result.err
    toolkits = env / "home" / "toolkits"
    assert not toolkits.exists() or list(toolkits.iterdir()) == []


@pytest.mark.slow  # a real nginx
def test_mirror_behind_nginx_gives_identical_trees(
    env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeNvidiaServer(build_site()) as origin:
        point_env_at(monkeypatch, origin)
        monkeypatch.setenv("CUDAUP_CACHE_DIR", str(env / "cache-lock"))
        assert run_lock(capsys, "12.9.1", "redist", "nvcc", "linux-x86_64", "linux-sbsa").code == 0
        first = run_cli(capsys, "mirror", "cuda.lock.toml", "mirror", "--json")
        assert first.code == 0, first.err
        assert len(first.json()["fetched"]) == 4 and first.json()["kept"] == []
        again = run_cli(capsys, "mirror", "cuda.lock.toml", "mirror", "--json")
        assert (
            again.json()["fetched"] == [] and len(again.json()["kept"]) == 4
        )  # incremental, verified
    mirror = env / "mirror"
    assert (mirror / "compute/cuda/redist/redistrib_12.9.1.json").is_file()
    assert "redistrib_12.9.1.json" in (mirror / "compute/cuda/redist/index.html").read_text()
    for name in (
        "CUDAUP_NVIDIA_DOWNLOAD_URL",
        "CUDAUP_NVIDIA_ARCHIVE_URL",
        "CUDAUP_NVIDIA_PRERELEASE_URL",
        "CUDAUP_PYPI_URL",
    ):
        monkeypatch.setenv(name, REFUSED)
    with Nginx(mirror) as nginx:
        digests = []
        for node in ("node1", "node2"):
            monkeypatch.setenv("CUDAUP_HOME", str(env / node))
            monkeypatch.setenv("CUDAUP_CACHE_DIR", str(env / f"cache-{node}"))
            result = run_cli(
                capsys,
                "install",
                "--lock",
                "cuda.lock.toml",
                "--mirror",
                nginx.url("plain"),
                "--platform",
                "linux-x86_64",
                "--json",
            )
            assert result.code == 0, result.err
            digests.append(tree_digest(env / node / "toolkits" / "12.9.1"))
        assert digests[0] == digests[1]
        # resolve against the mirror gives the same answer as against the origin
        resolved = run_cli(
            capsys,
            "resolve",
            "12.9.1",
            "--channel",
            "redist",
            "--components",
            "nvcc",
            "--platform",
            "linux-x86_64",
            "--mirror",
            nginx.url("plain"),
            "--json",
        )
        assert resolved.code == 0, resolved.err
        lock = read_lock(env / "cuda.lock.toml").for_platform("linux-x86_64")
        by_component = {a["component"]: a for a in resolved.json()["artifacts"]}
        assert by_component["cuda_nvcc"]["sha256"] == next(
            f.sha256 for f in lock.files if f.component == "cuda_nvcc"
        )
        assert all(a["verified"] for a in resolved.json()["artifacts"])


@pytest.mark.slow  # a real nginx
@pytest.mark.pypi
def test_pypi_channel_mirror_serves_pip_and_cudaup(
    env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import subprocess
    import sys

    monkeypatch.setenv("CUDAUP_CACHE_DIR", str(env / "cache"))
    assert run_lock(capsys, "13.0.1", "pypi", "crt", "linux-x86_64").code == 0
    hashed: list[str] = []

    def counted(path: Path, algorithm: str) -> str:
        hashed.append(path.name)
        return hash_file(path, algorithm)

    monkeypatch.setattr(mirror, "hash_file", counted)
    result = run_cli(capsys, "mirror", "cuda.lock.toml", "mirror", "--json")
    assert result.code == 0, result.err
    # The crt wheel, verified against the lock as it was mirrored, is not read again for
    # the index; the cuda-toolkit wheel, a source document with no sha256 of the lock's, is.
    crt = (env / "mirror/simple/nvidia-cuda-crt/index.html").read_text()
    (sha,) = [f.sha256 for t in read_lock(env / "cuda.lock.toml").toolkits for f in t.files]
    assert f"#sha256={sha}" in crt
    assert (env / "mirror/simple/cuda-toolkit/index.html").is_file()
    assert [n for n in hashed if n.startswith("nvidia_cuda_crt")] == []
    assert [n.split("-")[0] for n in hashed] == ["cuda_toolkit"]
    monkeypatch.setenv("CUDAUP_PYPI_URL", REFUSED)
    with Nginx(env / "mirror") as nginx:
        simple = nginx.url("plain") + "/simple"
        done = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--index-url", simple, "-d", str(env / "pipdl"), "nvidia-cuda-crt==13.0.88"],
            env={**os.environ, "PIP_CONFIG_FILE": os.devnull}, capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        monkeypatch.setenv("CUDAUP_HOME", str(env / "home"))
        installed = run_cli(
            capsys,
            "install",
            "--lock",
            "cuda.lock.toml",
            "--mirror",
            nginx.url("plain"),
            "--platform",
            "linux-x86_64",
            "--json",
        )
        assert installed.code == 0, installed.err
        resolved = run_cli(
            capsys,
            "resolve",
            "13.0.1",
            "--channel",
            "pypi",
            "--components",
            "crt",
            "--platform",
            "linux-x86_64",
            "--mirror",
            nginx.url("plain"),
            "--json",
        )
        assert resolved.code == 0, resolved.err
        assert resolved.json()["artifacts"][0]["filename"].startswith("nvidia_cuda_crt-13.0.88")


@pytest.mark.pypi
def test_lock_with_wheels_embeds_a_pep751_lock_and_mirrors_it(
    fake_nvidia_fresh: FakeNvidiaServer,
    env: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    point_env_at(monkeypatch, fake_nvidia_fresh)
    result = run_lock(
        capsys,
        "12.9.1",
        "redist",
        "nvcc",
        "linux-x86_64",
        extra=(
            "--with",
            "six",
            "--index",
            "pypi",
            "--python",
            "3.12",
        ),
    )
    assert result.code == 0, result.err
    lock = read_lock(env / "cuda.lock.toml")
    [wheels] = lock.wheels
    assert wheels.pylock == "pylock.cuda-lock-linux-x86_64.toml"
    pylock = tomllib.loads((env / wheels.pylock).read_text())
    assert pylock["lock-version"] == "1.0" and [p["name"] for p in pylock["packages"]] == ["six"]
    mirrored = run_cli(capsys, "mirror", "cuda.lock.toml", "mirror", "--json")
    assert mirrored.code == 0, mirrored.err
    assert (env / "mirror/simple/six/index.html").read_text().count("<a href=") == 1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("lock-version = 2\n", "lock-version 2 is not one this cudaup reads"),
        ("lock-version = 1\n[[toolkits]\n", "is not valid TOML"),
        (
            'lock-version = 1\n[[toolkits]]\nplatform = "linux-x86_64"\nrelease = "13.0.1"\nchannel = "redist"\n',
            "no files",
        ),
        (
            'lock-version = 1\n[[toolkits]]\nplatform = "linux-x86_64"\nrelease = "13.0.1"\nchannel = "ftp"\n',
            "unknown channel",
        ),
        (
            'lock-version = 1\n[[toolkits]]\nplatform = "linux-x86_64"\nrelease = "13.0.1"\nchannel = "redist"\n'
            '[[toolkits.files]]\ncomponent = "cuda_nvcc"\nurl = "https://x/a.tar.xz"\nsize = 10\nsha256 = "abc"\n',
            "'sha256' must be 64 lower-case hex digits",
        ),
        (
            'lock-version = 1\n[[toolkits]]\nplatform = "linux-x86_64"\nrelease = "13.0.1"\nchannel = "redist"\n'
            '[[toolkits.files]]\ncomponent = "cuda_nvcc"\nurl = "https://x/a.tar.xz"\nsize = -1\nsha256 = "'
            + "a" * 64
            + '"\n',
            "size -1 in .* is refused",
        ),
        (
            'lock-version = 1\n[[toolkits]]\nplatform = "linux-x86_64"\nrelease = "13.0.1"\nchannel = "redist"\n'
            '[[toolkits.files]]\ncomponent = "cuda_nvcc"\nurl = "https://x/a.tar.xz"\nsize = 1\n',
            "needs a sha256 or md5",
        ),
    ],
)
def test_broken_locks_are_refused_with_the_reason(tmp_path: Path, text: str, message: str) -> None:
    from cudaup.errors import SourceFormatError

    path = tmp_path / "cuda.lock.toml"
    path.write_text(text)
    with pytest.raises(SourceFormatError, match=message):
        read_lock(path)


def test_a_lock_for_another_platform_says_which_it_has(
    fake_nvidia_fresh: FakeNvidiaServer,
    env: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    point_env_at(monkeypatch, fake_nvidia_fresh)
    monkeypatch.setenv("CUDAUP_HOME", str(env / "home"))
    assert run_lock(capsys, "13.0.1", "redist", "cudart", "linux-sbsa").code == 0
    result = run_cli(capsys, "install", "--lock", "cuda.lock.toml", "--platform", "linux-x86_64")
    assert (
        result.code == EXIT_CODES["usage"]
        and "has no toolkit for linux-x86_64 (it has linux-sbsa)" in result.err
    )
    missing = run_cli(capsys, "install", "--lock", "nowhere.toml", "--platform", "linux-x86_64")
    assert missing.code == EXIT_CODES["usage"] and "cannot read the lock" in missing.err
