"""The command table: every ``cudaup`` command, where it lives, what it does.

Data only, in the manner of pip's ``commands/__init__.py``: building the parser
for ``cudaup --help`` or ``cudaup --version`` reads this table and imports no
command module; running a command imports exactly the module that defines it.
A module defines, for each of its commands, ``add_<name>(parser)``, which adds
the command's arguments and sets ``handler`` (``-`` in a name becomes ``_``).
"""

from __future__ import annotations


class CommandInfo:
    """Where a command lives and what it does (a plain class: a dataclass imports
    inspect, a NamedTuple typing; together ~7 ms of every start).

    ``online``: the command always makes HTTPS requests, so the CA certificates start
    loading (:func:`cudaup.net.tls.warm_up`) before its module imports, on another core.
    """

    __slots__ = ("example", "module", "online", "summary")

    def __init__(self, module: str, summary: str, example: str, *, online: bool = False) -> None:
        self.module = module
        self.summary = summary
        self.example = example
        self.online = online


COMMANDS: dict[str, CommandInfo] = {
    # answering from NVIDIA's and PyPI's sources
    "resolve": CommandInfo(
        "cudaup.cli.resolve",
        "a release to exact, verified artifacts",
        "cudaup resolve 13.0 --channel redist --components nvcc,cudart",
    ),
    "versions": CommandInfo(
        "cudaup.cli.resolve",
        "every release: date, bundled driver, platforms",
        "cudaup versions --json",
    ),
    "probe": CommandInfo(
        "cudaup.cli.probe",
        "check a URL cheaply and explain a failure",
        "cudaup probe https://developer.download.nvidia.com/compute/cuda/13.0.1/local_installers/cuda_13.0.1_580.82.07_linux.run",
    ),
    # moving bytes
    "download": CommandInfo(
        "cudaup.cli.transfer",
        "fetch a release's files (or a URL), verified and resumable",
        "cudaup download 13.0.1 -o ./downloads",
    ),
    "install": CommandInfo(
        "cudaup.cli.toolkits",
        "install a toolkit side by side (no root needed)",
        "cudaup install 13.0 --components nvcc,cudart",
        online=True,
    ),
    "uninstall": CommandInfo(
        "cudaup.cli.toolkits",
        "remove a toolkit cudaup installed",
        "cudaup uninstall 12.8.1",
    ),
    "list": CommandInfo(
        "cudaup.cli.toolkits",
        "toolkits cudaup installed, and every other one found",
        "cudaup list --json",
    ),
    "cache": CommandInfo(
        "cudaup.cli.cache",
        "cudaup's cache: where it is, what it holds, making room",
        "cudaup cache prune",
    ),
    # switching
    "default": CommandInfo(
        "cudaup.cli.switch",
        "the toolkit used where nothing else chooses one (or, with --system, /usr/local/cuda)",
        "cudaup default 13.0",
    ),
    "pin": CommandInfo(
        "cudaup.cli.switch",
        "write .cuda-version here: this directory's toolkit",
        "cudaup pin 12.8",
    ),
    "env": CommandInfo(
        "cudaup.cli.switch",
        "print exports for the active (or given) toolkit",
        'eval "$(cudaup env)"',
    ),
    "run": CommandInfo(
        "cudaup.cli.switch",
        "run a command with a toolkit",
        "cudaup run 12.8 -- nvcc --version",
    ),
    "which": CommandInfo(
        "cudaup.cli.switch",
        "the path of a tool in the active toolkit",
        "cudaup which nvcc",
    ),
    "show": CommandInfo(
        "cudaup.cli.switch",
        "the active toolkit and why, and every installed one",
        "cudaup show",
    ),
    "shims": CommandInfo(
        "cudaup.cli.switch",
        "the shims in $CUDAUP_HOME/bin, and whether this cudaup wrote them",
        "cudaup shims --rebuild",
    ),
    "undo": CommandInfo(
        "cudaup.cli.switch",
        "put /usr/local/cuda back as it was before `default --system`",
        "sudo cudaup undo",
    ),
    # this machine, and what fits on it
    "doctor": CommandInfo(
        "cudaup.cli.machine",
        "driver, GPUs, every toolkit, and problems with fixes",
        "cudaup doctor --json",
    ),
    "compat": CommandInfo(
        "cudaup.cli.machine",
        "which releases a driver runs, which drivers run a release, which CUDA majors a "
        "library release is built for",
        "cudaup compat --driver 590.48.01",
    ),
    "arch": CommandInfo(
        "cudaup.cli.arch",
        "the SASS and PTX targets in CUDA binaries and wheels (cuobjdump's answer, faster)",
        "cudaup arch .venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcurand.so.10",
    ),
    "plan": CommandInfo(
        "cudaup.cli.plan",
        "the newest CUDA line the driver and the ML packages agree on",
        "cudaup plan torch flashinfer-python sgl-kernel",
    ),
    # Python environments
    "upgrade": CommandInfo(
        "cudaup.cli.upgrade",
        "move a Python environment to another CUDA line, transactionally",
        "cudaup upgrade 13.0 --python .venv/bin/python --dry-run",
    ),
    "rollback": CommandInfo(
        "cudaup.cli.upgrade",
        "put a Python environment back as it was before the last upgrade (offline)",
        "cudaup rollback --python .venv/bin/python",
    ),
    "snapshots": CommandInfo(
        "cudaup.cli.upgrade",
        "the snapshots kept for a Python environment; --prune removes old ones",
        "cudaup snapshots --python .venv/bin/python --prune --keep 3",
    ),
    # fleets
    "lock": CommandInfo(
        "cudaup.cli.fleet",
        "decide every byte of a toolkit, with hashes",
        "cudaup lock 13.0.1 --components nvcc,cudart -o cuda.lock.toml",
    ),
    "mirror": CommandInfo(
        "cudaup.cli.fleet",
        "write a lock's files as a static mirror",
        "cudaup mirror cuda.lock.toml ./cuda-mirror",
    ),
    # the shell
    "completions": CommandInfo(
        "cudaup.cli.completions",
        "a shell completion script: bash, zsh or fish",
        "cudaup completions bash > ~/.local/share/bash-completion/completions/cudaup",
    ),
}
