"""store/default.py: the store a tuner uses when given none follows the settings."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from kernelpick import settings
from kernelpick.store.base import MemoryStore
from kernelpick.store.default import default_store
from kernelpick.store.sqlite import SQLiteStore


def test_sqlite_under_the_cache_dir_by_default(tmp_path: Path) -> None:
    with settings.override(cache_dir=tmp_path / "here"):
        store = default_store()
        assert isinstance(store, SQLiteStore)
        assert store.path == tmp_path / "here" / "results.sqlite3"
        assert default_store() is store
    assert store.path.is_file()


def test_each_cache_dir_has_its_own_store(tmp_path: Path) -> None:
    with settings.override(cache_dir=tmp_path / "one"):
        one = default_store()
    with settings.override(cache_dir=tmp_path / "two"):
        two = default_store()
    assert one is not two
    with settings.override(cache_dir=tmp_path / "one"):
        assert default_store() is one


def test_memory_store_when_the_cache_is_off(tmp_path: Path) -> None:
    with settings.override(cache=False, cache_dir=tmp_path / "unused"):
        store = default_store()
        assert isinstance(store, MemoryStore)
        assert default_store() is store
    assert not (tmp_path / "unused").exists()


def test_memory_store_and_one_warning_when_the_cache_dir_is_a_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    file = tmp_path / "cache"
    file.write_text("")
    with settings.override(cache_dir=file), caplog.at_level(logging.WARNING):
        store = default_store()
        assert isinstance(store, MemoryStore)
        assert default_store() is store
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1
    assert f"KERNELPICK_CACHE_DIR={file}" in warnings[0] and "not a folder" in warnings[0]
