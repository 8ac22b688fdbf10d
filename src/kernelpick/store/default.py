"""Which store a tuner uses when it is given none: chosen by the settings, one per location per process."""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Iterator

from kernelpick import settings
from kernelpick.store.base import MemoryStore, ResultStore
from kernelpick.store.recording import RecordingStore
from kernelpick.store.sqlite import SQLiteStore

_stores: dict[str, ResultStore] = {}
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
    """SQLite under the cache dir, or a store in memory when `KERNELPICK_CACHE=0`."""
    recorder = _recording.get()
    return recorder if recorder is not None else _default_store()


def _default_store() -> ResultStore:
    name = str(settings.cache_dir() / "results.sqlite3") if settings.current().cache else "memory"
    with _lock:
        store = _stores.get(name)
        if store is None:
            store = _stores[name] = MemoryStore() if name == "memory" else SQLiteStore(name)
        return store
