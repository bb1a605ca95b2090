"""What each quick command loads: start-up is measured in modules imported.

Times are benchmarks (``benchmarks/resolve.py``), never assertions; these tests pin
the import sets that the measured times depend on, in a fresh interpreter each.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from cudaup import __version__
from cudaup.cli.commands import COMMANDS
from tests.fakenvidia.server import FakeNvidiaServer
from tests.faultserver import FaultServer, payload
from tests.helpers import point_env_at

#: Runs the CLI in-process and prints its exit code and the modules it loaded.
PROBE = """
import json, sys
from cudaup.cli.main import main
code = main(sys.argv[1:])
from cudaup.net import tls
print(json.dumps({"code": code, "modules": sorted(sys.modules), "tls": len(tls._builds)}))
"""

#: Heavy modules a command that does not resolve anything must not load (a version
#: number's parser is light; markers, tags, specifiers and metadata are not).
RESOLVING = (
    "packaging.markers",
    "packaging.tags",
    "packaging.specifiers",
    "packaging.metadata",
    "cudaup.resolve.resolver",
    "cudaup.resolve.choose",
    "cudaup.core.model",
)


def loaded(*argv: str) -> tuple[int, set[str], int]:
    """The exit code, the modules and the TLS contexts built by ``cudaup ARGV``."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, check=False
    )
    last = done.stdout.strip().splitlines()[-1]
    report = json.loads(last)
    return report["code"], set(report["modules"]), report["tls"]


def test_version_and_help_load_no_error_translation_nor_typing() -> None:
    for argv in (["--version"], ["--help"]):
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "cudaup", *argv],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode in {0, 2}, done.stderr
        imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()}
        for heavy in ("cudaup.util.faults", "dataclasses", "typing", "json", "difflib", "urllib3"):
            assert heavy not in imported, (argv, heavy)


#: All that ``cudaup --version`` may import beyond the interpreter's own start.
VERSION_MODULES = {"__future__", "cudaup", "cudaup.cli", "cudaup.cli.main", "cudaup.cli.version"}


def test_version_imports_only_the_entry_point() -> None:
    """``--version`` is answered before the parser: no argparse (with re, gettext, shutil,
    textwrap), no command table, no error classes, no rich nor urllib3."""
    probe = (
        "import json, sys; before = set(sys.modules); from cudaup.cli import main; "
        "code = main(['--version']); sys.stdout.flush(); "
        "print(json.dumps([code, sorted(set(sys.modules) - before)]))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    printed, report = done.stdout.splitlines()
    code, modules = json.loads(report)
    assert code == 0 and printed == "cudaup " + __version__
    assert set(modules) <= VERSION_MODULES, sorted(set(modules) - VERSION_MODULES)
    for heavy in ("argparse", "re", "threading", "rich", "urllib3", "cudaup.errors"):
        assert heavy not in modules


def test_version_through_the_parser_says_the_same() -> None:
    """Any other command line with ``--version`` goes through argparse's action: same line."""
    for argv in (["--version"], ["-q", "--version"], ["--color", "never", "--version"]):
        done = subprocess.run(
            [sys.executable, "-m", "cudaup", *argv], capture_output=True, text=True, check=False
        )
        assert (done.returncode, done.stdout, done.stderr) == (0, f"cudaup {__version__}\n", "")


def test_a_command_imports_only_its_own_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Building the parser for one command imports that command's module and no other's."""
    monkeypatch.setenv("CUDAUP_HOME", str(tmp_path))
    monkeypatch.delenv("CUDAUP_TOOLKIT", raising=False)
    code, modules, _ = loaded("which", "--json")
    assert code == 0 or code > 1  # no toolkit active here is an answer; exit 1 would be a bug
    assert "cudaup.cli.switch" in modules and "argparse" in modules
    others = {info.module for name, info in COMMANDS.items() if info.module != "cudaup.cli.switch"}
    assert not others & modules, sorted(others & modules)


#: What a command that only reads the machine and the store never loads: the network
#: stack and the download engine (~0.1 s of imports, all of it before the answer).  Not
#: ``ssl``: :data:`PROBE` loads it itself, after the command, to count TLS contexts.
NETWORK = ("urllib3", "http.client", "cudaup.download", "cudaup.install.installer")


@pytest.mark.parametrize(
    "argv", [["which", "nvcc"], ["env"], ["show"], ["list"], ["default"], ["shims"]]
)
def test_a_command_that_reads_the_store_loads_no_network_stack(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDAUP_HOME", str(tmp_path))
    monkeypatch.delenv("CUDAUP_TOOLKIT", raising=False)
    code, modules, _ = loaded(*argv)
    assert code == 0 or code > 1  # nothing installed here is an answer; exit 1 would be a bug
    assert "cudaup.install.store" in modules  # it did read the store
    assert not [m for m in modules for heavy in NETWORK if m.startswith(heavy)], argv


@pytest.mark.parametrize("action", ["dir", "info"])
def test_the_cache_command_loads_no_network_stack(
    action: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDAUP_CACHE_DIR", str(tmp_path))
    code, modules, _ = loaded("cache", action)
    assert code == 0 and "cudaup.util.cachedir" in modules
    assert not [m for m in modules for heavy in NETWORK if m.startswith(heavy)], action


#: Runs the CLI in-process and prints, in order, when the CA certificates began to load
#: (the ``cudaup-tls`` thread) and when a command module was imported.
ORDER = """
import json, sys, threading
events = []
class Witness:
    def find_spec(self, name, path=None, target=None):
        events.append(name)  # then the next finder finds it
sys.meta_path.insert(0, Witness())
start = threading.Thread.start
def started(thread):
    events.append(thread.name)
    start(thread)
threading.Thread.start = started
from cudaup.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(events))
"""


def _order(*argv: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", ORDER, *argv], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    events: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return [e for e in events if e == "cudaup-tls" or e in {i.module for i in COMMANDS.values()}]


def test_an_online_command_loads_the_certificates_while_its_module_imports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``install`` always goes online: the CA certificates (~25 ms, without the GIL) start
    loading before its module imports (~0.15 s), not before its first request; a command
    that stays here loads none."""
    assert [name for name, info in COMMANDS.items() if info.online] == ["install"]
    monkeypatch.setenv("CUDAUP_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CUDAUP_CACHE_DIR", str(tmp_path / "cache"))
    # an index that refuses the connection: the order is all this looks at
    refusing = ("--pypi-url", "http://127.0.0.1:9/simple")
    assert _order(*refusing, "install", "13.0.1", "--channel", "pypi") == [
        "cudaup-tls",
        "cudaup.cli.toolkits",
    ]
    assert _order("install", "--help") == ["cudaup.cli.toolkits"]  # help goes nowhere
    assert _order("which", "--json") == ["cudaup.cli.switch"]


