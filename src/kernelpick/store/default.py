"""Which store a tuner uses when it is given none: chosen by the settings, one per location per process."""

from __future__ import annotations

import threading

from kernelpick import settings
from kernelpick.store.base import MemoryStore, ResultStore
from kernelpick.store.sqlite import SQLiteStore

_stores: dict[str, ResultStore] = {}
_lock = threading.Lock()


def default_store() -> ResultStore:
    """SQLite under the cache dir, or a store in memory when `KERNELPICK_CACHE=0`."""
    name = str(settings.cache_dir() / "results.sqlite3") if settings.current().cache else "memory"
    with _lock:
        store = _stores.get(name)
        if store is None:
            store = _stores[name] = MemoryStore() if name == "memory" else SQLiteStore(name)
        return store
