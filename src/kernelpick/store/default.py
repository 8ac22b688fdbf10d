"""Which store a tuner uses when it is given none: chosen by the settings, one per location per process."""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Iterator
from pathlib import Path

from kernelpick import settings
from kernelpick.store.base import MemoryStore, ResultStore
from kernelpick.store.recording import RecordingStore
from kernelpick.store.redis import LayeredStore, RedisStore
from kernelpick.store.sqlite import SQLiteStore

_stores: dict[tuple[Path | None, str, float], ResultStore] = {}
_lock = threading.Lock()
_recording: contextvars.ContextVar[RecordingStore | None] = contextvars.ContextVar(
    "kernelpick_recording", default=None
)


@contextlib.contextmanager
def recording() -> Iterator[RecordingStore]:
    """Within the block, the default store also keeps what is saved through it (`kernelpick tune`
    sends a job's results from the process that tuned to the one that exports the table)."""
    recorder = RecordingStore(_default_store)
    token = _recording.set(recorder)
    try:
        yield recorder
    finally:
        _recording.reset(token)


def default_store() -> ResultStore:
    """SQLite under the cache dir, layered under Redis when `KERNELPICK_REDIS_URL` is set, or a store
    in memory (and no Redis) when `KERNELPICK_CACHE=0`.

    Raises:
        StoreError: `KERNELPICK_REDIS_URL` is set and the `redis` package is missing or the URL is not
            a Redis URL; the SQLite file cannot be opened.
    """
    recorder = _recording.get()
    return recorder if recorder is not None else _default_store()


def default_store_path() -> Path:
    """Where the default store's SQLite file is: `results.sqlite3` under `KERNELPICK_CACHE_DIR`."""
    return settings.cache_dir() / "results.sqlite3"


def _default_store() -> ResultStore:
    current = settings.current()
    path = default_store_path() if current.cache else None
    redis_url = current.redis_url if current.cache else ""
    place = (path, redis_url, current.redis_timeout_s)
    with _lock:
        store = _stores.get(place)
        if store is None:
            store = _stores[place] = _open(path, redis_url, current.redis_timeout_s)
        return store


def _open(path: Path | None, redis_url: str, redis_timeout_s: float) -> ResultStore:
    """The store of one place: in memory (no path), a SQLite file, or a SQLite file in front of Redis."""
    if path is None:
        return MemoryStore()
    local = SQLiteStore(path)
    if not redis_url:
        return local
    return LayeredStore(local, RedisStore(redis_url, timeout_s=redis_timeout_s))
