"""``cudaup install`` end to end: redist from the fake NVIDIA server, hostile archives,
the runfile channel, interruptions, concurrency, the driver check, uninstall."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import threading
from pathlib import Path
from typing import Any

import pytest

import cudaup.install.installer as installer_module
from cudaup.config import Settings
from cudaup.errors import EXIT_CODES, DriverTooOldError, IntegrityError
from cudaup.install.installer import InstallOptions, install
from cudaup.install.layout import merge_tree
from cudaup.install.store import Store
from cudaup.machine import driver_probe
from tests import fakemachine as fm
from tests.fakenvidia.server import FakeNvidiaServer
from tests.faultserver import Fault, FaultServer
from tests.helpers import point_env_at, run_cli, settings_for
from tests.install.served import CUDART, make_wheel, serve_pypi

REDIST = InstallOptions(platform="linux-x86_64", channel="redist", components=("nvcc",))


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Store:
    monkeypatch.setenv("CUDAUP_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CUDAUP_SYSTEM_ROOT", str(tmp_path / "root"))
    monkeypatch.delenv("CUDAUP_DRIVER_VERSION", raising=False)
    (tmp_path / "root").mkdir()
    return Store(tmp_path / "home")


def test_redist_install_lays_out_a_cuda_home(fake_nvidia: FakeNvidiaServer, home: Store) -> None:
    result = install("13.0.1", REDIST, settings=settings_for(fake_nvidia), store=home)
    root = home.toolkits_dir / "13.0.1"
    assert result.path == root and not result.skipped
    assert result.components == ["cuda_cudart", "cuda_nvcc"]  # nvcc brings cudart's headers
    nvcc = root / "bin" / "nvcc"
    assert os.access(nvcc, os.X_OK)
    assert (
        "V13.0.88"
        in subprocess.run(
            [str(nvcc), "--version"], capture_output=True, text=True, check=True
        ).stdout
    )
    assert (root / "lib64").is_symlink() and (root / "lib64" / "libcudart.so").exists()
    assert (root / "licenses" / "cuda_nvcc" / "LICENSE").is_file()
    version = json.loads((root / "version.json").read_text())
    assert version["cuda"]["version"] == "13.0.1" and version["cuda_nvcc"]["version"] == "13.0.88"
    record = json.loads((root / "cudaup-record.json").read_text())
    assert record["channel"] == "redist" and {a["component"] for a in record["artifacts"]} == {
        "cuda_nvcc",
        "cuda_cudart",
    }
    assert all(len(a["sha256"]) == 64 for a in record["artifacts"])
    assert not [p for p in home.toolkits_dir.iterdir() if p.name.startswith(".")]
    # doctor identifies it exactly, from the version.json cudaup wrote
    from cudaup.machine.sysroot import SystemRoot
    from cudaup.machine.toolkits import Lookup, find_toolkits

    [found] = find_toolkits(
        Lookup(root=SystemRoot(home.home / "none"), env={}, store=home.toolkits_dir, python="/none")
    )
    assert found.owner == "cudaup" and found.identity.exact == "13.0.1"


def test_rerun_is_idempotent_and_adding_components_keeps_the_rest(
    fake_nvidia: FakeNvidiaServer, home: Store
) -> None:
    settings = settings_for(fake_nvidia)
    cudart_only = InstallOptions(platform="linux-x86_64", channel="redist", components=("cudart",))
    first = install("12.8.1", cudart_only, settings=settings, store=home)
    assert first.components == ["cuda_cudart"]
    again = install("12.8.1", cudart_only, settings=settings, store=home)
    assert again.skipped
    more = install("12.8.1", REDIST, settings=settings, store=home)
    assert not more.skipped and more.components == ["cuda_cudart", "cuda_nvcc"]
    assert (home.toolkits_dir / "12.8.1" / "bin" / "nvcc").exists()
    assert (home.toolkits_dir / "12.8.1" / "lib" / "libcudart_static.a").exists()


def _hostile_tar(kind: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz") as archive:
        top = "cuda_nvcc-linux-x86_64-99.0.1-archive"
        info = tarfile.TarInfo(f"{top}/bin")
        info.type = tarfile.DIRTYPE
        archive.addfile(info)
        if kind == "traversal":
            data = b"owned"
            info = tarfile.TarInfo(f"{top}/../../../evil")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        elif kind == "symlink":
            info = tarfile.TarInfo(f"{top}/bin/nvcc")
            info.type = tarfile.SYMTYPE
            info.linkname = "/etc/passwd"
            archive.addfile(info)
        elif kind == "setuid":
            data = b"#!/bin/sh\n"
            info = tarfile.TarInfo(f"{top}/bin/nvcc")
            info.size = len(data)
            info.mode = 0o4755
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@pytest.mark.parametrize("kind", ["traversal", "symlink", "setuid"])
def test_hostile_archives_are_refused_and_leave_nothing(
    fault_server: FaultServer, home: Store, kind: str, tmp_path: Path
) -> None:
    body = _hostile_tar(kind)
    relative = "cuda_nvcc/linux-x86_64/cuda_nvcc-linux-x86_64-99.0.1-archive.tar.xz"
    manifest = {
        "release_date": "2030-01-01", "release_label": "99.0.1", "release_product": "cuda",
        "cuda_nvcc": {"name": "CUDA NVCC", "license": "CUDA Toolkit", "version": "99.0.1",
                      "linux-x86_64": {"relative_path": relative, "sha256": hashlib.sha256(body).hexdigest(),
                                       "md5": hashlib.md5(body).hexdigest(), "size": str(len(body))}},
    }  # fmt: skip
    fault_server.add("/compute/cuda/redist/redistrib_99.0.1.json", json.dumps(manifest).encode())
    fault_server.add("/compute/cuda/redist/" + relative, body)
    settings = Settings.from_env(
        download_url=fault_server.url, archive_url=fault_server.url, cache_dir=tmp_path / "cache"
    )
    with pytest.raises(IntegrityError):
        install("99.0.1", REDIST, settings=settings, store=home)
    assert not (home.toolkits_dir / "99.0.1").exists()
    assert [p.name for p in home.toolkits_dir.iterdir()] == []
    assert not (tmp_path / "evil").exists() and not (home.home / "evil").exists()


def test_interrupt_mid_install_leaves_the_earlier_install_intact(
    fake_nvidia: FakeNvidiaServer, home: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = settings_for(fake_nvidia)
    install(
        "13.0.2",
        InstallOptions(platform="linux-x86_64", channel="redist", components=("cudart",)),
        settings=settings,
        store=home,
    )
    before = sorted(p.relative_to(home.toolkits_dir) for p in home.toolkits_dir.rglob("*"))
    calls = {"n": 0}
    real = merge_tree

    def interrupted(*args: object, **kwargs: object) -> list[str]:
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(installer_module, "merge_tree", interrupted)
    with pytest.raises(KeyboardInterrupt):
        install("13.0.2", REDIST, settings=settings, store=home)
    after = sorted(p.relative_to(home.toolkits_dir) for p in home.toolkits_dir.rglob("*"))
    assert after == before  # no staging left, the cudart-only install untouched


def test_two_processes_install_one_good_copy(
    fake_nvidia: FakeNvidiaServer, home: Store, tmp_path: Path
) -> None:
    env = {
        **os.environ,
        "CUDAUP_NVIDIA_DOWNLOAD_URL": fake_nvidia.download_url,
        "CUDAUP_NVIDIA_ARCHIVE_URL": fake_nvidia.archive_url,
        "CUDAUP_CACHE_DIR": str(tmp_path / "cache"),
    }
    argv = [
        sys.executable,
        "-m",
        "cudaup",
        "install",
        "12.9.1",
        "--channel",
        "redist",
        "--components",
        "nvcc",
        "--platform",
        "linux-x86_64",
        "--json",
        "-q",
    ]
    processes = [
        subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=120) for p in processes]
    assert [p.returncode for p in processes] == [0, 0], outputs
    skipped = sorted(json.loads(out)["skipped"] for out, _err in outputs)
    assert skipped == [False, True]
    assert [p.name for p in home.toolkits_dir.iterdir()] == ["12.9.1"]


def test_driver_check_refuses_unless_forced(fake_nvidia: FakeNvidiaServer, home: Store) -> None:
    settings = settings_for(fake_nvidia)
    old = InstallOptions(
        platform="linux-x86_64", channel="redist", components=("nvcc",), driver="570.124.06"
    )
    with pytest.raises(
        DriverTooOldError, match=r"driver 570\.124\.06 cannot run CUDA 13\.0\.1"
    ) as refused:
        install("13.0.1", old, settings=settings, store=home)
    assert refused.value.hint == "--force installs it anyway"
    assert not home.toolkits_dir.exists() or not any(home.toolkits_dir.iterdir())
    forced = InstallOptions(
        platform="linux-x86_64",
        channel="redist",
        components=("nvcc",),
        driver="570.124.06",
        force=True,
    )
    result = install("13.0.1", forced, settings=settings, store=home)
    assert any("--force" in note for note in result.notes)
    assert DriverTooOldError.exit_code == 12
    unknown = install(
        "12.9.0", REDIST, settings=settings, store=home
    )  # 12.8.0's archives are virtual
    assert any("not checked against a driver" in note for note in unknown.notes)


def test_the_driver_is_looked_for_while_the_release_resolves(
    fault_server: FaultServer, home: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding the driver (NVML's start: long where it has GPUs to start) runs beside the
    resolution's requests, not after them: the index answers cuda-toolkit's page only once
    the driver is being looked for (or, were it looked for after, 5 s later)."""
    url = serve_pypi(fault_server, "13.0.1", make_wheel("nvidia-cuda-runtime", "13.0.88", CUDART))
    looking, late = threading.Event(), threading.Event()
    real = driver_probe.detect_driver

    def detect(**options: Any) -> Any:
        looking.set()
        return real(**options)

    monkeypatch.setattr(installer_module, "detect_driver", detect)
    fault_server.resources["/simple/cuda-toolkit/"].faults.append(
        Fault(hang="headers", until=looking)
    )

    def too_late() -> None:
        late.set()
        looking.set()

    fallback = threading.Timer(5, too_late)
    fallback.start()
    try:
        options = InstallOptions(platform="linux-x86_64", channel="pypi", components=("cudart",))
        result = install("13.0.1", options, settings=Settings.from_env(pypi_url=url), store=home)
    finally:
        fallback.cancel()
    assert not late.is_set(), "the driver was looked for only after the release resolved"
    assert (result.path / "lib" / "libcudart.so.13").is_file()
    assert any("no NVIDIA driver found" in note for note in result.notes)


