"""The package-index table (``data/indexes.toml``, extended by the user's
``indexes.toml``): every index URL is listed, none is built from a pattern.

An index with per-line URLs (``cu130 = …``) is *tagged*: the projects it lists
are taken from it on its lines, and the ones it alone publishes (``only``) from
nowhere else on any line.  An index with one URL for every line (``"" = …``,
PyPI) is *flat*."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from packaging.utils import canonicalize_name

from cudaup.core.documents import load_toml
from cudaup.errors import UsageError
from cudaup.plan.lines import tag_line
from cudaup.util.reading import read_regular


# ----------------------------------------------------------------------------
# Indexes (data)
# ----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Index:
    name: str
    urls: dict[str, str]  # tag ("" = every line) → simple-index URL
    projects: tuple[str, ...]
    #: Projects this index alone publishes: never looked up on another index.
    only: tuple[str, ...] = ()
    #: A nightly index (pre-releases only): consulted with ``--pre``, before the others.
    pre: bool = False

    def serves(self, project: str) -> bool:
        return "*" in self.projects or canonicalize_name(project) in {
            canonicalize_name(p) for p in self.projects
        }

    def publishes_alone(self, project: str) -> bool:
        return canonicalize_name(project) in {canonicalize_name(p) for p in self.only}

    @property
    def flat(self) -> bool:
        return "" in self.urls


def load_indexes(extra: Path | None = None) -> dict[str, Index]:
    """The shipped index table, extended or overridden by a user file of the same format."""
    documents = [
        tomllib.loads(
            resources.files("cudaup").joinpath("data/indexes.toml").read_text(encoding="utf-8")
        )
    ]
    if extra is not None and extra.is_file():
        try:
            documents.append(
                load_toml(read_regular(extra, 1 << 20), what=str(extra), max_bytes=1 << 20)
            )
        except OSError as exc:
            raise UsageError(f"cannot read {extra}: {exc.strerror}") from None
        tables = documents[-1].get("indexes", {})
        if not isinstance(tables, dict) or not all(
            isinstance(entry, dict)
            and isinstance(entry.get("urls", {}), dict)
            and isinstance(entry.get("projects", []), list)
            and isinstance(entry.get("only", []), list)
            for entry in tables.values()
        ):
            raise UsageError(
                f"{extra}: 'indexes' must be a table of tables, each with a 'urls' table "
                "and 'projects' and 'only' lists"
            )
    indexes: dict[str, Index] = {}
    for document in documents:
        for name, entry in document.get("indexes", {}).items():
            urls = {str(k): str(v).rstrip("/") for k, v in entry.get("urls", {}).items()}
            for tag, url in urls.items():
                if tag and tag_line(tag) is None:
                    raise UsageError(f"index {name}: {tag!r} is not a CUDA tag such as cu130")
                if not url.startswith(("https://", "http://")):
                    raise UsageError(f"index {name}: {url!r} is not an HTTP(S) URL")
            projects = tuple(str(p) for p in entry.get("projects", ["*"]))
            only = tuple(str(p) for p in entry.get("only", []))
            pre = entry.get("pre", False)
            if not isinstance(pre, bool):
                raise UsageError(f"index {name}: pre must be true or false")
            indexes[name] = Index(name, urls, projects, only, pre)
    return indexes


def indexes_for(
    pypi_url: str, chosen: Sequence[str], extra: Path | None, *, pre: bool = False
) -> dict[str, Index]:
    """The index table for a run: shipped + the user's file, PyPI moved to the configured
    index (``--pypi-url``/``--mirror``), restricted by ``--index``; the nightly indexes
    only with ``--pre`` (or when ``--index`` names one), and then ahead of the others."""
    known = load_indexes(extra)
    if "pypi" in known:
        known["pypi"].urls[""] = pypi_url
    return arrange(select_indexes(known, chosen), chosen, pre=pre)


def arrange(indexes: Mapping[str, Index], chosen: Sequence[str], *, pre: bool) -> dict[str, Index]:
    """Without ``--pre``, the nightly indexes ``--index`` does not name are left out; with
    it, they come first (a project is taken from the first per-line index serving it)."""
    if not pre:
        return {n: i for n, i in indexes.items() if not i.pre or n in chosen}
    return dict(sorted(indexes.items(), key=lambda item: not item[1].pre))


def select_indexes(indexes: Mapping[str, Index], chosen: Sequence[str]) -> dict[str, Index]:
    """``--index NAME|URL``: known names, or a URL as an index that serves everything."""
    if not chosen:
        return dict(indexes)
    selected: dict[str, Index] = {}
    for item in chosen:
        if item in indexes:
            selected[item] = indexes[item]
        elif "://" in item:
            selected[item] = Index(item, {"": item.rstrip("/")}, ("*",))
        else:
            raise UsageError(f"unknown index {item!r}; use a URL or one of {', '.join(indexes)}")
    return selected
