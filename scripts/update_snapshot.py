"""Regenerate ``src/cudaup/data/snapshot.json``, the offline snapshot of installers.

Input: a TSV of standalone installers (``version platform filename md5 bytes url``),
e.g. ``tests/fakenvidia/data/local-installers-catalog.tsv`` (verbatim
NVIDIA facts).  The snapshot is used only with ``--offline`` and is stamped
with the date it was made, so answers from it say how old they are.

    python scripts/update_snapshot.py CATALOG.tsv [--date YYYY-MM-DD]
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
from pathlib import Path

from cudaup.nvidia.installers import classify_installer

OUT = Path(__file__).resolve().parent.parent / "src" / "cudaup" / "data" / "snapshot.json"


def build(catalog: Path, date: str) -> dict[str, object]:
    releases: dict[str, list[dict[str, object]]] = {}
    with catalog.open(newline="") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            info = classify_installer(row["filename"])
            if info is None:
                raise SystemExit(f"unrecognised installer name {row['filename']!r}")
            releases.setdefault(row["version"], []).append(
                {
                    "platform": info.platform,
                    "filename": row["filename"],
                    "url": row["url"],
                    "md5": row["md5"],
                    "size": int(row["bytes"]),
                    "driver": info.driver,
                }
            )
    return {"schema": 1, "generated": date, "source": catalog.name, "releases": releases}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("catalog", type=Path)
    parser.add_argument("--date", default=datetime.date.today().isoformat())
    args = parser.parse_args()
    OUT.write_text(json.dumps(build(args.catalog, args.date), indent=1, sort_keys=True) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
