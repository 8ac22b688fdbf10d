"""Which store a tuner uses when it is given none: chosen by the settings, one per location per
process; `fresh_cache()` scopes a temporary one."""

from __future__ import annotations

import contextlib
import contextvars
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from kernelpick import settings
from kernelpick.store.base import MemoryStore, ResultStore
from kernelpick.store.layered import LayeredStore
from kernelpick.store.recording import RecordingStore
from kernelpick.store.redis import RedisStore
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
    in memory (and no Redis) when `KERNELPICK_CACHE=0` or the cache dir cannot be used (a file, or
    not writable: `settings.usable_cache_dir` warns once).

    Raises:
        StoreError: `KERNELPICK_REDIS_URL` is set and the `redis` package is missing or the URL is not
            a Redis URL; the SQLite file cannot be opened.
    """
    recorder = _recording.get()
    return recorder if recorder is not None else _default_store()


@contextlib.contextmanager
def fresh_cache() -> Iterator[Path]:
    """Within the block, an empty temporary result store and template cache; both are deleted after.

    For tests of one's own kernels: tuning inside measures afresh and leaves no row in the user's
    store (nor in a shared Redis store: `KERNELPICK_REDIS_URL` is off within). It scopes
    `KERNELPICK_CACHE_DIR` like `settings.override` does: in this thread or task, in the threads
    kernelpick starts for it and in its worker processes. Deployment tables still apply. What a
    selector or tuned kernel picked earlier in this process stays picked: `selector.clear()` (or
    `kernel.cache.clear()` of an autotuned kernel) tunes it again.

    Example:
        with kernelpick.fresh_cache() as folder:
            record = my_selector.tune(x, y)
            assert not record.from_store

    Yields:
        The temporary cache folder (the store is `results.sqlite3` in it, rendered templates are
        under `templates/`).
    """
    with tempfile.TemporaryDirectory(prefix="kernelpick-cache-", ignore_cleanup_errors=True) as folder:
        path = Path(folder)
        try:
            with settings.override(cache_dir=path, cache=True, redis_url=""):
                yield path
        finally:
            _close_stores_under(path)


def _close_stores_under(folder: Path) -> None:
    """Close and forget the default stores opened in `folder` (it is about to be deleted)."""
    with _lock:
        places = [place for place in _stores if place[0] is not None and place[0].is_relative_to(folder)]
        closing = [_stores.pop(place) for place in places]
    for store in closing:
        close = getattr(store, "close", None)
        if callable(close):
            close()


def default_store_path() -> Path:
    """Where the default store's SQLite file is: `results.sqlite3` under `KERNELPICK_CACHE_DIR`.

    Raises:
        CacheDirError: the cache dir cannot be created or written.
    """
    return settings.cache_dir() / "results.sqlite3"


def _default_store() -> ResultStore:
    current = settings.current()
    folder = settings.usable_cache_dir() if current.cache else None
    path = None if folder is None else folder / "results.sqlite3"
    redis_url = current.redis_url if path is not None else ""
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
