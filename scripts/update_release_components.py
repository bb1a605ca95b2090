"""Regenerate ``src/cudaup/data/release_components.json``: component versions per CUDA release.

Source: PyPI's ``cuda-toolkit`` meta-package.  Each release is a ~2 KB wheel
whose METADATA pins the component wheels as prefix pins, e.g.
``Requires-Dist: nvidia-cuda-nvcc==13.0.88.*; ... extra == 'all'`` (12.x and
11.x use ``nvidia-cuda-nvcc-cu12`` style names).  The table lets ``doctor`` and
``compat`` tell which release(s) an installed toolkit can be from: one
component version often belongs to several releases (nvcc 13.0.88 ships in
13.0.1, 13.0.2 and 13.0.3; cudart 13.0.88 only in 13.0.1).

    .venv/bin/python scripts/update_release_components.py [--output PATH] [--date YYYY-MM-DD]

Versions come from the file names of the PEP 691 JSON simple index (its
``versions`` array can be incomplete).  Four-part versions (``13.0.3.0``) are
the release ``13.0.3``; pre-, dev- and yanked files are skipped.  Metadata is
read from ``<wheel-url>.metadata`` (PEP 658) when the index advertises it, and
otherwise from the wheel itself.  The requirements of the ``all`` extra are
kept (a release without an ``all`` extra gets the union of its extras) and
mapped to NVIDIA's redist keys with :func:`cudaup.core.components.component_of_project`.
"""

from __future__ import annotations

import argparse
import datetime
import io
import json
import sys
import zipfile
from email.parser import HeaderParser
from pathlib import Path
from typing import Any

import urllib3
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

from cudaup.core.components import component_of_project

OUT = Path(__file__).resolve().parent.parent / "src" / "cudaup" / "data" / "release_components.json"
INDEX_URL = "https://pypi.org/simple/cuda-toolkit/"
SOURCE = "PyPI cuda-toolkit meta-package metadata (prefix pins of the component wheels)"
TIMEOUT = urllib3.Timeout(connect=15.0, read=60.0)
#: (sys_platform, platform_machine) pairs under which a requirement's marker is
#: evaluated: a pin counts when it applies on any of them (``nvidia-cufile`` is
#: Linux-only, ``nvidia-cudla`` aarch64-only).
PLATFORMS = (("linux", "x86_64"), ("linux", "aarch64"), ("win32", "AMD64"), ("win32", "ARM64"))

_http = urllib3.PoolManager(
    timeout=TIMEOUT,
    retries=urllib3.Retry(total=4, backoff_factor=1.0, status_forcelist=(429, 500, 502, 503, 504)),
    headers={"User-Agent": "cudaup-update-release-components"},
)


def fetch(url: str, accept: str | None = None) -> bytes:
    headers = {"Accept": accept} if accept else {}
    response = _http.request("GET", url, headers=headers)
    if response.status != 200:
        raise SystemExit(f"GET {url}: HTTP {response.status}")
    return response.data


def release_label(version: Version) -> str | None:
    """``13.0.3.0`` → ``"13.0.3"``; ``None`` for pre-, dev- and ``0.0.0`` placeholder versions."""
    if version.is_prerelease or version.is_devrelease or version.major == 0:
        return None
    parts = (*version.release, 0, 0)[:3]
    return ".".join(str(p) for p in parts)


def release_wheels(index: dict[str, Any]) -> dict[str, tuple[Version, dict[str, Any]]]:
    """Release label → (meta-package version, file entry); the highest version wins a label."""
    chosen: dict[str, tuple[Version, dict[str, Any]]] = {}
    for entry in index["files"]:
        filename: str = entry["filename"]
        if not filename.endswith(".whl") or entry.get("yanked"):
            continue
        _name, version, _build, _tags = parse_wheel_filename(filename)
        label = release_label(version)
        if label is None:
            continue
        if label not in chosen or version > chosen[label][0]:
            chosen[label] = (version, entry)
    return chosen


def metadata_text(entry: dict[str, Any]) -> str:
    url: str = entry["url"]
    if entry.get("core-metadata") or entry.get("dist-info-metadata"):
        return fetch(url + ".metadata").decode("utf-8")
    with zipfile.ZipFile(io.BytesIO(fetch(url))) as wheel:
        names = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
        if len(names) != 1:
            raise SystemExit(f"{entry['filename']}: expected one METADATA, found {names}")
        return wheel.read(names[0]).decode("utf-8")


def _applies(marker: Marker | None, extra: str) -> bool:
    if marker is None:
        return True
    return any(
        marker.evaluate({"extra": extra, "sys_platform": system, "platform_machine": machine})
        for system, machine in PLATFORMS
    )


def pinned_version(req: Requirement) -> str | None:
    """``nvidia-cuda-nvcc==13.0.88.*`` → ``"13.0.88"``; ``None`` for a range such as ``>=13.0.88,<14``."""
    specs = list(req.specifier)
    if len(specs) != 1 or specs[0].operator != "==":
        return None
    return specs[0].version.removesuffix(".*")


def components_of(metadata: str, where: str) -> dict[str, str]:
    """NVIDIA component key → pinned version, for the ``all`` extra (or the union of extras)."""
    message = HeaderParser().parsestr(metadata)
    extras = [canonicalize_name(e) for e in message.get_all("Provides-Extra") or []]
    wanted = ["all"] if "all" in extras else extras
    requirements = [Requirement(line) for line in message.get_all("Requires-Dist") or []]
    found: dict[str, str] = {}
    for req in requirements:
        if not any(_applies(req.marker, extra) for extra in wanted):
            continue
        project = canonicalize_name(req.name)
        if not project.startswith("nvidia-"):
            print(f"{where}: skipping non-NVIDIA requirement {req}", file=sys.stderr)
            continue
        key, version = component_of_project(project), pinned_version(req)
        if version is None:
            # A floor, not a pin (nvjitlink since 12.8.2: ``>=12.8.93,<13``): it does
            # not say which version the release ships, so it is left out.
            print(f"{where}: skipping {key}, not pinned ({req.specifier})", file=sys.stderr)
            continue
        if found.get(key, version) != version:
            raise SystemExit(f"{where}: {key} pinned to both {found[key]} and {version}")
        found[key] = version
    if not found:
        raise SystemExit(f"{where}: no component pins found (extras: {extras})")
    return found


def build(date: str) -> dict[str, object]:
    index = json.loads(fetch(INDEX_URL, accept="application/vnd.pypi.simple.v1+json"))
    releases: dict[str, dict[str, str]] = {}
    for label, (version, entry) in sorted(
        release_wheels(index).items(), key=lambda item: item[1][0]
    ):
        releases[label] = components_of(metadata_text(entry), f"cuda-toolkit {version}")
        print(f"{label}: {len(releases[label])} components (from {entry['filename']})")
    return {"schema": 1, "generated": date, "source": SOURCE, "releases": releases}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--output", type=Path, default=OUT, help=f"default: {OUT}")
    parser.add_argument("--date", default=datetime.date.today().isoformat())
    args = parser.parse_args()
    table = build(args.date)
    args.output.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
