"""The release list a plan reads, with a failed NVIDIA listing remembered for a while.

A listing NVIDIA answered is cached by the HTTP client (``TTL["listing"]``); one that
could not be read (the host is out of reach from an air-gapped fleet) leaves nothing
there, so every plan would ask again and wait for the failure.  The answer given then
(PyPI's ``cuda-toolkit`` versions, or the shipped snapshot, with the note saying why)
is kept under ``<cache>/plan/releases.json`` for :data:`~cudaup.net.http.NEGATIVE_TTL`
seconds, keyed by the NVIDIA and PyPI URLs, so a warm plan sends no request; ``-v``
says it was used, and ``--refresh`` asks again.  An entry that does not read back as
written is ignored.
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path

from packaging.version import InvalidVersion, Version

from cudaup.config import Settings
from cudaup.net.http import NEGATIVE_TTL, HttpClient, log
from cudaup.resolve.releases import LiveReleases, live_releases
from cudaup.util.atomic import atomic_write

SCHEMA = 1


def plan_releases(settings: Settings, cache: Path) -> LiveReleases:
    """The live release list, or the fallback answer a recent failure gave."""
    path = cache / "releases.json"
    key = [settings.download_url, settings.pypi_url]
    if not settings.refresh and not settings.offline:
        remembered = _remembered(path, key)
        if remembered is not None:
            return remembered
    # No retries: an unreachable NVIDIA host is a note, answered at once.
    live = live_releases(settings, HttpClient(settings, retries=0))
    if live.source != "nvidia" and not settings.offline:
        entry = {
            "schema": SCHEMA,
            "key": key,
            "written": time.time(),
            "versions": list(live.versions),
            "source": live.source,
            "described": live.described,
            "notes": list(live.notes),
        }
        # A cache that cannot be written costs the failure again next time, nothing more.
        with contextlib.suppress(OSError):
            atomic_write(path, json.dumps(entry))
    return live


def _remembered(path: Path, key: list[str]) -> LiveReleases | None:
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(entry, dict) or entry.get("schema") != SCHEMA or entry.get("key") != key:
        return None
    written, versions, notes = entry.get("written"), entry.get("versions"), entry.get("notes")
    source, described = entry.get("source"), entry.get("described")
    if not isinstance(written, (int, float)) or not isinstance(described, str):
        return None
    if source not in ("pypi", "snapshot"):
        return None
    versions, notes = _texts(versions), _texts(notes)
    if not versions or notes is None:
        return None
    try:
        for version in versions:
            Version(version)
    except InvalidVersion:
        return None
    age = time.time() - written
    if not 0 <= age < NEGATIVE_TTL:
        return None
    log.info(
        "cache: the release list of %.0f s ago is used, not asked for %.0f s more (%s)",
        age,
        NEGATIVE_TTL - age,
        "; ".join(notes) or described,
    )
    return LiveReleases(tuple(versions), source, described, tuple(notes))


def _texts(value: object) -> list[str] | None:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    return None
