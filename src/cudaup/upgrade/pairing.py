"""What is built together stays together: the checks a resolved move must pass before it
is a plan, and the pins that make it pass.

* A *companion* (``flashinfer-cubin``, ``flashinfer-jit-cache``) has its package's version
  (``flashinfer-python``): when the resolution gave them different versions, both are
  pinned to the newest version both publish, not newer than the package's, and the move
  is resolved again.
* A package whose extension modules link libtorch (:attr:`Census.torch_linked`) needs a
  build made for the torch chosen.  Its resolved version is proven by its metadata (a
  ``torch==T`` pin: sglang-kernel 0.4.10 pins torch==2.14.1); else another version that
  pins ``T`` is asked for (newest first); else, with none, the pairing is refused with the
  reason: the resolver's choice of an unpinned build is never taken on trust.  Else its
  wheel and the new torch's are unpacked (by uv, through the cache the upgrade installs
  from) and every torch symbol its libtorch-linked objects need (mangled names in c10::,
  at::, torch::, caffe2::) must be exported by torch's libraries; one missing, or no
  object to check, and the pairing is refused with the symbols named.

The rules are pure: the metadata and the versions an index publishes come through
:class:`Catalog`, which the caller backs with the package index.
"""

from __future__ import annotations

import mmap
import os
import re
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from cudaup.core.wheels import wheel_fits
from cudaup.errors import NoCommonLineError
from cudaup.net.http import HttpClient
from cudaup.plan import PlanResult, PlanTarget
from cudaup.plan.closure import Closure
from cudaup.plan.elf import DynamicSymbols, NotElfError, UndefinedSymbol, dynamic_symbols, scan
from cudaup.plan.lines import Line, line_text
from cudaup.resolve.pypi import DistFile, PackageIndex
from cudaup.upgrade.apply import run_uv
from cudaup.upgrade.census import TORCH, Request, is_torch_library

#: Versions of one libtorch-linked project whose metadata is read in search of a pin,
#: and (each an unpacked wheel) whose symbols are checked when none pins.
PIN_SEARCH = 8
SYMBOL_SEARCH = 2
#: Resolutions after the first before the pins must have settled (each round can only
#: pin, and a pinned project is not pinned again).
ROUNDS = 3


class Catalog(Protocol):
    """What an index says about a project (the I/O edge)."""

    def versions(self, project: str) -> Sequence[Version]:
        """The versions with a wheel for the target, newest first."""
        ...

    def requires(self, project: str, version: Version) -> Sequence[Requirement]:
        """The Requires-Dist of that version's wheel for the target."""
        ...

    def symbols(self, project: str, version: Version, torch: Version) -> SymbolCheck:
        """The torch symbols that version's libtorch-linked objects need, checked against
        what ``torch``'s libraries export."""
        ...


@dataclass(frozen=True)
class SymbolCheck:
    #: The objects that link libtorch (relative paths in the wheel).
    objects: tuple[str, ...]
    #: How many torch symbols they need in all.
    needed: int
    #: Those no library of the torch exports.
    missing: tuple[str, ...]

    @property
    def proven(self) -> bool:
        return bool(self.objects) and not self.missing


@dataclass
class Pairing:
    """The outcome of one round: pins to resolve again with, and what was proven."""

    pins: dict[str, Version] = field(default_factory=dict)
    proven: list[str] = field(default_factory=list)


def companion_pins(
    closure: Closure, companions: Mapping[str, str], catalog: Catalog
) -> dict[str, Version]:
    """Companion and package → the one version both must have, where they differ: the
    newest version both publish that is not newer than the package's resolved one (else
    the oldest both publish above it)."""
    pins: dict[str, Version] = {}
    for companion, package in sorted(companions.items()):
        mine, theirs = closure.get(companion), closure.get(package)
        if mine is None or theirs is None or mine.version == theirs.version:
            continue
        both = set(catalog.versions(companion)) & set(catalog.versions(package))
        if not both:
            raise NoCommonLineError(
                f"{companion} must have {package}'s version, and the indexes publish no "
                f"version of both (resolved: {mine}, {theirs})"
            )
        below = [v for v in both if v <= theirs.version]
        common = max(below) if below else min(both)
        pins[companion] = pins[package] = common
    return pins


def pins_torch(requires: Sequence[Requirement], torch: Version) -> bool:
    """Whether the requirements pin exactly ``torch`` (``torch==2.14.1``), markers aside."""
    for requirement in requires:
        if canonicalize_name(requirement.name) != TORCH:
            continue
        if requirement.marker is not None and "extra" in str(requirement.marker):
            continue  # an optional extra's pin says nothing about the build
        exact = [
            s for s in requirement.specifier if s.operator in {"==", "==="} and "*" not in s.version
        ]
        if exact and requirement.specifier.contains(torch, prereleases=True):
            return True
    return False


