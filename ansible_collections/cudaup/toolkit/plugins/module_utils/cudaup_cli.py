# Copyright: cudaup developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""What the cudaup modules share: running the ``cudaup`` CLI, its errors, names, locks.

The modules drive the ``cudaup`` command line on the managed host (its ``--json``
output is the interface), so they need nothing but cudaup itself there; this file
is shipped to the host with them.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

#: Parameters every cudaup module takes: which cudaup, which store, extra environment.
COMMON_ARGUMENT_SPEC: dict[str, dict[str, Any]] = {
    "executable": {"type": "str", "default": "cudaup"},
    "cudaup_home": {"type": "path"},
    "env": {"type": "dict", "default": {}},
}

#: ``X.Y.Z``: a request that names exactly one release (the store's directory name).
EXACT_RELEASE = re.compile(r"^\d+\.\d+\.\d+$")
_LINE = re.compile(r"^\d+(?:\.\d+)?$")
_CU_TAG = re.compile(r"^cu(\d{2,4})$", re.IGNORECASE)

#: cudaup's friendly component aliases (the extras of PyPI's ``cuda-toolkit``) → NVIDIA's
#: keys, as in ``cudaup.components.ALIASES`` (a test keeps the two equal).  The store
#: records NVIDIA's keys, so a request for ``nvcc`` is satisfied by ``cuda_nvcc``.
ALIASES: dict[str, str] = {
    "nvcc": "cuda_nvcc",
    "cudart": "cuda_cudart",
    "cccl": "cuda_cccl",
    "crt": "cuda_crt",
    "nvrtc": "cuda_nvrtc",
    "cupti": "cuda_cupti",
    "nvtx": "cuda_nvtx",
    "nvml": "cuda_nvml_dev",
    "cuxxfilt": "cuda_cuxxfilt",
    "culibos": "cuda_culibos",
    "opencl": "cuda_opencl",
    "profiler_api": "cuda_profiler_api",
    "sanitizer_api": "cuda_sanitizer_api",
    "cuobjdump": "cuda_cuobjdump",
    "nvdisasm": "cuda_nvdisasm",
    "nvprune": "cuda_nvprune",
    "gdb": "cuda_gdb",
    "cublas": "libcublas",
    "cufft": "libcufft",
    "cufile": "libcufile",
    "curand": "libcurand",
    "cusolver": "libcusolver",
    "cusparse": "libcusparse",
    "npp": "libnpp",
    "nvjpeg": "libnvjpeg",
    "nvjitlink": "libnvjitlink",
    "nvfatbin": "libnvfatbin",
    "nvvm": "libnvvm",
    "nvptxcompiler": "libnvptxcompiler",
}


def nvidia_name(name: str) -> str:
    """NVIDIA's key for an alias or an NVIDIA name (``nvcc`` → ``cuda_nvcc``)."""
    key = name.strip().lower().replace("-", "_")
    return ALIASES.get(key, key)


def component_request(name: str) -> tuple[str, str | None]:
    """A component as the store records it, and a library's own version pin if it has one:
    ``nvcc`` → (``cuda_nvcc``, None), ``cudnn==9.27`` → (``cudnn``, ``9.27``)."""
    base, pin = name.split("==", 1) if "==" in name else (name, "")
    return nvidia_name(base), pin.strip() or None


def library_satisfied(installed: Any, pin: str) -> bool:
    """Whether an installed library (its entry in ``cudaup list --json``'s ``libraries``)
    falls under a version pin as a prefix (``9.27.0.42`` under ``9.27``), as cudaup matches
    it; an entry that does not say its version never does."""
    version = installed.get("version") if isinstance(installed, dict) else None
    if not isinstance(version, str):
        return False
    wanted, have = pin.split("."), version.split(".")
    return have[: len(wanted)] == wanted


def line_prefix(request: str) -> str | None:
    """``13.0`` → ``13.0``, ``13`` → ``13``, ``cu130`` → ``13.0``; ``None`` for other forms."""
    text = request.strip()
    if EXACT_RELEASE.match(text) or _LINE.match(text):
        return text
    tag = _CU_TAG.match(text)
    if tag:
        digits = tag.group(1)
        return f"{int(digits[:-1])}.{int(digits[-1])}"
    return None


def matches(request: str, version: str) -> bool:
    """Whether installed release ``version`` answers ``request`` (a label or a line)."""
    prefix = line_prefix(request)
    if prefix is None:
        return False
    return version == prefix or version.startswith(prefix + ".")


