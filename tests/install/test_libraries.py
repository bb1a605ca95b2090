"""NVIDIA's libraries beside the toolkit (cuDNN, NCCL, cuSPARSELt, cuTENSOR, NVSHMEM), through the
CLI: the build for the toolkit's CUDA major, from the library's own redist manifests (the fake
NVIDIA site serves them in their real nested shape: tests/fakenvidia/products.py) or from PyPI,
into the same CUDA_HOME; and every way a product manifest can be wrong, refused with its code
and nothing published."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cudaup.core.libraries import LIBRARIES, parse_library, split_libraries, version_matches
from cudaup.errors import SourceFormatError, UsageError
from cudaup.fleet.lockfile import read_lock
from cudaup.nvidia.manifest import parse_manifest
from tests.fakenvidia.fixtures import MakeFakeNvidia
from tests.fakenvidia.products import with_products
from tests.fakenvidia.server import FakeNvidiaServer
from tests.fakenvidia.site import DATA_DIR, build_site
from tests.helpers import point_env_at, run_cli
from tests.nginx import Nginx
from tests.plan.builders import X86, wheel
from tests.plan.pyindex import IndexServer, index_server  # noqa: F401 - fixture
from tests.sandbox import Sandbox, sandbox  # noqa: F401 - fixture

Mutate = Callable[[str, str, dict[str, Any]], None]


@pytest.fixture
def products(
    make_fake_nvidia: MakeFakeNvidia, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[Mutate | None], None]]:
    """Start the fake NVIDIA site with the library products (``mutate`` makes one hostile)."""

    def start(mutate: Mutate | None = None) -> None:
        point_env_at(monkeypatch, make_fake_nvidia(with_products(build_site(), mutate)))

    yield start


def install(capsys: pytest.CaptureFixture[str], release: str, components: str, *extra: str) -> Any:
    return run_cli(
        capsys, "--json", "install", release, "--channel", "redist", "--components", components,
        "--platform", "linux-x86_64", *extra,
    )  # fmt: skip


# -- the pure parts ---------------------------------------------------------------------------
def test_library_names_and_pins() -> None:
    assert parse_library("nvcc") is None
    request = parse_library("cudnn==9.27")
    assert request is not None and request.library is LIBRARIES["cudnn"]
    assert request.version == "9.27" and request.text == "cudnn==9.27"
    assert split_libraries(("nvcc", "cudnn", "nccl==2.30")) == (
        ("nvcc",),
        (parse_library("cudnn"), parse_library("nccl==2.30")),
    )
    assert version_matches("9.27.0.42", "9.27") and not version_matches("9.28.1.4", "9.27")
    assert not version_matches("9.2.0", "9.27")


@pytest.mark.parametrize(
    "text", ["cudnn==", "cudnn==9.x", "cudnn>=9", "nvcc==13.0", "cudnn==" + "9" * 5000]
)
def test_a_malformed_pin_is_a_usage_error(text: str) -> None:
    with pytest.raises(UsageError):
        parse_library(text)


def test_twice_the_same_library_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="twice"):
        split_libraries(("cudnn", "cudnn==9.27"))


def test_the_real_cudnn_manifest_keeps_nested_and_direct_archives() -> None:
    """cuDNN 9.27.0's windows-arm64 has a nested cuda13 build and a direct archive beside it."""
    manifest = parse_manifest((DATA_DIR / "redistrib_cudnn_9.27.0.json").read_bytes())
    cudnn = manifest.components["cudnn"]
    arm = [(a.variant, a.filename) for a in cudnn.archives if a.platform == "windows-arm64"]
    assert arm == [
        (None, "cudnn-windows-arm64-9.27.0.42_cuda13.4-archive.zip"),
        ("cuda13", "cudnn-windows-arm64-9.27.0.42_cuda13-archive.zip"),
    ]
    x86 = {a.variant for a in cudnn.archives if a.platform == "linux-x86_64"}
    assert x86 == {"cuda12", "cuda13"}


