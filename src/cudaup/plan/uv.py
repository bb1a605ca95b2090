"""uv, the resolver ``plan`` runs: found, checked, called hermetically, answered.

Each resolution is ``uv pip compile`` for one target Python and platform, with
constraints that hold it to one CUDA line.  The call is hermetic: ``--no-config``
and no ``UV_*`` variable from the caller (a user's ``UV_INDEX_STRATEGY=unsafe-best-match``
or ``UV_EXTRA_INDEX_URL`` would otherwise reach it), ``--no-build`` (a plan never
runs a package's build code, as root or otherwise), no Python downloads, the
default first-index strategy, and uv's cache inside cudaup's.  Per-line indexes
are not handed to uv as URLs: cudaup writes a local PEP 503 index holding only
the projects its index table routes to them (:func:`write_local_index`), placed
first, so those projects come from there and nowhere else, and every other
project from the default index.  Within a plan the flat indexes are read through its
:class:`~cudaup.plan.index_memo.IndexMemo` (``UvRunner.memo``), once for all its uv runs.
"""

from __future__ import annotations

import contextlib
import hashlib
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from cudaup.core.names import is_project_name
from cudaup.errors import (
    CudaupError,
    InsufficientSpaceError,
    NetworkError,
    SourceFormatError,
    UsageError,
)
from cudaup.plan.closure import Closure, parse_compile_output
from cudaup.plan.index_memo import IndexMemo
from cudaup.resolve.pypi import DistFile
from cudaup.util import processes
from cudaup.util.atomic import atomic_write
from cudaup.util.paths import inside

#: The oldest uv this module was tested with (``--format pylock.toml``, ``--index``,
#: ``--emit-index-annotation``, ``--python-platform x86_64-manylinux_2_39``).
MIN_UV = Version("0.13.9")
_SHA256 = re.compile(r"^[0-9a-fA-F]{64}$")
_FETCH = re.compile(r"Failed to fetch:? `?([^`\s]+)`?")
_NETWORK = (
    "error sending request",
    "Request failed after",
    "dns error",
    "tcp connect error",
    "Connection refused",
    "timed out",
    "operation timed out",
    "client error (Connect)",
)


def uv_version() -> Version:
    return _located_once()[1]


def find_uv() -> str:
    """uv beside cudaup's interpreter (the dependency installed with it), else on PATH."""
    return _located_once()[0]


#: The lines of a plan's first window start their uv runs at once: unlocked, each found
#: the cache empty and spawned ``uv --version`` of its own.
_LOCATING = threading.Lock()


def _located_once() -> tuple[str, Version]:
    with _LOCATING:
        return _located()


@cache
def _located() -> tuple[str, Version]:
    found = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if found is None:
        raise UsageError(
            "plan resolves with uv, which is not installed beside cudaup nor on PATH: "
            "reinstall cudaup (uv is one of its dependencies) or `pip install uv`"
        )
    try:
        done = processes.run([found, "--version"], timeout=30)
        if done.returncode != 0:
            raise subprocess.CalledProcessError(done.returncode, done.args)
        version = Version(done.stdout.split()[1])
    except (OSError, subprocess.SubprocessError, IndexError, InvalidVersion):
        raise UsageError(f"{found} does not run as uv (`uv --version` failed)") from None
    if version < MIN_UV:
        raise UsageError(f"{found} is uv {version}; plan needs uv ≥ {MIN_UV}: pip install -U uv")
    return found, version


