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
from typing import Any, Literal, NamedTuple

from kernelpick.errors import StoreError
from kernelpick.store.base import CandidateResult, MemoryStore, StoredRow, is_number, parse_stored
from kernelpick.store.claims import FileClaims
from kernelpick.store.keys import TuningKey, canonical_json, canonical_value
from kernelpick.store.sqlite_file import (
    NOFOLLOW,
    CorruptFile,
    integrity_problems,
    is_corruption,
    locked,
    move_aside,
    readable_rows,
    writable,
)

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


#: What a store does when its file fails after it opened (a full disk, a read-only file, a disk
#: error): raise `StoreError` (tools), or warn once per cause and keep what it could not save in
#: memory for the process (the default store: a tuned call never fails for its store).
OnFault = Literal["raise", "memory"]


class SQLiteStore:
    """Results in a SQLite database (WAL mode: concurrent readers, one writer at a time, across processes).

    A file this process cannot write (a read-only file, folder or file system) is opened read-only:
    its results are read, and saving raises `StoreError`, or with `on_fault="memory"` keeps them in
    memory. Files it creates are private to the user (0600).
    """

    def __init__(self, path: Path | str, *, on_fault: OnFault = "raise") -> None:
        """Open (or create) the store at `path`.

        Raises:
            StoreError: the file cannot be opened (a folder, a newer schema, a damaged file that cannot
                be moved aside, no file where it cannot be created).
        """
        self.path = Path(path)
        self.on_fault = on_fault
        self._lock = threading.Lock()
        self._memory = MemoryStore()  # what could not be saved to the file (on_fault="memory")
        self._faults: set[str] = set()  # the causes of faults warned of
        self._warned_rows: set[tuple[str, str]] = set()  # (key, candidate) of rows warned of
        self.read_only = self.path.exists() and not writable(self.path)
        if self.read_only:
            self._db = self._open_read_only()
            return
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            if not self.path.exists():  # SQLite would make it 0644; its log files take its mode
                os.close(os.open(self.path, os.O_RDWR | os.O_CREAT | NOFOLLOW, 0o600))
        except OSError as error:
            raise StoreError(f"cannot create the result store {self.path}: {error}") from error
        try:
            # Shared with the other processes opening the file, exclusive to one rebuilding it: a
            # process never connects to the file (nor makes its log and shared-memory file) while
            # another moves it aside with them, which left it "disk I/O error" on every statement.
            with locked(self._lock_path, exclusive=False):
                self._db = self._open()
        except CorruptFile as corrupt:
            self._db = self._rebuild(corrupt)

    @property
    def _lock_path(self) -> Path:
        """The file whose lock orders opening the store against rebuilding it."""
        return self.path.with_name(f"{self.path.name}.lock")

    def _open(self) -> sqlite3.Connection:
        """A connection to the file, checked (`PRAGMA quick_check`) and with the current schema.

        Raises:
            CorruptFile: the file is damaged or is not a SQLite database.
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
            self._check(db)
            db.executescript(_SCHEMA)
            db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            return db
        except BaseException as error:
            if db is not None:
                db.close()
            if isinstance(error, sqlite3.DatabaseError) and is_corruption(error):
                raise CorruptFile(str(error)) from error
            if isinstance(error, sqlite3.Error):
                raise StoreError(f"cannot open the result store {self.path}: {error}") from error
            raise

    def _check(self, db: sqlite3.Connection) -> None:
        """Check an open store: a schema this kernelpick reads, and no damaged page.

        Raises:
            CorruptFile: a page is damaged.
            StoreError: its schema is newer than this kernelpick's.
        """
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
            raise CorruptFile("; ".join(problems[:3]))

    def _open_read_only(self) -> sqlite3.Connection:
        """A read-only connection to a file this process cannot write: nothing is written, not even the
        log files a WAL store's readers make (where the folder forbids them, the file alone is read).

        Raises:
            StoreError: it cannot be read, is damaged (it cannot be repaired here) or has a newer schema.
        """
        uri = self.path.resolve().as_uri()
        failure: BaseException | None = None
        for mode in ("mode=ro", "immutable=1"):
            try:
                db = sqlite3.connect(f"{uri}?{mode}", uri=True, timeout=30.0, check_same_thread=False)
            except sqlite3.Error as error:
                failure = error
                continue
            try:
                self._check(db)
                _stand_in_for_missing_tables(db)
                return db
            except CorruptFile as corrupt:
                db.close()
                raise StoreError(
                    f"result store {self.path} is damaged ({corrupt}) and read-only: it cannot be repaired "
                    "here; point KERNELPICK_CACHE_DIR elsewhere"
                ) from None
            except sqlite3.Error as error:  # a WAL store whose folder forbids its -shm file: immutable
                db.close()
                failure = error
            except BaseException:
                db.close()
                raise
        raise StoreError(f"cannot read the result store {self.path} (read-only): {failure}")

    def _rebuild(self, corrupt: CorruptFile) -> sqlite3.Connection:
        """Move the damaged file aside and start a new store in its place with every row of the damaged
        one that can still be read (one process does: the others wait for it, then open what it made)."""
        with locked(self._lock_path, exclusive=True):
            try:
                return self._open()  # another process may have moved it aside meanwhile
            except CorruptFile:
                pass
            aside = move_aside(self.path, corrupt)
            db = self._open()
            results, picks = readable_rows(aside, RESULT_COLUMNS)
            try:
                db.execute("BEGIN IMMEDIATE")
                # OR IGNORE: a process that opened the new file meanwhile may have saved newer rows.
                kept = db.executemany(
                    f"INSERT OR IGNORE INTO results ({RESULT_COLUMNS}) VALUES ({', '.join('?' * 9)})",
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
        """The connection, in a write transaction committed at the end of the block.

        Raises:
            StoreError: the store is read-only here.
        """
        if self.read_only:
            raise StoreError(f"cannot write to the result store {self.path}: it is read-only here")
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                yield self._db
                self._db.execute("COMMIT")
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise

    def load(self, key: TuningKey) -> dict[str, CandidateResult]:
        """The results stored under `key`, by candidate. A row that is not kernelpick data (written
        by hand, or by a newer or broken program) is left out with a warning: its candidate is then
        measured again, and the new result replaces it.

        Raises:
            StoreError: SQLite cannot read the file (named in the message), unless `on_fault="memory"`.
        """
        try:
            found = self._load(key)
        except StoreError as error:
            self._fault(error)
            found = {}
        return {**found, **self._memory.load(key)}

    def _load(self, key: TuningKey) -> dict[str, CandidateResult]:
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
                found[candidate] = _parse_row(candidate, description, result)
            except ValueError as error:
                with self._lock:  # once per row and store, however often the key is read
                    seen = (key.digest, str(candidate)) in self._warned_rows
                    self._warned_rows.add((key.digest, str(candidate)))
                if seen:
                    continue
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
        """The candidate the last finished tuning of `key` picked (None: none finished, or all failed):
        only a candidate stored under `key` whose result is sound and `ok`.

        Raises:
            StoreError: SQLite cannot read the file, unless `on_fault="memory"`.
        """
        kept = self._memory.picked(key)
        if kept is not None:
            return kept
        try:
            return self._picked(key)
        except StoreError as error:
            self._fault(error)
            return None

    def _picked(self, key: TuningKey) -> str | None:
        try:
            with self._lock:
                found = self._db.execute(
                    "SELECT p.candidate, r.description, r.result FROM picks p JOIN results r "
                    "ON r.key = p.key AND r.candidate = p.candidate WHERE p.key = ?",
                    (key.digest,),
                ).fetchone()
        except sqlite3.Error as error:
            raise StoreError(f"cannot read the result store {self.path}: {error}") from error
        if found is None:
            return None
        try:
            return str(found[0]) if _parse_row(*found).result.ok else None
        except ValueError:
            return None

    def claims(self) -> FileClaims | None:
        """Claims on keys shared by the processes using this file: lock files in `<file>.locks/`
        (none for a read-only store: it tunes nothing into the file)."""
        return None if self.read_only else FileClaims(self.path.with_name(f"{self.path.name}.locks"))

    def save(self, key: TuningKey, results: Iterable[CandidateResult], *, pick: str | None = None) -> None:
        """Remember `results` (and `pick`) under `key`.

        Raises:
            StoreError: the file cannot be written (read-only, full, failing), unless
                `on_fault="memory"`: then they are kept in memory for this process, with a warning.
        """
        results = list(results)
        try:
            self._save(key, results, pick)
        except StoreError as error:
            self._fault(error)
            self._memory.save(key, results, pick=pick)

    def _save(self, key: TuningKey, results: list[CandidateResult], pick: str | None) -> None:
        now = time.time()
        rows = [
            (
                key.digest,
                r.digest,
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
        """Every stored result (or one kernel's), by kernel and key; a row that is not what kernelpick
        writes is left out with a warning (`kernelpick cache verify` names them). A row is `picked`
        when its key's pick names it and its result is `ok`.

        Raises:
            StoreError: SQLite cannot read the file.
        """
        query = (
            "SELECT r.key, r.candidate, r.key_data, r.description, r.result, r.created, p.candidate "
            "FROM results r LEFT JOIN picks p ON p.key = r.key"
        )
        try:
            with self._lock:
                found = self._db.execute(
                    f"{query} WHERE r.kernel = ? ORDER BY r.kernel, r.key"
                    if kernel
                    else f"{query} ORDER BY r.kernel, r.key",
                    (kernel,) if kernel else (),
                ).fetchall()
        except sqlite3.Error as error:
            raise StoreError(f"cannot read the result store {self.path}: {error}") from error
        for digest, candidate, key_data, description, result, created, picked in found:
            try:
                stored = _parse_row(candidate, description, result)
                key = TuningKey.from_dict(_json(key_data))
                if key.digest != digest or not is_number(created):
                    raise ValueError("its key or time is not what kernelpick writes")
            except (ValueError, RecursionError) as error:
                log.warning(
                    "result store %s: leaving out row (key %s, candidate %s), which is not kernelpick "
                    "data (%s); `kernelpick cache verify` names such rows",
                    self.path,
                    str(digest)[:12],
                    str(candidate)[:12],
                    str(error)[:200],
                )
                continue
            ok = stored.result.ok
            yield StoredRow(
                key, candidate, stored.description, stored.result, created, ok and picked == candidate
            )

    def _fault(self, error: StoreError) -> None:
        """Raise `error`, or with `on_fault="memory"` warn of it once per cause and carry on in memory."""
        if self.on_fault == "raise":
            raise error
        cause = str(error.__cause__ or error)
        with self._lock:
            first = cause not in self._faults
            self._faults.add(cause)
        if first:
            log.warning(
                "%s; kernelpick carries on, keeping what it cannot save there in memory for this process",
                error,
            )

    def summary(self) -> list[dict[str, Any]]:
        """Per kernel: how many keys and results are stored, and how many results failed."""
        with self._lock:
            rows = self._db.execute(
                "SELECT kernel, COUNT(DISTINCT key), COUNT(*), SUM(status != 'ok') FROM results GROUP BY kernel"
            ).fetchall()
        return [{"kernel": k, "keys": n, "results": r, "failed": f} for k, n, r, f in rows]

    def clear(self, kernel: str | None = None) -> int:
        """Forget every result (or those of one kernel); returns how many rows went.

        Raises:
            StoreError: the file cannot be written.
        """
        try:
            with self._transaction() as db:
                if kernel is None:
                    db.execute("DELETE FROM picks")
                    return int(db.execute("DELETE FROM results").rowcount)
                removed = int(db.execute("DELETE FROM results WHERE kernel = ?", (kernel,)).rowcount)
                db.execute("DELETE FROM picks WHERE key NOT IN (SELECT key FROM results)")
                return removed
        except sqlite3.Error as error:
            raise StoreError(f"cannot write to the result store {self.path}: {error}") from error

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

    def dangling_picks(self) -> list[tuple[Any, Any, Any]]:
        """The picks that name no stored result: (key digest, candidate, the key's kernel where a row
        of the key says it, else None), as `kernelpick cache verify` reports them.

        Raises:
            StoreError: SQLite cannot read the file.
        """
        try:
            with self._lock:
                return [
                    tuple(row)
                    for row in self._db.execute(
                        "SELECT p.key, p.candidate, (SELECT kernel FROM results WHERE key = p.key LIMIT 1) "
                        "FROM picks p WHERE NOT EXISTS "
                        "(SELECT 1 FROM results r WHERE r.key = p.key AND r.candidate = p.candidate) "
                        "ORDER BY p.key"
                    )
                ]
        except sqlite3.Error as error:
            raise StoreError(f"cannot read the result store {self.path}: {error}") from error

    @staticmethod
    def integrity_problems(path: Path | str) -> list[str]:
        """What SQLite's `PRAGMA integrity_check` finds wrong with the store file at `path` (empty when
        nothing), the file left as it is (`kernelpick.store.sqlite_file.integrity_problems`)."""
        return integrity_problems(path)

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


def _stand_in_for_missing_tables(db: sqlite3.Connection) -> None:
    """Give a read-only connection an empty temporary table for each table its file lacks: a store of
    an older schema (version 1 had no `picks`) that cannot be migrated in place is read as it is,
    with no picks. Temporary tables live in this connection alone: nothing is written to the file."""
    present = {name for (name,) in db.execute("SELECT name FROM main.sqlite_master WHERE type = 'table'")}
    for statement in _SCHEMA.split(";"):
        words = statement.split()
        if words[:5] == ["CREATE", "TABLE", "IF", "NOT", "EXISTS"] and words[5] not in present:
            db.execute(statement.replace("CREATE TABLE IF NOT EXISTS", "CREATE TEMP TABLE", 1))


RESULT_COLUMNS = "key, candidate, kernel, key_data, description, status, median_ms, result, created"


def _parse_row(candidate: Any, description: Any, result: Any) -> CandidateResult:
    """A results row's candidate, description and result columns, checked (`parse_stored`).

    Raises:
        ValueError: they are not what kernelpick writes (a column holding no text, or JSON nested too
            deep to decode, included).
    """
    if not isinstance(candidate, str):
        raise ValueError(f"candidate is {type(candidate).__name__}, not text")
    return parse_stored(candidate, _json(description), _json(result))


def _json(text: Any) -> Any:
    """A column's JSON.

    Raises:
        ValueError: it holds no text, or text that is not JSON or nested too deep to decode.
    """
    if not isinstance(text, str):
        raise ValueError(f"a column holds {type(text).__name__}, not JSON text")
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("a column holds JSON nested too deep to decode") from None


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