def torch_pairing(
    closure: Closure,
    linked: Mapping[str, tuple[str, ...]],
    catalog: Catalog,
    installed: Mapping[str, Version | None],
) -> Pairing:
    """Each libtorch-linked package of the closure proven to pair with its torch, or the
    version to pin that does; :class:`NoCommonLineError` when no version can be proven.
    A package and a torch both as ``installed`` are the environment's own pairing."""
    pairing = Pairing()
    torch = closure.get(TORCH)
    if torch is None:
        return pairing
    for name in sorted(linked):
        package = closure.get(name)
        if package is None:
            continue
        if installed.get(TORCH) == torch.version and installed.get(name) == package.version:
            continue
        libraries = ", ".join(linked[name])
        if pins_torch(catalog.requires(name, package.version), torch.version):
            pairing.proven.append(f"{package} pins torch=={torch.version} (it links {libraries})")
            continue
        candidates = [v for v in catalog.versions(name) if v != package.version][:PIN_SEARCH]
        pinned = next(
            (v for v in candidates if pins_torch(catalog.requires(name, v), torch.version)), None
        )
        if pinned is not None:
            pairing.pins[name] = pinned
            continue
        check = catalog.symbols(name, package.version, torch.version)
        if check.proven:
            pairing.proven.append(
                f"{package} pins no torch, but torch {torch.version}'s libraries export all "
                f"{check.needed} torch symbols its {', '.join(check.objects)} need"
            )
            continue
        # The resolved build fails the proof: another (the newest first) may pass it.
        tried = candidates[:SYMBOL_SEARCH]
        proven = next((v for v in tried if catalog.symbols(name, v, torch.version).proven), None)
        if proven is not None:
            pairing.pins[name] = proven
            continue
        if check.objects:
            shown = ", ".join(check.missing[:3]) + (", …" if len(check.missing) > 3 else "")
            why = (
                f"torch {torch.version}'s libraries lack {len(check.missing)} of the "
                f"{check.needed} torch symbols its {', '.join(check.objects)} need ({shown})"
            )
        else:
            why = f"no object of its wheel links libtorch to check against torch {torch.version}"
        others = f" (nor those of {', '.join(map(str, tried))})" if tried else ""
        raise NoCommonLineError(
            f"{package} links {libraries}, and nothing proves it was built for torch "
            f"{torch.version}: none of the {len(candidates) + 1} versions read pins that "
            f"torch, and {why}{others}; an extension built against another torch fails to "
            f"load, so cudaup does not pair them. Ask for a {name} version made for torch "
            f"{torch.version}, or name a line (cudaup upgrade X.Y) it has a build for"
        )
    return pairing


def pinned(requirement: Requirement, version: Version) -> Requirement:
    """``flashinfer-python[cu13]`` pinned to ``==0.6.8.post1``, extras and marker kept."""
    copy = Requirement(str(requirement))
    copy.specifier = SpecifierSet(f"=={version}")
    return copy


Replan = Callable[[list[Request], Line], PlanResult]


def settle(
    requests: list[Request],
    result: PlanResult,
    companions: Mapping[str, str],
    linked: Mapping[str, tuple[str, ...]],
    catalog: Catalog,
    replan: Replan,
    installed: Mapping[str, Version | None],
) -> tuple[list[Request], PlanResult, list[str]]:
    """Resolve again on the chosen line, pinned, until companions and libtorch-linked
    packages pair (see the module docstring); the requests, the result and what proves
    each pairing."""
    for _ in range(ROUNDS + 1):
        pins = companion_pins(result.closure, companions, catalog)
        pairing = torch_pairing(result.closure, linked, catalog, installed)
        pins.update(pairing.pins)
        if not pins:
            kept = [
                f"{result.closure.get(c)} has {package}'s version (its companion)"
                for c, package in sorted(companions.items())
                if result.closure.get(c) is not None and result.closure.get(package) is not None
            ]
            return requests, result, [*pairing.proven, *kept]
        requests = with_pins(requests, pins)
        result = replan(requests, result.line)
    raise NoCommonLineError(
        f"the pins that keep companions and libtorch builds together did not settle on CUDA "
        f"{line_text(result.line)} after {ROUNDS} resolutions"
    )


def with_pins(requests: Sequence[Request], pins: Mapping[str, Version]) -> list[Request]:
    """The requests with ``pins`` applied; a pinned project nothing asked for is added."""
    out: list[Request] = []
    for r in requests:
        name = canonicalize_name(r.requirement.name)
        out.append(replace(r, requirement=pinned(r.requirement, pins[name])) if name in pins else r)
    asked = {canonicalize_name(r.requirement.name) for r in requests}
    out += [
        Request(Requirement(f"{n}=={v}"), None) for n, v in sorted(pins.items()) if n not in asked
    ]
    return out


