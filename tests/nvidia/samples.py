"""NVIDIA's real samples (copied from shared/reference/nvidia-samples), read as bytes."""

from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "fakenvidia" / "data"


def sample(name: str) -> bytes:
    return (DATA / name).read_bytes()
