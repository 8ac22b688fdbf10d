"""The default result store: one SQLite file, safe to share between processes on one machine."""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from kernelpick.errors import StoreError
from kernelpick.store.base import StoredResult, StoredRow, parse_stored
from kernelpick.store.claims import FileClaims
from kernelpick.store.keys import TuningKey, canonical_json, canonical_value

log = logging.getLogger("kernelpick.store")

SCHEMA_VERSION = 2
#: Versions this kernelpick opens: version 1 had no `picks` table, which opening it adds.
READABLE_VERSIONS = (0, 1, SCHEMA_VERSION)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    key         TEXT NOT NULL,  -- sha256 of the tuning key's canonical JSON
    candidate   TEXT NOT NULL,  -- digest of the config or choice
    kernel      TEXT NOT NULL,  -- for people: the kernel or operation name
    key_data    TEXT NOT NULL,  -- the tuning key as canonical JSON
    description TEXT NOT NULL,  -- the candidate as JSON
    status      TEXT NOT NULL,
    median_ms   REAL,
    result      TEXT NOT NULL,  -- the whole BenchmarkResult as JSON
    created     REAL NOT NULL,  -- unix time
    PRIMARY KEY (key, candidate)
);
CREATE INDEX IF NOT EXISTS results_by_kernel ON results (kernel);
CREATE TABLE IF NOT EXISTS picks (
    key         TEXT PRIMARY KEY,  -- as in results
    candidate   TEXT NOT NULL,     -- the candidate the last tuning of this key chose
    created     REAL NOT NULL
);
"""


class SQLiteStore:
    """Results in a SQLite database (WAL mode: concurrent readers, one writer at a time, across processes)."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            # Shared with the other processes opening the file, exclusive to one rebuilding it: a
            # process never connects to the file (nor makes its log and shared-memory file) while
            # another moves it aside with them, which left it "disk I/O error" on every statement.
            with _locked(self._lock_path, exclusive=False):
                self._db = self._open()
        except _CorruptFile as corrupt:
            self._db = self._rebuild(corrupt)

    @property
    def _lock_path(self) -> Path:
        """The file whose lock orders opening the store against rebuilding it."""
        return self.path.with_name(f"{self.path.name}.lock")

    def _open(self) -> sqlite3.Connection:
        """A connection to the file, checked (`PRAGMA quick_check`) and with the current schema.

        Raises:
            _CorruptFile: the file is damaged or is not a SQLite database.
            StoreError: it cannot be opened otherwise, or has a schema newer than this kernelpick's.
        """
        db = None
        try:
            db = sqlite3.connect(self.path, timeout=30.0, check_same_thread=False, isolation_level=None)
            deadline = time.monotonic() + 30.0
            while True:  # switching a new file to WAL fails at once, ignoring the busy timeout, when
                try:  # another process is switching it too ("database is locked", or "disk I/O
                    # error" while that process sets up the shared-memory file): retry meanwhile
                    db.execute("PRAGMA journal_mode=WAL")
                    break
                except sqlite3.OperationalError as error:
                    transient = "locked" in str(error) or "disk I/O error" in str(error)
                    if not transient or time.monotonic() > deadline:
                        raise
                    time.sleep(0.01)
            db.execute("PRAGMA synchronous=NORMAL")
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version not in READABLE_VERSIONS:
                raise StoreError(
                    f"result store {self.path} has schema version {version}, this kernelpick reads "
                    f"version {SCHEMA_VERSION}: delete the file or point KERNELPICK_CACHE_DIR elsewhere"
                )
            # ~3.5 ms on a store of 10,000 results (8 MB) in the page cache, ~0.1 s read cold: paid
            # once per process; a damaged page found now costs the rows on it, not a crash later.
            problems = [str(message) for (message,) in db.execute("PRAGMA quick_check").fetchall()]
            if problems != ["ok"]:
                raise _CorruptFile("; ".join(problems[:3]))
            db.executescript(_SCHEMA)
            db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            return db
        except BaseException as error:
            if db is not None:
                db.close()
            if isinstance(error, sqlite3.DatabaseError) and _is_corruption(error):
                raise _CorruptFile(str(error)) from error
            if isinstance(error, sqlite3.Error):
                raise StoreError(f"cannot open the result store {self.path}: {error}") from error
            raise

    def _rebuild(self, corrupt: _CorruptFile) -> sqlite3.Connection:
        """Move the damaged file aside and start a new store in its place with every row of the damaged
        one that can still be read (one process does: the others wait for it, then open what it made)."""
        with _locked(self._lock_path, exclusive=True):
            try:
                return self._open()  # another process may have moved it aside meanwhile
            except _CorruptFile:
                pass
            aside = self.path.with_name(f"{self.path.name}.corrupt-{int(time.time())}")
            while aside.exists():
                aside = aside.with_name(f"{aside.name}-")
            try:
                os.replace(self.path, aside)
                for suffix in ("-wal", "-shm"):  # the write-ahead log belongs to the damaged file
                    companion = self.path.with_name(self.path.name + suffix)
                    if companion.exists():
                        os.replace(companion, aside.with_name(aside.name + suffix))
            except OSError as error:
                raise StoreError(
                    f"result store {self.path} is damaged ({corrupt}) and cannot be moved aside to "
                    f"{aside}: {error}; delete it or point KERNELPICK_CACHE_DIR elsewhere"
                ) from error
            db = self._open()
            results, picks = _readable_rows(aside)
            try:
                db.execute("BEGIN IMMEDIATE")
                # OR IGNORE: a process that opened the new file meanwhile may have saved newer rows.
                kept = db.executemany(
                    f"INSERT OR IGNORE INTO results ({_RESULT_COLUMNS}) VALUES ({', '.join('?' * 9)})",
                    results,
                ).rowcount
                db.executemany(
                    "INSERT OR IGNORE INTO picks (key, candidate, created) VALUES (?, ?, ?)", picks
                )
                db.execute("COMMIT")
            except sqlite3.Error as error:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                kept = 0
                log.warning(
                    "result store %s: the rows read from the damaged file could not be kept: %s",
                    self.path,
                    error,
                )
            log.warning(
                "result store %s is damaged (%s): moved it to %s and started a new store with the %d "
                "results that could still be read from it; the others will be measured again",
                self.path,
                corrupt,
                aside,
                kept,
            )
            return db

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                yield self._db
                self._db.execute("COMMIT")
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise

    def load(self, key: TuningKey) -> dict[str, StoredResult]:
        """The results stored under `key`, by candidate. A row that is not kernelpick data (written
        by hand, or by a newer or broken program) is left out with a warning: its candidate is then
        measured again, and the new result replaces it.

        Raises:
            StoreError: SQLite cannot read the file (named in the message).
        """
        try:
            with self._lock:
                rows = self._db.execute(
                    "SELECT candidate, description, result FROM results WHERE key = ?", (key.digest,)
                ).fetchall()
        except sqlite3.Error as error:
            raise StoreError(f"cannot read the result store {self.path}: {error}") from error
        found = {}
        for candidate, description, result in rows:
            try:
                found[candidate] = parse_stored(candidate, json.loads(description), json.loads(result))
            except (ValueError, TypeError) as error:  # TypeError: a column holding no text
                log.warning(
                    "result store %s: ignoring the row of %s (key %s, candidate %s), which is not kernelpick "
                    "data (%s); it will be measured again. `kernelpick cache verify` lists such rows",
                    self.path,
                    key.kernel,
                    key.digest[:12],
                    str(candidate)[:12],
                    error,
                )
        return found

    def picked(self, key: TuningKey) -> str | None:
        """The candidate the last finished tuning of `key` picked (None: none finished, or all failed).

        Raises:
            StoreError: SQLite cannot read the file.
        """
        try:
            with self._lock:
                found = self._db.execute(
                    "SELECT candidate FROM picks WHERE key = ?", (key.digest,)
                ).fetchone()
        except sqlite3.Error as error:
            raise StoreError(f"cannot read the result store {self.path}: {error}") from error
        return None if found is None else str(found[0])

    def claims(self) -> FileClaims:
        """Claims on keys shared by the processes using this file: lock files in `<file>.locks/`."""
        return FileClaims(self.path.with_name(f"{self.path.name}.locks"))

    def save(self, key: TuningKey, results: Iterable[StoredResult], *, pick: str | None = None) -> None:
        now = time.time()
        rows = [
            (
                key.digest,
                r.candidate,
                key.kernel,
                key.canonical,
                canonical_json(canonical_value(dict(r.description))),
                r.result.status,
                r.result.timing.median_ms if r.result.timing else None,
                canonical_json(r.result.to_dict()),
                now,
            )
            for r in results
        ]
        try:
            with self._transaction() as db:
                db.executemany("INSERT OR REPLACE INTO results VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
                if pick is not None:
                    db.execute("INSERT OR REPLACE INTO picks VALUES (?, ?, ?)", (key.digest, pick, now))
        except sqlite3.Error as error:
            raise StoreError(f"cannot write to the result store {self.path}: {error}") from error

    def rows(self, kernel: str | None = None) -> Iterator[StoredRow]:
        """Every stored result (or one kernel's), by kernel and key.

        Raises:
            StoreError: a row is not what kernelpick writes (`kernelpick cache verify` names them).
        """
        query = (
            "SELECT r.key, r.candidate, r.key_data, r.description, r.result, r.created, p.candidate "
            "FROM results r LEFT JOIN picks p ON p.key = r.key"
        )
        with self._lock:
            found = self._db.execute(
                f"{query} WHERE r.kernel = ? ORDER BY r.kernel, r.key"
                if kernel
                else f"{query} ORDER BY r.kernel, r.key",
                (kernel,) if kernel else (),
            ).fetchall()
        for digest, candidate, key_data, description, result, created, picked in found:
            try:
                stored = parse_stored(candidate, json.loads(description), json.loads(result))
                yield StoredRow(
                    TuningKey.from_dict(json.loads(key_data)),
                    candidate,
                    stored.description,
                    stored.result,
                    created,
                    picked == candidate,
                )
            except (ValueError, TypeError) as error:
                raise StoreError(
                    f"result store {self.path}: row (key {digest[:12]}, candidate {candidate[:12]}) is not "
                    f"kernelpick data ({error}); run `kernelpick cache verify`"
                ) from None

    def summary(self) -> list[dict[str, Any]]:
        """Per kernel: how many keys and results are stored, and how many results failed."""
        with self._lock:
            rows = self._db.execute(
                "SELECT kernel, COUNT(DISTINCT key), COUNT(*), SUM(status != 'ok') FROM results GROUP BY kernel"
            ).fetchall()
        return [{"kernel": k, "keys": n, "results": r, "failed": f} for k, n, r, f in rows]

    def clear(self, kernel: str | None = None) -> int:
        """Forget every result (or those of one kernel); returns how many rows went."""
        with self._transaction() as db:
            if kernel is None:
                db.execute("DELETE FROM picks")
                return db.execute("DELETE FROM results").rowcount
            removed = db.execute("DELETE FROM results WHERE kernel = ?", (kernel,)).rowcount
            db.execute("DELETE FROM picks WHERE key NOT IN (SELECT key FROM results)")
            return removed

    def raw_rows(self, kernel: str | None = None) -> list[RawRow]:
        """Every row (or one kernel's) as its columns hold it, unparsed, with its key's pick: what
        `kernelpick cache verify` checks (`kernelpick.store.maintenance.check_row`)."""
        query = (
            "SELECT r.key, r.candidate, r.kernel, r.key_data, r.description, r.status, r.median_ms, "
            "r.result, r.created, p.candidate FROM results r LEFT JOIN picks p ON p.key = r.key"
        )
        where = " WHERE r.kernel = ?" if kernel is not None else ""
        try:
            with self._lock:
                found = self._db.execute(
                    f"{query}{where} ORDER BY r.kernel, r.key, r.candidate",
                    () if kernel is None else (kernel,),
                ).fetchall()
        except sqlite3.Error as error:
            raise StoreError(f"cannot read the result store {self.path}: {error}") from error
        return [RawRow(*row) for row in found]

    @staticmethod
    def integrity_problems(path: Path | str) -> list[str]:
        """What SQLite's `PRAGMA integrity_check` finds wrong with the store file at `path` (empty when
        nothing). The file is opened read-only: unlike opening a store, this leaves a damaged file as it is."""
        try:
            db = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True, timeout=30.0)
            try:
                found = [str(message) for (message,) in db.execute("PRAGMA integrity_check").fetchall()]
            finally:
                db.close()
        except sqlite3.Error as error:
            return [str(error)]
        return [] if found == ["ok"] else found

    def remove(self, rows: Iterable[tuple[str, str]]) -> int:
        """Forget these (key digest, candidate) rows, and the picks left naming no stored row.

        Returns:
            How many rows went.
        """
        try:
            with self._transaction() as db:
                removed = sum(
                    db.execute("DELETE FROM results WHERE key = ? AND candidate = ?", row).rowcount
                    for row in rows
                )
                db.execute(
                    "DELETE FROM picks WHERE NOT EXISTS "
                    "(SELECT 1 FROM results r WHERE r.key = picks.key AND r.candidate = picks.candidate)"
                )
                return removed
        except sqlite3.Error as error:
            raise StoreError(f"cannot write to the result store {self.path}: {error}") from error

    def close(self) -> None:
        with self._lock:
            self._db.close()


_RESULT_COLUMNS = "key, candidate, kernel, key_data, description, status, median_ms, result, created"


def _readable_rows(damaged: Path) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
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
            results = _readable(db, "results", _RESULT_COLUMNS) if "results" in tables else []
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


class _CorruptFile(Exception):
    """The store's file is damaged or not a SQLite database (never leaves this module)."""


def _is_corruption(error: sqlite3.DatabaseError) -> bool:
    code = getattr(error, "sqlite_errorcode", None)  # Python 3.11+
    if code is not None:
        return code & 0xFF in (11, 26)  # SQLITE_CORRUPT, SQLITE_NOTADB
    return "malformed" in str(error) or "not a database" in str(error)


@contextmanager
def _locked(lock_path: Path, *, exclusive: bool) -> Iterator[None]:
    """Hold a lock on `lock_path` across processes, shared or exclusive (where the OS has `fcntl`)."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    with open(lock_path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


class RawRow(NamedTuple):
    """One row of the `results` table as stored, unchecked (SQLite lets a column hold any type)."""

    key: Any
    candidate: Any
    kernel: Any
    key_data: Any
    description: Any
    status: Any
    median_ms: Any
    result: Any
    created: Any
    pick: Any  # the candidate the key's pick names, None when it has none
