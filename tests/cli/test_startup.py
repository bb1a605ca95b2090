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
    fault_server: FaultServer, tmp_path: Path
) -> None:
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
