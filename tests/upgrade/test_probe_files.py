"""The environment probe reads each RECORD as strings: the same names ``dist.files`` gives.

The probe (:data:`cudaup.upgrade.environment.PROBE`) runs in the environment's own
interpreter; its functions are loaded here from the same text, in this interpreter.
"""

from __future__ import annotations

import contextlib
import importlib.metadata as md
import io
from pathlib import Path
from typing import Any

from cudaup.upgrade.environment import PROBE


def probe_functions() -> dict[str, Any]:
    """The probe's functions (its answer about this interpreter goes nowhere)."""
    namespace: dict[str, Any] = {"__name__": "probe"}
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(PROBE, "<probe>", "exec"), namespace)  # cudaup's own text
    return namespace


def test_every_installed_distribution_lists_the_files_dist_files_does() -> None:
    file_names = probe_functions()["file_names"]
    checked = 0
    for dist in md.distributions():
        expected = [str(path) for path in dist.files or ()]
        assert file_names(dist) == expected, dist.metadata["Name"]
        checked += 1
    assert checked > 20  # this environment's packages: pytest, urllib3, packaging, ...


def test_odd_record_entries_are_spelled_as_pathlib_spells_them(tmp_path: Path) -> None:
    info = tmp_path / "odd-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: odd\nVersion: 1.0\n")
    rows = [
        "odd/__init__.py,sha256=x,1",
        "./odd/./core.py,,",
        "odd//lib/libodd.so.1,,",
        '"odd/with,comma.py",,',
        "../../bin/odd,,",
        "/opt/odd/abs.so,,",
        "odd.pth,,",
        "odd-1.0.dist-info/RECORD,,",
        "",
    ]
    (info / "RECORD").write_text("\n".join(rows))
    dist = md.PathDistribution(info)
    probe = probe_functions()
    names = probe["file_names"](dist)
    assert names == [str(path) for path in dist.files or ()]
    assert "odd/core.py" in names and "/opt/odd/abs.so" in names
    # "/" as dist.files' parts gave it: parse_environment keeps module names only
    assert probe["modules"](dist, names) == ["/", "odd"]
    assert probe["shared_objects"](names) == ["/opt/odd/abs.so", "odd/lib/libodd.so.1"]


def test_a_distribution_without_a_record_falls_back_to_dist_files(tmp_path: Path) -> None:
    info = tmp_path / "legacy-2.0.egg-info"
    info.mkdir()
    (info / "PKG-INFO").write_text("Metadata-Version: 1.1\nName: legacy\nVersion: 2.0\n")
    (info / "SOURCES.txt").write_text("legacy/__init__.py\nlegacy/_speed.so\n")
    dist = md.PathDistribution(info)
    probe = probe_functions()
    names = probe["file_names"](dist)
    assert (
        names
        == [str(path) for path in dist.files or ()]
        == [
            "legacy/__init__.py",
            "legacy/_speed.so",
        ]
    )
    assert probe["shared_objects"](names) == ["legacy/_speed.so"]
