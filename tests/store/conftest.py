"""Store test set-up: a SQLite store with garbage in it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.store.samples import write_damaged_store


@pytest.fixture
def damaged_store(tmp_path: Path) -> Path:
    """The path of a store of 2,000 results with garbage over pages in the middle of its file."""
    path = tmp_path / "damaged" / "results.sqlite3"
    write_damaged_store(path)
    return path