def _cudnn(**change: Any) -> bytes:
    document = json.loads((DATA_DIR / "redistrib_cudnn_9.27.0.json").read_text())
    document["cudnn"].update(change)
    return json.dumps(document).encode()


@pytest.mark.parametrize(
    ("document", "says"),
    [
        (_cudnn(cuda_variant=["12"]), "variant 'cuda13' is not in its cuda_variant"),
        (_cudnn(cuda_variant="12"), "cuda_variant"),
        (_cudnn(cuda_variant=["1" * 5000]), "cuda_variant"),
        (
            _cudnn(**{"linux-x86_64": {"../x": {"relative_path": "a", "sha256": "0" * 64}}}),
            "variant '../x'",
        ),
    ],
)
def test_a_broken_variant_is_a_source_format_error(document: bytes, says: str) -> None:
    with pytest.raises(SourceFormatError, match=says.replace("(", r"\(")):
        parse_manifest(document, "https://mirror.example/redistrib_9.27.0.json")


# -- redist: the library's own manifests ------------------------------------------------------
def test_redist_installs_the_build_for_the_toolkits_major(
    products: Callable[[Mutate | None], None],
    sandbox: Sandbox,  # noqa: F811 - fixture
    capsys: pytest.CaptureFixture[str],
) -> None:
    products(None)
    done = install(capsys, "13.0.1", "nvcc,cudart,cudnn,cutensor", "--prefix", str(sandbox.prefix))
    assert done.code == 0, done.err
    result = done.json()
    assert {"cudnn", "cutensor", "cuda_nvcc", "cuda_cudart"} <= set(result["components"])
    prefix = sandbox.prefix
    assert (prefix / "include" / "cudnn.h").is_file()
    assert (prefix / "include" / "cutensor.h").is_file()
    assert (prefix / "lib" / "libcudnn.so.9").is_symlink()
    assert (prefix / "lib" / "libcudnn.so").resolve().name == "libcudnn.so.9.27.0.42"
    record = json.loads((prefix / "cudaup-record.json").read_text())
    assert record["libraries"]["cudnn"] == {
        "product": "cuDNN",
        "version": "9.27.0.42",
        "cuda_variant": "cuda13",
        "channel": "redist",
        "source": record["libraries"]["cudnn"]["source"],
    }
    assert record["libraries"]["cudnn"]["source"].endswith(
        "/compute/cudnn/redist/redistrib_9.27.0.json"
    )
    cudnn_archive = next(a for a in record["artifacts"] if a["component"] == "cudnn")
    assert cudnn_archive["filename"] == "cudnn-linux-x86_64-9.27.0.42_cuda13-archive.tar.xz"


def test_a_cuda_12_toolkit_gets_the_cuda12_build_and_a_pin_is_honoured(
    products: Callable[[Mutate | None], None],
    sandbox: Sandbox,  # noqa: F811 - fixture
    capsys: pytest.CaptureFixture[str],
) -> None:
    products(None)
    done = install(capsys, "12.8.1", "nvcc,cudnn==9.26", "--prefix", str(sandbox.prefix))
    assert done.code == 0, done.err
    record = json.loads((sandbox.prefix / "cudaup-record.json").read_text())
    assert record["libraries"]["cudnn"]["version"] == "9.26.0.42"
    assert record["libraries"]["cudnn"]["cuda_variant"] == "cuda12"
    names = [a["filename"] for a in record["artifacts"] if a["component"] == "cudnn"]
    assert names == ["cudnn-linux-x86_64-9.26.0.42_cuda12-archive.tar.xz"]


