"""Extras that name a CUDA major (``data/families.toml`` ``[extras]``: ``jax[cuda12]``,
``flashinfer-python[cu13]``) (pure).

``upgrade`` renames them for the major it moves to (through its family table, which a
user's ``families.toml`` extends); ``plan`` holds a request that asks for one to that
major's lines.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import cache
from importlib import resources

from packaging.utils import canonicalize_name

from cudaup.core.documents import load_toml
from cudaup.core.names import is_project_name
from cudaup.errors import UsageError

_EXTRA = re.compile(r"^[a-z0-9]+(?:[-_.][a-z0-9]+)*$")


def parse_major_extras(table: object, where: str) -> dict[str, tuple[str, ...]]:
    """``[extras]``: ``project = ["cu{major}", …]``, each template naming ``{major}`` once."""
    if not isinstance(table, dict):
        raise UsageError(f"{where}: [extras] is not a table")
    found: dict[str, tuple[str, ...]] = {}
    for project, templates in table.items():
        name = canonicalize_name(project) if isinstance(project, str) else ""
        if not is_project_name(name):
            raise UsageError(f"{where}: {project!r} is not a project name")
        if not isinstance(templates, list) or not templates:
            raise UsageError(f"{where}: extras.{project} is not a list of extras")
        for item in templates:
            if (
                not isinstance(item, str)
                or item.count("{major}") != 1
                or not _EXTRA.match(item.replace("{major}", "12"))
            ):
                raise UsageError(
                    f"{where}: extras.{project}: {item!r} is not an extra with {{major}}"
                )
        found[name] = tuple(templates)
    return found


def extra_major(templates: Sequence[str], extra: str) -> int | None:
    """The major ``extra`` names by one of ``templates`` (``cu12`` by ``cu{major}``: 12)."""
    for template in templates:
        pattern = re.escape(template).replace(re.escape("{major}"), r"(\d{2})")
        if match := re.fullmatch(pattern, extra):
            return int(match.group(1))
    return None


def named_majors(
    extras: Mapping[str, Sequence[str]], project: str, asked: Sequence[str]
) -> dict[str, int]:
    """Each of ``asked`` (a request's extras) that names a major, with the major."""
    templates = extras.get(canonicalize_name(project), ())
    return {e: major for e in asked if (major := extra_major(templates, e)) is not None}


@cache
def shipped_major_extras() -> dict[str, tuple[str, ...]]:
    """The extras naming a major that the shipped family table lists."""
    data = resources.files("cudaup").joinpath("data/families.toml").read_bytes()
    document = load_toml(data, what="the shipped families.toml", max_bytes=1 << 20)
    return parse_major_extras(document.get("extras", {}), "the shipped families.toml")
