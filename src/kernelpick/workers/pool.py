"""Worker pools: one worker process per device, reused while tuning goes on, and the isolated measurement."""

from __future__ import annotations

import atexit
import collections
import contextlib
import functools
import itertools
import logging
import queue
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Literal

from kernelpick import settings
from kernelpick.bench.benchmarker import confirmed, lowest_cost
from kernelpick.bench.measure import OnDone
from kernelpick.bench.result import BenchmarkResult, TimingSummary
from kernelpick.errors import IsolationError
from kernelpick.threads import Threads
from kernelpick.workers.process import Message, WorkerProcess, describe_exit, describe_output
from kernelpick.workers.zygote import fork_zygote

log = logging.getLogger("kernelpick.workers")


@dataclass(frozen=True, slots=True)
class _Busy:
    """What a busy worker is doing: its candidates, until when, which request."""

    candidates: tuple[str, ...]
    deadline: float
    request: int


class WorkerPool:
    """Worker processes for a set of devices (GPU indices, or `None` for one CPU worker); where one
    has a GPU, idle workers end (`retires`, `KERNELPICK_WORKER_IDLE`)."""

    def __init__(self, devices: Sequence[int | None]) -> None:
        self._messages: queue.Queue[Message] = queue.Queue()
        self.workers = [WorkerProcess(device, self._messages, slot) for slot, device in enumerate(devices)]
        self._lock = threading.Lock()
        self._requests = itertools.count()
        self._start_lock = threading.Lock()
        self._starting: Future[None] | None = None
        self._payloads: Mapping[str, Any] = {}
        self._worker_phases: collections.Counter[str] = collections.Counter()  # worker-seconds, by part
        self.retires = any(d is not None for d in devices)
        self._wanted = 0  # bumped by every measurement and early start: an idle spell's number

    def start(self) -> None:
        """Start every worker that is not running (all at once: each takes seconds to import torch).

        Raises:
            IsolationError: a worker did not start.
        """
        with self._start_lock, Threads(max_workers=max(1, len(self.workers))) as starter:
            list(starter.map(lambda worker: worker.start(), [w for w in self.workers if not w.alive]))

    def start_soon(self) -> None:
        """Start the workers in the background (while the caller compiles, say): the next
        measurement waits for them, and raises what starting them raised."""
        self._wanted += 1  # a measurement comes: workers idle until then stay up
        if self._starting is not None or all(w.alive for w in self.workers):
            return
        # Its zygote now, in the caller's thread: forked from the thread below while the caller's
        # compiling thread held a module's import lock (Triton imports lazily), the zygote and every
        # worker it forks would wait for that lock for good (each config timed out after 60 s).
        fork_zygote(spawn=True)
        starting: Future[None] = Future()

        def start() -> None:
            try:
                self.start()
            except BaseException as error:
                starting.set_exception(error)
            else:
                starting.set_result(None)

        self._starting = starting
        threading.Thread(target=start, name="kernelpick-workers-start", daemon=True).start()

    def _send(
        self,
        worker: WorkerProcess,
        request: Mapping[str, Any],
        step: Literal["prepare", "screen", "confirm"],
        candidates: Sequence[str],
        timeout_s: float,
        **details: Any,
    ) -> _Busy:
        """Send `worker` one step of `request` for `candidates`; what to wait for, until when."""
        number = next(self._requests)
        carried = {c: self._payloads[c] for c in candidates}
        # The worker ends itself a little past `timeout_s` too, should this process not kill it.
        worker.send(
            {**request, "candidates": carried, "step": step, **details, "id": number, "timeout_s": timeout_s}
        )
        return _Busy(tuple(candidates), time.monotonic() + timeout_s, number)

    def close(self) -> None:
        for worker in self.workers:
            worker.stop()

    def _retire_when_idle(self) -> None:
        """End the workers once `KERNELPICK_WORKER_IDLE` seconds pass with no tuning, measurement or
        early start since (for a pool that `retires`); during a burst of tunings, `BURST_GRACE_S` at least."""
        if not self.retires:
            return
        spell = self._wanted
        grace = settings.current().worker_idle_s
        timer = threading.Timer(max(grace, BURST_GRACE_S) if _in_burst else grace, self._retire, (spell,))
        timer.daemon = True
        timer.name = "kernelpick-workers-retire"
        timer.start()

    def _retire(self, spell: int) -> None:
        global _in_burst
        with self._lock, self._start_lock:
            if spell != self._wanted or self._starting is not None or _tunings_running:
                return  # wanted again meanwhile
            _in_burst = False
            for worker in self.workers:
                if worker.alive and worker.forked:  # a new interpreter would take seconds to start again
                    log.debug("worker %d idle: stopped", worker.slot)
                    worker.stop()

    def feed(self) -> Feed:
        """Candidates for a measurement that are not all known when it starts (see `Feed`)."""
        return Feed(self._messages)

    def measure(
        self,
        request: Mapping[str, Any],
        candidates: Sequence[str],
        payloads: Mapping[str, Any],
        *,
        feed: Feed | None = None,
        timeout_s: float,
        prepare_timeout_s: float | None = None,
        confirm_top: int = 0,
        confirm_within: float = 0.1,
        on_done: OnDone | None = None,
        reference: str | None = None,
        phases: dict[str, float] | None = None,
        best_ms: Callable[[], float] = lambda: float("inf"),
    ) -> dict[str, BenchmarkResult]:
        """Measure each candidate in a worker; then time the closest few again together on all of them.

        Args:
            request: what every worker needs to rebuild the problem (problem, settings).
            candidates: the ids of the candidates known now (config or choice digests).
            payloads: what a request carries of each candidate, by id (a fed one's too).
            feed: more candidates as the caller compiles them, screened as they come after any prepare step.
            timeout_s: how long one candidate may take, compiling and timing included.
            prepare_timeout_s: how long the workers may compile their shares of `candidates` first
                (None: no prepare step; the caller compiled them already).
            confirm_top, confirm_within, reference: which to time again (`bench.benchmarker.confirmed`).
            on_done: called with each candidate and its screening result as it is done with.
            phases: the seconds of each step (prepare, screen, confirm, `workers_start`), and the
                workers' own, summed: `worker_problem` (making the inputs), `worker_load`
                (candidates ready to launch), `worker_measure` (verifying and timing).
            best_ms: the lowest cost measured elsewhere now (other ranks of a job), which the cutoff
                and the finalists count too (`kernelpick.bench.benchmarker.benchmark`).

        Raises:
            IsolationError: the workers cannot do the work at all (they do not start, or cannot
                import the target): the caller should measure in its own process instead.
        """
        on_done = on_done or (lambda candidate, result: None)
        with self._lock:
            self._wanted += 1
            self._payloads = payloads
            phases = {} if phases is None else phases
            started = time.perf_counter()
            starting, self._starting = self._starting, None
            if starting is not None:
                starting.result()  # an IsolationError of the background start is this measurement's
            self.start()
            if (waited := time.perf_counter() - started) > 0.01:
                phases["workers_start"] = waited
            self._worker_phases.clear()
            try:
                results: dict[str, BenchmarkResult] = {}
                feed = Feed(self._messages, closed=True) if feed is None else feed
                started = time.perf_counter()
                if candidates and prepare_timeout_s is not None:
                    results = self._prepare(request, candidates, prepare_timeout_s, feed)
                    for candidate, result in results.items():
                        on_done(candidate, result)
                    phases["prepare"] = time.perf_counter() - started
                    started = time.perf_counter()
                feed.waiting[:0] = [c for c in candidates if c not in results]  # before those fed meanwhile
                results.update(self._screen(request, timeout_s, on_done, feed, best_ms))
                phases["screen"] = time.perf_counter() - started
                confirm = functools.partial(self._confirm, request, timeout_s=timeout_s, phases=phases)
                results = confirmed(results, confirm, confirm_top, confirm_within, reference, best_ms())
                return {c: results[c] for c in dict.fromkeys([*candidates, *results])}
            finally:
                phases.update({f"worker_{part}": seconds for part, seconds in self._worker_phases.items()})

    def _prepare(
        self, request: Mapping[str, Any], candidates: Sequence[str], timeout_s: float, feed: Feed
    ) -> dict[str, BenchmarkResult]:
        """Step 1: every worker compiles its share; the failures, by candidate. What `feed` delivers
        meanwhile waits in it for step 2."""
        live = [w for w in self.workers if w.alive]
        busy: dict[int, _Busy] = {}
        for i, worker in enumerate(live):
            if share := candidates[i :: len(live)]:
                busy[worker.slot] = self._send(worker, request, "prepare", share, timeout_s)
        failed: dict[str, BenchmarkResult] = {}
        with self._abandoned_on_error(busy):
            for slot, waiting, body in self._answers(busy, feed):
                if body is None:
                    log.warning(
                        "a worker died while compiling %d candidates; going on one at a time: %s",
                        len(waiting.candidates),
                        _failure(self.workers[slot], body, {}),
                    )
                elif "error" in body:
                    raise IsolationError(f"a worker could not run the measurement: {body['error']}")
                else:
                    failed.update({c: BenchmarkResult.from_dict(r) for c, r in body["results"].items()})
        if busy:  # the deadline passed: those compile again, one by one, in step 2
            log.warning(
                "compiling in the workers took over %g s; going on one candidate at a time", timeout_s
            )
        return failed

    def _screen(
        self,
        request: Mapping[str, Any],
        timeout_s: float,
        on_done: OnDone,
        feed: Feed,
        best_ms: Callable[[], float],
    ) -> dict[str, BenchmarkResult]:
        """Step 2: one candidate at a time to whichever worker is free, as `feed` has them waiting."""
        results: dict[str, BenchmarkResult] = {}
        busy: dict[int, _Busy] = {}
        with self._abandoned_on_error(busy):
            while feed.waiting or busy or feed.open:
                for worker in [w for w in self.workers if w.slot not in busy][: len(feed.waiting)]:
                    if not worker.alive:
                        worker.start()
                    fastest = lowest_cost(results, best_ms())
                    lowest = None if fastest == float("inf") else fastest
                    busy[worker.slot] = self._send(
                        worker, request, "screen", [feed.waiting.pop(0)], timeout_s, best_ms=lowest
                    )
                message = self._next_message(busy, feed)
                if message is None:  # a deadline passed
                    for slot, waiting in list(busy.items()):
                        if time.monotonic() >= waiting.deadline:
                            worker = self.workers[slot]
                            worker.kill()
                            (candidate,) = busy.pop(slot).candidates
                            results[candidate] = BenchmarkResult.failed(
                                "timeout",
                                f"took over {timeout_s:g} s; the worker was killed{describe_output(worker.tail())}",
                            )
                            on_done(candidate, results[candidate])
                    continue
                slot, body = message
                if slot == _FEED:  # a fed candidate, waiting in the feed now
                    continue
                (candidate,) = busy.pop(slot).candidates
                results[candidate] = self._result(slot, candidate, body, first=not results)
                on_done(candidate, results[candidate])
        return results

    def _confirm(
        self, request: Mapping[str, Any], candidates: list[str], *, timeout_s: float, phases: dict[str, float]
    ) -> dict[str, TimingSummary]:
        """Step 3: the finalists again, interleaved, on every worker, each running its share of the
        runs, each of them `timeout_s` at most; its seconds in `phases`."""
        started = time.perf_counter()
        timeout_s *= len(candidates)
        busy: dict[int, _Busy] = {}
        share = 1.0 / len(self.workers)
        for worker in self.workers:
            try:
                if not worker.alive:
                    worker.start()
                busy[worker.slot] = self._send(worker, request, "confirm", candidates, timeout_s, share=share)
            except IsolationError as error:
                log.warning("a worker did not start again for the second round: %s", error)
        # Only workers that timed every finalist count: each finalist then runs on the same GPUs.
        complete: list[dict[str, TimingSummary]] = []
        with self._abandoned_on_error(busy):
            for slot, _, body in self._answers(busy):
                found = {} if body is None else body.get("results", {})
                timed = {c: BenchmarkResult.from_dict(found.get(c, _MISSING)).timing for c in candidates}
                if all(timed.values()):
                    complete.append(timed)  # type: ignore[arg-type]
                else:
                    log.warning(
                        "second round failed on a worker: %s", _failure(self.workers[slot], body, found)
                    )
        if busy:
            log.warning(
                "second round took over %g s on %d worker(s); using the others'", timeout_s, len(busy)
            )
        phases["confirm"] = time.perf_counter() - started
        if not complete:
            log.warning("second round failed, keeping the first round's timings")
            return {}
        return {c: TimingSummary.combine([part[c] for part in complete]) for c in candidates}

    def _answers(self, busy: dict[int, _Busy], feed: Feed | None = None) -> Iterator[tuple[int, _Busy, Any]]:
        """Each busy worker's answer as it comes (None: it died), with what it was busy with (what `feed`
        delivers meanwhile waits in it); once the deadline passes, the workers still `busy` are killed."""
        while busy:
            message = self._next_message(busy, feed)
            if message is None:
                for slot in busy:
                    self.workers[slot].kill()
                return
            if message[0] != _FEED:
                yield message[0], busy.pop(message[0]), message[1]

    @contextlib.contextmanager
    def _abandoned_on_error(self, busy: Mapping[int, _Busy]) -> Iterator[None]:
        """Within the block, an exception that ends it (Ctrl-C, SIGTERM while tuning, an unusable
        answer) kills the workers still `busy` with its requests: nobody reads their answers now, and
        a worker left running a candidate would hold its GPU until that candidate ended."""
        try:
            yield
        except BaseException:
            for slot in list(busy):
                self.workers[slot].kill()
            raise

    def _next_message(
        self, busy: Mapping[int, _Busy], feed: Feed | None = None
    ) -> tuple[int, dict[str, Any] | None] | None:
        """The next answer of a busy worker (None for its death) or, while `feed` is open, of the feed
        (its candidate then waits in it); None once the nearest deadline passes."""
        feeding = feed if feed is not None and feed.open else None
        while True:
            if not busy and feeding is None:
                return None
            remaining = None
            if busy:
                # Past the deadline, what already arrived is still read (timeout 0): the pool may
                # have been busy restarting a worker while the answer came in.
                remaining = max(0.0, min(waiting.deadline for waiting in busy.values()) - time.monotonic())
            try:
                slot, generation, body = self._messages.get(timeout=remaining)
            except queue.Empty:
                return None
            if slot == _FEED:
                # Only this measurement's feed: one interrupted earlier may still deliver to the queue.
                if feeding is not None and generation == feeding.number:
                    feeding.open = body is not None
                    feeding.waiting += [] if body is None else [body["candidate"]]
                    return slot, body
                continue
            current = slot in busy and generation == self.workers[slot].generation
            if current and (body is None or body.get("id") == busy[slot].request):
                if body is not None:
                    self._worker_phases.update(body.get("seconds") or {})
                    if body.get("exiting"):
                        self.workers[slot].kill()  # it is on its way out: the next use starts another
                return slot, body
            # Stale: from a worker killed and replaced meanwhile, or the answer to a request given
            # up on (a measurement that stopped early).

    def _result(
        self, slot: int, candidate: str, body: dict[str, Any] | None, *, first: bool
    ) -> BenchmarkResult:
        """A screened candidate's result from its worker's answer.

        Raises:
            IsolationError: the first answer of a measurement says the request is unusable (the
                target does not import, say). Later, such an answer is the candidate's failure: the
                caller never runs a candidate in its own process once workers have started on them.
        """
        worker = self.workers[slot]
        if body is None:
            code = worker.exit_code()
            if code == -signal.SIGALRM:  # it ended itself past its time limit (`kernelpick.workers.main`)
                return BenchmarkResult.failed(
                    "timeout",
                    f"it ran past its time limit and the worker ended itself{describe_output(worker.tail())}",
                )
            return BenchmarkResult.failed(
                "crashed",
                f"the worker died ({describe_exit(code)}) while running it{describe_output(worker.tail())}",
            )
        if "error" in body:
            if first:
                raise IsolationError(f"a worker could not run the measurement: {body['error']}")
            return BenchmarkResult.failed("runtime_error", f"{body['error']}\n{body.get('traceback', '')}")
        return BenchmarkResult.from_dict(body["results"][candidate])


