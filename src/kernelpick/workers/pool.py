"""Worker pools: one worker process per device, started once and reused, and the isolated measurement.

A measurement sends one candidate at a time to whichever worker is free, so that a candidate that
hangs or kills its worker is known by name: it gets status `timeout` or `crashed` with the end of
the worker's output, the worker is started again, and the rest go on. The fastest few are then
timed again together on one worker, so that the final ranking never compares two GPUs.
"""

from __future__ import annotations

import atexit
import collections
import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kernelpick.bench.result import BenchmarkResult
from kernelpick.workers.process import WorkerProcess, describe_exit
from kernelpick.workers.references import IsolationError

log = logging.getLogger("kernelpick.workers")

_Message = tuple[int, int, "dict[str, Any] | None"]


class WorkerPool:
    """Worker processes for a set of devices (GPU indices, or `None` for one CPU worker)."""

    def __init__(self, devices: Sequence[int | None]) -> None:
        self._messages: queue.Queue[_Message] = queue.Queue()
        self.workers = [WorkerProcess(device, self._messages, slot) for slot, device in enumerate(devices)]
        self._lock = threading.Lock()

    def start(self) -> None:
        """Start every worker that is not running (all at once: each takes seconds to import torch)."""
        stopped = [w for w in self.workers if not w.alive]
        if not stopped:
            return
        with ThreadPoolExecutor(max_workers=len(stopped)) as starter:
            list(starter.map(lambda worker: worker.start(), stopped))

    def close(self) -> None:
        for worker in self.workers:
            worker.stop()

    def measure(
        self,
        request: Mapping[str, Any],
        candidates: Sequence[str],
        *,
        timeout_s: float,
        confirm_top: int = 0,
        confirm_within: float = 0.1,
        on_done: Callable[[], object] | None = None,
    ) -> dict[str, BenchmarkResult]:
        """Measure each candidate in a worker; then time the closest few again together, on one worker.

        Args:
            request: what every worker needs to rebuild the problem (target, kind, problem, settings).
            candidates: the ids of the candidates to measure (config or choice digests).
            timeout_s: how long one candidate may take, compiling and timing included.
            confirm_top: at most how many of the fastest to time again together (0 or 1: none).
            confirm_within: only candidates within this fraction of the best are timed again.
            on_done: called after each candidate.

        Raises:
            IsolationError: the workers cannot do the work at all (they do not start, or cannot
                import the target): the caller should measure in its own process instead.
        """
        with self._lock:
            self.start()
            results = self._screen(request, candidates, timeout_s, on_done)
            ranked = sorted((c for c in candidates if results[c].ok), key=lambda c: results[c].median_ms)
            if confirm_top > 1 and len(ranked) > 1:
                limit = results[ranked[0]].median_ms * (1 + confirm_within)
                closest = [c for c in ranked[:confirm_top] if results[c].median_ms <= limit]
                if len(closest) > 1:
                    results.update(self._confirm(request, closest, timeout_s * len(closest)))
            return results

    def _screen(
        self,
        request: Mapping[str, Any],
        candidates: Sequence[str],
        timeout_s: float,
        on_done: Callable[[], object] | None,
    ) -> dict[str, BenchmarkResult]:
        results: dict[str, BenchmarkResult] = {}
        pending = collections.deque(candidates)
        busy: dict[int, tuple[str, float]] = {}
        while pending or busy:
            for worker in self.workers:
                if not pending:
                    break
                if worker.slot in busy:
                    continue
                if not worker.alive:
                    worker.start()
                candidate = pending.popleft()
                worker.send({**request, "candidates": [candidate], "confirm": False})
                busy[worker.slot] = (candidate, time.monotonic() + timeout_s)
            message = self._next_message(busy)
            if message is None:  # a deadline passed
                for slot, (candidate, deadline) in list(busy.items()):
                    if time.monotonic() >= deadline:
                        worker = self.workers[slot]
                        worker.kill()
                        results[candidate] = BenchmarkResult.failed(
                            "timeout",
                            f"took over {timeout_s:g} s; the worker was killed{_output(worker.tail())}",
                        )
                        del busy[slot]
                        if on_done is not None:
                            on_done()
                continue
            slot, body = message
            candidate, _ = busy.pop(slot)
            results[candidate] = self._result(slot, candidate, body)
            if on_done is not None:
                on_done()
        return results

    def _confirm(
        self, request: Mapping[str, Any], candidates: list[str], timeout_s: float
    ) -> dict[str, BenchmarkResult]:
        worker = self.workers[0]
        try:
            if not worker.alive:
                worker.start()
            worker.send({**request, "candidates": candidates, "confirm": True})
            busy = {worker.slot: ("", time.monotonic() + timeout_s)}
            message = self._next_message(busy)
        except IsolationError as error:
            log.warning("second round failed, keeping the first round's timings: %s", error)
            return {}
        if message is None or message[1] is None or "results" not in message[1]:
            worker.kill()
            log.warning("second round failed, keeping the first round's timings:%s", _output(worker.tail()))
            return {}
        found = message[1]["results"]
        confirmed = {c: BenchmarkResult.from_dict(found[c]) for c in candidates if c in found}
        return {c: r for c, r in confirmed.items() if r.ok}

    def _next_message(
        self, busy: Mapping[int, tuple[str, float]]
    ) -> tuple[int, dict[str, Any] | None] | None:
        """The next message from a busy worker, or None once the nearest deadline passes."""
        while True:
            if not busy:
                return None
            remaining = min(deadline for _, deadline in busy.values()) - time.monotonic()
            if remaining <= 0:
                return None
            try:
                slot, generation, body = self._messages.get(timeout=remaining)
            except queue.Empty:
                return None
            if slot in busy and generation == self.workers[slot].generation:
                return slot, body
            # A message from a worker that was killed and replaced meanwhile: stale.

    def _result(self, slot: int, candidate: str, body: dict[str, Any] | None) -> BenchmarkResult:
        worker = self.workers[slot]
        if body is None:
            code = worker.exit_code()
            return BenchmarkResult.failed(
                "crashed", f"the worker died ({describe_exit(code)}) while running it{_output(worker.tail())}"
            )
        if "error" in body:
            raise IsolationError(f"a worker could not run the measurement: {body['error']}")
        return BenchmarkResult.from_dict(body["results"][candidate])


def _output(tail: str) -> str:
    return f"; its last output:\n{tail}" if tail.strip() else ""


_pools: dict[tuple[int | None, ...], WorkerPool] = {}
_pools_lock = threading.Lock()


def pool_for(devices: Sequence[int | None]) -> WorkerPool:
    """The process-wide pool for these devices (started on first use, stopped at exit)."""
    key = tuple(devices)
    with _pools_lock:
        pool = _pools.get(key)
        if pool is None:
            pool = _pools[key] = WorkerPool(key)
        return pool


@atexit.register
def _close_pools() -> None:
    for pool in list(_pools.values()):
        pool.close()
