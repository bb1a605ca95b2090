"""The GitHub Action (``action.yml``), its steps run in order by a stand-in for the runner.

:class:`tests.github_runner.ActionRunner` plays the runner: a copy of the
checkout as the action's path, a temporary ``RUNNER_TEMP``, the runner's file
commands, the ``${{ … }}`` expressions.  ``actions/cache`` cannot run here: a
second job gets the directories the cache step names, carried over from the
first, which is what restoring the cache does.

* offline, against the fake NVIDIA server (a stand-in for the setup step's
  ``pip install``, which needs PyPI): the whole flow, the cache key, what a warm job
  downloads (nothing), the runner check;
* ``pypi``: the real thing: cudaup installed from the checkout into a private
  virtual environment, ``nvcc,cudart`` from the live PyPI, a kernel compiled with
  the exported ``nvcc``, and a warm second job that opens no connection to install.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import select
import shutil
import socket
import socketserver
import subprocess
import sys
import threading
import tomllib
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

import cudaup
from tests.fakenvidia import FakeNvidiaServer
from tests.fakenvidia.fixtures import MakeFakeNvidia
from tests.fakenvidia.products import with_products
from tests.fakenvidia.site import build_site
from tests.github_runner import ACTION_FILE, REPO, ActionRun, ActionRunner
from tests.helpers import point_env_at, run_cli
from tests.nginx import Nginx

ACTION: dict[str, Any] = yaml.safe_load(ACTION_FILE.read_text())
STEPS: dict[str, dict[str, Any]] = {step["id"]: step for step in ACTION["runs"]["steps"]}
#: The job's own PATH puts the machine's /usr/local/cuda first: the action must beat it.
JOB_PATH = "/usr/local/cuda/bin:/usr/local/bin:/usr/bin:/bin"
REFUSED = "http://127.0.0.1:9"  # nothing listens there


def action_copy(destination: Path) -> Path:
    """The checkout's files (tracked, and new ones git does not ignore), as the runner
    downloads an action: anywhere, under any name."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout
    for name in os.fsdecode(listed).split("\0"):
        source = REPO / name
        if name and source.is_file():
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return destination


@pytest.fixture(scope="module")
def action_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return action_copy(tmp_path_factory.mktemp("actions") / "some owner" / "cudaup" / "v1")


def job_env(**extra: str) -> dict[str, str]:
    """The runner's environment: this machine's, minus anything CUDA or cudaup."""
    environ = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("CUDA", "GITHUB_", "RUNNER_", "PYTEST_"))
        and name not in {"LD_LIBRARY_PATH", "VIRTUAL_ENV"}
    }
    environ["PATH"] = JOB_PATH
    environ.update(extra)
    return environ


def runner(root: Path, action: Path, **extra: str) -> ActionRunner:
    root.mkdir(parents=True)
    (root / "system").mkdir()  # no NVIDIA driver, as on GitHub's hosted runners
    return ActionRunner(
        action_path=action,
        temp=root / "temp",
        workspace=root / "workspace",
        env=job_env(CUDAUP_SYSTEM_ROOT=str(root / "system"), **extra),
    )


def stand_in_for_setup(job: ActionRunner) -> None:
    """What the setup step leaves: ``cudaup`` in ``$RUNNER_TEMP/cudaup/venv/bin`` (here,
    the interpreter running the tests, which has cudaup from this checkout)."""
    script = job.temp / "cudaup" / "venv" / "bin" / "cudaup"
    script.parent.mkdir(parents=True)
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m cudaup "$@"\n')
    script.chmod(0o755)


def cache_paths(job: ActionRunner) -> list[Path]:
    """The directories the cache step saves and restores, for this job's RUNNER_TEMP."""
    text = STEPS["cache"]["with"]["path"].replace("${{ runner.temp }}", str(job.temp))
    return [Path(line.strip()) for line in text.splitlines() if line.strip()]


def restore_cache(first: ActionRunner, second: ActionRunner) -> None:
    """What actions/cache does between two jobs: the cached directories, nothing else."""
    for saved, restored in zip(cache_paths(first), cache_paths(second), strict=True):
        if saved.exists():
            restored.parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(saved, restored, symlinks=True)


def succeeded(run: ActionRun) -> ActionRun:
    failed = run.failed
    assert failed is None, f"step {failed.name} failed:\n{failed.stdout}\n{failed.stderr}"
    return run


