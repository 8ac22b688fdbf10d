"""store/copying.py: what a tuning saved comes back as plain data, and is checked as a store's rows
are when it is saved into another store (`kernelpick tune` brings it from nodes that may lie)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelpick.store import MemoryStore, SQLiteStore
from kernelpick.store.copying import RecordingStore, replay
from tests.store.samples import make_key, measured


def recorded() -> list[dict[str, object]]:
    recorder = RecordingStore(MemoryStore)
    recorder.save(make_key(), [measured("a", 2.0), measured("b", 1.0)], pick="b")
    return recorder.saved


def test_recorded_saves_replay_into_another_store(tmp_path: Path) -> None:
    target = SQLiteStore(tmp_path / "results.sqlite3")
    assert replay(recorded(), target) == 2
    assert set(target.load(make_key())) == {"a", "b"} and target.picked(make_key()) == "b"


def test_a_replayed_result_out_of_range_is_refused(tmp_path: Path) -> None:
    saved = recorded()
    results = saved[0]["results"]
    assert isinstance(results, list)
    results[1]["result"]["timing"]["median_ms"] = -1.0  # a node's forgery: it would win every pick
    target = SQLiteStore(tmp_path / "results.sqlite3")
    with pytest.raises(ValueError, match=r"timing\.median_ms is -1\.0"):
        replay(saved, target)
    assert target.load(make_key()) == {}
