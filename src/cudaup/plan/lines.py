"""CUDA lines, and what ties a resolved package to one (pure).

A *line* is a CUDA major.minor (13.0).  The resolver is steered onto a line by
constraints (:func:`line_constraints`): ``cuda-toolkit``, the CUDA runtime and
NVRTC wheels to ``X.Y.*``, the other majors' runtime and NVRTC names
forbidden.  What it then resolves is read back
(:func:`evidence_of`): a package's line comes from the per-line index it was
taken from (``/whl/cu130``), its local version (``+cu130``), its version when
it is ``cuda-toolkit`` or the CUDA runtime/NVRTC, and only its major from
names (``nvidia-cudnn-cu13``, ``cupy-cuda13x``, ``jax-cuda13-plugin``; the whole
line from ``mxnet-cu112``), or from what its wheel carries (:mod:`cudaup.plan.wheels`):
the line its version module declares, one object per runtime (the set of lines it
supports), the CUDA runtime its objects link or load by name (only the major), or a
bundled toolchain (a GPU build that fits any line).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from packaging.utils import canonicalize_name
from packaging.version import Version

from cudaup.core.versions import shown
from cudaup.errors import UsageError

Line = tuple[int, int]

TOOLKIT = "cuda-toolkit"
_TAG = re.compile(r"^cu(\d{2,3})$")
_LOCAL_CU = re.compile(r"(?:^|\.)cu(\d{2,3})(?:$|\.)")
#: The runtime and NVRTC wheels are versioned like the toolkit (12.8.90 is CUDA 12.8).
_RUNTIME = re.compile(r"^nvidia-cuda-(?:runtime|nvrtc)(?:-cu(\d{2}))?$")
#: Names that carry a major: nvidia-cudnn-cu13, cuequivariance-ops-torch-cu12.
_SUFFIX_MAJOR = re.compile(r"-cu(\d{2})$")
#: Names that carry a whole line: mxnet-cu112, cupy-cuda112 (CUDA 11.2).
_NAME_LINE = re.compile(r"-cu(?:da)?(\d{3})$")
#: Families with the major in the name: cupy-cuda13x, jax-cuda13-plugin, jax-cuda12-pjrt.
_FAMILY_MAJOR = re.compile(r"(?:^|-)cuda(\d{2})(?:x$|-|$)")
#: The libraries whose soname's major is the CUDA major they belong to: the runtime, NVRTC,
#: nvJitLink and cuBLAS (``libcublas.so.12`` is CUDA 12.x's).  cuFFT, cuSPARSE and cuRAND
#: keep their own numbering (``libcufft.so.11`` is CUDA 12's, ``libcurand.so.10`` every
#: major's since 10), so they say nothing about the line.
_CUDA_LIBRARY = re.compile(
    r"^(libcudart|libnvrtc|libnvJitLink|libcublas|libcublasLt)(?:-[0-9a-f]{8})?\.so\.(\d+)"
)


def tag_line(tag: str) -> Line | None:
    """``cu130`` → (13, 0); ``cu92`` → (9, 2); anything else → None."""
    match = _TAG.match(tag)
    if not match:
        return None
    digits = match.group(1)
    return int(digits[:-1]), int(digits[-1])


def line_text(line: Line) -> str:
    return f"{line[0]}.{line[1]}"


def line_tag(line: Line) -> str:
    return f"cu{line[0]}{line[1]}"


def release_line(release: str) -> Line:
    parts = Version(release).release
    return parts[0], parts[1] if len(parts) > 1 else 0


def parse_line(text: str) -> Line:
    """``--cuda 13.0`` (or ``cu130``) → (13, 0)."""
    tagged = tag_line(text.strip().lower())
    if tagged is not None:
        return tagged
    match = re.fullmatch(r"(\d{1,2})\.(\d{1,2})", text.strip())
    if not match:
        raise UsageError(f"{shown(text)} is not a CUDA line; write it as 13.0 or cu130")
    return int(match.group(1)), int(match.group(2))


def describe_lines(lines: Iterable[Line], every: Sequence[Line]) -> str:
    """``12.8 only``, ``13.0-13.5``, ``12.6, 12.8 and 13.0-13.2``: runs of adjacent known lines."""
    chosen = sorted(set(lines))
    if not chosen:
        return "no line"
    if len(chosen) == 1:
        return f"{line_text(chosen[0])} only"
    order = sorted(set(every) | set(chosen))
    runs: list[list[Line]] = []
    for line in chosen:
        if runs and order.index(line) == order.index(runs[-1][-1]) + 1:
            runs[-1].append(line)
        else:
            runs.append([line])
    return _spelled(runs)


def line_tiers(
    lines: Sequence[Line], support: Mapping[Line, str | None], allow_minor_compat: bool = False
) -> list[list[Line]]:
    """The order lines are tried in, as groups, each newest first (``lines``' order kept).

    The rule an engineer follows: the newest line the driver runs *fully* (NVIDIA's
    per-release table) wins; a line it runs only under minor-version compatibility
    (``support`` says ``"minor-version"``: the application runs, but PTX JIT and features
    that need the newer driver do not) is tried only when no fully supported line fits,
    or at once with ``allow_minor_compat``.  A line whose support is not known (no driver,
    None) counts as fully supported: nothing says otherwise, and the driver check that
    follows still stands.  Empty groups are left out."""
    if allow_minor_compat:
        return [list(lines)] if lines else []
    minor = [line for line in lines if support.get(line) == "minor-version"]
    full = [line for line in lines if line not in minor]
    return [tier for tier in (full, minor) if tier]


# ----------------------------------------------------------------------------
# Evidence: what ties one resolved package to a line
# ----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Evidence:
    """A resolved package's CUDA line (``minor is None``: only its major is known)."""

    project: str
    version: str
    major: int
    minor: int | None
    how: str
    #: The toolkit release this package is (``cuda-toolkit`` itself) or None.
    release: str | None = None
    #: ``name`` evidence is answered by forbidding the name; any other by its version.
    #: ``any``: a GPU build that sets no line; ``lines``: exactly the lines in ``lines``.
    kind: str = "version"
    lines: tuple[Line, ...] = ()

    @classmethod
    def cpu_only(cls, project: str, version: str, how: str) -> Evidence:
        """A build of a CUDA project that carries no CUDA at all: it fits no line."""
        return cls(project, version, 0, None, how, kind="cpu-only")

    @classmethod
    def any_line(cls, project: str, version: str, how: str) -> Evidence:
        """A GPU build that brings its own CUDA toolchain and sets no line: it fits every one."""
        return cls(project, version, 0, None, how, kind="any")

    @property
    def line(self) -> Line | None:
        return None if self.minor is None else (self.major, self.minor)

    @property
    def names_a_line(self) -> bool:
        """Whether this says anything about which line (a CPU-only build does too)."""
        return self.kind != "any"

    def fits(self, line: Line) -> bool:
        if self.kind == "cpu-only":
            return False
        if self.kind == "any":
            return True
        if self.kind == "lines":
            return line in self.lines
        return self.major == line[0] and (self.minor is None or self.minor == line[1])

    def cuda(self) -> str:
        if self.kind == "cpu-only":
            return "no CUDA"
        if self.kind == "any":
            return "any CUDA line"
        if self.kind == "lines":
            return f"CUDA {_runs(self.lines)}"
        return f"CUDA {self.major}.x" if self.minor is None else f"CUDA {self.major}.{self.minor}"

    def describe(self) -> str:
        return f"{self.project} {self.version}: {self.cuda()} ({self.how})"

    def exclusion(self, toward: Line | None = None) -> str:
        """The constraint that keeps this package (or this version of it) out of a resolution.

        With ``toward``, a build for lines all older than ``toward`` keeps out every version
        up to its own (``>``), one for lines all newer every version from its own on (``<``):
        uv, having settled other packages first, can backtrack a package (a request too)
        to old builds though newer ones fit, and excluding those one at a time walks down,
        away from the line.  A version with a local label (``+cu128``) is excluded alone: a ``<`` or ``>``
        specifier may not carry one."""
        if self.kind == "name":
            return f"{self.project}<0"
        side = 0 if toward is None or "+" in self.version else self._side(toward)
        operator = {-1: ">", 0: "!=", 1: "<"}[side]
        return f"{self.project}{operator}{self.version}"

    def _side(self, line: Line) -> int:
        """-1 when every line this build fits is older than ``line``, 1 when every one is
        newer, else 0 (it fits ``line``, or says nothing of a direction)."""
        if self.kind == "lines":
            fitted = self.lines
        elif self.kind == "version":
            fitted = ((self.major, self.minor),) if self.minor is not None else ()
            if self.minor is None and self.major != line[0]:
                return -1 if self.major < line[0] else 1
        else:
            return 0
        if fitted and all(f < line for f in fitted):
            return -1
        if fitted and all(f > line for f in fitted):
            return 1
        return 0


def toolkit_release(version: Version) -> str | None:
    """``cuda-toolkit`` 13.4.1.0 → ``13.4.1``; pre-releases and placeholders → None."""
    if version.is_prerelease or version.is_devrelease or version.local or len(version.release) < 2:
        return None
    if version.release[0] < 1:
        return None
    return ".".join(str(p) for p in (*version.release[:3], 0, 0)[:3])


def evidence_of(
    project: str, version: Version, index_line: Line | None, index_url: str | None
) -> Evidence | None:
    """The strongest signal one resolved package carries by itself (None: it carries none)."""
    name = canonicalize_name(project)
    text = str(version)
    if name == TOOLKIT:
        release = toolkit_release(version)
        if release is None:
            return None
        major, minor = release_line(release)
        return Evidence(name, text, major, minor, f"{TOOLKIT} {release}", release=release)
    if _RUNTIME.match(name) and len(version.release) >= 2:
        return Evidence(name, text, version.release[0], version.release[1], f"{name} {text}")
    if index_line is not None:
        return Evidence(name, text, index_line[0], index_line[1], f"from {index_url}")
    if version.local and (match := _LOCAL_CU.search(version.local)):
        local = tag_line("cu" + match.group(1))
        if local is not None:
            return Evidence(name, text, local[0], local[1], f"local version +{version.local}")
    if (match := _NAME_LINE.search(name)) and (named := tag_line("cu" + match.group(1))):
        return Evidence(name, text, named[0], named[1], f"the name {name}", kind="name")
    if match := (_SUFFIX_MAJOR.search(name) or _FAMILY_MAJOR.search(name)):
        return Evidence(name, text, int(match.group(1)), None, f"the name {name}", kind="name")
    return None


def name_stem(project: str) -> str | None:
    """``nvidia-cutlass-dsl-libs-cu12`` → ``nvidia-cutlass-dsl-libs-cuNN``: the family a
    major-named project belongs to (None: its name carries no major)."""
    name = canonicalize_name(project)
    if _SUFFIX_MAJOR.search(name):
        return _SUFFIX_MAJOR.sub("-cuNN", name)
    if _FAMILY_MAJOR.search(name):
        return _FAMILY_MAJOR.sub(lambda m: m.group(0).replace(m.group(1), "NN"), name)
    return None


def contradictions(evidence: Iterable[Evidence], line: Line) -> list[Evidence]:
    """The evidence that does not fit ``line``.

    A major in a name is overruled by the same family's name for the line's major in
    the same resolution: ``nvidia-cutlass-dsl`` requires ``…-libs-cu12`` always and
    ``…-libs-cu13`` with its ``cu13`` extra, so both together decide nothing."""
    items = list(evidence)
    fitting_stems = {name_stem(e.project) for e in items if e.kind == "name" and e.fits(line)}
    return [
        e
        for e in items
        if not e.fits(line) and not (e.kind == "name" and name_stem(e.project) in fitting_stems)
    ]


def library_evidence(
    project: str, version: str, libraries: Iterable[str], *, how: str = "its shared objects link {}"
) -> Evidence | None:
    """``libcudart.so.12`` among a wheel's linked libraries → CUDA 12.x."""
    found = _cuda_libraries(libraries)
    if not found:
        return None
    majors = {major for major, _ in found}
    major, library = found[-1]
    if len(majors) > 1:  # links two majors' runtimes: evidence for neither, said so
        names = ", ".join(lib for _, lib in found)
        return Evidence(project, version, major, None, f"links {names}: mixed majors")
    return Evidence(project, version, major, None, how.format(library))


def _cuda_libraries(libraries: Iterable[str]) -> list[tuple[int, str]]:
    """Each of ``libraries`` whose soname's major is CUDA's, with that major, in order."""
    return sorted({(int(m.group(2)), lib) for lib in libraries if (m := _CUDA_LIBRARY.match(lib))})


def loaded_evidence(project: str, version: str, loaded: Iterable[str]) -> Evidence | None:
    """The CUDA libraries a wheel loads by name: one major's say that major; both majors'
    (cudnn-frontend dlopens ``libcudart.so.12`` or ``.so.13``, whichever it finds) say a
    GPU build for either, which sets no line."""
    found = _cuda_libraries(loaded)
    if len({major for major, _ in found}) > 1:
        names = ", ".join(lib for _, lib in found)
        return Evidence.any_line(project, version, f"loads {names} by name: either major")
    return library_evidence(project, version, loaded, how="loads {} by name")


_DECLARED = re.compile(r"['\"](\d+)\.(\d+)")
_PER_RUNTIME_TAG = re.compile(r"[_-]cuda(\d{3})(?:_[a-z]+)?\.so$")


def declared_evidence(project: str, version: str, declared: str) -> Evidence | None:
    """``paddle/version/__init__.py says cuda_version = '11.8'`` → CUDA 11.8."""
    match = _DECLARED.search(declared)
    if not match:
        return None
    return Evidence(project, version, int(match.group(1)), int(match.group(2)), declared)


def per_runtime_line(name: str) -> Line | None:
    """``libbitsandbytes_cuda128.so`` → (12, 8): an object built for one CUDA runtime."""
    match = _PER_RUNTIME_TAG.search(name)
    return tag_line("cu" + match.group(1)) if match else None


def runtimes_evidence(project: str, version: str, objects: Iterable[str]) -> Evidence | None:
    """One object per CUDA runtime (``libbitsandbytes_cuda117.so`` … ``_cuda128.so``): the
    package loads the one of the runtime beside it, so it supports exactly those lines."""
    lines = sorted({line for name in objects if (line := per_runtime_line(name))})
    if not lines:
        return None
    major = lines[-1][0]
    shown = ", ".join(name.rsplit("/", 1)[-1] for name in sorted(objects)[:2])
    how = f"one object per CUDA runtime ({shown}, …: {len(lines)} lines)"
    return Evidence(project, version, major, None, how, kind="lines", lines=tuple(lines))


def toolchain_evidence(project: str, version: str, tools: Sequence[str]) -> Evidence | None:
    """A bundled CUDA toolchain (triton's ``backends/nvidia/bin/ptxas``): a GPU build, any line."""
    if not tools:
        return None
    shown = ", ".join(tools[:3]) + (", …" if len(tools) > 3 else "")
    how = f"a GPU build that sets no line: it ships its own CUDA tools ({shown})"
    return Evidence.any_line(project, version, how)


def _spelled(runs: list[list[Line]]) -> str:
    """Runs of lines in words: ``11.7-11.8, 12.0-12.6 and 12.8``."""
    words = [
        line_text(run[0]) if len(run) == 1 else f"{line_text(run[0])}-{line_text(run[-1])}"
        for run in runs
    ]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _runs(lines: Sequence[Line]) -> str:
    """``11.7-11.8, 12.0-12.6 and 12.8``: runs of consecutive minors."""
    runs: list[list[Line]] = []
    for line in sorted(lines):
        if runs and runs[-1][-1] == (line[0], line[1] - 1):
            runs[-1].append(line)
        else:
            runs.append([line])
    return _spelled(runs)


def is_cuda_library(name: str) -> bool:
    return _CUDA_LIBRARY.match(name) is not None


# ----------------------------------------------------------------------------
# Constraints: steering the resolver onto one line
# ----------------------------------------------------------------------------
def line_constraints(
    line: Line, majors: Iterable[int], exclusions: Iterable[str] = (), held: Iterable[str] = ()
) -> list[str]:
    """Constraints (``uv pip compile -c``) that keep a resolution on ``line``.

    What *is* a line: ``cuda-toolkit`` of it, and the CUDA runtime and NVRTC wheels of
    it (``nvidia-cuda-runtime==13.0.*``, or ``-cu12`` for 12.x).  The other ``majors``'
    runtime and NVRTC names are forbidden.  Library wheels (cuBLAS, cuFFT, …) are not
    held: NVIDIA's own packages let them float past a release.  ``exclusions`` are what
    reading a resolution back taught (``sgl-kernel!=0.3.21``, ``cupy-cuda12x<0``);
    ``held`` are projects whose version is the CUDA release they belong to
    (``cuda-bindings`` 13.0.3 is CUDA 13.0), held to the line like the runtime."""
    major, minor = line
    constraints = [f"{TOOLKIT}=={major}.{minor}.*"]
    constraints += [
        f"{name}=={major}.{minor}.*" for name in sorted(set(map(canonicalize_name, held)))
    ]
    for base in ("nvidia-cuda-runtime", "nvidia-cuda-nvrtc"):
        constraints.append(f"{base}=={major}.{minor}.*")
        constraints.append(f"{base}-cu{major}=={major}.{minor}.*")
        constraints.extend(f"{base}-cu{other}<0" for other in sorted(set(majors) - {major}))
    constraints.extend(sorted(set(exclusions)))
    return constraints