class StepMeter:
    """What each step used (requests, connections, by kind): a snapshot before each step
    and one when the action is done (:meth:`stop`)."""

    def __init__(self, snapshot: Callable[[], Counter[str]]) -> None:
        self.snapshot = snapshot
        self.marks: list[tuple[str, Counter[str]]] = []

    def __call__(self, step: str) -> None:
        self.marks.append((step, self.snapshot()))

    def stop(self) -> dict[str, Counter[str]]:
        """Per step, what it used."""
        self.marks.append(("", self.snapshot()))
        return {
            step: after - before
            for (step, before), (_, after) in zip(self.marks, self.marks[1:], strict=False)
        }


def archives_fetched(server: FakeNvidiaServer) -> Callable[[], Counter[str]]:
    """A snapshot for :class:`StepMeter`: the archives ``server`` has served, by name."""

    def archives() -> Counter[str]:
        return Counter(
            r.path.rsplit("/", 1)[-1]
            for r in server.log
            if r.method == "GET" and r.path.endswith(".tar.xz")
        )

    return archives


def cold_then_warm(
    tmp_path: Path,
    action_path: Path,
    server: FakeNvidiaServer,
    inputs: dict[str, str],
    hosts: dict[str, str],
) -> tuple[list[ActionRunner], list[ActionRun], list[dict[str, Counter[str]]]]:
    """Two jobs with ``inputs``, the second restoring the first's cache: each job, its run,
    and the archives each of its steps fetched."""
    jobs: list[ActionRunner] = []
    runs: list[ActionRun] = []
    used: list[dict[str, Counter[str]]] = []
    for number in (1, 2):
        job = runner(tmp_path / f"job{number}", action_path, **hosts)
        stand_in_for_setup(job)
        if jobs:
            restore_cache(jobs[0], job)
        job.before_step = meter = StepMeter(archives_fetched(server))
        runs.append(succeeded(job.run(inputs, skip=frozenset({"setup"}))))
        used.append(meter.stop())
        jobs.append(job)
    return jobs, runs, used


# -- what action.yml promises ------------------------------------------------------------
def test_action_declares_its_inputs_outputs_and_steps() -> None:
    inputs = ACTION["inputs"]
    assert inputs["cuda"]["required"] is True
    defaults = {name: spec.get("default") for name, spec in inputs.items() if name != "cuda"}
    assert defaults == {
        "components": "nvcc,cudart",
        "channel": "auto",
        "mirror": "",
        "cache": "true",
        "python": "python3",
    }
    assert {name: spec["value"] for name, spec in ACTION["outputs"].items()} == {
        "cuda-version": "${{ steps.env.outputs.cuda-version }}",
        "cuda-home": "${{ steps.env.outputs.cuda-home }}",
    }
    assert list(STEPS) == ["check", "setup", "resolve", "cache", "install", "env"]
    for step in STEPS.values():
        if "run" in step:
            assert step["shell"] == "bash"
            # Inputs reach scripts through env: an input pasted into a script is code.
            assert "${{" not in step["run"], step["id"]
    cache = STEPS["cache"]
    assert cache["uses"].startswith("actions/cache@") and cache["if"] == "inputs.cache == 'true'"
    assert cache["with"]["key"] == "${{ steps.resolve.outputs.cache-key }}"
    root = STEPS["install"]["env"]["CUDAUP_CACHE_DIR"]
    assert [line.strip() for line in cache["with"]["path"].splitlines()] == [
        f"{root}/downloads",
        f"{root}/unpacked",
    ]
    for step_id in ("resolve", "install", "env"):
        assert STEPS[step_id]["env"]["CUDAUP_CACHE_DIR"] == root
        assert STEPS[step_id]["env"]["CUDAUP_HOME"] == "${{ runner.temp }}/cudaup/home"