@pytest.mark.parametrize(
    ("release", "components", "says"),
    [
        # cuSPARSELt 0.10.0 is built for CUDA 13 only.
        ("12.8.1", "nvcc,cusparselt", "no cuSPARSELt release on"),
        ("13.0.1", "nvcc,cudnn==9.1", "cuDNN 9.1.x for CUDA 13"),
        # NCCL has an archive tree but no manifest: nothing to verify it against.
        ("13.0.1", "nvcc,nccl", "NVIDIA publishes no redist manifest for NCCL"),
    ],
)
def test_a_library_with_no_build_to_verify_is_exit_4(
    products: Callable[[Mutate | None], None],
    sandbox: Sandbox,  # noqa: F811 - fixture
    capsys: pytest.CaptureFixture[str],
    release: str,
    components: str,
    says: str,
) -> None:
    products(None)
    before = sandbox.snapshot()
    done = install(capsys, release, components, "--prefix", str(sandbox.prefix))
    assert done.code == 4, done.err
    assert says in done.err
    assert done.json()["error"]["exit_code"] == 4
    assert not sandbox.prefix.exists()
    assert (
        sandbox.changed_outside(before, sandbox.snapshot(), [sandbox.cache, sandbox.home]) == set()
    )


def _hostile_path(product: str, label: str, document: dict[str, Any]) -> None:
    if product == "cudnn" and label == "9.27.0":
        document["cudnn"]["linux-x86_64"]["cuda13"]["relative_path"] = "../../../srv/data/x.tar.xz"


def _other_major(product: str, label: str, document: dict[str, Any]) -> None:
    if product == "cudnn" and label == "9.27.0":
        document["cudnn"]["cuda_variant"] = ["12"]


def _wrong_size(product: str, label: str, document: dict[str, Any]) -> None:
    if product == "cudnn" and label == "9.27.0":
        entry = document["cudnn"]["linux-x86_64"]["cuda13"]
        entry["size"] = str(int(entry["size"]) + 1)


def _wrong_digest(product: str, label: str, document: dict[str, Any]) -> None:
    if product == "cudnn" and label == "9.27.0":
        document["cudnn"]["linux-x86_64"]["cuda13"]["sha256"] = "ab" * 32


@pytest.mark.parametrize(
    ("mutate", "code", "says"),
    [
        (_hostile_path, 8, "relative_path '../../../srv/data/x.tar.xz'"),
        (_other_major, 8, "variant 'cuda13' is not in its cuda_variant"),
        (_wrong_size, 7, "refusing a file whose sources disagree"),
        (_wrong_digest, 7, "sha256"),
    ],
    ids=["hostile-relative-path", "variant-of-another-major", "size-disagrees", "digest-disagrees"],
)
def test_a_bad_product_manifest_is_refused_and_nothing_is_published(
    products: Callable[[Mutate | None], None],
    sandbox: Sandbox,  # noqa: F811 - fixture
    capsys: pytest.CaptureFixture[str],
    mutate: Mutate,
    code: int,
    says: str,
) -> None:
    products(mutate)
    before = sandbox.snapshot()
    done = install(capsys, "13.0.1", "nvcc,cudnn", "--prefix", str(sandbox.prefix))
    assert done.code == code, done.err
    assert says in done.err
    assert "redistrib_9.27.0.json" in done.err or code == 7
    assert not sandbox.prefix.exists()
    # Only the cache and the store's locks may change: nothing was published.
    assert (
        sandbox.changed_outside(before, sandbox.snapshot(), [sandbox.cache, sandbox.home]) == set()
    )
    assert not (sandbox.home / "toolkits").exists()


# -- live PyPI: compiled and run ----------------------------------------------------------------
PROGRAM = r"""
#include <cstdio>
#include <cudnn.h>
#include <nccl.h>
int main() {
    int nccl = 0;
    if (ncclGetVersion(&nccl) != ncclSuccess) return 2;
    std::printf("%zu %d\n", cudnnGetVersion(), nccl);
    return 0;
}
"""


