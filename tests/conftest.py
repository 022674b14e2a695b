"""Shared fixtures for the whole suite."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


def vectors_root() -> Path:
    """Where the public test vectors live: ``../shared/vectors`` beside the clone (or $REVIEWPORTAL_VECTORS)."""
    override = os.environ.get("REVIEWPORTAL_VECTORS")
    return Path(override) if override else REPO_ROOT.parent / "shared" / "vectors"


@pytest.fixture(scope="session")
def vectors_dir() -> Path:
    root = vectors_root()
    if not root.is_dir():
        pytest.skip(f"public test vectors not found at {root} (set REVIEWPORTAL_VECTORS or place shared/ beside the clone)")
    return root