@pytest.mark.slow  # the Action on a runner of its own
@pytest.mark.parametrize(
    ("os_name", "arch"), [("Windows", "X64"), ("macOS", "ARM64"), ("Linux", "ARM")]
)
def test_other_runners_fail_in_the_first_step_with_one_sentence(
    tmp_path: Path, action_path: Path, os_name: str, arch: str
) -> None:
    job = runner(tmp_path / "job", action_path)
    job.os_name, job.arch = os_name, arch
    run = job.run({"cuda": "13.0"})
    assert [step.id for step in run.steps] == ["check"]  # nothing after it ran
    assert run.steps[0].returncode == 1
    sentence = run.steps[0].stdout.strip().removeprefix("::error title=cudaup::")
    assert sentence == (
        "cudaup's action installs CUDA on Linux x86_64 and arm64 runners only, so "
        f"{os_name} on {arch} is not supported yet (there, cudaup resolve and cudaup "
        "download work)."
    )
    assert not (job.temp / "cudaup").exists()


@pytest.mark.slow  # the Action on a runner of its own
def test_setup_refuses_a_python_older_than_3_11(tmp_path: Path, action_path: Path) -> None:
    old = tmp_path / "python3.10"
    # Python 3.10 as far as the action can tell: the code it is given sees version_info 3.10.
    old.write_text(
        "#!/bin/sh\n"
        '[ "$1" = -c ] || exit 99\n'
        f'exec "{sys.executable}" -c "import sys; sys.version_info = (3, 10, 12); exec(sys.argv[1])" "$2"\n'
    )
    old.chmod(0o755)
    for python in (str(old), str(tmp_path / "no-such-python")):
        job = runner(tmp_path / f"job-{Path(python).name}", action_path)
        run = job.run({"cuda": "13.0", "python": python})
        assert [step.id for step in run.steps] == ["check", "setup"]
        assert run.steps[1].returncode == 1
        assert (
            "::error title=cudaup::cudaup runs on Python 3.11 or newer, and the python input "
            f"({python}) is not one: set it to one (for example after actions/setup-python)."
        ) in run.steps[1].stdout
        assert not (job.temp / "cudaup").exists()


# -- the whole flow, offline ---------------------------------------------------------------
@pytest.mark.slow  # the Action on a runner of its own
def test_action_installs_exports_and_a_warm_job_downloads_nothing(
    tmp_path: Path, action_path: Path, fake_nvidia_fresh: FakeNvidiaServer
) -> None:
    server = fake_nvidia_fresh
    hosts = {
        "CUDAUP_NVIDIA_DOWNLOAD_URL": server.download_url,
        "CUDAUP_NVIDIA_ARCHIVE_URL": server.archive_url,
        "CUDAUP_NVIDIA_PRERELEASE_URL": server.prerelease_url,
    }

    inputs = {"cuda": "13.0.1", "channel": "redist"}
    jobs, runs, used = cold_then_warm(tmp_path, action_path, server, inputs, hosts)

    first, second = runs
    home = jobs[0].temp / "cudaup" / "cuda"
    assert first.outputs == {"cuda-version": "13.0.1", "cuda-home": str(home)}
    assert first.skipped == [STEPS["cache"]["name"]]
    assert jobs[0].env["CUDA_HOME"] == jobs[0].env["CUDA_PATH"] == str(home)
    assert jobs[0].env["LD_LIBRARY_PATH"] == f"{home}/lib64"
    assert jobs[0].prepend_path == [f"{home}/bin"]
    user = jobs[0].run_user_step('command -v nvcc\nnvcc --version\necho "$CUDA_HOME"\n')
    assert user.returncode == 0, user.stderr
    lines = user.stdout.splitlines()
    assert lines[0] == f"{home}/bin/nvcc"
    assert any(line.startswith("Cuda compilation tools, release 13.0, V") for line in lines)
    assert lines[-1] == str(home)

    # The key: the same files, the same key; the second job found the cache by it.
    key = first.step("resolve").outputs["cache-key"]
    assert second.step("resolve").outputs["cache-key"] == key
    lock = Path(first.step("resolve").outputs["lock"])
    digest = hashlib.sha256(lock.read_bytes()).hexdigest()
    assert key == f"cudaup-{cudaup.__version__}-Linux-X64-{digest}"
    # The first job fetched the archives while installing; the warm one fetched nothing.
    assert set(used[0]["install"]) == {
        f"{component}-linux-x86_64-13.0.88-archive.tar.xz"
        for component in ("cuda_nvcc", "cuda_cudart")
    }
    assert sum(used[0].values(), Counter()) == used[0]["install"]
    assert sum(used[1].values(), Counter()) == Counter()
    assert second.outputs["cuda-version"] == "13.0.1"
    # Hard links from the restored cache: the tree shares its files with it.
    nvcc = jobs[1].temp / "cudaup" / "cuda" / "bin" / "nvcc"
    assert nvcc.stat().st_nlink >= 2


