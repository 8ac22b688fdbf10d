"""What can still be read from a damaged SQLite store: the rows of its tables that SQLite reads, past
the damaged pages (`kernelpick.store.sqlite` moves a damaged file aside and keeps these)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any


def readable_rows(damaged: Path, result_columns: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The rows of a damaged store's `results` and `picks` tables that SQLite can still read (a
    damaged page loses the rows on it, not those after it); none when it cannot be opened at all."""
    uri = damaged.resolve().as_uri()
    # Immutable: the file alone, read with no lock and no shared-memory file left beside it; with
    # its write-ahead log, read-only, so that the log's last saves are read too.
    has_log = damaged.with_name(f"{damaged.name}-wal").exists()
    for mode in ("mode=ro", "immutable=1") if has_log else ("immutable=1",):
        try:
            db = sqlite3.connect(f"{uri}?{mode}", uri=True, timeout=30.0)
        except sqlite3.Error:
            continue
        try:
            tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            results = _readable(db, "results", result_columns) if "results" in tables else []
            picks = _readable(db, "picks", "key, candidate, created") if "picks" in tables else []
            return results, picks
        except sqlite3.Error:
            continue
        finally:
            db.close()
    return [], []


def _readable(db: sqlite3.Connection, table: str, columns: str) -> list[tuple[Any, ...]]:
    """The rows of `table` that can be read, in rowid order: a scan that meets a damaged page (or a
    row it cannot decode) goes on after it, from the first rowid past the damage that reads again."""
    query = f"SELECT rowid, {columns} FROM {table} WHERE rowid > ? ORDER BY rowid"
    found: list[tuple[Any, ...]] = []
    after = _BEFORE_FIRST_ROWID
    while True:
        try:
            for row in db.execute(query, (after,)):
                found.append(tuple(row[1:]))
                after = row[0]
            return found
        except sqlite3.DatabaseError:
            resume = _past_damage(db, f"{query} LIMIT 1", after)
            if resume is None:
                return found
            after = resume


#: Below the first rowid SQLite gives a row (1; kernelpick never chooses rowids), and the highest it can.
_BEFORE_FIRST_ROWID, _HIGHEST_ROWID = 0, 2**63 - 1


def _past_damage(db: sqlite3.Connection, probe: str, damaged_after: int) -> int | None:
    """The smallest rowid r > `damaged_after` from which the next row reads (`probe` with r succeeds):
    steps doubling in size find one, halving steps the smallest; None when the damage runs to the end."""

    def reads(rowid: int) -> bool:
        try:
            db.execute(probe, (rowid,)).fetchall()
        except sqlite3.DatabaseError:
            return False
        return True

    failing, step = damaged_after, 1
    while not reads(failing + step):
        failing += step
        step *= 2
        if failing + step > _HIGHEST_ROWID:
            return None
    reading = failing + step
    while reading - failing > 1:
        middle = (failing + reading) // 2
        if reads(middle):
            reading = middle
        else:
            failing = middle
    return reading
