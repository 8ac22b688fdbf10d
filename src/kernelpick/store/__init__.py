"""Result stores: where tuning results are remembered across processes and machines."""

from __future__ import annotations

from kernelpick.store.base import CandidateResult, MemoryStore, ResultStore
from kernelpick.store.default import default_store
from kernelpick.store.keys import Toolchain, TuningKey
from kernelpick.store.layered import LayeredStore
from kernelpick.store.redis import RedisStore
from kernelpick.store.sqlite import SQLiteStore

__all__ = [
    "CandidateResult",
    "LayeredStore",
    "MemoryStore",
    "RedisStore",
    "ResultStore",
    "SQLiteStore",
    "Toolchain",
    "TuningKey",
    "default_store",
]
