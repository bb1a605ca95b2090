"""Two trees' upgrade steps on one environment, interleaved: the probe, the snapshot.

For each round, each tree (this checkout, and ``--against``, another checkout's ``src/``)
in turn: ``read_environment`` of ``ENV`` (the probe run by the plan and again by the
verification) and what an upgrade does to keep and copy ``ENV`` (the snapshot's clone,
its manifest, the work clone, and the comparison before the swap).  Nothing is installed
and ``ENV`` is only read; the clones go to a scratch directory beside it (hard links
need its filesystem).  Ratios new/old are taken within each round.

    .venv/bin/python benchmarks/upgrade_steps.py ENV --against COPY/src [--runs 4]
"""

from __future__ import annotations

import importlib
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

sys.path.insert(0, str(Path(__file__).resolve().parent))

from report import parser_for


def load(src: Path) -> dict[str, ModuleType]:
    """The upgrade modules of the cudaup under ``src``, imported afresh."""
    sys.path.insert(0, str(src))
    for name in [n for n in sys.modules if n == "cudaup" or n.startswith("cudaup.")]:
        del sys.modules[name]
    try:
        names = ("clone", "environment", "snapshots")
        return {n: importlib.import_module(f"cudaup.upgrade.{n}") for n in names}
    finally:
        sys.path.pop(0)


def keep_and_copy(modules: dict[str, ModuleType], environment: Path, scratch: Path) -> float:
    """Seconds for the snapshot (clone + manifest), the work clone and the final comparison."""
    clone, snapshots = modules["clone"], modules["snapshots"]
    store = snapshots.SnapshotStore(environment)
    snapshot_id = store.new_id()
    started = time.perf_counter()
    (scratch / snapshot_id).mkdir()
    fingerprint = clone.clone_tree(environment, scratch / snapshot_id / "tree")
    record = {"id": snapshot_id, "changes": []}
    store.directory = scratch  # the store's layout, in the scratch directory
    store.create(record, fingerprint)
    clone.clone_tree(environment, scratch / f"work-{snapshot_id}")
    fingerprint.differences(scratch / snapshot_id / "tree")
    return time.perf_counter() - started


def main() -> None:
    parser = parser_for(__doc__, runs=4)
    parser.add_argument("environment", type=Path, help="a virtual environment (only read)")
    parser.add_argument("--against", type=Path, required=True, help="the other tree's src/")
    args = parser.parse_args()
    trees = {"new": load(Path(__file__).resolve().parent.parent / "src"), "old": load(args.against)}
    python = str(args.environment / "bin" / "python")
    times: dict[str, dict[str, list[float]]] = {"probe": {}, "snapshot": {}}
    for _ in range(args.runs):
        for tree, modules in trees.items():
            started = time.perf_counter()
            modules["environment"].read_environment(python)
            times["probe"].setdefault(tree, []).append(time.perf_counter() - started)
            with tempfile.TemporaryDirectory(dir=args.environment.parent) as scratch:
                seconds = keep_and_copy(modules, args.environment, Path(scratch))
                times["snapshot"].setdefault(tree, []).append(seconds)
    for step, by_tree in times.items():
        old, new = by_tree["old"], by_tree["new"]
        ratios = sorted(n / o for n, o in zip(new, old, strict=True))
        print(
            f"{step}: old {min(old):.2f}-{max(old):.2f} s, new {min(new):.2f}-{max(new):.2f} s, "
            f"new/old median {statistics.median(ratios):.2f} ({ratios[0]:.2f}-{ratios[-1]:.2f}), "
            f"{args.runs} rounds"
        )


if __name__ == "__main__":
    main()
