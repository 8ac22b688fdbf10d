"""The SQLite store's file: locked across processes, checked, and moved aside and salvaged when damaged."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kernelpick.errors import StoreError

#: SQLite's code for a file it cannot open (a WAL store's shared-memory file that cannot be made).
SQLITE_CANTOPEN = 14
#: Opening a path that is a symbolic link fails (where the OS can say so): no file is made through one.
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class CorruptFile(Exception):
    """The store's file is damaged or not a SQLite database (never leaves the store's modules)."""


def is_corruption(error: sqlite3.DatabaseError) -> bool:
    code = getattr(error, "sqlite_errorcode", None)  # Python 3.11+
    if code is not None:
        return code & 0xFF in (11, 26)  # SQLITE_CORRUPT, SQLITE_NOTADB
    return "malformed" in str(error) or "not a database" in str(error)


@contextmanager
def locked(lock_path: Path, *, exclusive: bool) -> Iterator[None]:
    """Hold a lock on `lock_path` across processes, shared or exclusive (where the OS has `fcntl`).

    Raises:
        StoreError: the lock file cannot be made or opened.
    """
    try:
        import fcntl
    except ImportError:
        yield
        return
    try:
        handle = os.open(lock_path, os.O_RDWR | os.O_CREAT | NOFOLLOW, 0o600)
    except OSError as error:
        raise StoreError(f"cannot lock the result store with {lock_path}: {error}") from error
    try:
        fcntl.flock(handle, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        os.close(handle)  # lets go of the lock


def writable(path: Path) -> bool:
    """Whether this process may write the store file at `path` and make files beside it."""
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK | os.X_OK)


def move_aside(path: Path, corrupt: CorruptFile) -> Path:
    """Move the damaged store file at `path` (with its write-ahead log) to a new name beside it,
    `<name>.corrupt-<unix time>`; returns that name.

    Raises:
        StoreError: it cannot be moved; the message says what to do.
    """
    aside = path.with_name(f"{path.name}.corrupt-{int(time.time())}")
    while aside.exists():
        aside = aside.with_name(f"{aside.name}-")
    try:
        os.replace(path, aside)
        for suffix in ("-wal", "-shm"):  # the write-ahead log belongs to the damaged file
            companion = path.with_name(path.name + suffix)
            if companion.exists():
                os.replace(companion, aside.with_name(aside.name + suffix))
    except OSError as error:
        raise StoreError(
            f"result store {path} is damaged ({corrupt}) and cannot be moved aside to "
            f"{aside}: {error}; delete it or point KERNELPICK_CACHE_DIR elsewhere"
        ) from error
    return aside


def integrity_problems(path: Path | str) -> list[str]:
    """What SQLite's `PRAGMA integrity_check` finds wrong with the store file at `path` (empty when
    nothing). The file is opened read-only: unlike opening a store, this leaves a damaged file as it
    is (and reads a store in a folder it cannot write, whose log files it cannot make, as it is)."""
    uri = Path(path).resolve().as_uri()
    found: list[str] = []
    for mode in ("mode=ro", "immutable=1"):
        try:
            db = sqlite3.connect(f"{uri}?{mode}", uri=True, timeout=30.0)
            try:
                found = [str(message) for (message,) in db.execute("PRAGMA integrity_check").fetchall()]
            finally:
                db.close()
            break
        except sqlite3.Error as error:
            found = [str(error)]
            if getattr(error, "sqlite_errorcode", 0) & 0xFF != SQLITE_CANTOPEN:
                break
    return [] if found == ["ok"] else found


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
