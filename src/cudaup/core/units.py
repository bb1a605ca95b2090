"""Sizes in words: binary units (KiB, MiB, GiB), as everywhere cudaup shows a size."""

from __future__ import annotations


def binary_size(value: float) -> str:
    """``512 B``, ``1.5 KiB``, ``3.2 GiB``."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")  # pragma: no cover
