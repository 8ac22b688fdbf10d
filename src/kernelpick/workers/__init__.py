"""Isolated benchmarking: worker processes that a crashing, hanging or poisoning candidate cannot take down."""

from __future__ import annotations

from kernelpick.workers.plan import start_workers
from kernelpick.workers.pool import WorkerPool, pool_for
from kernelpick.workers.references import IsolationError, Reference, reference_to, resolve

__all__ = [
    "IsolationError",
    "Reference",
    "WorkerPool",
    "pool_for",
    "reference_to",
    "resolve",
    "start_workers",
]
