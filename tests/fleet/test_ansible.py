"""The Ansible collection (``ansible_collections/cudaup/toolkit``) end to end.

``ansible-playbook`` runs the collection's modules on three local hosts, each with a
cudaup store of its own, against the fake NVIDIA server: install, idempotence, check
mode, diff, removal and cudaup's own error messages.  Needs ansible-core (the test extra).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import platform
import subprocess
import sys
import threading
import tomllib
from dataclasses import dataclass
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from cudaup.core.components import ALIASES
from cudaup.core.libraries import version_matches
from tests.fakenvidia.fixtures import MakeFakeNvidia
from tests.fakenvidia.products import with_products
from tests.fakenvidia.server import FakeNvidiaServer
from tests.fakenvidia.site import build_site
from tests.helpers import point_env_at, require_tool, run_cli

REPO = Path(__file__).resolve().parents[2]
COLLECTION = REPO / "ansible_collections" / "cudaup" / "toolkit"
CUDAUP = Path(sys.executable).parent / "cudaup"
HOSTS = ("node1", "node2", "node3")

# ansible-core ships no JSON stdout callback (that one lives in ansible.posix), so the test
# brings a small one: every task's result per host, and the play recap, in one JSON file.
CALLBACK = """
import json
import os

from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "cudaup_test_json"

    def __init__(self):
        super().__init__()
        self.tasks = []

    def v2_playbook_on_task_start(self, task, is_conditional):
        self.tasks.append({"name": task.get_name(), "hosts": {}})

    def _record(self, result, status):
        data = json.loads(json.dumps(result._result, default=str))
        data["_status"] = status
        self.tasks[-1]["hosts"][result._host.get_name()] = data

    def v2_runner_on_ok(self, result, **kwargs):
        self._record(result, "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False, **kwargs):
        self._record(result, "failed")

    def v2_runner_on_skipped(self, result, **kwargs):
        self._record(result, "skipped")

    def v2_runner_on_unreachable(self, result, **kwargs):
        self._record(result, "unreachable")

    def v2_playbook_on_stats(self, stats):
        summary = {host: stats.summarize(host) for host in sorted(stats.processed)}
        with open(os.environ["CUDAUP_TEST_ANSIBLE_RESULTS"], "w") as stream:
            json.dump({"tasks": self.tasks, "stats": summary}, stream, default=str)
"""


@dataclass
class Play:
    """One ``ansible-playbook`` run: exit status, output, per-task results and the recap."""

    rc: int
    stdout: str
    stderr: str
    tasks: dict[str, dict[str, dict[str, Any]]]
    stats: dict[str, dict[str, int]]

    def results(self, task: str) -> dict[str, dict[str, Any]]:
        return self.tasks[task]

    def changed_hosts(self) -> set[str]:
        return {host for host, counts in self.stats.items() if counts["changed"]}


@dataclass
class Fleet:
    """Three local hosts with a store each, and ``ansible-playbook`` set up to reach them."""

    tmp: Path
    env: dict[str, str]
    inventory: Path
    playbook: Path
    variables: Path
    results: Path

    def home(self, host: str) -> Path:
        return self.tmp / f"home-{host}"

    def play(self, *options: str, playbook: Path | None = None, **extra_vars: Any) -> Play:
        program = Path(sys.executable).parent / "ansible-playbook"
        command = [str(program), "-i", str(self.inventory), str(playbook or self.playbook)]
        command += ["-e", f"@{self.variables}", *options]
        if extra_vars:
            command += ["-e", json.dumps(extra_vars)]
        self.results.unlink(missing_ok=True)
        done = subprocess.run(
            command,
            env=self.env,
            cwd=self.tmp,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if not self.results.exists():
            raise AssertionError(
                f"ansible-playbook wrote no results (exit {done.returncode})\n"
                f"{done.stdout}\n{done.stderr}"
            )
        document = json.loads(self.results.read_text())
        tasks = {task["name"]: task["hosts"] for task in document["tasks"]}
        return Play(done.returncode, done.stdout, done.stderr, tasks, document["stats"])


@pytest.fixture
def fleet(tmp_path: Path, fake_nvidia: FakeNvidiaServer) -> Fleet:
    return _fleet(tmp_path, fake_nvidia, ["nvcc"])


def _fleet(tmp_path: Path, fake_nvidia: FakeNvidiaServer, components: list[str]) -> Fleet:
    """Three local hosts whose playbook installs ``components`` of ``toolkit_version``."""
    require_tool(str(Path(sys.executable).parent / "ansible-playbook"), "(pip) ansible-core")
    assert CUDAUP.exists(), f"cudaup's script is missing: {CUDAUP}"
    lines = ["[gpu]"]
    for host in HOSTS:
        root = tmp_path / f"root-{host}"  # an empty system: no driver, no other toolkits
        root.mkdir()
        lines.append(
            f"{host} ansible_connection=local ansible_python_interpreter={sys.executable} "
            f"cudaup_home={tmp_path / f'home-{host}'} cudaup_cache={tmp_path / f'cache-{host}'} "
            f"cudaup_root={root} cudaup_executable={CUDAUP}"
        )
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("\n".join(lines) + "\n")
    # every play gets the fake server's URLs and each host's cache and system root
    variables = tmp_path / "vars.json"
    variables.write_text(
        json.dumps(
            {
                "cudaup_env": {
                    "CUDAUP_NVIDIA_DOWNLOAD_URL": fake_nvidia.download_url,
                    "CUDAUP_NVIDIA_ARCHIVE_URL": fake_nvidia.archive_url,
                    "CUDAUP_NVIDIA_PRERELEASE_URL": fake_nvidia.prerelease_url,
                    "CUDAUP_CACHE_DIR": "{{ cudaup_cache }}",
                    "CUDAUP_SYSTEM_ROOT": "{{ cudaup_root }}",
                }
            }
        )
    )
    common = {
        "executable": "{{ cudaup_executable }}",
        "cudaup_home": "{{ cudaup_home }}",
        "env": "{{ cudaup_env }}",
    }
    playbook = [
        {
            "name": "CUDA on the fleet",
            "hosts": "gpu",
            "gather_facts": False,
            "vars": {
                "toolkit_version": "13.0.1",
                "toolkit_state": "present",
                "toolkit_components": components,
            },
            "tasks": [
                {"name": "facts", "cudaup.toolkit.cudaup_facts": common},
                {
                    "name": "toolkit",
                    "cudaup.toolkit.cudaup_toolkit": {
                        **common,
                        "version": "{{ toolkit_version }}",
                        "channel": "redist",
                        "components": "{{ toolkit_components }}",
                        "platform": "linux-x86_64",
                        "default": True,
                        "state": "{{ toolkit_state }}",
                    },
                },
            ],
        }
    ]
    site = tmp_path / "site.yml"
    site.write_text(json.dumps(playbook, indent=2))  # JSON is YAML
    callbacks = tmp_path / "callback_plugins"
    callbacks.mkdir()
    (callbacks / "cudaup_test_json.py").write_text(CALLBACK)
    (tmp_path / "ansible.cfg").write_text("[defaults]\n")
    (tmp_path / "user").mkdir()
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("ANSIBLE_", "CUDAUP_"))
    }
    env.update(
        HOME=str(tmp_path / "user"),
        LC_ALL="C.UTF-8",  # ansible refuses to start without a UTF-8 locale
        ANSIBLE_CONFIG=str(tmp_path / "ansible.cfg"),
        ANSIBLE_COLLECTIONS_PATH=str(REPO),
        ANSIBLE_CALLBACK_PLUGINS=str(callbacks),
        ANSIBLE_STDOUT_CALLBACK="cudaup_test_json",
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-local"),
        ANSIBLE_REMOTE_TEMP=str(tmp_path / "ansible-remote"),
        ANSIBLE_HOST_KEY_CHECKING="False",
        ANSIBLE_RETRY_FILES_ENABLED="False",
        CUDAUP_TEST_ANSIBLE_RESULTS=str(tmp_path / "results.json"),
    )
    return Fleet(tmp_path, env, inventory, site, variables, tmp_path / "results.json")


def _versions(state: dict[str, Any]) -> list[str]:
    return [entry["version"] for entry in state["installed"]]


@pytest.mark.slow  # ansible-playbook on three hosts
def test_install_is_idempotent_checkable_diffable_and_removable(fleet: Fleet) -> None:
    first = fleet.play()
    assert first.rc == 0, first.stderr + first.stdout
    assert first.changed_hosts() == set(HOSTS)
    for host, result in first.results("toolkit").items():
        home = fleet.home(host)
        assert result["changed"] and not result["toolkit"]["skipped"]
        assert result["toolkit"]["version"] == "13.0.1"
        assert result["toolkit"]["components"] == ["cuda_cudart", "cuda_nvcc"]
        assert Path(result["toolkit"]["path"]) == home / "toolkits" / "13.0.1"
        assert (home / "toolkits" / "13.0.1" / "bin" / "nvcc").is_file()
        assert (home / "default").read_text().strip() == "13.0.1"
        assert result["default"] == "13.0.1"
        assert [t["version"] for t in result["installed"]] == ["13.0.1"]
        assert [c.split()[1:3] for c in result["commands"]] == [
            ["install", "13.0.1"],
            ["default", "13.0.1"],
        ]
    for result in first.results("facts").values():
        assert not result["changed"]
        assert result["ansible_facts"]["cudaup"]["schema"] == 1
        assert result["ansible_facts"]["cudaup"]["driver"]["found"] is False

    # the same again: nothing to do anywhere, and the facts now see each host's toolkit
    second = fleet.play()
    assert second.rc == 0, second.stderr + second.stdout
    assert second.changed_hosts() == set()
    for host, result in second.results("toolkit").items():
        assert result["toolkit"]["skipped"] and result["commands"] == []
        toolkits = result["toolkit"]["path"]
        facts = second.results("facts")[host]["ansible_facts"]["cudaup"]
        assert toolkits in {t["path"] for t in facts["toolkits"]}

    # a request that is not a release label: cudaup resolves it, finds it there, adds nothing
    named = fleet.play(toolkit_version="13.0 Update 1")
    assert named.rc == 0, named.stderr + named.stdout
    assert named.changed_hosts() == set()
    for result in named.results("toolkit").values():
        assert result["toolkit"]["skipped"] and result["toolkit"]["version"] == "13.0.1"
        assert result["commands"] == []

    # check mode for another release: a change is reported, nothing is installed or switched
    checked = fleet.play("--check", toolkit_version="12.8.1")
    assert checked.rc == 0, checked.stderr + checked.stdout
    assert checked.changed_hosts() == set(HOSTS)
    for host, result in checked.results("toolkit").items():
        home = fleet.home(host)
        assert result["changed"] and result["toolkit"] is None and "diff" not in result
        assert [c.split()[1:3] for c in result["commands"]] == [
            ["install", "12.8.1"],
            ["default", "12.8.1"],
        ]
        assert not (home / "toolkits" / "12.8.1").exists()
        assert (home / "default").read_text().strip() == "13.0.1"

    # --check --diff: the predicted store, before and after
    diffed = fleet.play("--check", "--diff", toolkit_version="12.8.1")
    assert diffed.rc == 0, diffed.stderr + diffed.stdout
    for host, result in diffed.results("toolkit").items():
        before, after = result["diff"]["before"], result["diff"]["after"]
        assert _versions(before) == ["13.0.1"] and before["default"] == "13.0.1"
        assert _versions(after) == ["13.0.1", "12.8.1"] and after["default"] == "12.8.1"
        assert after["installed"][1] == {
            "version": "12.8.1",
            "channel": "redist",
            "components": ["cuda_nvcc"],
        }
        assert not (fleet.home(host) / "toolkits" / "12.8.1").exists()

    # state=absent removes it (and the default that named it); --diff shows the real change
    removed = fleet.play("--diff", toolkit_state="absent", toolkit_version="13.0.1")
    assert removed.rc == 0, removed.stderr + removed.stdout
    assert removed.changed_hosts() == set(HOSTS)
    for host, result in removed.results("toolkit").items():
        home = fleet.home(host)
        assert result["removed"] == ["13.0.1"] and result["installed"] == []
        assert result["diff"]["after"] == {"installed": [], "default": None}
        assert _versions(result["diff"]["before"]) == ["13.0.1"]
        assert not (home / "toolkits" / "13.0.1").exists()
        assert not (home / "default").exists()


@pytest.mark.slow  # ansible-playbook on three hosts
def test_a_library_pin_is_installed_once_then_satisfied(
    tmp_path: Path, make_fake_nvidia: MakeFakeNvidia
) -> None:
    """``components: [nvcc, cudart, cudnn==9.27]`` twice: changed, then ok, because
    ``cudaup list --json`` carries each toolkit's libraries with their versions."""
    server = make_fake_nvidia(with_products(build_site()))
    fleet = _fleet(tmp_path, server, ["nvcc", "cudart", "cudnn==9.27"])
    first = fleet.play()
    assert first.rc == 0, first.stderr + first.stdout
    assert first.changed_hosts() == set(HOSTS)
    for host, result in first.results("toolkit").items():
        assert result["changed"] and not result["toolkit"]["skipped"]
        (listed,) = result["installed"]
        assert {"cuda_nvcc", "cuda_cudart", "cudnn"} <= set(listed["components"])
        cudnn = listed["libraries"]["cudnn"]
        assert (cudnn["product"], cudnn["version"], cudnn["cuda_variant"]) == (
            "cuDNN", "9.27.0.42", "cuda13",
        )  # fmt: skip
        assert cudnn["source"].endswith("/compute/cudnn/redist/redistrib_9.27.0.json")
        assert (fleet.home(host) / "toolkits" / "13.0.1" / "include" / "cudnn.h").is_file()

    again = fleet.play()
    assert again.rc == 0, again.stderr + again.stdout
    assert again.changed_hosts() == set()
    for result in again.results("toolkit").values():
        assert result["toolkit"]["skipped"] and result["commands"] == []
    # check mode decides from the listing alone (cudaup is not asked): nothing to do either
    predicted = fleet.play("--check")
    assert predicted.rc == 0, predicted.stderr + predicted.stdout
    assert predicted.changed_hosts() == set()
    for result in predicted.results("toolkit").values():
        assert result["toolkit"]["skipped"] and result["commands"] == []

    # another pin is not satisfied by 9.27.0.42: check mode says it would install
    checked = fleet.play("--check", toolkit_components=["nvcc", "cudnn==9.26"])
    assert checked.rc == 0, checked.stderr + checked.stdout
    assert checked.changed_hosts() == set(HOSTS)
    for result in checked.results("toolkit").values():
        assert [c.split()[1:3] for c in result["commands"]][:1] == [["install", "13.0.1"]]
        assert "cudnn==9.26" in result["commands"][0]


@pytest.mark.slow  # ansible-playbook on three hosts
def test_cudaup_errors_fail_every_host_with_its_message(fleet: Fleet) -> None:
    play = fleet.play(toolkit_version="12.7")
    assert play.rc != 0
    assert {host for host, counts in play.stats.items() if counts["failures"]} == set(HOSTS)
    for host, result in play.results("toolkit").items():
        assert result["_status"] == "failed"
        assert "there is no CUDA 12.7" in result["msg"]
        assert result["msg"].startswith("cudaup: error: ")
        assert result["rc"] == 3  # no such release
        assert result["cmd"][1:3] == ["install", "12.7"]
        assert not (fleet.home(host) / "toolkits").exists() or not any(
            (fleet.home(host) / "toolkits").iterdir()
        )


@pytest.mark.slow  # ansible-playbook on three hosts
def test_example_playbook_installs_a_lock_from_a_mirror(
    fleet: Fleet,
    fake_nvidia: FakeNvidiaServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """playbooks/site.yml as shipped: facts, the lock copied over, installed via the mirror."""
    if platform.machine().lower() not in {"x86_64", "amd64", "aarch64", "arm64"}:
        pytest.skip("the fake NVIDIA site has toolkits for x86_64 and sbsa only")
    point_env_at(monkeypatch, fake_nvidia)
    lock, mirror = fleet.tmp / "cuda.lock.toml", fleet.tmp / "mirror"
    made = run_cli(
        capsys, "lock", "13.0.1", "--channel", "redist", "--components", "nvcc",
        "--platform", "linux-x86_64", "--platform", "linux-sbsa", "-o", str(lock),
    )  # fmt: skip
    assert made.code == 0, made.err
    assert run_cli(capsys, "mirror", str(lock), str(mirror), "-q").code == 0
    served: list[str] = []

    class Mirror(SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(mirror), **kwargs)

        def log_message(self, format: str, *args: Any) -> None:
            served.append(self.path)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Mirror)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    site = COLLECTION / "playbooks" / "site.yml"
    options = {
        "cudaup_lock_src": str(lock),
        "cudaup_mirror": f"http://127.0.0.1:{server.server_address[1]}",
        "cudaup_lock": str(fleet.tmp / "on-the-host" / "cuda.lock.toml"),
    }
    try:
        fake_nvidia.clear_log()
        first = fleet.play(playbook=site, **options)
        second = fleet.play("--check", "--diff", playbook=site, **options)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert first.rc == 0, first.stderr + first.stdout
    [installs] = [r for name, r in first.tasks.items() if name.startswith("Install what the lock")]
    for host, result in installs.items():
        home = fleet.home(host)
        assert result["changed"] and result["toolkit"]["version"] == "13.0.1"
        assert any("via the mirror" in note for note in result["toolkit"]["notes"])
        assert (home / "toolkits" / "13.0.1" / "bin" / "nvcc").is_file()
        assert (home / "default").read_text().strip() == "13.0.1"
    assert any(path.endswith(".tar.xz") for path in served)  # the files came from the mirror
    assert not [r for r in fake_nvidia.log if r.path.endswith(".tar.xz")]  # not from NVIDIA
    # again, in check mode with a diff: the lock is there now, and nothing is left to do
    assert second.rc == 0, second.stderr + second.stdout
    assert second.changed_hosts() == set()
    [again] = [r for name, r in second.tasks.items() if name.startswith("Install what the lock")]
    for result in again.values():
        assert result["diff"]["before"] == result["diff"]["after"]
        assert result["toolkit"]["skipped"] and result["commands"] == []


def _ansible_env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "user").mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(
        HOME=str(tmp_path / "user"),
        LC_ALL="C.UTF-8",
        ANSIBLE_COLLECTIONS_PATH=str(REPO),
        ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-local"),
        ANSIBLE_NOCOLOR="1",
    )
    return env


