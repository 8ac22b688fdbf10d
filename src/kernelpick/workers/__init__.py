"""The process boundary: worker processes that a crashing, hanging or poisoning candidate cannot kill."""

from __future__ import annotations

from kernelpick.errors import IsolationError
from kernelpick.workers.plan import start_workers
from kernelpick.workers.pool import WorkerPool, pool_for

__all__ = ["IsolationError", "WorkerPool", "pool_for", "start_workers"]