_MISSING = {"status": "runtime_error", "timing": None, "message": "no result"}
_FEED = -1  # the slot of messages from a feed
_feeds = itertools.count(1)


class Feed:
    """Candidates delivered while a measurement runs: `put` each as it becomes ready (compiled),
    then `close` (always: the measurement ends only then). Safe to call from any thread. `messages`:
    the measuring pool's queue; `closed`: a feed of nothing (for a measurement given none)."""

    def __init__(self, messages: queue.Queue[Message], *, closed: bool = False) -> None:
        self._messages = messages
        self.number = next(_feeds)  # tells its messages from those of an earlier feed
        # The measurement's side: whether more may come, and what waits for a free worker.
        self.open = not closed
        self.waiting: list[str] = []

    def put(self, candidate: str) -> None:
        self._messages.put((_FEED, self.number, {"candidate": candidate}))

    def close(self) -> None:
        self._messages.put((_FEED, self.number, None))


def _failure(worker: WorkerProcess, body: Mapping[str, Any] | None, results: Mapping[str, Any]) -> str:
    """Why a worker's answer is no use, for a log line."""
    if body is None:
        return f"it died ({describe_exit(worker.exit_code())}){describe_output(worker.tail())}"
    if "error" in body:
        return f"{body['error']}\n{body.get('traceback', '')}"
    reasons = {r.get("message", "") for r in results.values() if r.get("status") != "ok"}
    return "; ".join(sorted(reasons)) or "finalists missing from its answer"