@pytest.mark.slow  # the Action on a runner of its own
def test_action_carries_libraries_beside_the_toolkit(
    tmp_path: Path, action_path: Path, make_fake_nvidia: MakeFakeNvidia
) -> None:
    """``components: nvcc,cudart,cudnn==9.27``: the lock names cuDNN's CUDA 13 build, the
    toolkit's CUDA_HOME gets it (headers, the loader's name), a pin changes the cache key,
    and a warm job downloads nothing, cuDNN included."""
    server = make_fake_nvidia(with_products(build_site()))
    hosts = {"CUDAUP_NVIDIA_DOWNLOAD_URL": server.download_url}

    inputs = {"cuda": "13.0.1", "channel": "redist", "components": "nvcc,cudart,cudnn==9.27"}
    jobs, runs, used = cold_then_warm(tmp_path, action_path, server, inputs, hosts)

    first, second = runs
    home = jobs[0].temp / "cudaup" / "cuda"
    assert first.outputs == {"cuda-version": "13.0.1", "cuda-home": str(home)}
    lock = tomllib.loads(Path(first.step("resolve").outputs["lock"]).read_text())
    (toolkit,) = lock["toolkits"]
    assert "cudnn" in toolkit["components"]
    cudnn_archive = "cudnn-linux-x86_64-9.27.0.42_cuda13-archive.tar.xz"
    assert cudnn_archive in {f["url"].rsplit("/", 1)[-1] for f in toolkit["files"]}
    record = json.loads((home / "cudaup-record.json").read_text())
    assert record["libraries"]["cudnn"]["version"] == "9.27.0.42"
    # what a later step sees: the headers under CUDA_HOME, the library where the loader looks
    user = jobs[0].run_user_step(
        'ls "$CUDA_HOME/include/cudnn.h"\n'
        'IFS=: read -r first _ <<< "$LD_LIBRARY_PATH"\n'
        'readlink -f "$first/libcudnn.so.9"\n'
    )
    assert user.returncode == 0, user.stderr
    assert user.stdout.splitlines()[-1].endswith("/libcudnn.so.9.27.0.42")
    assert cudnn_archive in used[0]["install"]
    assert sum(used[1].values(), Counter()) == Counter()  # the warm job: nothing, cuDNN too
    assert second.outputs["cuda-version"] == "13.0.1"
    # another library pin is other files: another key
    other = runner(tmp_path / "job3", action_path, **hosts)
    stand_in_for_setup(other)
    older = succeeded(
        other.run(
            {**inputs, "components": "nvcc,cudart,cudnn==9.26"},
            skip=frozenset({"setup", "install", "env"}),
        )
    )
    assert older.step("resolve").outputs["cache-key"] != first.step("resolve").outputs["cache-key"]


