"""Switching toolkits: selection, shims, environments, pins and the system link.

Everything runs against a temporary ``CUDAUP_HOME`` and ``CUDAUP_SYSTEM_ROOT``;
the system-link tests also check that this machine's own ``/usr/local/cuda``
is left exactly as it was.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cudaup.core.versions import parse_request
from cudaup.errors import CommandNotRunError, CudaupError, ReleaseNotFoundError, UsageError
from cudaup.install import store as store_module
from cudaup.install.store import Store
from cudaup.machine.sysroot import SystemRoot
from cudaup.machine.toolkits import is_shim
from cudaup.switch import environment, pins, selection, shim, shim_files, system_link
from tests.helpers import lingering_wrapper, require_tool, started_child, wait_until_ended

UPDATE_ALTERNATIVES = "/usr/bin/update-alternatives"


# -- helpers ---------------------------------------------------------------------------------
def readlink(path: Path) -> str:
    return str(path.readlink())


def tool_script(label: str, tool: str) -> str:
    return (
        "#!/bin/sh\n"
        f'echo "{tool} from {label}"\n'
        'echo "CUDA_HOME=$CUDA_HOME"\n'
        'echo "PATH=$PATH"\n'
        'echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"\n'
        'echo "ARGS=$*"\n'
    )


def make_tree(directory: Path, label: str, tools: tuple[str, ...] = ("nvcc",)) -> Path:
    (directory / "bin").mkdir(parents=True, exist_ok=True)
    (directory / "lib64").mkdir(exist_ok=True)
    for tool in tools:
        script = directory / "bin" / tool
        script.write_text(tool_script(label, tool))
        script.chmod(0o755)
    return directory


def make_toolkit(store: Store, version: str, tools: tuple[str, ...] = ("nvcc",)) -> Path:
    directory = make_tree(store.toolkits_dir / version, version, tools)
    store.write_record(directory, {"version": version, "components": ["cuda_nvcc"]})
    return directory


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Store:
    home = tmp_path / "home"
    root = tmp_path / "root"
    root.mkdir()
    monkeypatch.setenv("CUDAUP_HOME", str(home))
    monkeypatch.setenv("CUDAUP_SYSTEM_ROOT", str(root))
    monkeypatch.delenv("CUDAUP_TOOLKIT", raising=False)
    return Store.from_env()


@pytest.fixture
def root(store: Store) -> SystemRoot:
    return SystemRoot.from_env()


@pytest.fixture
def three(store: Store) -> Store:
    for version in ("12.8.0", "12.8.1", "13.0.1"):
        make_toolkit(store, version, ("nvcc", "ptxas") if version != "12.8.0" else ("nvcc",))
    return store


# -- the shim's own request parser agrees with cudaup.core.versions ----------------------------------------
REQUESTS = [
    "13.0.1",
    "13.0",
    "13",
    "cu130",
    "CU128",
    "cu13",
    "cu1210",
    "13.0 Update 1",
    "13.0u1",
    "13.0.0 update 2",
    "12.8 GA",
    "12.8ga",
    "latest",
    "Newest",
    "cuda 12.8",
    "CUDA-Toolkit 13.0",
    "cuda_toolkit-12.4.1",
    "v12.8",
    "13.0.3.0",
    "  12.8  ",
]
NOT_REQUESTS = ["", "13.0.3.1", "cu1", "12.x", "twelve", "13.0 Update", "13..0", "u1", "cu12345"]


@pytest.mark.parametrize("text", REQUESTS)
def test_shim_parses_requests_like_cudaup_versions(text: str) -> None:
    expected = parse_request(text)
    assert shim.parse_request(text) == (expected.kind, expected.parts)


@pytest.mark.parametrize("text", NOT_REQUESTS)
def test_shim_rejects_what_cudaup_versions_rejects(text: str) -> None:
    with pytest.raises(UsageError):
        parse_request(text)
    assert shim.parse_request(text) is None


@pytest.mark.parametrize(
    ("request_text", "expected"),
    [
        ("12.8", "12.8.1"),
        ("12.8.0", "12.8.0"),
        ("12", "12.8.1"),
        ("cu128", "12.8.1"),
        ("13", "13.0.1"),
        ("latest", "13.0.1"),
        ("13.0 Update 1", "13.0.1"),
        ("12.4", None),
        ("11", None),
    ],
)
def test_a_version_request_names_the_newest_installed_match(
    three: Store, request_text: str, expected: str | None
) -> None:
    found = three.find(request_text)
    assert (found.version if found else None) == expected
    mine = shim.find_installed(str(three.home), request_text)
    assert (mine[0] if mine else None) == expected  # the shim agrees with Store.find


@pytest.mark.parametrize(
    ("request_text", "tool", "expected"),
    [
        ("12.8", "nvcc", "12.8.1"),  # 12.8.2 is newer but has no nvcc
        ("12.8", "ptxas", "12.8.1"),
        ("12.8", "cuobjdump", "12.8.2"),  # only 12.8.2 has it
        ("12.8", "ncu", "12.8.2"),  # nobody has it: the newest match
        ("12.8.2", "nvcc", "12.8.2"),  # a release is that release
        ("12", "nvcc", "12.8.1"),
        ("latest", "nvcc", "13.0.1"),
    ],
)
def test_a_floating_request_prefers_a_toolkit_that_has_the_tool(
    three: Store, request_text: str, tool: str, expected: str
) -> None:
    make_toolkit(three, "12.8.2", ("cuobjdump",))
    found = three.find(request_text, tool)
    assert found is not None and found.version == expected
    assert shim.find_installed(str(three.home), request_text, tool) == (
        expected,
        str(three.toolkits_dir / expected),
    )  # the shim agrees with Store.find
    assert shim.COMPILER == "nvcc" == store_module.COMPILER


def test_external_toolkits_count_as_installed(three: Store, tmp_path: Path) -> None:
    elsewhere = make_tree(tmp_path / "opt" / "cuda-12.9", "12.9.0")
    three.add_external("12.9.0", elsewhere)
    assert shim.find_installed(str(three.home), "12") == ("12.9.0", str(elsewhere))
    assert three.find("12")
    assert three.find("12").path == elsewhere  # type: ignore[union-attr]


# -- selection order ------------------------------------------------------------------------------------
def test_selection_order(three: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "project"
    nested = project / "src" / "deep"
    nested.mkdir(parents=True)
    env: dict[str, str] = {}

    nothing = selection.select(three, env=env, cwd=nested)
    assert (nothing.source, nothing.path) == ("none", None)
    assert nothing.reason.startswith("none: no CUDA toolkit is chosen here")
    with pytest.raises(CudaupError, match="cudaup default VERSION"):
        nothing.require()

    three.set_default("12")
    active = selection.select(three, env=env, cwd=nested)
    assert (active.source, active.version, active.reason) == ("default", "12.8.1", "the default")

    (project / ".cuda-version").write_text("# this project\n\n12.8.0\n")
    active = selection.select(three, env=env, cwd=nested)
    assert (active.source, active.version) == ("file", "12.8.0")
    assert active.reason == f"from {project / '.cuda-version'}"

    env["CUDAUP_TOOLKIT"] = "cu130"
    active = selection.select(three, env=env, cwd=nested)
    assert (active.source, active.version, active.reason) == (
        "env",
        "13.0.1",
        "from CUDAUP_TOOLKIT",
    )

    active = selection.select(three, env=env, cwd=nested, request="12.8")
    assert (active.source, active.version) == ("run", "12.8.1")
    assert active.path == three.toolkits_dir / "12.8.1"


def test_the_nearest_pin_wins_and_relative_paths_are_relative_to_it(
    three: Store, tmp_path: Path
) -> None:
    outer = tmp_path / "outer"
    inner = outer / "inner"
    (inner / "a" / "b").mkdir(parents=True)
    (outer / ".cuda-version").write_text("13.0\n")
    (inner / ".cuda-version").write_text("12.8\n")
    assert selection.select(three, env={}, cwd=inner / "a" / "b").version == "12.8.1"
    assert selection.select(three, env={}, cwd=outer).version == "13.0.1"
    local = make_tree(inner / "vendor" / "cuda", "vendored")
    (inner / ".cuda-version").write_text("vendor/cuda\n")
    active = selection.select(three, env={}, cwd=inner / "a")
    assert (active.path, active.version) == (local, None)
    assert active.describe() == f"the toolkit at {local}"


def test_a_request_that_matches_nothing_is_an_error_not_a_fall_through(
    three: Store, tmp_path: Path
) -> None:
    three.set_default("13.0")
    (tmp_path / ".cuda-version").write_text("12.4\n")
    active = selection.select(three, env={}, cwd=tmp_path)
    assert (active.source, active.path, active.failure) == ("file", None, "not-installed")
    with pytest.raises(ReleaseNotFoundError, match=r"installed: 13\.0\.1, 12\.8\.1, 12\.8\.0"):
        active.require()
    (tmp_path / ".cuda-version").write_text("twelve\n")
    with pytest.raises(UsageError, match="neither a CUDA version nor a path"):
        selection.select(three, env={}, cwd=tmp_path).require()
    (tmp_path / ".cuda-version").write_text("\n# nothing\n")
    with pytest.raises(UsageError, match="names no toolkit"):
        selection.select(three, env={}, cwd=tmp_path).require()
    bad = selection.select(three, env={"CUDAUP_TOOLKIT": "/no/such/toolkit"}, cwd=tmp_path)
    assert bad.failure == "not-a-directory"


def test_a_path_can_be_the_default(three: Store, tmp_path: Path, root: SystemRoot) -> None:
    system = make_tree(root.path("/usr/local/cuda-12.6"), "12.6.3")
    choice = selection.choose_default(three, "/usr/local/cuda-12.6", root=root)
    assert (choice.value, choice.path, choice.version) == (str(system), system, None)
    three.set_default(choice.value)
    active = selection.select(three, env={}, cwd=tmp_path)
    assert (active.source, active.path) == ("default", system)
    # A store toolkit named by its path is still recognised as that version.
    by_path = selection.choose_default(three, str(three.toolkits_dir / "13.0.1"), root=root)
    assert by_path.version == "13.0.1"
    with pytest.raises(UsageError, match="not a directory"):
        selection.choose_default(three, "/usr/local/cuda-9.9", root=root)


def test_a_directory_without_a_toolkits_marks_is_no_default(three: Store, root: SystemRoot) -> None:
    """``cudaup default /opt/tools`` (a typo, or a directory of other tools): recorded, every
    shim would fail with it; a ``bin/`` is not enough, it needs what a toolkit has."""
    tools = root.path("/opt/tools")
    (tools / "bin").mkdir(parents=True)
    (tools / "bin" / "cmake").touch()
    with pytest.raises(UsageError) as refused:
        selection.choose_default(three, str(tools), root=root)
    assert str(refused.value) == (
        f"{tools} is not a CUDA toolkit: it has no CUDA tool in bin/ (nvcc, cuobjdump, …), "
        "no nvvm/, include/cuda_runtime_api.h or version.json"
    )
    with pytest.raises(UsageError, match=r"/opt has no bin/ directory: it is not a CUDA toolkit"):
        selection.choose_default(three, str(root.path("/opt")), root=root)
    with pytest.raises(UsageError, match=r"^/opt/tools is not a CUDA toolkit: it has no CUDA"):
        system_link.system_target(three, "/opt/tools", root=root)
    (tools / "bin" / "cuobjdump").touch()  # a toolkit of cuobjdump alone
    assert selection.choose_default(three, str(tools), root=root).path == tools


def test_a_version_only_on_the_system_becomes_a_path_default(
    three: Store, root: SystemRoot, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    system = make_tree(root.path("/usr/local/cuda-12.6"), "12.6.3")
    (system / "version.json").write_text('{"cuda": {"name": "CUDA SDK", "version": "12.6.3"}}')
    choice = selection.choose_default(three, "12.6", root=root)
    assert choice.path == system
    assert choice.value == str(system)
    assert choice.note is not None
    assert "system toolkit /usr/local/cuda-12.6 (CUDA 12.6.3)" in choice.note
    with pytest.raises(ReleaseNotFoundError, match=r"installed: 13\.0\.1, 12\.8\.1, 12\.8\.0"):
        selection.choose_default(three, "11.8", root=root)


def test_tool_in_the_active_toolkit(three: Store, tmp_path: Path) -> None:
    active = selection.select(three, env={"CUDAUP_TOOLKIT": "12.8.0"}, cwd=tmp_path)
    found = selection.tool_in(active, "nvcc", three)
    assert found == three.toolkits_dir / "12.8.0" / "bin" / "nvcc"
    with pytest.raises(
        CommandNotRunError, match=r"ptxas is not in CUDA 12\.8\.0 .*CUDAUP_TOOLKIT"
    ) as refused:
        selection.tool_in(active, "ptxas", three)
    assert refused.value.exit_code == 127


# -- environments ----------------------------------------------------------------------------------------------
def test_toolkit_env_puts_the_toolkit_first_and_does_not_stack(three: Store) -> None:
    first = three.toolkits_dir / "12.8.1"
    second = three.toolkits_dir / "13.0.1"
    env = {"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": ""}
    once = environment.toolkit_env(first, three, env)
    assert once == {
        "CUDA_HOME": str(first),
        "CUDA_PATH": str(first),
        "PATH": f"{first}/bin:/usr/bin:/bin",
        "LD_LIBRARY_PATH": f"{first}/lib64",
    }
    assert environment.toolkit_env(first, three, {**env, **once}) == once
    switched = environment.toolkit_env(second, three, {**env, **once})
    assert switched["PATH"] == f"{second}/bin:/usr/bin:/bin"
    assert switched["LD_LIBRARY_PATH"] == f"{second}/lib64"


def test_toolkit_env_removes_a_previous_system_toolkit_but_never_usr_bin(three: Store) -> None:
    first = three.toolkits_dir / "12.8.1"
    env = {
        "CUDA_HOME": "/usr/local/cuda-12.4",
        "PATH": "/usr/local/cuda-12.4/bin:/usr/bin:/bin",
        "LD_LIBRARY_PATH": "/usr/local/cuda-12.4/lib64:/opt/lib",
    }
    result = environment.toolkit_env(first, three, env)
    assert result["PATH"] == f"{first}/bin:/usr/bin:/bin"
    assert result["LD_LIBRARY_PATH"] == f"{first}/lib64:/opt/lib"
    debian = {"CUDA_HOME": "/usr", "PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": "/usr/lib64"}
    result = environment.toolkit_env(first, three, debian)
    assert result["PATH"] == f"{first}/bin:/usr/bin:/bin"
    assert result["LD_LIBRARY_PATH"] == f"{first}/lib64:/usr/lib64"


def test_render_env_for_each_shell() -> None:
    variables = {"CUDA_HOME": "/opt/it's here", "PATH": "/a b/bin:/usr/bin"}
    bash = environment.render_env(variables, "bash")
    assert bash == "export CUDA_HOME='/opt/it'\"'\"'s here'\nexport PATH='/a b/bin:/usr/bin'\n"
    assert environment.render_env(variables, "zsh") == bash
    fish = environment.render_env(variables, "fish")
    assert fish == "set -gx CUDA_HOME '/opt/it\\'s here';\nset -gx PATH '/a b/bin' '/usr/bin';\n"
    assert environment.detect_shell({"SHELL": "/usr/bin/fish"}) == "fish"
    assert environment.detect_shell({"SHELL": "/bin/zsh"}) == "zsh"
    assert environment.detect_shell({"SHELL": "/bin/tcsh"}) == "bash"
    assert environment.detect_shell({}) == "bash"


def test_bash_evaluates_the_exports(three: Store) -> None:
    toolkit = three.toolkits_dir / "13.0.1"
    weird = {"CUDA_HOME": "/x/it's $HOME `x`", "PATH": f"{toolkit}/bin:/usr/bin:/bin"}
    script = 'eval "$1"; printf "%s\\n" "$CUDA_HOME" "$PATH"; nvcc'
    done = subprocess.run(
        ["bash", "-c", script, "bash", environment.render_env(weird, "bash")],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
        check=True,
    )
    assert done.stdout.splitlines()[:3] == [weird["CUDA_HOME"], weird["PATH"], "nvcc from 13.0.1"]


# -- pins ----------------------------------------------------------------------------------------------------------
def test_pin_and_unpin(three: Store, tmp_path: Path) -> None:
    path = pins.write_pin(tmp_path, " cu128 ")
    assert path.read_text() == "cu128\n"
    assert pins.find_pin(tmp_path / "x" / "y") == path
    with pytest.raises(UsageError):
        pins.write_pin(tmp_path, "twelve")
    assert pins.remove_pin(tmp_path) == path
    assert pins.remove_pin(tmp_path) is None


# -- shims ----------------------------------------------------------------------------------------------------------
def test_write_shims_marks_replaces_and_removes_only_its_own(three: Store) -> None:
    three.bin_dir.mkdir(parents=True)
    foreign = three.bin_dir / "ptxas"
    foreign.write_text("#!/bin/sh\necho mine\n")
    written = shim_files.write_shims(three, ["nvcc", "ptxas", "cuobjdump"])
    assert sorted(p.name for p in written) == ["cuobjdump", "nvcc"]
    assert foreign.read_text() == "#!/bin/sh\necho mine\n"  # never overwritten
    nvcc = three.bin_dir / "nvcc"
    assert is_shim(nvcc)
    assert os.access(nvcc, os.X_OK)
    text = nvcc.read_text()
    assert text.startswith("#!/bin/sh\n# cudaup shim")
    assert text.endswith(
        f"exec {sys.executable} -I -S -c '{shim_files.SHIM_CODE}' {shim_files.package_root()} "
        f'{three.home} nvcc "$@"\n'
    )
    # The directory baked in is the one this cudaup was imported from.
    assert (Path(shim_files.package_root()) / "cudaup" / "switch" / "shim.py").is_file()
    shim_files.write_shims(three, ["nvcc"])
    assert sorted(p.name for p in three.bin_dir.iterdir()) == ["nvcc", "ptxas"]
    assert not [p for p in three.bin_dir.iterdir() if p.name.startswith(".")]
    with pytest.raises(UsageError):
        shim_files.write_shims(three, ["../evil"])


def test_shims_are_written_only_for_tools_a_toolkit_has(three: Store, tmp_path: Path) -> None:
    make_toolkit(three, "12.9.0", ("nvcc", "nvvp", "ls", "python3"))
    assert shim_files.available_tools(three) == ["nvcc", "nvvp", "ptxas"]
    assert shim_files.foreign_programs(three.toolkits_dir / "12.9.0") == ["ls", "python3"]
    written = shim_files.refresh_shims(three)
    assert sorted(p.name for p in written) == ["nvcc", "nvvp", "ptxas"]
    # A system's ncu stays visible behind the shims: no toolkit of cudaup's has one.
    system = make_tree(tmp_path / "nsight", "system", ("ncu",))
    env = {"PATH": f"{three.bin_dir}:{system / 'bin'}:/usr/bin:/bin"}
    done = subprocess.run(["ncu"], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.startswith("ncu from system")
    # nvcc keeps its shim with no toolkit at all: it says how to choose one.
    empty = Store(tmp_path / "empty")
    assert [p.name for p in shim_files.refresh_shims(empty)] == ["nvcc"]
    # A default that is a path brings its tools; removing a toolkit removes its shims.
    three.set_default(str(system))
    assert "ncu" in shim_files.available_tools(three)
    three.set_default(None)
    shutil.rmtree(three.toolkits_dir / "12.9.0")
    assert sorted(p.name for p in shim_files.refresh_shims(three)) == ["nvcc", "ptxas"]
    assert not (three.bin_dir / "nvvp").exists()


def run_shim(
    home: Path, tool: str, *args: str, cwd: Path, extra: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {"PATH": f"{home / 'bin'}:/usr/bin:/bin", "HOME": str(cwd), **(extra or {})}
    return subprocess.run(
        [tool, *args], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )


def test_shims_end_to_end(three: Store, tmp_path: Path) -> None:
    shim_files.refresh_shims(three)
    project = tmp_path / "project"
    (project / "sub").mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    none = run_shim(three.home, "nvcc", cwd=elsewhere)
    assert none.returncode == 127
    assert none.stderr.startswith("cudaup: cannot run nvcc: no CUDA toolkit is chosen here;")
    assert "cudaup default VERSION" in none.stderr
    assert ".cuda-version" in none.stderr
    assert "CUDAUP_TOOLKIT" in none.stderr
    assert len(none.stderr.strip().splitlines()) == 1

    three.set_default("12.8")
    done = run_shim(three.home, "nvcc", "-c", "x y.cu", cwd=elsewhere)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    toolkit = three.toolkits_dir / "12.8.1"
    assert lines[0] == "nvcc from 12.8.1"
    assert lines[1] == f"CUDA_HOME={toolkit}"
    assert lines[2] == f"PATH={toolkit}/bin:{three.home}/bin:/usr/bin:/bin"
    assert lines[3] == f"LD_LIBRARY_PATH={toolkit}/lib64"
    assert lines[4] == "ARGS=-c x y.cu"

    (project / ".cuda-version").write_text("13.0\n")
    assert run_shim(three.home, "nvcc", cwd=project / "sub").stdout.startswith("nvcc from 13.0.1")
    assert run_shim(three.home, "ptxas", cwd=project).stdout.startswith("ptxas from 13.0.1")
    pinned_old = run_shim(three.home, "nvcc", cwd=project, extra={"CUDAUP_TOOLKIT": "12.8.0"})
    assert pinned_old.stdout.startswith("nvcc from 12.8.0")

    missing = run_shim(three.home, "ptxas", cwd=project, extra={"CUDAUP_TOOLKIT": "12.8.0"})
    assert missing.returncode == 127
    assert missing.stderr == (
        f"cudaup: ptxas is not in CUDA 12.8.0 ({three.toolkits_dir / '12.8.0'}), chosen by "
        "CUDAUP_TOOLKIT; it comes with the cuda_nvcc component (`cudaup install 12.8.0 "
        f"--components cuda_nvcc` adds it), or {shim.HOW_TO_CHOOSE}\n"
    )
    (project / ".cuda-version").write_text("12.4\n")
    absent = run_shim(three.home, "nvcc", cwd=project / "sub")
    assert absent.returncode == 127
    assert (
        f"{project / '.cuda-version'} asks for CUDA 12.4, which is not installed" in absent.stderr
    )
    assert "(installed: 13.0.1, 12.8.1, 12.8.0)" in absent.stderr


def test_python_m_cudaup_shim_and_a_toolkit_that_is_the_shims_themselves(
    three: Store, tmp_path: Path
) -> None:
    shim_files.refresh_shims(three)
    three.set_default("13.0")
    argv = [sys.executable, "-m", "cudaup.switch.shim", str(three.home), "nvcc", "-V"]
    env = {"PATH": "/usr/bin:/bin"}
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    assert done.stdout.startswith("nvcc from 13.0.1")
    usage = subprocess.run(argv[:3], env=env, capture_output=True, text=True, check=False)
    assert usage.returncode == 2
    # CUDAUP_HOME itself as "the toolkit": its bin/nvcc is a shim; no endless exec loop.
    loop = run_shim(three.home, "nvcc", cwd=tmp_path, extra={"CUDAUP_TOOLKIT": str(three.home)})
    assert loop.returncode == 127
    assert "nvcc is not in the toolkit at" in loop.stderr


def test_the_shim_survives_a_deleted_working_directory(three: Store, tmp_path: Path) -> None:
    shim_files.refresh_shims(three)
    three.set_default("13.0")
    gone = tmp_path / "gone"
    gone.mkdir()
    script = f"cd {gone} && rmdir {gone} && nvcc"
    done = subprocess.run(
        ["sh", "-c", script],
        env={"PATH": f"{three.home / 'bin'}:/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.stdout.startswith("nvcc from 13.0.1"), done.stderr


def test_shim_overhead_is_small(three: Store, tmp_path: Path) -> None:
    """Not a benchmark: a guard against slow imports (measured: ~9.5 ms, mostly Python start-up)."""
    shim_files.refresh_shims(three)
    three.set_default("13.0")
    env = {"PATH": f"{three.home / 'bin'}:/usr/bin:/bin"}
    real = str(three.toolkits_dir / "13.0.1" / "bin" / "nvcc")

    def best(argv: list[str]) -> float:
        times = []
        for _ in range(5):
            start = time.perf_counter()
            subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, check=True)
            times.append(time.perf_counter() - start)
        return min(times)

    overhead = best(["nvcc", "--version"]) - best([real, "--version"])
    assert overhead < 0.5
    modules = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; before = set(sys.modules); import cudaup.switch.shim; "
            "print(' '.join(sorted(set(sys.modules) - before)))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert set(modules) <= {
        "__future__",
        "cudaup",
        "cudaup.core",
        "cudaup.core.tools",  # the table of NVIDIA's tools: no imports
        "cudaup.switch",
        "cudaup.switch.shim",
        "cudaup.util",
        "cudaup.util.trust",  # who may choose: os and stat only
    }  # no pathlib, re, json


# -- the system link ------------------------------------------------------------------------------------------------
@pytest.fixture
def real_link_untouched() -> Iterator[None]:
    def state() -> str:
        link = Path("/usr/local/cuda")
        if link.is_symlink():
            return str(link.readlink())  # os.readlink('/usr/local/cuda')
        return "not a link" if link.exists() else "absent"

    before = state()
    yield
    assert state() == before


def test_plain_link_set_and_undo(three: Store, root: SystemRoot, real_link_untouched: None) -> None:
    for line in ("12.8", "13.0"):
        make_tree(root.path(f"/usr/local/cuda-{line}"), line)
    root.path("/usr/local/cuda").symlink_to("/usr/local/cuda-13.0")

    target, version = system_link.system_target(three, "/usr/local/cuda-12.8", root=root)
    assert (target, version) == ("/usr/local/cuda-12.8", "12.8")
    change = system_link.set_system_link(three, target, version=version, root=root)
    assert change.method == "symlink"
    assert change.before == system_link.LinkState("link", "/usr/local/cuda-13.0")
    assert readlink(root.path("/usr/local/cuda")) == "/usr/local/cuda-12.8"
    assert not [p for p in root.path("/usr/local").iterdir() if p.name.startswith(".")]
    history = system_link.read_history(three)
    assert [h["target"] for h in history] == ["/usr/local/cuda-12.8"]

    undone = system_link.undo_system_link(three, root=root)
    assert undone.note is None
    assert readlink(root.path("/usr/local/cuda")) == "/usr/local/cuda-13.0"
    assert system_link.read_history(three) == []
    with pytest.raises(CudaupError, match="nothing to undo"):
        system_link.undo_system_link(three, root=root)


def test_a_missing_link_is_created_and_undo_removes_it(
    three: Store, root: SystemRoot, real_link_untouched: None
) -> None:
    make_tree(root.path("/usr/local/cuda-12.8"), "12.8")
    system_link.set_system_link(three, "/usr/local/cuda-12.8", root=root)
    assert readlink(root.path("/usr/local/cuda")) == "/usr/local/cuda-12.8"
    system_link.undo_system_link(three, root=root)
    assert not os.path.lexists(root.path("/usr/local/cuda"))


def test_a_store_toolkit_inside_the_root_can_be_linked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, real_link_untouched: None
) -> None:
    root = SystemRoot(tmp_path / "machine")
    store = Store(root.path("/home/me/.local/share/cudaup"))
    make_toolkit(store, "12.8.1")
    target, version = system_link.system_target(store, "12.8", root=root)
    assert (target, version) == ("/home/me/.local/share/cudaup/toolkits/12.8.1", "12.8.1")
    outside = Store(tmp_path / "outside")
    make_toolkit(outside, "12.8.1")
    with pytest.raises(UsageError, match="outside the system root"):
        system_link.system_target(outside, "12.8", root=root)
    root.path("/usr/local").mkdir(parents=True)
    root.path("/usr/local/cuda").symlink_to("/home/me/.local/share/cudaup/toolkits/12.8.1")
    with pytest.raises(UsageError, match="is the link itself"):
        system_link.system_target(store, "/usr/local/cuda", root=root)


def test_a_real_directory_at_the_link_is_refused(
    three: Store, root: SystemRoot, real_link_untouched: None
) -> None:
    make_tree(root.path("/usr/local/cuda-12.8"), "12.8")
    make_tree(root.path("/usr/local/cuda"), "12.4 runfile")
    with pytest.raises(CudaupError, match="is a real directory, not a link"):
        system_link.set_system_link(three, "/usr/local/cuda-12.8", root=root)
    assert root.path("/usr/local/cuda").is_dir()
    assert system_link.read_history(three) == []


def test_without_root_on_the_real_system_it_says_sudo(
    three: Store, monkeypatch: pytest.MonkeyPatch, real_link_untouched: None
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(CudaupError, match=r"needs root; run: sudo .* default --system /x"):
        system_link.set_system_link(three, "/x", root=SystemRoot(Path("/")))
    with pytest.raises(CudaupError, match="needs root"):
        system_link.undo_system_link(three, root=SystemRoot(Path("/")))
    assert system_link.read_history(three) == []


def test_alternatives_set_and_undo(
    three: Store, root: SystemRoot, real_link_untouched: None
) -> None:
    require_tool(UPDATE_ALTERNATIVES, "dpkg")
    for line in ("12.4", "12.8", "13.0"):
        make_tree(root.path(f"/usr/local/cuda-{line}"), line)
    for line, priority in (("12.4", "124"), ("13.0", "130")):
        subprocess.run(
            [
                *(UPDATE_ALTERNATIVES, "--root", str(root.root), "--install", "/usr/local/cuda"),
                *("cuda", f"/usr/local/cuda-{line}", priority),
            ],
            check=True,
            capture_output=True,
        )
    before = system_link.read_link_state(root)
    assert before == system_link.LinkState(
        "link", "/etc/alternatives/cuda", "cuda", "auto", "/usr/local/cuda-13.0"
    )

    # 12.4 is registered: --set only.
    change = system_link.set_system_link(three, "/usr/local/cuda-12.4", version="12.4", root=root)
    assert (change.method, change.registered) == ("update-alternatives", None)
    assert change.after.value == "/usr/local/cuda-12.4"
    assert change.after.status == "manual"
    assert readlink(root.path("/etc/alternatives/cuda")) == "/usr/local/cuda-12.4"

    # 12.8 is not: --install (priority 128), then --set.
    change = system_link.set_system_link(three, "/usr/local/cuda-12.8", version="12.8.1", root=root)
    assert change.registered == "/usr/local/cuda-12.8"
    admin = root.path("/var/lib/dpkg/alternatives/cuda").read_text()
    assert "/usr/local/cuda-12.8\n128\n" in admin
    assert system_link.read_link_state(root).value == "/usr/local/cuda-12.8"
    assert readlink(root.path("/usr/local/cuda")) == "/etc/alternatives/cuda"

    undone = system_link.undo_system_link(three, root=root)
    assert undone.after == system_link.LinkState(
        "link", "/etc/alternatives/cuda", "cuda", "manual", "/usr/local/cuda-12.4"
    )
    assert "/usr/local/cuda-12.8" not in root.path("/var/lib/dpkg/alternatives/cuda").read_text()
    undone = system_link.undo_system_link(three, root=root)
    assert undone.after == before
    assert system_link.read_history(three) == []


def test_an_update_alternatives_that_never_answers_is_stopped_and_named(
    three: Store,
    root: SystemRoot,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    real_link_untouched: None,
) -> None:
    """``default --system`` waited without limit for ``update-alternatives``, which may
    wait on a hung filesystem forever: now it is stopped, with what it started, and named."""
    require_tool(UPDATE_ALTERNATIVES, "dpkg")
    for line in ("12.8", "13.0"):
        make_tree(root.path(f"/usr/local/cuda-{line}"), line)
    subprocess.run(
        [
            *(UPDATE_ALTERNATIVES, "--root", str(root.root), "--install", "/usr/local/cuda"),
            *("cuda", "/usr/local/cuda-13.0", "130"),
        ],
        check=True,
        capture_output=True,
    )
    before = system_link.read_link_state(root)
    hanging = tmp_path / "bin" / "update-alternatives"
    hanging.parent.mkdir()
    child = lingering_wrapper(hanging)
    monkeypatch.setattr(system_link, "ALTERNATIVES_TIMEOUT", 0.5)
    started = time.monotonic()
    with pytest.raises(CudaupError, match=r"update-alternatives .* did not finish within 0\.5 s"):
        system_link.set_system_link(
            three, "/usr/local/cuda-12.8", root=root, env={"PATH": str(hanging.parent)}
        )
    assert time.monotonic() - started < 10
    wait_until_ended(started_child(child))
    assert system_link.read_link_state(root) == before
    assert system_link.read_history(three) == []  # nothing changed: nothing to undo


def test_priorities_follow_nvidia() -> None:
    assert system_link.alternatives_priority("12.8.1") == 128
    assert system_link.alternatives_priority("13.0") == 130
    assert system_link.alternatives_priority(None) == 1


@pytest.mark.parametrize(
    "text", ["13." + "1" * 4400, "1" * 4400, "13.0 Update " + "9" * 4400, "13." + "0" * 10 + " GA"]
)
def test_shim_answers_not_a_request_for_numbers_no_release_has(text: str) -> None:
    """The shim runs on every nvcc call: a pin of thousands of digits is no request, never a
    ValueError from int() (cudaup itself says exit 3 for the same text)."""
    assert shim.parse_request(text) is None
    with pytest.raises(CudaupError):
        parse_request(text)


@pytest.mark.property
@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="0123456789.cuCUDAvV updateGA-_ \t", max_size=60))
def test_shim_and_cudaup_agree_on_every_request(text: str) -> None:
    parsed = shim.parse_request(text)  # never raises
    if parsed is not None:
        expected = parse_request(text)
        assert parsed == (expected.kind, expected.parts)
