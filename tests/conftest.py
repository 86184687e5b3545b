"""Shared test helpers: where the real public data lives."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data folder not found next to the repository ({SHARED_DATA.name})")
    return SHARED_DATA


@pytest.fixture(scope="session")
def loadtests(shared_data: Path) -> Path:
    """The published load-test tables (shared/data/loadtests)."""
    return shared_data / "loadtests"