@pytest.mark.slow  # the Action on a runner of its own
def test_cache_key_follows_the_files_and_a_lock_file_installs_as_written(
    tmp_path: Path, action_path: Path, fake_nvidia: FakeNvidiaServer
) -> None:
    hosts = {"CUDAUP_NVIDIA_DOWNLOAD_URL": fake_nvidia.download_url}
    counter = iter(range(100))

    def resolve(inputs: dict[str, str], *, install: bool = False) -> ActionRun:
        job = runner(tmp_path / f"job{next(counter)}", action_path, **hosts)
        stand_in_for_setup(job)
        for name in ("cuda.lock.toml", "edited.lock.toml"):
            if (tmp_path / name).exists():
                shutil.copy(tmp_path / name, job.workspace / name)
        skip = {"setup"} if install else {"setup", "install", "env"}
        return job.run(inputs, skip=frozenset(skip))

    def key(**inputs: str) -> str:
        return succeeded(resolve(inputs)).step("resolve").outputs["cache-key"]

    base = {"cuda": "13.0.1", "channel": "redist"}
    first = key(**base)
    assert key(**base) == first  # a later run, the same files: the same key
    assert key(**{**base, "cuda": "13.0.2"}) != first
    assert key(**{**base, "components": "cudart"}) != first
    # all of the fake 13.0.1 is nvcc and cudart: the same files, so the same key (the
    # lock is sorted, whichever way its files were asked for)
    assert key(**{**base, "components": "all"}) == first

    # A lock file as input: its bytes make the key, and the install follows it.
    run = succeeded(resolve(base))
    shutil.copy(run.step("resolve").outputs["lock"], tmp_path / "cuda.lock.toml")
    from_lock = succeeded(resolve({"cuda": "cuda.lock.toml"}, install=True))
    assert from_lock.step("resolve").outputs["cache-key"] == first
    assert from_lock.step("resolve").outputs["lock"].endswith("/workspace/cuda.lock.toml")
    assert from_lock.outputs["cuda-version"] == "13.0.1"
    text = (tmp_path / "cuda.lock.toml").read_text()
    (tmp_path / "edited.lock.toml").write_text(
        text.replace('request = "13.0.1"', 'request = "13.0"')
    )
    assert key(cuda="edited.lock.toml") != first

    missing = resolve({"cuda": "missing.lock.toml"})
    assert missing.failed is not None and missing.failed.id == "resolve"
    assert "there is no lock file missing.lock.toml in " in missing.failed.stdout
    installer = resolve({"cuda": "13.0.1", "channel": "installer"})
    assert installer.failed is not None
    assert "the installer channel installs the whole toolkit, so set components: all" in (
        installer.failed.stdout
    )
    nothing = resolve({"cuda": "12.7", "channel": "redist"})  # no such release: cudaup's own error
    assert nothing.failed is not None and nothing.failed.returncode == 3
    assert "there is no CUDA 12.7.x" in nothing.failed.stderr