def test_a_probe_that_finds_its_file_loads_no_resolver(
    fake_nvidia: FakeNvidiaServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    point_env_at(monkeypatch, fake_nvidia)
    good = (
        fake_nvidia.download_url
        + "/compute/cuda/13.0.1/local_installers/cuda_13.0.1_580.82.07_linux.run"
    )
    code, modules, _ = loaded("probe", good)
    assert code == 0
    assert not [m for m in modules for heavy in RESOLVING if m.startswith(heavy)]
    # a missing file is explained from the release's sources: the resolver loads then
    code, modules, _ = loaded("probe", good.replace("580.82.07", "570.124.06"))
    assert code == 6 and "cudaup.resolve.resolver" in modules


def test_a_download_by_url_loads_no_resolver_and_no_trust_store(
    fault_server: FaultServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))  # whatever this machine's HOME has
    body = payload(3 * 1024 * 1024)
    fault_server.add("/f.run", body)
    sha = hashlib.sha256(body).hexdigest()
    out = tmp_path / "out"
    code, modules, contexts = loaded(
        "download", fault_server.url + "/f.run", "--sha256", sha, "-o", str(out), "-q"
    )
    assert code == 0 and (out / "f.run").read_bytes() == body
    assert not [m for m in modules for heavy in RESOLVING if m.startswith(heavy)]
    assert contexts == 0  # plain HTTP: the CA certificates were never loaded
    assert not [m for m in modules for unused in NOT_FOR_A_DOWNLOAD if m.startswith(unused)]


#: What a download by URL never needs, though the modules it loads could: a thread pool
#: for one file, netrc (and shlex) with no ``.netrc``, the platform table and its version
#: parser, the cache of answers, the translation of a failure into words.
NOT_FOR_A_DOWNLOAD = (
    "concurrent.futures",
    "netrc",
    "shlex",
    "packaging",
    "platform",
    "cudaup.core.platforms",
    "cudaup.core.versions",
    "cudaup.machine",
    "cudaup.net.response_cache",
    "cudaup.cli.failure",
    "difflib",
)
