"""NVIDIA's library products on the fake site: cuDNN, cuTENSOR and cuSPARSELt redist trees.

Each product lives where NVIDIA keeps it, ``/download/compute/<product>/redist/``: an
auto-generated listing, ``redistrib_<label>.json`` manifests in the real nested shape
(``"linux-x86_64": {"cuda12": {…}, "cuda13": {…}}`` with ``"cuda_variant"``), and the
archives they name.  cuDNN 9.27.0, cuTENSOR 2.8.1 and cuSPARSELt 0.10.0 keep the structure of
NVIDIA's real manifests (``tests/fakenvidia/data/redistrib_*`` are verbatim copies of the
samples), every archive replaced by a tiny real one with the real layout (``include/cudnn*.h``,
``lib/libcudnn*.so.9`` …) and its true size and hashes; cuDNN 9.26.0 is an older release of the
same shape, so that a pin (``cudnn==9.26``) has something to choose.

:func:`with_products` adds them to a built :class:`Site`; ``mutate`` lets a test make one
manifest hostile (a path, a variant, a size) before it is served.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import io
import json
import lzma
import tarfile
from collections.abc import Callable
from typing import Any

from .resources import DEFAULT_LAST_MODIFIED, Resource, StaticResource
from .site import DATA_DIR, Site

PRODUCTS = {
    "cudnn": ("9.27.0", "redistrib_cudnn_9.27.0.json"),
    "cutensor": ("2.8.1", "redistrib_cutensor_2.8.1.json"),
    "cusparselt": ("0.10.0", "redistrib_cusparselt_0.10.0.json"),
}
#: What each component's archive holds: (path inside the top directory, content or link target).
_MEMBERS: dict[str, Callable[[str], list[tuple[str, bytes | str]]]] = {
    "cudnn": lambda v: [
        ("include/cudnn.h", f"#pragma once\n#define CUDNN_MAJOR {v.split('.')[0]}\n".encode()),
        ("include/cudnn_version.h", f"/* cuDNN {v} (cudaup test fixture) */\n".encode()),
        (f"lib/libcudnn.so.{v}", b"\x7fELF fake cudnn " + v.encode()),
        (f"lib/libcudnn.so.{v.split('.')[0]}", f"libcudnn.so.{v}"),
        (f"lib/libcudnn_graph.so.{v}", b"\x7fELF fake cudnn_graph " + v.encode()),
        (f"lib/libcudnn_graph.so.{v.split('.')[0]}", f"libcudnn_graph.so.{v}"),
    ],
    "cudnn_jit": lambda v: [(f"lib/libcudnn_jit.so.{v}", b"\x7fELF fake cudnn_jit")],
    "libcutensor": lambda v: [
        ("include/cutensor.h", b"#pragma once\n"),
        ("lib/libcutensor.so.2", b"\x7fELF fake cutensor " + v.encode()),
    ],
    "libcusparse_lt": lambda v: [
        ("include/cusparseLt.h", b"#pragma once\n"),
        ("lib/libcusparseLt.so.0", b"\x7fELF fake cusparselt " + v.encode()),
    ],
}


def _license_only(version: str) -> list[tuple[str, bytes | str]]:
    return [("LICENSE", f"fixture {version}\n".encode())]


def _tar_xz(top: str, members: list[tuple[str, bytes | str]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as archive:
        directories = sorted({"/".join(n.split("/")[:i]) for n, _ in members for i in (1,)})
        for name in [top, *(f"{top}/{d}" for d in directories)]:
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, DEFAULT_LAST_MODIFIED
            archive.addfile(info)
        for name, data in members:
            info = tarfile.TarInfo(f"{top}/{name}")
            info.mtime = DEFAULT_LAST_MODIFIED
            if isinstance(data, str):
                info.type, info.linkname, info.mode = tarfile.SYMTYPE, data, 0o777
                archive.addfile(info)
            else:
                info.size, info.mode = len(data), 0o755 if name.startswith("lib/") else 0o644
                archive.addfile(info, io.BytesIO(data))
    return lzma.compress(buffer.getvalue(), format=lzma.FORMAT_XZ)


def _older(document: dict[str, Any], label: str) -> dict[str, Any]:
    """The same manifest as another release: every version and path renamed."""
    old = document["release_label"]
    text = json.dumps(document).replace(old, label)
    return dict(json.loads(text))


def product_manifests() -> dict[str, dict[str, dict[str, Any]]]:
    """product -> label -> the manifest document as NVIDIA's shape has it (before the archives
    are built: sizes and hashes are the real ones until :func:`with_products` replaces them)."""
    found: dict[str, dict[str, dict[str, Any]]] = {}
    for product, (label, sample) in PRODUCTS.items():
        document = json.loads((DATA_DIR / sample).read_text())
        found[product] = {label: document}
    found["cudnn"]["9.26.0"] = _older(found["cudnn"]["9.27.0"], "9.26.0")
    return found


def _archive_entries(document: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(component, the entry with relative_path) for every archive the document names."""
    entries = []
    for key, value in document.items():
        if not isinstance(value, dict):
            continue
        for entry in value.values():
            if not isinstance(entry, dict):
                continue
            if "relative_path" in entry:
                entries.append((key, entry))
            entries += [(key, v) for v in entry.values() if isinstance(v, dict)]
    return entries


def _listing(directory: str, names: list[str]) -> bytes:
    items = "\n".join(
        f"<li><span class='file'><a href='{n}'>{n}</a></span> "
        f"<span class='date'>2026-09-29 00:00:00</span></li>"
        for n in sorted(names)
    )
    return (
        f"<!DOCTYPE html><html><head><title>Index of {directory}</title></head><body>"
        f"<ul class='directorycontents'>\n{items}\n</ul></body></html>\n"
    ).encode()


def with_products(
    site: Site, mutate: Callable[[str, str, dict[str, Any]], None] | None = None
) -> Site:
    """``site`` with the library products served; ``mutate(product, label, document)`` may
    change a manifest after its archives were built (a hostile or inconsistent one)."""
    resources: dict[str, Resource] = dict(site.resources)
    for product, releases in product_manifests().items():
        directory = f"/download/compute/{product}/redist/"
        for label, original in releases.items():
            document = copy.deepcopy(original)
            for component, entry in _archive_entries(document):
                relative = entry["relative_path"]
                basename = relative.rsplit("/", 1)[-1]
                top = basename.removesuffix(".tar.xz").removesuffix(".zip")
                members = _MEMBERS.get(component, _license_only)
                body = _tar_xz(top, members(document[component]["version"]))
                entry["relative_path"] = relative.removesuffix(".zip") + (
                    "" if relative.endswith(".tar.xz") else ".tar.xz"
                )
                entry["size"] = str(len(body))
                entry["sha256"] = hashlib.sha256(body).hexdigest()
                entry["md5"] = hashlib.md5(body).hexdigest()
                resources[directory + entry["relative_path"]] = StaticResource(
                    body, "application/x-xz"
                )
            if mutate is not None:
                mutate(product, label, document)
            resources[f"{directory}redistrib_{label}.json"] = StaticResource(
                json.dumps(document, indent=4).encode(), "application/json"
            )
        names = [f"redistrib_{label}.json" for label in releases]
        resources[directory] = StaticResource(_listing(directory, names), "text/html")
    return dataclasses.replace(site, resources=resources)