@pytest.mark.parametrize("name", ["cudaup_toolkit", "cudaup_facts"])
def test_module_documentation_matches_its_arguments(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What ``ansible-doc`` shows is what the module accepts (names, types, defaults, choices)."""
    program = require_tool(str(Path(sys.executable).parent / "ansible-doc"), "(pip) ansible-core")
    done = subprocess.run(
        [program, "--json", f"cudaup.toolkit.{name}"],
        env=_ansible_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)[f"cudaup.toolkit.{name}"]
    assert doc["examples"].strip() and doc["return"]
    documented: dict[str, dict[str, Any]] = doc["doc"]["options"]

    captured: dict[str, Any] = {}

    class BuiltError(Exception):
        pass

    def build(**kwargs: Any) -> None:
        captured.update(kwargs)
        raise BuiltError

    monkeypatch.syspath_prepend(str(REPO))
    module = importlib.import_module(f"ansible_collections.cudaup.toolkit.plugins.modules.{name}")
    monkeypatch.setattr(module, "AnsibleModule", build)
    with pytest.raises(BuiltError):
        module.main()
    spec: dict[str, dict[str, Any]] = captured["argument_spec"]
    assert set(documented) == set(spec)
    for option, accepted in spec.items():
        shown = documented[option]
        assert shown.get("type", "str") == accepted.get("type", "str"), option
        assert shown.get("default") == accepted.get("default"), option
        assert shown.get("choices") == accepted.get("choices"), option
        assert shown.get("elements") == accepted.get("elements"), option
    assert captured["supports_check_mode"] is True


# -- the shared module code, without Ansible running it ---------------------------------------
@pytest.fixture
def cli_utils(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    path = COLLECTION / "plugins" / "module_utils" / "cudaup_cli.py"
    spec = importlib.util.spec_from_file_location("cudaup_ansible_cli", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_module_aliases_are_cudaups(cli_utils: ModuleType) -> None:
    assert cli_utils.ALIASES == ALIASES


def test_requests_match_installed_releases(cli_utils: ModuleType) -> None:
    assert cli_utils.matches("13.0", "13.0.1") and cli_utils.matches("13", "13.0.1")
    assert cli_utils.matches("cu130", "13.0.2") and cli_utils.matches("12.8.1", "12.8.1")
    assert not cli_utils.matches("13.0", "13.1.0") and not cli_utils.matches("1", "13.0.1")
    assert not cli_utils.matches("latest", "13.0.1")


def test_a_library_pin_is_matched_as_cudaup_matches_it(cli_utils: ModuleType) -> None:
    assert cli_utils.component_request("nvcc") == ("cuda_nvcc", None)
    assert cli_utils.component_request("cudnn==9.27") == ("cudnn", "9.27")
    installed = {"product": "cuDNN", "version": "9.27.0.42", "cuda_variant": "cuda13"}
    for pin in ("9", "9.27", "9.27.0.42"):
        assert cli_utils.library_satisfied(installed, pin) and version_matches("9.27.0.42", pin)
    for pin in ("9.2", "9.26", "9.27.1"):
        assert not cli_utils.library_satisfied(installed, pin)
        assert not version_matches("9.27.0.42", pin)
    assert not cli_utils.library_satisfied(None, "9.27")
    assert not cli_utils.library_satisfied({"product": "cuDNN"}, "9.27")


def test_install_arguments_for_versions_and_locks(cli_utils: ModuleType) -> None:
    params: dict[str, Any] = {
        "version": "13.0.1",
        "lock": None,
        "mirror": None,
        "channel": "redist",
        "components": ["nvcc", "cudart"],
        "platform": "linux-x86_64",
        "force": False,
    }
    assert cli_utils.install_args(params) == [
        "install", "13.0.1", "--channel", "redist", "--components", "nvcc,cudart",
        "--platform", "linux-x86_64",
    ]  # fmt: skip
    mirrored = {**params, "components": None, "channel": "auto", "mirror": "http://m/cuda"}
    assert cli_utils.install_args(mirrored) == [
        "install", "13.0.1", "--channel", "auto", "--platform", "linux-x86_64", "--mirror", "http://m/cuda",
    ]  # fmt: skip
    locked = {**params, "version": None, "components": None, "lock": "/etc/cuda.lock.toml"}
    locked |= {"mirror": "http://m/cuda", "platform": None, "force": True}
    assert cli_utils.install_args(locked) == [
        "install", "--lock", "/etc/cuda.lock.toml", "--mirror", "http://m/cuda", "--force",
    ]  # fmt: skip


def test_locks_are_read_per_platform(cli_utils: ModuleType, tmp_path: Path) -> None:
    def toolkit(platform: str, release: str = "13.0.1") -> str:
        return (
            f'[[toolkits]]\nplatform = "{platform}"\nrelease = "{release}"\n'
            'channel = "redist"\ncomponents = ["cuda_nvcc", "cuda_cudart"]\n'
            '[[toolkits.files]]\ncomponent = "cuda_nvcc"\nurl = "https://x/y.tar.xz"\nsize = 1\n'
        )

    lock = tmp_path / "cuda.lock.toml"
    lock.write_text(
        'lock-version = 1\nrequest = "13.0"\n' + toolkit("linux-x86_64") + toolkit("linux-sbsa")
    )
    info = cli_utils.read_lock(str(lock), "linux-sbsa")
    assert (info.release, info.channel) == ("13.0.1", "redist")
    assert info.components == ["cuda_cudart", "cuda_nvcc"]
    assert cli_utils.read_lock(str(lock), "linux-aarch64") is None  # not locked for Jetson
    document = tomllib.loads(lock.read_text())
    assert cli_utils.parse_lock(document, None, "x86_64").release == "13.0.1"
    assert cli_utils.parse_lock(document, None, "aarch64").release == "13.0.1"  # sbsa
    assert cli_utils.parse_lock(document, None, "riscv64") is None
    jetson = tomllib.loads(toolkit("linux-sbsa") + toolkit("linux-aarch64", "12.6.3"))
    assert cli_utils.parse_lock(jetson, None, "aarch64") is None  # sbsa or Jetson: cudaup decides
    assert cli_utils.parse_lock(jetson, "linux-aarch64").release == "12.6.3"
    assert cli_utils.parse_lock({"lock-version": 1}) is None
    assert cli_utils.read_lock(str(tmp_path / "missing.toml")) is None
    (tmp_path / "bad.toml").write_text("this is [not toml")
    assert cli_utils.read_lock(str(tmp_path / "bad.toml")) is None


def test_cudaup_message_is_the_error(cli_utils: ModuleType) -> None:
    stderr = "progress...\ncudaup: error: there is no CUDA 12.7.x; nearest: 12.6.3 and 12.8.0\n"
    assert cli_utils.error_message("", stderr, 3) == (
        "cudaup: error: there is no CUDA 12.7.x; nearest: 12.6.3 and 12.8.0"
    )
    stdout = json.dumps({"schema": 1, "error": {"message": "boom", "exit_code": 5}})
    assert cli_utils.error_message(stdout, "", 5) == "cudaup: error: boom"
    assert "status 9" in cli_utils.error_message("", "", 9)


def test_example_playbook_parses_and_is_the_guides(tmp_path: Path) -> None:
    program = require_tool(
        str(Path(sys.executable).parent / "ansible-playbook"), "(pip) ansible-core"
    )
    env = _ansible_env(tmp_path)
    playbooks = COLLECTION / "playbooks"
    guide = (REPO / "docs" / "ansible.md").read_text()
    for example in ("hosts.ini", "site.yml"):  # the guide shows the files as they are
        assert (playbooks / example).read_text() in guide, f"docs/ansible.md lacks {example}"
    done = subprocess.run(
        [
            program,
            "--syntax-check",
            "-i",
            str(playbooks / "hosts.ini"),
            str(playbooks / "site.yml"),
        ],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    listed = subprocess.run(
        [program, "--list-hosts", "-i", str(playbooks / "hosts.ini"), str(playbooks / "site.yml")],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert "gpu03.example.internal" in listed.stdout
