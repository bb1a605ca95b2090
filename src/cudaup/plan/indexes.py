"""The package-index table (``data/indexes.toml``, extended by the user's
``indexes.toml``): every index URL is listed, none is built from a pattern."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from packaging.utils import canonicalize_name

from cudaup.errors import UsageError


# ----------------------------------------------------------------------------
# Indexes (data)
# ----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Index:
    name: str
    urls: dict[str, str]  # tag ("" = every line) → simple-index URL
    projects: tuple[str, ...]

    def serves(self, project: str) -> bool:
        return "*" in self.projects or canonicalize_name(project) in {
            canonicalize_name(p) for p in self.projects
        }


def load_indexes(extra: Path | None = None) -> dict[str, Index]:
    """The shipped index table, extended or overridden by a user file of the same format."""
    documents = [tomllib.loads(resources.files("cudaup").joinpath("data/indexes.toml").read_text())]
    if extra is not None and extra.is_file():
        try:
            documents.append(tomllib.loads(extra.read_text()))
        except tomllib.TOMLDecodeError as exc:
            raise UsageError(f"{extra} is not valid TOML ({exc})") from None
    indexes: dict[str, Index] = {}
    for document in documents:
        for name, entry in document.get("indexes", {}).items():
            urls = {str(k): str(v).rstrip("/") for k, v in entry.get("urls", {}).items()}
            indexes[name] = Index(name, urls, tuple(entry.get("projects", ["*"])))
    return indexes


def indexes_for(pypi_url: str, chosen: Sequence[str], extra: Path | None) -> dict[str, Index]:
    """The index table for a run: shipped + the user's file, PyPI moved to the configured
    index (``--pypi-url``/``--mirror``), restricted by ``--index``."""
    known = load_indexes(extra)
    if "pypi" in known:
        known["pypi"].urls[""] = pypi_url
    return select_indexes(known, chosen)


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
