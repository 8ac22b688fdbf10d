"""Which store a tuner uses when given none (one per location per process), and `fresh_cache`."""

from __future__ import annotations

import contextlib
import contextvars
import logging
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from kernelpick import settings
from kernelpick.errors import CacheDirError, StoreError
from kernelpick.store.base import MemoryStore, ResultStore
from kernelpick.store.copying import RecordingStore
from kernelpick.store.layered import LayeredStore
from kernelpick.store.redis import RedisStore
from kernelpick.store.sqlite import SQLiteStore

log = logging.getLogger("kernelpick.store")

_stores: dict[tuple[Path | None, str, float, Path | None], ResultStore] = {}
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
    not writable: `settings.usable_cache_dir` warns once; a store file in a folder that cannot be
    written is still read).

    Never a fault of its file fails a call: a store file that cannot be opened (a folder, a newer
    schema, a damaged file that cannot be moved aside) costs one warning and a store in memory, and
    one that fails later (a full disk, a disk error) keeps what it cannot save in memory, with one
    warning per cause (`SQLiteStore(on_fault="memory")`).

    Raises:
        StoreError: `KERNELPICK_REDIS_URL` is set and the `redis` package is missing or the URL is not
            a Redis URL.
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
    if current.cache and folder is None:
        path = _read_only_store()
    redis_url = current.redis_url if path is not None else ""
    place = (path, redis_url, current.redis_timeout_s, current.store_key_file)
    with _lock:
        store = _stores.get(place)
        if store is None:
            store = _stores[place] = _open(path, redis_url, current.redis_timeout_s, current.store_key_file)
        return store


def _read_only_store() -> Path | None:
    """The store file of a cache dir that cannot be written (`settings.usable_cache_dir` warned of it),
    where there is one to read."""
    try:
        settings.cache_dir()
    except CacheDirError as error:
        path = Path(error.path) / "results.sqlite3"
        return path if path.is_file() else None
    return None


def _open(path: Path | None, redis_url: str, redis_timeout_s: float, key_file: Path | None) -> ResultStore:
    """The store of one place: in memory (no path), a SQLite file, or a SQLite file in front of Redis;
    in memory, with a warning, where the file cannot be opened."""
    local: ResultStore = MemoryStore()
    if path is not None:
        try:
            local = SQLiteStore(path, on_fault="memory")
        except StoreError as error:
            log.warning(
                "%s; kernelpick carries on, keeping this process's results in memory (`kernelpick cache "
                "verify` checks the file)",
                error,
            )
    if path is None or not redis_url:
        return local
    return LayeredStore(local, RedisStore(redis_url, timeout_s=redis_timeout_s, key_file=key_file))
