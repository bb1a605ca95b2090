"""One layout from every channel: a CUDA_HOME with bin/, include/, lib64/, nvvm/.

NVIDIA's redist archives each hold one component tree (``bin/ include/ lib/``
and a ``LICENSE``); 13.x wheels put their files under ``nvidia/cu13/``; 12.x
wheels have one ``nvidia/<component>/`` tree each.  :func:`merge_tree` moves a
component tree into the toolkit (same filesystem: renames, no copies);
:func:`finish_layout` adds what builds expect of a CUDA_HOME and what the
channels leave out: ``lib64`` (a link to ``lib``), unversioned ``.so`` links
(``libcudart.so -> libcudart.so.13``), and ``version.json`` in NVIDIA's format so
that ``doctor`` identifies the release exactly.

Destinations named by outside values are built by :func:`cudaup.util.paths.inside`:
``licenses/<component>/`` from a checked component name, ``dist-info/<name>``
from a wheel's own ``*.dist-info`` directory, whose ``RECORD`` lists relative
paths only (checked when the wheel was unpacked: a ``../`` there is a hostile
wheel, refused).
"""

from __future__ import annotations

import filecmp
import json
import re
import shutil
from collections.abc import Mapping
from pathlib import Path

from cudaup.core.names import check_component
from cudaup.errors import IntegrityError
from cudaup.util.paths import inside

_SONAME = re.compile(r"^(lib[\w+-]+?\.so)\.(\d+(?:\.\d+)*)$")
#: Top-level files of a component archive (LICENSE, README…) would collide between
#: components; they are kept per component instead.
LICENSES = "licenses"


def merge_tree(source: Path, destination: Path, component: str) -> list[str]:
    """Move ``source``'s tree into ``destination``; the relative paths that collided.

    Identical files are fine (components share some headers); a top-level file goes
    to ``licenses/<component>/``; a differing file at the same path is an error,
    since two components would disagree about what the toolkit contains.
    """
    collisions: list[str] = []
    check_component(component, field="component", where=str(source), error=IntegrityError)
    destination.mkdir(parents=True, exist_ok=True)
    for entry in sorted(source.iterdir()):
        if entry.name.startswith("."):
            continue  # e.g. the cccl wheel's nvidia/cu13/.metadata
        if entry.is_file() and not entry.is_symlink():
            target = inside(destination, LICENSES, component, entry.name)
            target.parent.mkdir(parents=True, exist_ok=True)
            entry.replace(target)
            continue
        _merge_entry(entry, inside(destination, entry.name), entry.name, collisions)
    return collisions


def _merge_entry(entry: Path, target: Path, relative: str, collisions: list[str]) -> None:
    if entry.is_dir() and not entry.is_symlink():
        if not target.exists() and not target.is_symlink():
            entry.replace(target)  # a whole subtree in one rename
            return
        if not target.is_dir() or target.is_symlink():
            raise IntegrityError(
                f"{relative} is a directory in one component and a file in another"
            )
        for child in sorted(entry.iterdir()):
            _merge_entry(child, inside(target, child.name), f"{relative}/{child.name}", collisions)
        return
    if not target.exists() and not target.is_symlink():
        entry.replace(target)
        return
    same = (
        entry.is_symlink() and target.is_symlink() and entry.readlink() == target.readlink()
    ) or (
        not entry.is_symlink()
        and not target.is_symlink()
        and target.is_file()
        and filecmp.cmp(entry, target, shallow=False)
    )
    if not same:
        raise IntegrityError(f"two components ship different files at {relative}")
    collisions.append(relative)


def wheel_roots(extracted: Path) -> list[Path]:
    """The CUDA_HOME-shaped trees inside an unpacked wheel (``nvidia/cu13`` or ``nvidia/<comp>``)."""
    nvidia = extracted / "nvidia"
    if not nvidia.is_dir():
        return []
    cu13 = [p for p in nvidia.iterdir() if p.is_dir() and re.fullmatch(r"cu\d+", p.name)]
    if cu13:
        return cu13
    return [p for p in sorted(nvidia.iterdir()) if p.is_dir() and p.name != "__pycache__"]


def keep_wheel_record(extracted: Path, destination: Path) -> None:
    """Keep each wheel's ``*.dist-info`` under ``dist-info/`` (doctor reads versions there).

    The RECORD kept there names paths a tool that trusts it (an uninstaller) would act
    on: every one of them was checked (a plain relative path, listing exactly the
    wheel's files) when the wheel was unpacked (:func:`cudaup.install.extract.wheel.check_record`),
    and the tree it comes from is checked against its manifest on every use.
    """
    for info in extracted.glob("*.dist-info"):
        target = inside(destination, "dist-info", info.name)
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():
            shutil.rmtree(target)
        info.replace(target)


def _unversioned_links(lib: Path) -> list[str]:
    made: list[str] = []
    best: dict[str, str] = {}
    for entry in sorted(lib.iterdir()):
        match = _SONAME.match(entry.name)
        if not match:
            continue
        base = match.group(1)
        # prefer the shortest versioned name: libcudart.so.13 over libcudart.so.13.0.88
        if base not in best or len(entry.name) < len(best[base]):
            best[base] = entry.name
    for base, name in best.items():
        link = lib / base
        if not link.exists() and not link.is_symlink():
            link.symlink_to(name)
            made.append(base)
    return made


def finish_layout(root: Path, release: str, components: Mapping[str, str]) -> list[str]:
    """Add lib64, unversioned .so links and version.json; the notes of what was added."""
    notes: list[str] = []
    lib, lib64 = root / "lib", root / "lib64"
    if lib.is_dir() and not lib64.exists() and not lib64.is_symlink():
        lib64.symlink_to("lib")
        notes.append("lib64 -> lib")
    library_dir = lib64 if lib64.is_dir() else lib
    if library_dir.is_dir():
        made = _unversioned_links(library_dir.resolve())
        if made:
            notes.append(f"unversioned links: {', '.join(made)}")
    document: dict[str, dict[str, str]] = {"cuda": {"name": "CUDA SDK", "version": release}}
    for name, version in sorted(components.items()):
        document[name] = {"name": name, "version": version}
    (root / "version.json").write_text(json.dumps(document, indent=3) + "\n", encoding="utf-8")
    return notes