@pytest.mark.slow  # the Action on a runner of its own
def test_mirror_input_serves_every_step_with_the_origins_gone(
    tmp_path: Path,
    action_path: Path,
    fake_nvidia: FakeNvidiaServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    point_env_at(monkeypatch, fake_nvidia)
    monkeypatch.chdir(tmp_path)
    locked = run_cli(capsys, "lock", "13.0.1", "--channel", "redist", "--components", "nvcc")
    assert locked.code == 0, locked.err
    mirrored = run_cli(capsys, "mirror", "cuda.lock.toml", "mirror")
    assert mirrored.code == 0, mirrored.err
    gone = dict.fromkeys(
        (
            "CUDAUP_NVIDIA_DOWNLOAD_URL",
            "CUDAUP_NVIDIA_ARCHIVE_URL",
            "CUDAUP_NVIDIA_PRERELEASE_URL",
            "CUDAUP_PYPI_URL",
        ),
        REFUSED,
    )
    with Nginx(tmp_path / "mirror") as nginx:
        job = runner(tmp_path / "job", action_path, **gone)
        stand_in_for_setup(job)
        inputs = {"cuda": "13.0", "channel": "redist", "mirror": nginx.url("plain")}
        run = succeeded(job.run(inputs, skip=frozenset({"setup"})))
    assert run.outputs["cuda-version"] == "13.0.1"
    assert (Path(run.outputs["cuda-home"]) / "bin" / "nvcc").is_file()


# -- the real thing: live PyPI, a real nvcc ------------------------------------------------
class CountingProxy(socketserver.ThreadingTCPServer):
    """An HTTPS proxy (``CONNECT``) on loopback that counts the tunnels opened per host."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        self.tunnels: Counter[str] = Counter()
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Tunnel)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def snapshot(self) -> Counter[str]:
        with self.lock:
            return Counter(self.tunnels)


class _Tunnel(socketserver.StreamRequestHandler):
    server: CountingProxy
    rbufsize = 0  # unbuffered: no byte of the tunnel is left behind in a reader's buffer

    def handle(self) -> None:
        request = self.rfile.readline().decode("latin-1").split()
        while self.rfile.readline() not in {b"\r\n", b"\n", b""}:
            pass  # the request's headers
        if len(request) < 2 or request[0] != "CONNECT":
            self.wfile.write(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
            return
        host, _, port = request[1].rpartition(":")
        with self.server.lock:
            self.server.tunnels[host] += 1
        # A peer closing its end mid-tunnel is how tunnels end: not an error here.
        with (
            socket.create_connection((host, int(port)), timeout=60) as upstream,
            contextlib.suppress(OSError),
        ):
            self.wfile.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            self.wfile.flush()
            client = self.connection
            sockets = [client, upstream]
            while True:
                ready, _, _ = select.select(sockets, [], [], 120)
                if not ready:
                    return
                for source in ready:
                    data = source.recv(65536)
                    if not data:
                        return
                    (upstream if source is client else client).sendall(data)


@contextlib.contextmanager
def counting_proxy() -> Iterator[CountingProxy]:
    proxy = CountingProxy()
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        proxy.shutdown()
        proxy.server_close()


KERNEL = r"""
#include <cstdio>
#include <cuda_runtime.h>

__global__ void saxpy(int n, float a, const float *x, float *y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

int main() {
    int devices = 0;
    cudaError_t status = cudaGetDeviceCount(&devices);  // no GPU here: an error code, no crash
    printf("CUDART_VERSION %d\n", CUDART_VERSION);
    printf("devices %d (%s)\n", devices, cudaGetErrorName(status));
    return 0;
}
"""

USER_STEP = """
command -v nvcc
echo "$CUDA_HOME"
nvcc --version
cat > saxpy.cu <<'EOF'
{kernel}
EOF
nvcc -arch=sm_90 -cubin -o saxpy.cubin saxpy.cu
nvcc -o saxpy saxpy.cu -cudart static
./saxpy
"""


@pytest.mark.slow  # the Action on a runner of its own
@pytest.mark.pypi
def test_action_from_live_pypi_compiles_a_kernel_and_a_warm_job_downloads_nothing(
    tmp_path: Path, action_path: Path
) -> None:
    inputs = {"cuda": "13.0", "channel": "pypi"}  # components: the default, nvcc,cudart
    with counting_proxy() as proxy:
        proxied = {"HTTPS_PROXY": proxy.url, "https_proxy": proxy.url, "NO_PROXY": "127.0.0.1"}
        first = runner(tmp_path / "job1", action_path, **proxied)
        first.before_step = meter = StepMeter(proxy.snapshot)
        run = succeeded(first.run(inputs))
        first_used = meter.stop()

        second = runner(tmp_path / "job2", action_path, **proxied)
        restore_cache(first, second)
        second.before_step = meter = StepMeter(proxy.snapshot)
        again = succeeded(second.run(inputs))
        second_used = meter.stop()

    version = run.outputs["cuda-version"]
    home = Path(run.outputs["cuda-home"])
    assert re.fullmatch(r"13\.0\.\d+", version)
    lock = tomllib.loads(Path(run.step("resolve").outputs["lock"]).read_text())
    assert lock["toolkits"][0]["release"] == version
    assert f'"version": "{version}"' in (home / "version.json").read_text()
    nvcc = next(f["version"] for f in lock["toolkits"][0]["files"] if f["component"] == "cuda_nvcc")
    assert home == first.temp / "cudaup" / "cuda"
    # cudaup lives in its own environment under RUNNER_TEMP; the job's PATH gained only CUDA.
    assert (first.temp / "cudaup" / "venv" / "bin" / "cudaup").is_file()
    assert first.prepend_path == [f"{home}/bin"]

    user = first.run_user_step(USER_STEP.format(kernel=KERNEL))
    assert user.returncode == 0, user.stdout + user.stderr
    lines = user.stdout.splitlines()
    assert lines[0] == f"{home}/bin/nvcc"  # not /usr/local/cuda's, though the job's PATH has it
    assert lines[1] == str(home)
    assert f"Cuda compilation tools, release 13.0, V{nvcc}" in user.stdout
    assert (first.workspace / "saxpy.cubin").read_bytes()[:4] == b"\x7fELF"
    assert "CUDART_VERSION 13000" in lines

    # The toolkit's wheels came through the proxy in the first job's install step...
    assert first_used["install"]["files.pythonhosted.org"] >= 1
    # ...and the warm job, with the cache restored, opened no connection to install.
    assert again.step("resolve").outputs["cache-key"] == run.step("resolve").outputs["cache-key"]
    assert second_used["install"] == Counter()
    assert second_used["resolve"]["pypi.org"] >= 1  # it did resolve afresh (the key needs it)
    assert again.outputs["cuda-version"] == version
    warm = second.run_user_step("nvcc --version\n")
    assert warm.returncode == 0 and f"V{nvcc}" in warm.stdout
