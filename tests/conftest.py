"""Shared test helpers: where the real public data lives."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip("real data folder ../shared/data not found next to the repository")
    return SHARED_DATA


@pytest.fixture(scope="session")
def loadtests(shared_data: Path) -> Path:
    """The published load-test tables (shared/data/loadtests)."""
    return shared_data / "loadtests"