RUNFILE = r"""#!/bin/sh
# A stand-in for NVIDIA's runfile: records its arguments, writes a toolkit, and (like
# the real one may) re-points /usr/local/cuda under the system root.
printf '%s\n' "$@" > "$RECORD_ARGS"
for arg in "$@"; do
  case "$arg" in --toolkitpath=*) target="${arg#--toolkitpath=}" ;; esac
done
mkdir -p "$target/bin" "$target/lib64" "$target/include"
printf '#!/bin/sh\necho "Cuda compilation tools, release 98.0, V98.0.1"\n' > "$target/bin/nvcc"
chmod 755 "$target/bin/nvcc"
echo "installer output"
ln -sfn "$target" "$CUDAUP_SYSTEM_ROOT/usr/local/cuda"
"""


def test_runfile_channel(
    fault_server: FaultServer, home: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = RUNFILE.encode()
    name = "cuda_98.0.1_600.10.01_linux.run"
    fault_server.add(f"/compute/cuda/98.0.1/local_installers/{name}", body)
    fault_server.add(
        "/compute/cuda/98.0.1/docs/sidebar/md5sum.txt",
        f"{hashlib.md5(body).hexdigest()}  {name}\n".encode(),
    )
    root = tmp_path / "root"
    fm.toolkit_tree(root / "usr/local/cuda-12.8", nvcc="12.8.93", cudart="12.8.90")
    fm.link(root, "/usr/local/cuda", "/usr/local/cuda-12.8")
    snapshot = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
    monkeypatch.setenv("RECORD_ARGS", str(tmp_path / "args.txt"))
    settings = Settings.from_env(
        download_url=fault_server.url, archive_url=fault_server.url, cache_dir=tmp_path / "cache"
    )
    options = InstallOptions(
        platform="linux-x86_64", channel="installer", prefix=tmp_path / "opt" / "cuda-98.0.1"
    )
    result = install("98.0.1", options, settings=settings, store=home)
    target = tmp_path / "opt" / "cuda-98.0.1"
    assert result.path == target and (target / "bin" / "nvcc").exists()
    args = (tmp_path / "args.txt").read_text().splitlines()
    staging = Path(args[2].split("=", 1)[1])
    assert args[:2] == ["--silent", "--toolkit"] and staging.parent.parent == target.parent
    assert args[3] == f"--defaultroot={staging}"
    assert args[4:6] == ["--no-man-page", "--override"] and args[6].startswith("--tmpdir=")
    # nothing outside the target changed: the runfile's /usr/local/cuda move was undone
    assert (root / "usr/local/cuda").readlink() == Path("/usr/local/cuda-12.8")
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*")) == snapshot
    logs = list((home.home / "logs").iterdir())
    assert len(logs) == 1 and "installer output" in logs[0].read_text()
    assert home.get("98.0.1") is not None and home.get("98.0.1").external  # type: ignore[union-attr]


def test_cli_install_list_uninstall(
    fake_nvidia: FakeNvidiaServer,
    home: Store,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    point_env_at(monkeypatch, fake_nvidia)
    result = run_cli(
        capsys,
        "install",
        "cu126",
        "--channel",
        "redist",
        "--components",
        "nvcc",
        "--platform",
        "linux-x86_64",
        "-q",
    )
    assert result.code == 0, result.err
    assert "CUDA 12.6.3 installed at" in result.out
    listed = run_cli(capsys, "list", "--json").json()
    assert [t["version"] for t in listed["installed"]] == ["12.6.3"]
    fm.deb_12_4_with_alternatives(tmp_path / "root")
    refused = run_cli(capsys, "uninstall", "12.4.1")
    assert (
        refused.code == EXIT_CODES["usage"]
        and "owned by dpkg: cuda-toolkit-12-4 12.4.1-1" in refused.err
    )
    missing = run_cli(capsys, "uninstall", "11.8")
    assert missing.code == EXIT_CODES["artifact-not-found"] and "installed: 12.6.3" in missing.err
    removed = run_cli(capsys, "uninstall", "12.6")
    assert removed.code == 0 and not (home.toolkits_dir / "12.6.3").exists()
    # No components named: the default profile, named in the output, less what 12.6.3 lacks.
    profiled = run_cli(
        capsys, "install", "12.6", "--channel", "redist", "--platform", "linux-x86_64"
    )
    assert profiled.code == 0, profiled.err
    assert profiled.out.splitlines()[1:3] == [
        "note: profile default (the default: --profile minimal|default|complete or "
        "CUDAUP_PROFILE chooses)",
        "note: CUDA 12.6.3 offers no cuda_cccl, cuda_nvrtc, libcublas, libcufft, libcurand, "
        "libcusolver, libcusparse, libnvjitlink, cuda_nvtx for linux-x86_64: profile default "
        "goes without",
    ]  # the fake site's 12.6.3 has nvcc and cudart only


def test_auto_channel_prefers_nvidia_when_it_answers(
    fake_nvidia: FakeNvidiaServer, home: Store
) -> None:
    options = InstallOptions(platform="linux-x86_64", channel="auto", components=("cudart",))
    result = install("13.0.1", options, settings=settings_for(fake_nvidia), store=home)
    assert result.channel == "redist" and any(
        "channel auto: using redist" in n for n in result.notes
    )


def test_leftovers_of_a_killed_install_are_swept(
    fake_nvidia: FakeNvidiaServer, home: Store
) -> None:
    stale = home.toolkits_dir / ".staging-12.5.1-deadbeef"
    (stale / "tree" / "bin").mkdir(parents=True)
    other = home.toolkits_dir / ".staging-12.5.0-cafebabe"  # another release's: not ours to remove
    other.mkdir()
    install("12.5.1", REDIST, settings=settings_for(fake_nvidia), store=home)
    assert not stale.exists() and other.exists()
    assert [t.version for t in home.installed()] == ["12.5.1"]


def test_installed_toolkits_are_switched_by_the_shims(
    fake_nvidia: FakeNvidiaServer,
    home: Store,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    point_env_at(monkeypatch, fake_nvidia)
    for version in ("12.8.1", "13.0.1"):
        result = run_cli(
            capsys,
            "install",
            version,
            "--channel",
            "redist",
            "--components",
            "nvcc",
            "--platform",
            "linux-x86_64",
            "-q",
        )
        assert result.code == 0, result.err
    assert run_cli(capsys, "default", "13.0").code == 0
    project = tmp_path / "project" / "src"
    project.mkdir(parents=True)
    monkeypatch.chdir(project.parent)
    assert run_cli(capsys, "pin", "12.8").code == 0
    env = {**os.environ, "PATH": f"{home.bin_dir}:/usr/bin:/bin"}
    env.pop("CUDAUP_TOOLKIT", None)

    def nvcc(cwd: Path, **extra: str) -> str:
        done = subprocess.run(
            ["nvcc", "--version"],
            cwd=cwd,
            env={**env, **extra},
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout

    assert "V12.8.93" in nvcc(project)  # the pin in the parent directory
    assert "V13.0.88" in nvcc(tmp_path)  # the default elsewhere
    assert "V13.0.88" in nvcc(project, CUDAUP_TOOLKIT="13.0.1")  # the environment beats the pin
    shown = run_cli(capsys, "show", "--json").json()
    assert shown["active"]["version"] == "12.8.1"
    ran = subprocess.run(
        [sys.executable, "-m", "cudaup", "run", "13.0", "--", "nvcc", "--version"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert ran.returncode == 0 and "V13.0.88" in ran.stdout