_pools: dict[tuple[int | None, ...], WorkerPool] = {}
_pools_lock = threading.Lock()
_tunings_running = 0  # tunings under way in this process (`tuning_in_progress`)
_tunings_lock = threading.Lock()
#: A tuning that starts within this many seconds of the last one's end makes a burst (a model's first
#: forward meeting its keys one after another, with nothing of the program's own run between them)...
BURST_GAP_S = 0.1
#: ... during which idle workers stay up this long at least: a key's workers started again would make
#: a new CUDA context and load every candidate's binary anew (docs/measurement.md, "Idle workers end").
BURST_GRACE_S = 0.5
_last_end = float("-inf")  # when the last tuning ended (`time.monotonic()`)
_in_burst = False


@contextlib.contextmanager
def tuning_in_progress() -> Iterator[None]:
    """Hold the workers up while a tuning runs (however many measurements it makes); once none runs,
    pools that retire their workers end them when idle (`WorkerPool._retire_when_idle`)."""
    global _tunings_running, _last_end, _in_burst
    with _tunings_lock:
        if not _tunings_running and time.monotonic() - _last_end < BURST_GAP_S:
            _in_burst = True
        _tunings_running += 1
    try:
        yield
    finally:
        with _tunings_lock:
            _tunings_running -= 1
            last = _tunings_running == 0
            _last_end = time.monotonic()
        if last:
            with _pools_lock:
                pools = list(_pools.values())
            for pool in pools:
                pool._retire_when_idle()


def pool_for(devices: Sequence[int | None]) -> WorkerPool:
    """The process-wide pool for these devices (started on first use, stopped at exit)."""
    key = tuple(devices)
    with _pools_lock:
        if key not in _pools:
            _pools[key] = WorkerPool(key)
        return _pools[key]


@atexit.register
def _close_pools() -> None:
    for pool in list(_pools.values()):
        pool.close()
