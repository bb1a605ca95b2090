"""NVIDIA's real samples (kept in tests/fakenvidia/data/), read as bytes."""

from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "fakenvidia" / "data"


def sample(name: str) -> bytes:
    return (DATA / name).read_bytes()