@pytest.mark.pypi
def test_live_cudnn_and_nccl_from_pypi_compile_and_run_with_plain_flags(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prefix = tmp_path / "cuda"
    done = run_cli(
        capsys, "--json", "install", "13.0.1", "--channel", "pypi",
        "--components", "nvcc,cudart,cudnn,nccl", "--platform", "linux-x86_64",
        "--prefix", str(prefix),
    )  # fmt: skip
    assert done.code == 0, done.err
    record = json.loads((prefix / "cudaup-record.json").read_text())
    cudnn, nccl = record["libraries"]["cudnn"], record["libraries"]["nccl"]
    assert cudnn["cuda_variant"] == nccl["cuda_variant"] == "cuda13"
    assert cudnn["source"].endswith("/nvidia-cudnn-cu13/")
    assert "libcublas" in record["components"]  # cuDNN loads cuBLAS: the toolkit's own comes
    source = tmp_path / "versions.cu"
    source.write_text(PROGRAM)
    binary = tmp_path / "versions"
    built = subprocess.run(
        [str(prefix / "bin" / "nvcc"), str(source), "-o", str(binary), "-lcudnn", "-lnccl"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    ran = subprocess.run(
        [str(binary)], capture_output=True, text=True, check=False,
        env={"LD_LIBRARY_PATH": str(prefix / "lib"), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    cudnn_version, nccl_version = (int(n) for n in ran.stdout.split())
    # cudnnGetVersion() is major*10000 + minor*100 + patch; ncclGetVersion() likewise.
    major, minor, patch = (int(p) for p in cudnn["version"].split(".")[:3])
    assert cudnn_version == major * 10000 + minor * 100 + patch
    major, minor, patch = (int(p) for p in nccl["version"].split(".")[:3])
    assert nccl_version == major * 10000 + minor * 100 + patch


# -- fleets: a lock carries the libraries, a mirror serves them, install --lock reproduces them --
@pytest.mark.slow  # a real nginx
def test_a_lock_carries_libraries_and_a_mirror_serves_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CUDAUP_SYSTEM_ROOT", str(tmp_path / "root"))
    (tmp_path / "root").mkdir()
    with FakeNvidiaServer(with_products(build_site())) as origin:
        point_env_at(monkeypatch, origin)
        locked = run_cli(
            capsys, "lock", "13.0.1", "--channel", "redist", "--components", "nvcc,cudnn==9.27",
            "--platform", "linux-x86_64",
        )  # fmt: skip
        assert locked.code == 0, locked.err
        lock = read_lock(tmp_path / "cuda.lock.toml").for_platform("linux-x86_64")
        assert "cudnn" in lock.components
        cudnn = [f for f in lock.files if f.component == "cudnn"]
        assert [f.url.rsplit("/", 1)[-1] for f in cudnn] == [
            "cudnn-linux-x86_64-9.27.0.42_cuda13-archive.tar.xz"
        ]
        mirrored = run_cli(capsys, "mirror", "cuda.lock.toml", "mirror", "--json")
        assert mirrored.code == 0, mirrored.err
    mirror = tmp_path / "mirror"
    assert (mirror / "compute/cudnn/redist/redistrib_9.27.0.json").is_file()
    for name in ("CUDAUP_NVIDIA_DOWNLOAD_URL", "CUDAUP_NVIDIA_ARCHIVE_URL", "CUDAUP_PYPI_URL"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")  # the origins are gone
    with Nginx(mirror) as nginx:
        installed = run_cli(
            capsys, "--json", "install", "--lock", "cuda.lock.toml", "--mirror", nginx.url("plain"),
            "--platform", "linux-x86_64",
        )  # fmt: skip
        assert installed.code == 0, installed.err
    toolkit = Path(installed.json()["path"])
    assert (toolkit / "include" / "cudnn.h").is_file()
    record = json.loads((toolkit / "cudaup-record.json").read_text())
    assert record["libraries"]["cudnn"]["version"] == "9.27.0.42"


def test_versions_product_lists_a_librarys_releases_with_their_cuda_majors(
    products: Callable[[Mutate | None], None], capsys: pytest.CaptureFixture[str]
) -> None:
    products(None)
    listed = run_cli(capsys, "versions", "--product", "cudnn", "--json")
    assert listed.code == 0, listed.err
    releases = {r["label"]: r for r in listed.json()["releases"]}
    assert list(releases) == ["9.27.0", "9.26.0"]
    assert releases["9.27.0"]["version"] == "9.27.0.42"
    majors = releases["9.27.0"]["cuda_majors"]
    assert set(majors) == {"12", "13"}
    assert "windows-arm64" in majors["13"] and "windows-arm64" not in majors["12"]
    sparse = run_cli(capsys, "versions", "--product", "cusparselt", "--json")
    assert set(sparse.json()["releases"][0]["cuda_majors"]) == {"13"}
    table = run_cli(capsys, "versions", "--product", "cutensor")
    assert table.code == 0 and "2.8.1" in table.out and "12 (linux-sbsa" in table.out
    nccl = run_cli(capsys, "versions", "--product", "nccl")
    assert nccl.code == 4 and "nvidia-nccl-cuNN" in nccl.err
    unknown = run_cli(capsys, "versions", "--product", "cudnnn")
    assert unknown.code == 2


# -- compat: the CUDA majors a library release is built for -----------------------------------
@pytest.fixture
def index(
    index_server: IndexServer,  # noqa: F811 - fixture
    monkeypatch: pytest.MonkeyPatch,
) -> IndexServer:
    """A loopback PyPI (empty until a test publishes a wheel on its ``pypi`` root)."""
    index_server.root("pypi")
    monkeypatch.setenv("CUDAUP_PYPI_URL", index_server.url("pypi"))
    return index_server


def _publish(index: IndexServer, project: str, version: str, tag: str = X86) -> None:
    name, body = wheel(project, version, tag=tag)
    index.add("pypi", name, body)


def test_compat_names_the_cuda_majors_of_a_library_release_from_each_source(
    products: Callable[[Mutate | None], None],
    index: IndexServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    products(None)
    # PyPI carries 9.27's CUDA 12 build only (and a newer pre-release and a yanked 9.27.1,
    # neither of which is the release asked for).
    _publish(index, "nvidia-cudnn-cu12", "9.27.0.42")
    _publish(index, "nvidia-cudnn-cu13", "9.27.2.1.dev5")
    name, body = wheel("nvidia-cudnn-cu13", "9.27.1.3")
    index.add("pypi", name, body, yanked="broken build")
    done = run_cli(capsys, "--json", "compat", "cudnn==9.27")
    assert done.code == 0, done.err
    answer = done.json()
    assert (answer["library"], answer["release"], answer["cuda_majors"]) == (
        "cudnn", "9.27.0", ["12", "13"],
    )  # fmt: skip
    redist, pypi = answer["sources"]
    assert redist["channel"] == "redist" and redist["version"] == "9.27.0.42"
    assert redist["url"].endswith("/compute/cudnn/redist/redistrib_9.27.0.json")
    assert set(redist["cuda_majors"]) == {"12", "13"}
    # cuDNN 9.27.0's windows-arm64 has a nested cuda13 build only.
    assert "windows-arm64" in redist["cuda_majors"]["13"]
    assert "windows-arm64" not in redist["cuda_majors"]["12"]
    assert pypi == {
        "channel": "pypi",
        "url": index.url("pypi") + "/nvidia-cudnn-cu12/",
        "version": "9.27.0.42",
        "cuda_majors": {"12": ["linux-x86_64"]},
    }
    # A pin picks the release under it; the text names each major and source.
    older = run_cli(capsys, "compat", "cudnn==9.26")
    assert older.code == 0, older.err
    assert "cuDNN 9.26.0 is built for CUDA 12, 13" in older.out
    assert "redistrib_9.26.0.json" in older.out
    # cuSPARSELt 0.10.0 is built for CUDA 13 only: its manifest's cuda_variant.
    sparse = run_cli(capsys, "--json", "compat", "cusparselt")
    assert sparse.code == 0, sparse.err
    assert sparse.json()["cuda_majors"] == ["13"]
    # A release only PyPI has is PyPI's answer, and the note says NVIDIA's listing lacks it.
    _publish(index, "cutensor-cu13", "2.9.0")
    newer = run_cli(capsys, "--json", "compat", "cutensor")
    assert newer.code == 0, newer.err
    assert (newer.json()["release"], newer.json()["cuda_majors"]) == ("2.9.0", ["13"])
    assert [s["channel"] for s in newer.json()["sources"]] == ["pypi"]
    assert any("lists no cuTENSOR 2.9.0" in note for note in newer.json()["notes"])


def test_compat_for_nccl_is_pypis_answer(
    products: Callable[[Mutate | None], None],
    index: IndexServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    products(None)
    _publish(index, "nvidia-nccl-cu13", "2.30.4")
    _publish(index, "nvidia-nccl-cu13", "2.30.4", tag="py3-none-manylinux_2_18_aarch64")
    _publish(index, "nvidia-nccl-cu12", "2.29.1")
    done = run_cli(capsys, "--json", "compat", "nccl")
    assert done.code == 0, done.err
    answer = done.json()
    assert (answer["release"], answer["cuda_majors"]) == ("2.30.4", ["13"])
    assert answer["sources"][0]["cuda_majors"]["13"] == [
        "linux-x86_64", "linux-sbsa", "linux-aarch64",
    ]  # fmt: skip
    assert any("no redist manifest for NCCL" in note for note in answer["notes"])
    pinned = run_cli(capsys, "--json", "compat", "nccl==2.29")
    assert pinned.json()["cuda_majors"] == ["12"]


def test_compat_for_a_library_release_no_source_knows(
    products: Callable[[Mutate | None], None],
    index: IndexServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    products(None)
    # Every source answered and none has it: no such release (3), the sources named.
    missing = run_cli(capsys, "--json", "compat", "cudnn==9.99")
    assert missing.code == 3, missing.err
    assert "there is no cuDNN 9.99.x on" in missing.err
    assert "/compute/cudnn/redist/" in missing.err and "nvidia-cudnn-cu13" in missing.err
    # PyPI cannot be reached and NCCL has no manifest: nobody says (21), never a guess.
    monkeypatch.setenv("CUDAUP_PYPI_URL", "http://127.0.0.1:9/simple")
    unknown = run_cli(capsys, "--json", "compat", "nccl==2.30")
    assert unknown.code == 21, unknown.err
    assert "no source says which CUDA majors NCCL 2.30.x is built for" in unknown.err
    assert "127.0.0.1:9" in unknown.err
    assert unknown.json()["error"]["exit_code"] == 21
    # PyPI down, NVIDIA up: NVIDIA's manifest answers and the note says what was not read.
    partial = run_cli(capsys, "--json", "compat", "cudnn==9.27")
    assert partial.code == 0, partial.err
    assert partial.json()["cuda_majors"] == ["12", "13"]
    assert any("127.0.0.1:9" in note for note in partial.json()["notes"])
    offline = run_cli(capsys, "--offline", "compat", "cudnn==9.27")
    assert offline.code == 21 and "--offline" in offline.err
    mixed = run_cli(capsys, "compat", "cudnn==9.27", "--driver", "580.65.06")
    assert mixed.code == 2 and "a library's" in mixed.err


@pytest.mark.pypi
def test_live_compat_for_cudnn_agrees_with_nvidias_manifest(
    products: Callable[[Mutate | None], None], capsys: pytest.CaptureFixture[str]
) -> None:
    """The fake site serves NVIDIA's real cuDNN 9.27.0 manifest; live PyPI has the wheels."""
    products(None)
    done = run_cli(capsys, "--json", "compat", "cudnn==9.27")
    assert done.code == 0, done.err
    answer = done.json()
    assert answer["cuda_majors"] == ["12", "13"]
    by_channel: dict[str, set[str]] = {}
    for source in answer["sources"]:
        by_channel.setdefault(source["channel"], set()).update(source["cuda_majors"])
    assert by_channel == {"redist": {"12", "13"}, "pypi": {"12", "13"}}