def error_message(stdout: str, stderr: str, rc: int) -> str:
    """cudaup's one-line error: its ``cudaup: error: …`` line, else its JSON error."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for line in reversed(lines):
        if line.startswith("cudaup:"):
            return line
    try:
        document = json.loads(stdout)
    except ValueError:
        document = None
    if isinstance(document, dict) and isinstance(document.get("error"), dict):
        return f"cudaup: error: {document['error'].get('message')}"
    if lines:
        return lines[-1]
    return f"cudaup exited with status {rc} and printed no error"


def fail(module: Any, msg: str, **details: Any) -> NoReturn:
    """``module.fail_json`` (which exits), typed as never returning."""
    module.fail_json(msg=msg, **details)
    raise SystemExit(1)  # not reached: fail_json exits


class Cudaup:
    """The ``cudaup`` CLI on the managed host, run with the module's environment."""

    def __init__(self, module: Any) -> None:
        self.module = module
        params = module.params
        executable = str(params["executable"])
        # an absolute path is taken as it is; else PATH, then ~/.local/bin (pip --user, pipx)
        found = module.get_bin_path(executable, opt_dirs=[str(Path("~/.local/bin").expanduser())])
        if not found:
            fail(
                module,
                f"cannot find the cudaup executable {executable!r} on PATH or in ~/.local/bin; "
                "install cudaup on this host, or set executable to its path",
            )
        self.executable = str(found)
        self.environ = {str(k): str(v) for k, v in (params["env"] or {}).items()}
        if params["cudaup_home"]:
            self.environ["CUDAUP_HOME"] = str(params["cudaup_home"])

    def command(self, *args: str) -> list[str]:
        return [self.executable, *args, "--json"]

    def run(self, *args: str) -> dict[str, Any]:
        """Run ``cudaup ARGS --json``; its JSON object, or ``fail_json`` with its error."""
        cmd = self.command(*args)
        rc, stdout, stderr = self.module.run_command(cmd, environ_update=self.environ)
        if rc != 0:
            fail(
                self.module,
                error_message(stdout, stderr, rc),
                rc=rc,
                cmd=cmd,
                stdout=stdout,
                stderr=stderr,
            )
        try:
            document = json.loads(stdout)
        except ValueError:
            document = None
        if not isinstance(document, dict):
            fail(
                self.module,
                f"cudaup printed no JSON object for {' '.join(args)}",
                rc=rc,
                cmd=cmd,
                stdout=stdout,
                stderr=stderr,
            )
        return document

    def try_run(self, *args: str) -> dict[str, Any] | None:
        """Like :meth:`run` for a read-only question: ``None`` instead of failing."""
        cmd = self.command(*args)
        rc, stdout, _stderr = self.module.run_command(cmd, environ_update=self.environ)
        if rc != 0:
            return None
        try:
            document = json.loads(stdout)
        except ValueError:
            return None
        return document if isinstance(document, dict) else None


@dataclass
class LockInfo:
    """What a ``cuda.lock.toml`` pins for one platform, as far as the module needs it."""

    release: str
    channel: str
    components: list[str] = field(default_factory=list)


#: The platforms cudaup would pick on a host of each ``platform.machine()`` (an Arm host is
#: Jetson's ``linux-aarch64`` or a server's ``linux-sbsa``; cudaup tells them apart).
_HOST_PLATFORMS: dict[str, tuple[str, ...]] = {
    "x86_64": ("linux-x86_64",),
    "amd64": ("linux-x86_64",),
    "aarch64": ("linux-sbsa", "linux-aarch64"),
    "arm64": ("linux-sbsa", "linux-aarch64"),
    "ppc64le": ("linux-ppc64le",),
}


def parse_lock(
    document: dict[str, Any], platform: str | None = None, machine: str | None = None
) -> LockInfo | None:
    """The release, channel and components a lock (``lock-version = 1``) pins for a platform.

    Its ``[[toolkits]]`` hold one entry per platform (``platform``, ``release``, ``channel``,
    ``components`` with what they need).  Without ``platform``, the entries this host's
    ``machine`` could use are taken when they agree.  ``None`` when the lock names nothing
    for the platform or is not one cudaup wrote: ``cudaup install --lock`` then decides and
    explains.
    """
    toolkits = document.get("toolkits")
    if not isinstance(toolkits, list):
        return None
    if platform:
        wanted: tuple[str, ...] = (platform,)
    else:
        here = (machine if machine is not None else os.uname().machine).lower()
        wanted = _HOST_PLATFORMS.get(here, ())
    found: list[LockInfo] = []
    for entry in toolkits:
        if not isinstance(entry, dict) or entry.get("platform") not in wanted:
            continue
        release, channel, components = (
            entry.get("release"),
            entry.get("channel"),
            entry.get("components"),
        )
        if not isinstance(release, str) or not EXACT_RELEASE.match(release):
            return None
        if not isinstance(channel, str) or not isinstance(components, list):
            return None
        found.append(LockInfo(release, channel, sorted(nvidia_name(str(c)) for c in components)))
    if not found or any(info != found[0] for info in found):
        return None
    return found[0]


def read_lock(path: str, platform: str | None = None) -> LockInfo | None:
    """:func:`parse_lock` of a lock file; ``None`` when it cannot be read or parsed."""
    try:
        import tomllib  # noqa: PLC0415 - Python 3.11+ on the managed host; optional
    except ImportError:
        return None
    try:
        with Path(path).expanduser().open("rb") as stream:
            document = tomllib.load(stream)
    except (OSError, ValueError):
        return None
    return parse_lock(document, platform)


def install_args(params: dict[str, Any]) -> list[str]:
    """``cudaup install`` arguments (without ``--json``) for the module's parameters."""
    args = ["install"]
    if params.get("lock"):
        args += ["--lock", str(params["lock"])]
    else:
        args.append(str(params["version"]))
        channel = params.get("channel") or "auto"
        args += ["--channel", str(channel)]
        if params.get("components"):
            args += ["--components", ",".join(str(c) for c in params["components"])]
    if params.get("platform"):
        args += ["--platform", str(params["platform"])]
    if params.get("mirror"):
        args += ["--mirror", str(params["mirror"])]
    if params.get("force"):
        args.append("--force")
    return args