def uv_environment(timeout: float) -> dict[str, str]:
    """The caller's environment without any ``UV_*`` setting, plus cudaup's."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("UV_")}
    environment.update(
        UV_PYTHON_DOWNLOADS="never",
        UV_NO_PROGRESS="1",
        UV_HTTP_RETRIES="1",  # like cudaup's own index requests: a dead index is reported quickly
        UV_HTTP_TIMEOUT=str(max(1, int(timeout))),
    )
    return environment


# ----------------------------------------------------------------------------
# Local per-line indexes
# ----------------------------------------------------------------------------
def write_local_index(root: Path, pages: Mapping[str, Sequence[DistFile]], where: str) -> str:
    """A PEP 503 index under ``root`` holding ``pages`` (project → its files); its file URL.

    Project names, file names and URLs come from remote indexes: each is checked
    before it chooses a path or reaches uv (only http(s) file URLs are listed)."""
    root.mkdir(parents=True, exist_ok=True)
    for project, files in pages.items():
        name = canonicalize_name(project)
        if not is_project_name(name):
            raise SourceFormatError(f"{where} names a project {project!r} cudaup will not write")
        links = []
        for file in files:
            if not file.url.startswith(("https://", "http://")):
                raise SourceFormatError(
                    f"{where} lists {file.filename} at {file.url!r}, not HTTP(S)"
                )
            href = file.url.split("#", 1)[0]
            if file.sha256 and _SHA256.match(file.sha256):
                href += f"#sha256={file.sha256.lower()}"
            attributes = [f'href="{html.escape(href)}"']
            if file.requires_python:
                attributes.append(f'data-requires-python="{html.escape(file.requires_python)}"')
            if file.yanked:
                reason = html.escape(file.yank_reason or "")
                attributes.append(f'data-yanked="{reason}"' if reason else "data-yanked")
            if file.core_metadata:  # with its sha256 where known, for uv to check (PEP 714)
                known = f"sha256={file.metadata_sha256}" if file.metadata_sha256 else "true"
                attributes.append(f'data-core-metadata="{known}"')
            links.append(f"<a {' '.join(attributes)}>{html.escape(file.filename)}</a><br>")
        page = "<!DOCTYPE html>\n<html><body>\n" + "\n".join(links) + "\n</body></html>\n"
        directory = inside(root, name, field="project", error=SourceFormatError)
        directory.mkdir(exist_ok=True)
        (directory / "index.html").write_text(page, encoding="utf-8")
    return root.resolve().as_uri()


def pages_identity(pages: Mapping[str, Sequence[DistFile]]) -> str:
    """A digest of what a local index holds (its path changes, its content decides)."""
    digest = hashlib.sha256()
    for project in sorted(pages):
        digest.update(f"{project}\n".encode())
        for file in pages[project]:
            fields = (file.filename, file.url, file.sha256, file.requires_python, file.yanked)
            digest.update(json.dumps(fields).encode() + b"\n")
    return digest.hexdigest()


# ----------------------------------------------------------------------------
# One resolution
# ----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class CompileJob:
    requirements: tuple[str, ...]
    constraints: tuple[str, ...]
    python: tuple[int, int]
    uv_platform: str
    #: Indexes consulted first, in order (local per-line indexes, then extra flat ones).
    indexes: tuple[str, ...]
    default_index: str
    offline: bool = False
    refresh: bool = False
    #: Resolve for this interpreter (its exact tags and markers) instead of
    #: ``python``/``uv_platform``.
    interpreter: str | None = None
    #: Versions uv keeps where the resolution allows (``numpy==2.2.6``): what an
    #: environment has installed stays unless something requires otherwise.
    preferences: tuple[str, ...] = ()
    #: ``--pre``: pre-releases may be taken (uv's ``--prerelease allow``).
    prerelease: bool = False


@dataclass(frozen=True, slots=True)
class CompileAnswer:
    closure: Closure | None
    #: Why uv found no resolution (its own words, joined into one paragraph).
    reason: str | None = None
    #: Projects uv found only source distributions of for the target (its hints: a plan
    #: runs uv with ``--no-build``), often the true cause behind its reason.
    source_only: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.closure is not None


class Stoppable:
    """A caller's hold on one compile's uv process: :meth:`stop` kills it (or it as it
    starts), the runner's other runs untouched (a round started ahead and not needed)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stopped = False
        self._processes: list[subprocess.Popen[str]] = []

    def started(self, process: subprocess.Popen[str]) -> None:
        with self._lock:
            self._processes.append(process)
            if self._stopped:
                processes.kill(process)

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            for process in self._processes:
                processes.kill(process)


