"""Result stores: where tuning results are remembered across processes and machines."""

from __future__ import annotations

from kernelpick.store.base import MemoryStore, ResultStore, StoredResult
from kernelpick.store.default import default_store
from kernelpick.store.keys import Toolchain, TuningKey
from kernelpick.store.layered import LayeredStore
from kernelpick.store.redis import RedisStore
from kernelpick.store.sqlite import SQLiteStore

__all__ = [
    "LayeredStore",
    "MemoryStore",
    "RedisStore",
    "ResultStore",
    "SQLiteStore",
    "StoredResult",
    "Toolchain",
    "TuningKey",
    "default_store",
]
