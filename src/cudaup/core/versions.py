"""Version requests: what a user may type for a CUDA release, and how it matches.

Pure: no I/O.  Release labels are ``X.Y.Z`` (NVIDIA's ``release_label``) and are
ordered with :class:`packaging.version.Version`, never as strings.

Accepted requests::

    13.0.1            exact release
    13.0              newest patch release of the 13.0 line
    13                newest 13.x release
    cu130, cu13       the PyTorch-style tag for a line (last digit is the minor)
    13.0 Update 1     NVIDIA's own naming (``GA`` = patch 0); also ``13.0u1``
    latest            the newest release

A request in those forms whose numbers are longer than :data:`MAX_DIGITS` is well
formed but names no release: :class:`~cudaup.errors.ReleaseNotFoundError` (exit 3),
raised before ``int()`` (which refuses 4301 digits and is slow well before that).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from packaging.version import Version

from cudaup.errors import ReleaseNotFoundError, UsageError

RequestKind = Literal["exact", "minor", "major", "latest"]

_PREFIX = re.compile(r"^(?:cuda[\s_-]*toolkit|cuda|v)[\s_-]*", re.IGNORECASE)
_CU_TAG = re.compile(r"^cu(\d{2,4})$", re.IGNORECASE)
_UPDATE = re.compile(
    r"^(\d+)\.(\d+)(?:\.0)?\s*(?:(?:update|upd|u)\s*(\d+)|(ga))$",
    re.IGNORECASE,
)
_DOTTED = re.compile(r"^\d+(?:\.\d+){0,3}$")
#: The most digits one number of a release may have.  NVIDIA's have 1 to 3 (PyPI's
#: 13.0.88); nine leave room for any to come and keep ``int()`` trivial.
MAX_DIGITS = 9
#: How much of a refused request a message quotes.
_SHOWN = 40


@dataclass(frozen=True, slots=True)
class ReleaseRequest:
    """A parsed version request. ``parts`` holds the numbers the user fixed."""

    kind: RequestKind
    parts: tuple[int, ...]
    text: str

    def matches(self, label: Version) -> bool:
        """Whether release ``label`` satisfies this request."""
        if self.kind == "latest":
            return True
        return label.release[: len(self.parts)] == self.parts and (
            self.kind != "exact" or len(label.release) <= 3 or not any(label.release[3:])
        )

    @property
    def exact_label(self) -> str | None:
        """``X.Y.Z`` when the request names one release, else ``None``."""
        return ".".join(map(str, self.parts)) if self.kind == "exact" else None

    def describe(self) -> str:
        """The request in NVIDIA's terms, for messages."""
        if self.kind == "latest":
            return "the latest release"
        if self.kind == "exact":
            return ".".join(map(str, self.parts))
        return ".".join(map(str, self.parts)) + ".x"

    def pick(self, labels: Iterable[Version]) -> list[Version]:
        """The labels that satisfy this request, newest first."""
        return sorted((v for v in labels if self.matches(v)), reverse=True)

    def bounds(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """Lowest and highest release tuples this request could cover (for nearest)."""
        low = self.parts + (0,) * (3 - len(self.parts))
        high = self.parts + (10**9,) * (3 - len(self.parts))
        return low, high


def parse_request(text: str) -> ReleaseRequest:
    """Parse what a user typed into a :class:`ReleaseRequest`.

    Raises :class:`~cudaup.errors.UsageError` with the accepted forms when the
    text is not a version request at all.
    """
    raw = text.strip()
    body = _PREFIX.sub("", raw).strip()
    lowered = body.lower()
    if lowered in {"latest", "newest"}:
        return ReleaseRequest("latest", (), raw)
    if tag := _CU_TAG.match(body):
        digits = tag.group(1)
        return ReleaseRequest("minor", (int(digits[:-1]), int(digits[-1])), raw)
    if upd := _UPDATE.match(body):
        major, minor, update = _numbers(raw, (upd.group(1), upd.group(2), upd.group(3) or "0"))
        return ReleaseRequest("exact", (major, minor, 0 if upd.group(4) else update), raw)
    if _DOTTED.match(body):
        numbers = _numbers(raw, body.split("."))
        if len(numbers) == 4:
            # PyPI spells some releases with four parts (13.0.3.0): same release.
            if numbers[3] != 0:
                raise _bad_request(raw)
            numbers = numbers[:3]
        kind: RequestKind = {1: "major", 2: "minor", 3: "exact"}[len(numbers)]  # type: ignore[assignment]
        return ReleaseRequest(kind, numbers, raw)
    raise _bad_request(raw)


def _numbers(raw: str, groups: Iterable[str]) -> tuple[int, ...]:
    """The numbers of a request, each counted before it is converted."""
    digits = tuple(groups)
    if any(len(group) > MAX_DIGITS for group in digits):
        raise ReleaseNotFoundError(
            f"no CUDA release is {shown(raw)}: the numbers of a release have at most "
            f"{MAX_DIGITS} digits"
        )
    return tuple(int(group) for group in digits)


def shown(text: str) -> str:
    """``text`` quoted for a message, cut short when it is long: a request of thousands
    of characters is named, not repeated."""
    if len(text) <= _SHOWN:
        return repr(text)
    return f"{text[:_SHOWN]!r}… ({len(text)} characters)"


def _bad_request(raw: str) -> UsageError:
    return UsageError(
        f"{shown(raw)} is not a CUDA version request; use e.g. 13.0.1, 13.0, 13, cu130, "
        "'13.0 Update 1' or latest"
    )


def release_key(version: Version) -> str:
    """Canonical ``X.Y.Z`` label of a version (drops PyPI's trailing ``.0``)."""
    parts = [*list(version.release), 0, 0]
    while len(parts) > 3 and parts[-1] == 0:
        parts.pop()
    return ".".join(map(str, parts[: max(3, len(parts))]))


def nearest(request: ReleaseRequest, labels: Iterable[Version]) -> tuple[Version, ...]:
    """The closest existing releases below and above a request that matched nothing.

    ``12.7`` with releases ``12.6.3`` and ``12.8.0`` gives ``(12.6.3, 12.8.0)``.
    """
    low, high = request.bounds()
    ordered = sorted(set(labels))
    below = [v for v in ordered if v.release[:3] < low]
    above = [v for v in ordered if v.release[:3] > high]
    found: list[Version] = []
    if below:
        found.append(below[-1])
    if above:
        found.append(above[0])
    return tuple(found)


def nvidia_label(version: Version, *, preview: bool = False) -> str:
    """NVIDIA's name for a release: ``CUDA 13.0 Update 1``, ``CUDA 12.8 GA``."""
    major, minor, patch = ([*list(version.release), 0, 0])[:3]
    if preview:
        return f"CUDA {major}.{minor} Developer Preview"
    return f"CUDA {major}.{minor} " + ("GA" if patch == 0 else f"Update {patch}")