@dataclass
class UvRunner:
    """Runs resolutions; :meth:`cancel` kills the ones still running (this runner's only).

    With ``answers`` (a directory), uv's answer to a job is kept for ``answer_ttl``
    seconds, keyed by everything that decides it (requirements, constraints, target,
    index URLs, the per-line pages' content, uv's version): the same policy as
    cudaup's cached index pages, so a warm plan does not resolve again what it
    resolved a moment ago.  ``--refresh`` (``refresh`` on the job) skips it.

    With ``memo``, uv reads the jobs' flat indexes through that plan's
    :class:`~cudaup.plan.index_memo.IndexMemo`: jobs, their keys and uv's answers name
    the upstream URLs; only uv's environment names the memo's (:meth:`environment`)."""

    cache_dir: Path
    work_dir: Path
    timeout: float
    answers: Path | None = None
    answer_ttl: float = 600.0
    memo: IndexMemo | None = None
    _running: set[subprocess.Popen[str]] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _cancelled: bool = False

    def argv(self, job: CompileJob, requirements: Path, constraints: Path) -> list[str]:
        argv = [find_uv(), "pip", "compile", str(requirements), "-c", str(constraints)]
        if job.interpreter is not None:
            argv += ["--python", job.interpreter]
        else:
            argv += [
                "--python", sys.executable,
                "--python-version", f"{job.python[0]}.{job.python[1]}",
                "--python-platform", job.uv_platform,
            ]  # fmt: skip
        argv += [
            "--no-config", "--no-build", "--no-header", "--quiet", "--native-tls",
            "--index-strategy", "first-index",
            "--annotation-style", "split", "--emit-index-annotation",
            "--cache-dir", str(self.cache_dir),
        ]  # fmt: skip
        if self.memo is None:
            argv += ["--default-index", job.default_index]
            for index in job.indexes:
                argv += ["--index", index]
        if job.prerelease:
            argv += ["--prerelease", "allow"]
        if job.offline:
            argv.append("--offline")
        if job.refresh:
            argv.append("--refresh")
        return argv

    def environment(self, job: CompileJob) -> dict[str, str]:
        """uv's environment for ``job``: :func:`uv_environment`, and with a memo the
        indexes, as ``UV_DEFAULT_INDEX``/``UV_INDEX`` (each the same as its flag): the
        memo's URL carries its secret path, which a command line shows every local user
        (``ps``) and an environment only the same user and root."""
        environment = uv_environment(self.timeout)
        if self.memo is not None:
            environment["UV_DEFAULT_INDEX"] = self.memo.local(job.default_index)
            # Space-separated, in order: a file URL has its spaces quoted (%20).
            environment["UV_INDEX"] = " ".join(self.memo.local(i) for i in job.indexes)
        return environment

    def compile(
        self,
        job: CompileJob,
        pylock: Path | None = None,
        *,
        identity: str = "",
        stoppable: Stoppable | None = None,
    ) -> CompileAnswer:
        """Resolve ``job``; ``identity`` names the content of its local indexes (their
        paths change from run to run, their pages decide the answer); ``stoppable`` lets
        the caller kill this run alone."""
        key = None
        if self.answers is not None and pylock is None:
            key = _job_key(job, identity)
            if not job.refresh and (kept := self._kept(key)) is not None:
                return _answer(*kept)
        with tempfile.TemporaryDirectory(dir=self.work_dir, prefix="uv-") as scratch:
            folder = Path(scratch)
            requirements, constraints = folder / "requirements.in", folder / "constraints.txt"
            requirements.write_text("\n".join(job.requirements) + "\n", encoding="utf-8")
            constraints.write_text("\n".join(job.constraints) + "\n", encoding="utf-8")
            argv = self.argv(job, requirements, constraints)
            output = None
            if pylock is not None:
                argv += ["--format", "pylock.toml", "-o", str(pylock)]
            elif job.preferences:
                # uv prefers the versions an existing output file pins; the answer is
                # then written there instead of to stdout.
                output = folder / "preferred.txt"
                output.write_text("\n".join(job.preferences) + "\n", encoding="utf-8")
                argv += ["-o", str(output)]
            code, out, err = self._run(argv, self.environment(job), stoppable)
            if output is not None and code == 0:
                out = output.read_text(encoding="utf-8")
            if self.memo is not None:
                out, err = self.memo.upstream_text(out), self.memo.upstream_text(err)
                if pylock is not None and code == 0:
                    text = self.memo.upstream_text(pylock.read_text(encoding="utf-8"))
                    pylock.write_text(text, encoding="utf-8")
        try:
            answer = _answer(code, out, err)  # raises on a failure that is not an answer
        except NetworkError:
            # uv was answered 502/504 for an index the memo could not read: cudaup's own
            # error says why (the host, the proxy, the status), as it would have directly.
            fetched = _FETCH.search(err)
            url = fetched.group(1) if fetched else None
            if self.memo is not None and (failure := self.memo.error(url)) is not None:
                raise failure from None
            raise
        if key is not None and not job.offline:
            self._keep(key, code, out, err)
        return answer

    def remember(self, job: CompileJob, reason: str, identity: str = "") -> None:
        """Keep ``reason`` as ``job``'s answer (no resolution), as :meth:`compile` keeps uv's:
        a proof the plan found before uv answered (a pinned wheel's requirements, with uv
        then stopped) is what a warm plan takes, in words uv's answer is read back from."""
        if self.answers is not None and not job.offline and not job.refresh:
            err = f"error: No solution found when resolving dependencies:\n  cause: {reason}\n"
            self._keep(_job_key(job, identity), 1, "", err)

    def has_answer(self, job: CompileJob, identity: str = "") -> bool:
        """Whether :meth:`compile` would answer ``job`` from a kept answer, with no uv run."""
        if self.answers is None or job.refresh:
            return False
        return self._kept(_job_key(job, identity)) is not None

    def _kept(self, key: str) -> tuple[int, str, str] | None:
        assert self.answers is not None
        path = self.answers / key[:2] / f"{key}.json"
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
            age = time.time() - float(entry["time"])
            code, out, err = entry["code"], entry["out"], entry["err"]
        except (OSError, ValueError, RecursionError, KeyError, TypeError):
            return None
        if entry.get("key") != key or not 0 <= age < self.answer_ttl:
            return None
        if not (isinstance(code, int) and isinstance(out, str) and isinstance(err, str)):
            return None
        return code, out, err

    def _keep(self, key: str, code: int, out: str, err: str) -> None:
        assert self.answers is not None
        entry = {"key": key, "time": time.time(), "code": code, "out": out, "err": err}
        # An answer not kept is resolved again next time, nothing worse.
        with contextlib.suppress(OSError):
            atomic_write(self.answers / key[:2] / f"{key}.json", json.dumps(entry))

    def _run(
        self, argv: list[str], environment: dict[str, str], stoppable: Stoppable | None = None
    ) -> tuple[int, str, str]:
        with self._lock:
            if self._cancelled:
                raise CudaupError("the plan was cancelled")
            process = processes.start(argv, environment)
            self._running.add(process)
        if stoppable is not None:
            stoppable.started(process)
        try:
            out, err = process.communicate(timeout=max(120.0, 8 * self.timeout))
        except subprocess.TimeoutExpired:
            processes.stop(process)
            raise NetworkError(
                f"uv did not finish resolving within {max(120.0, 8 * self.timeout):.0f} s"
            ) from None
        finally:
            with self._lock:
                self._running.discard(process)
        return process.returncode, out, err

    def cancel(self) -> None:
        """Kill the resolutions this runner started and refuse new ones until :meth:`resume`."""
        with self._lock:
            self._cancelled = True
            for process in self._running:
                processes.kill(process)

    def resume(self) -> None:
        with self._lock:
            self._cancelled = False


