"""The store and the layout build every destination with ``inside()`` from checked names:
the second line of defence, for a value that reached them without passing a parser."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cudaup.errors import IntegrityError, UntrustedPathError
from cudaup.install.layout import keep_wheel_record, merge_tree
from cudaup.install.store import RECORD, External, InstalledToolkit, Store
from cudaup.switch import shim
from tests.sandbox import Sandbox, sandbox  # noqa: F401 - fixture

CLIMBS = ["../../../../srv/data", "13.0.1/../../x", "..", "/srv/data", "13.0.1/x", ""]


@pytest.mark.parametrize("release", CLIMBS)
def test_a_release_that_is_not_a_release_names_no_directory(release: str, tmp_path: Path) -> None:
    with pytest.raises(IntegrityError, match="release"):
        Store(tmp_path).toolkit_dir(release)


def test_a_release_names_its_directory(tmp_path: Path) -> None:
    assert Store(tmp_path).toolkit_dir("13.0.1") == tmp_path / "toolkits" / "13.0.1"


@pytest.mark.parametrize("name", ["../x", "a/b", "..", ""])
def test_staging_sweep_and_locks_take_plain_names_only(name: str, tmp_path: Path) -> None:
    store = Store(tmp_path)
    with pytest.raises(IntegrityError), store.staging(tmp_path / "toolkits", name):
        pass
    with pytest.raises(IntegrityError):
        store.sweep(tmp_path / "toolkits", name)
    with pytest.raises(IntegrityError), store.lock(name + "/x"):
        pass
    assert list(tmp_path.iterdir()) == []


def test_a_link_planted_as_a_toolkit_is_replaced_not_followed(
    sandbox: Sandbox,  # noqa: F811 - fixture
) -> None:
    """Publishing over, sweeping and removing a ``toolkits/<release>`` that is a link to
    someone's data renames and drops the link; the data stays."""
    store = Store(sandbox.home)
    final = store.toolkit_dir("13.0.1")
    final.parent.mkdir(parents=True)
    final.symlink_to(sandbox.decoy)
    (final.parent / ".staging-13.0.1-planted").symlink_to(sandbox.decoy)
    decoy = {p: e for p, e in sandbox.snapshot().items() if p.startswith("srv/")}
    store.sweep(final.parent, final.name)
    with store.staging(final.parent, final.name) as staging:
        (staging / "tree").mkdir()
        store.publish(staging / "tree", final)
    assert final.is_dir() and not final.is_symlink()
    store.remove(InstalledToolkit("13.0.1", final, None))
    final.symlink_to(sandbox.decoy)
    store.remove(InstalledToolkit("13.0.1", final, None))
    assert {p: e for p, e in sandbox.snapshot().items() if p.startswith("srv/")} == decoy


def test_external_entries_that_are_not_cudaups_are_left_out(tmp_path: Path) -> None:
    store = Store(tmp_path)
    prefix = str(tmp_path / "prefix")
    (tmp_path / "external.json").write_text(  # the first format, keyed by release
        json.dumps(
            {
                "13.0.1": prefix,
                "../../x": "/srv/data",
                "12.8.0": "relative/path",
                "12.9.0": "/srv/../etc",
                "12.9.1": ["/srv/data"],
                "12.6.0": "/srv/\x1b[2J",
            }
        )
    )
    assert store.external() == [External(prefix, "13.0.1")]
    (tmp_path / "external.json").write_text(
        json.dumps(
            {
                "schema": 2,
                "toolkits": {
                    prefix: "13.0.1",
                    "/srv/a": "../../x",
                    "relative/path": "12.8.0",
                    "/srv/../etc": "12.9.0",
                    "/srv/b": ["12.9.1"],
                    "/srv/\x1b[2J": "12.6.0",
                },
                "foreign": {
                    "/srv/sbsa": {"release": "13.0.1", "platform": "linux-sbsa"},
                    "/srv/c": {"release": "13.0.1", "platform": "../../etc"},
                    "/srv/d": {"release": "/etc", "platform": "linux-sbsa"},
                    "/srv/e": "13.0.1",
                },
            }
        )
    )
    assert store.external() == [
        External(prefix, "13.0.1"),
        External("/srv/sbsa", "13.0.1", "linux-sbsa"),
    ]
    # The shim reads the same document the same way (and never a foreign toolkit).
    Path(prefix).mkdir()
    assert shim.installed(str(tmp_path)) == [("13.0.1", prefix)]
    assert [(t.version, str(t.path)) for t in store.runnable()] == [("13.0.1", prefix)]
    for broken in ("[" * 100_000, "[1]", "\xff", '{"schema": 2, "toolkits": [1]}'):
        (tmp_path / "external.json").write_text(broken)
        assert store.external() == []