class IndexCatalog:
    """:class:`Catalog` from the indexes a plan used: each project's page on the index it
    came from (its per-line index, else the plan's default index), wheels for the target."""

    def __init__(
        self,
        http: HttpClient,
        result: PlanResult,
        target: PlanTarget,
        cache: Path,
        scratch: Path,
        timeout: float,
    ) -> None:
        self.http, self.result, self.target = http, result, target
        #: uv's cache (the one the upgrade installs from) and where wheels are unpacked.
        self.cache, self.scratch, self.timeout = cache, scratch, timeout
        self._files: dict[str, dict[Version, DistFile]] = {}
        self._index: dict[str, PackageIndex] = {}

    def _wheels(self, project: str) -> dict[Version, DistFile]:
        if project not in self._files:
            origin = self.result.origins.get(project)
            url = origin.url if origin is not None else self.result.default_index()
            self._index[project] = PackageIndex(self.http, url)
            found: dict[Version, DistFile] = {}
            for file in self._index[project].files(project):
                version = file.version
                if (
                    version is not None
                    and file.is_wheel
                    and not file.yanked
                    and wheel_fits(file.filename, self.target.platform, self.target.python)
                ):
                    found.setdefault(version, file)
            self._files[project] = found
        return self._files[project]

    def versions(self, project: str) -> Sequence[Version]:
        return sorted((v for v in self._wheels(project) if not v.is_prerelease), reverse=True)

    def requires(self, project: str, version: Version) -> Sequence[Requirement]:
        file = self._wheels(project).get(version)
        if file is None:
            return ()
        metadata = self._index[project].metadata(file)
        return list(metadata.requires_dist or ())

    def symbols(self, project: str, version: Version, torch: Version) -> SymbolCheck:
        self.scratch.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="cudaup-pairing-", dir=self.scratch) as work:
            extension, library = Path(work) / "extension", Path(work) / "torch"
            self._fetch(f"{project}=={version}", extension)
            self._fetch(f"{TORCH}=={torch}", library)
            libraries = [
                read_symbols(path)
                for path in sorted((library / TORCH / "lib").glob("lib*.so*"))
                if is_torch_library(path.name)
            ]
            objects: list[str] = []
            needed: dict[str, UndefinedSymbol] = {}
            for path in sorted(extension.rglob("*.so*")):
                if path.is_symlink() or not path.is_file() or not _links_torch(path):
                    continue
                objects.append(str(path.relative_to(extension)))
                for symbol in read_symbols(path).undefined:
                    if not symbol.weak and _TORCH_SYMBOL.match(symbol.name):
                        needed.setdefault(symbol.name, symbol)
            missing = sorted(
                name
                for name, symbol in needed.items()
                if not any(lib.defines(symbol) for lib in libraries)
            )
            return SymbolCheck(tuple(objects), len(needed), tuple(missing))

    def _fetch(self, requirement: str, target: Path) -> None:
        """One wheel unpacked into ``target`` by uv (no dependencies, no build code), through
        the cache the upgrade installs from: what is read here is not downloaded again."""
        arguments = [
            "pip", "install", requirement, "--no-deps", "--target", str(target),
            "--python", self.target.interpreter or "python3", "--no-config", "--native-tls",
            "--no-build", "--link-mode", "hardlink", "--cache-dir", str(self.cache),
            "--default-index", self.result.default_index(),
        ]  # fmt: skip
        for url in self.result.extra_index_urls():
            arguments += ["--index", url]
        run_uv(arguments, f"fetch {requirement} to read its symbols", target, self.timeout)


#: Mangled names in torch's namespaces (c10::, at::, torch::, caffe2::), their type
#: information and vtables: what an extension built against torch needs from it.
_TORCH_SYMBOL = re.compile(r"^_Z(?:T[IVS])?N?K?(?:3c10|2at|5torch|6caffe2)")


def read_symbols(path: Path) -> DynamicSymbols:
    """One object's dynamic symbols (mapped, so only the pages read are loaded); an object
    that is not ELF has none."""
    try:
        with path.open("rb") as handle:
            if os.fstat(handle.fileno()).st_size == 0:
                return DynamicSymbols(frozenset(), (), False)
            with mmap.mmap(handle.fileno(), 0, prot=mmap.PROT_READ) as data:
                return dynamic_symbols(data)
    except NotElfError:
        return DynamicSymbols(frozenset(), (), False)


def _links_torch(path: Path) -> bool:
    with path.open("rb") as handle:
        data = handle.read(64 << 10)
        try:
            found = scan(data)
            if not found.complete and len(data) < found.needed:
                data += handle.read(found.needed - len(data))
                found = scan(data)
        except NotElfError:
            return False
    return any(is_torch_library(name) for name in found.libraries)