def _job_key(job: CompileJob, identity: str) -> str:
    local = [i for i in job.indexes if i.startswith("file:")]
    remote = [i for i in job.indexes if not i.startswith("file:")]
    document = {
        "uv": str(uv_version()),
        "requirements": list(job.requirements),
        "constraints": list(job.constraints),
        "python": list(job.python),
        "platform": job.uv_platform,
        "indexes": remote,
        "local": len(local),
        "identity": identity,
        "default": job.default_index,
        "offline": job.offline,
        "interpreter": job.interpreter,
        "preferences": list(job.preferences),
        "prerelease": job.prerelease,
    }
    return hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()


def _answer(code: int, out: str, err: str) -> CompileAnswer:
    if code == 0:
        return CompileAnswer(parse_compile_output(out))
    if code == 1 and "No solution found" in err:
        return CompileAnswer(None, uv_reason(err), tuple(dict.fromkeys(_SOURCE_ONLY.findall(err))))
    if fetched := _FETCH.search(err):
        raise NetworkError(f"uv could not fetch {fetched.group(1)}: {_last_cause(err)}")
    if any(word in err for word in _NETWORK):
        raise NetworkError(f"uv could not reach an index: {_last_cause(err)}")
    if "No space left on device" in err or "Disk quota exceeded" in err:
        raise InsufficientSpaceError(
            f"uv could not write its cache or its work files: {_last_cause(err)}; free space "
            "in cudaup's cache, or set CUDAUP_CACHE_DIR to a directory on a larger disk"
        )
    raise SourceFormatError(f"uv could not resolve the plan: {uv_reason(err) or f'exit {code}'}")


#: uv's hint when a project has nothing but source for the target (a plan builds nothing).
_SOURCE_ONLY = re.compile(r"Wheels are required for `([^`]+)` because building from source is")


def uv_reason(err: str) -> str:
    """uv's explanation as one paragraph (its ``cause:`` lines joined, hints dropped)."""
    lines: list[str] = []
    for raw in err.splitlines():
        text = raw.strip()
        if not text or text.startswith(("hint:", "warning:")):
            if text.startswith("hint:"):
                break
            continue
        text = text.removeprefix("error: ").removeprefix("cause: ")
        lines.append(text)
    joined = " ".join(lines)
    joined = joined.replace("No solution found when resolving dependencies:", "").strip()
    return re.sub(
        r"\s+", " ", joined.removeprefix("No solution found when resolving dependencies").strip()
    )


def _last_cause(err: str) -> str:
    causes = [line.strip().removeprefix("cause: ") for line in err.splitlines() if line.strip()]
    return causes[-1] if causes else "no reason given"