def test_prefix_installs_are_known_by_path(tmp_path: Path) -> None:
    store = Store(tmp_path / "home")
    first, second = tmp_path / "a", tmp_path / "b"
    for prefix in (first, second):
        prefix.mkdir()
        store.write_record(prefix, {"version": "13.0.1"})
        store.add_external("13.0.1", prefix)
    store.add_external("13.0.1", first)  # again: still one entry for it
    assert [(t.version, t.path) for t in store.installed()] == [
        ("13.0.1", first),
        ("13.0.1", second),
    ]
    document = json.loads((tmp_path / "home" / "external.json").read_text())
    assert document == {
        "schema": 2,
        "toolkits": {str(first): "13.0.1", str(second): "13.0.1"},
        "foreign": {},
    }
    store.remove(store.at(first))  # type: ignore[arg-type]
    assert [t.path for t in store.installed()] == [second]
    # A foreign toolkit is listed, never found by a request nor by its release.
    sbsa = tmp_path / "sbsa"
    sbsa.mkdir()
    store.add_external("13.0.2", sbsa, "linux-sbsa")
    assert [t.foreign for t in store.installed()] == ["linux-sbsa", None]
    assert store.find("13.0") == store.at(second)
    assert store.get("13.0.2") is None and store.find("13.0.2") is None


def test_an_external_tree_without_cudaups_record_is_not_deleted(
    sandbox: Sandbox,  # noqa: F811 - fixture
) -> None:
    store = Store(sandbox.home)
    sandbox.home.mkdir()
    store.add_external("13.0.1", sandbox.decoy)  # external.json pointed at someone's data
    [toolkit] = [t for t in store.installed() if t.external]
    before = sandbox.snapshot()
    with pytest.raises(IntegrityError, match=f"has no {RECORD}"):
        store.remove(toolkit)
    assert sandbox.changed(before, sandbox.snapshot()) == set()
    # one cudaup made (it has the record) is removed, and its entry with it
    prefix = sandbox.prefix
    prefix.mkdir()
    store.write_record(prefix, {"version": "13.0.1"})
    store.add_external("13.0.1", prefix)
    store.remove(InstalledToolkit("13.0.1", prefix, {"version": "13.0.1"}, True))
    assert not prefix.exists() and [e.path for e in store.external()] == [str(sandbox.decoy)]


@pytest.mark.parametrize("component", ["../../../../tmp/x", "a/b", "..", "-x"])
def test_merge_refuses_a_component_that_would_leave_licenses(
    component: str, tmp_path: Path
) -> None:
    source = tmp_path / "part"
    source.mkdir()
    (source / "LICENSE").write_text("l")
    destination = tmp_path / "stage" / "tree"
    with pytest.raises(IntegrityError, match="component"):
        merge_tree(source, destination, component)
    assert not (tmp_path / "tmp").exists() and not destination.exists()


def test_wheel_records_are_kept_and_a_link_in_the_way_refused(tmp_path: Path) -> None:
    extracted = tmp_path / "wheel"
    info = extracted / "nvidia_x-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "RECORD").write_text('nvidia/cu13/bin/x,sha256=abc,1\n"nvidia/a,b",,\n')
    tree = tmp_path / "tree"
    keep_wheel_record(extracted, tree)
    assert (tree / "dist-info" / "nvidia_x-1.0.dist-info" / "RECORD").is_file()

    info.mkdir()
    (info / "RECORD").write_text("nvidia/cu13/bin/x,,\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    planted = tmp_path / "planted"
    planted.mkdir()
    (planted / "dist-info").symlink_to(elsewhere)
    with pytest.raises(UntrustedPathError, match="symbolic link"):
        keep_wheel_record(extracted, planted)
    assert list(elsewhere.iterdir()) == []


def test_a_damaged_record_reads_as_none(tmp_path: Path) -> None:
    store = Store(tmp_path)
    tree = store.toolkit_dir("13.0.1")
    tree.mkdir(parents=True)
    for damaged in (b"[" * 100_000, b"\xff", b"[1]"):
        (tree / RECORD).write_bytes(damaged)
        [toolkit] = store.installed()
        assert toolkit.record is None and toolkit.components == []
