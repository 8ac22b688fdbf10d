"""Tuning in the background: a new signature's first calls run a provisional pick while it is tuned."""

from __future__ import annotations

import atexit
import concurrent.futures.thread  # noqa: F401 (registers its pools' shutdown: `_wait_at_exit` runs before it)
import contextvars
import copy
import functools
import hashlib
import json
import logging
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import torch

from kernelpick.bench.result import BenchmarkResult
from kernelpick.bench.timers import beside_the_program
from kernelpick.console import warn_once
from kernelpick.device import capturing
from kernelpick.engine.choice import Choice
from kernelpick.engine.ranks import RankJob, rank_job
from kernelpick.engine.record import CandidateResult, TuningRecord
from kernelpick.engine.signature import Calls, Signature, check_measurable
from kernelpick.engine.tuning import in_graph
from kernelpick.errors import ConfigError
from kernelpick.workers.plan import fork_zygote_early

if TYPE_CHECKING:
    from kernelpick.select.selector import Selector

log = logging.getLogger("kernelpick.select")
_Run = TypeVar("_Run")  # what a key runs: a selector's call, a tuned kernel's entry
_Front = TypeVar("_Front")

#: The provisional pick's row: it runs unmeasured while the choices are tuned.
UNMEASURED = BenchmarkResult.failed("skipped", "provisional: runs unmeasured while the choices are tuned")


@dataclass(eq=False)
class Pending(Generic[_Run]):
    """One key tuned in the background: what it runs meanwhile (`provisional`), and what the tuning thread
    found on a `shadow` of its front: what it runs after the switch (`outcome`) and the record (None where
    the tuning raised: `error`); then the key's `ranks` agree when to switch, and `done` is set."""

    provisional: _Run
    started: float = field(default_factory=time.perf_counter)
    done: threading.Event = field(default_factory=threading.Event)
    outcome: _Run | None = None
    record: TuningRecord | None = None
    error: BaseException | None = None
    calls: int = 0  # provisional calls so far
    ranks: RankSwitch | None = None  # the job's ranks switch together

    def due(self, values: Sequence[Any]) -> bool:
        """Count a call of the key with `values`; whether it switches to the pick: once the tuning ended
        (with `ranks`, at the job's call to switch at: a call past its bound waits), never in a capture."""
        self.calls += 1
        ended = self.done.is_set() if self.ranks is None else self.ranks.allows(self.calls)
        return ended and not capturing(values)

    def switched(
        self, logger: logging.Logger, who: str, noun: str, kept: str
    ) -> tuple[_Run, TuningRecord | None]:
        """What the key runs from its switch on, and its record (None: the tuning failed), said in the front's
        `logger`: `who` tuned, the provisional `noun` ("config"), what is `kept` where the tuning failed."""
        seconds = time.perf_counter() - self.started
        if self.outcome is None or self.record is None:
            failed = "%s: tuning in the background failed after %.1f s (%s: %s); %s keeps running"
            logger.warning(failed, who, seconds, type(self.error).__name__, self.error, kept)
            return self.provisional, None
        switched = "%s%s: switched from the provisional %s to %s after %.1f s of tuning in the background"
        logger.info(switched, who, self.record.key_text, noun, self.record.best, seconds)
        return self.outcome, self.record


def shadow(front: _Front, **own: Any) -> _Front:
    """A copy of `front` (a selector, a tuned kernel) that tunes a key at once into tables and records
    of its own (`own`, by attribute): the front's calls keep the provisional pick until the switch."""
    copied = copy.copy(front)
    for name, value in {**own, "background": False, "timed_here": {}}.items():
        setattr(copied, name, value)
    return copied


#: Calls a rank runs past its own tuning's end at most before it waits for the other ranks' word.
RANK_MARGIN = 64


class RankSwitch:
    """The call at which every rank of a job switches one key from its provisional pick.

    Each rank publishes in the job's store how many calls of the key it had made when its tuning ended
    (or that it failed: then none switches), reads every rank's, and switches at call `max + RANK_MARGIN`.
    A rank waits rather than run a call past its own count `+ RANK_MARGIN` before it knows: none passes it.
    """

    def __init__(self, job: RankJob, name: str) -> None:
        self.job, self.name = job, name
        self.bound: int | None = None
        self.at: int | None = None
        self.known = threading.Event()

    def agree(self, calls: int, *, ok: bool) -> None:  # in the tuning thread
        self.bound = calls + RANK_MARGIN
        try:
            self.job.store.set(f"{self.name}/{self.job.rank}", str(calls) if ok else "failed")
            said = [self.job.store.get(f"{self.name}/{rank}").decode() for rank in range(self.job.world)]
            self.at = None if "failed" in said else max(map(int, said)) + RANK_MARGIN
        except Exception as error:  # the job's store failed: this rank keeps its provisional pick
            failed = "the ranks could not agree when to switch %s (%s): it is not switched"
            log.warning(failed, self.name, error)
        finally:
            self.known.set()

    def allows(self, calls: int) -> bool:  # at a call
        if not self.known.is_set():
            if self.bound is None or calls < self.bound:
                return False
            self.known.wait()  # no further without the other ranks' word
        return self.at is not None and calls >= self.at


_switches: dict[str, int] = {}  # how often each key's switch was agreed in this process


def rank_switch(*parts: Any) -> RankSwitch | None:
    """How the ranks of this process's job switch a key together (None: no job of ranks), the key named in
    the job's store by `parts`, the same on every rank, and anew each time the key is tuned again."""
    job = rank_job()
    if job is None:
        return None
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:24]
    _switches[digest] = _switches.get(digest, 0) + 1
    return RankSwitch(job, f"background/{digest}/{_switches[digest]}")


_queue: queue.SimpleQueue[tuple[contextvars.Context, Pending[Any], Callable[[], Any]]] = queue.SimpleQueue()
_in_flight: set[Pending[Any]] = set()
_started = threading.Lock()
_thread: threading.Thread | None = None
#: Seconds a program that ends waits at most for its tunings in the background.
EXIT_WAIT_S = 120.0
_exit_deadline: float | None = None  # when the program's end stops waiting, once it has begun to


def _wait_at_exit() -> None:
    """Let the tunings in the background end before the program does (cut off in torch's C++ code as the
    interpreter finalized, the tuning thread aborted it: docs/selection.md); both calls share the wait."""
    global _exit_deadline
    if not _in_flight or (_exit_deadline is not None and time.monotonic() >= _exit_deadline):
        return  # nothing to wait for, or the wait has run out (and said so)
    try:
        if _exit_deadline is None and isinstance(getattr(sys, "last_value", None), KeyboardInterrupt):
            raise KeyboardInterrupt  # a program ended by Ctrl-C ends now, as one in the wait does
        if _exit_deadline is None:  # seconds of silence at the end would look like a hang: said where seen
            _exit_deadline = time.monotonic() + EXIT_WAIT_S
            log.warning(
                "waiting up to %g s for the tunings in the background before the program ends, so that their "
                "picks are stored (Ctrl-C ends without them); kernelpick.wait_for_tuning() waits where you "
                "choose",
                EXIT_WAIT_S,
            )
        ended = wait(max(0.0, _exit_deadline - time.monotonic()))
    except KeyboardInterrupt:  # no more waiting at this end, at atexit neither
        _exit_deadline = time.monotonic()
        log.warning("interrupted: the program ends without the picks of %d tuning(s)", len(_in_flight))
        return
    if not ended:
        unfinished = (
            "%d tuning(s) in the background did not end in %g s: the program ends without their picks"
        )
        log.warning(unfinished, len(_in_flight), EXIT_WAIT_S)


def _forget_in_child() -> None:
    """A forked process has no tuning thread: its parent's tunings are not its own to run or to wait
    for at its end (every `multiprocessing` child waited `EXIT_WAIT_S`)."""
    global _queue, _in_flight, _started, _thread, _exit_deadline
    _queue, _in_flight, _started = queue.SimpleQueue(), set(), threading.Lock()
    _thread = _exit_deadline = None


if hasattr(os, "register_at_fork"):  # not on Windows, which does not fork
    os.register_at_fork(after_in_child=_forget_in_child)
# Run as the main thread ends, before Python's thread pools refuse work (registered where they register
# it: the last registered runs first; after, a tuning's compile failed or hung: docs/selection.md), and
# again with `atexit`, once the program's own threads have ended, for the tunings they started.
(getattr(threading, "_register_atexit", None) or atexit.register)(_wait_at_exit)
atexit.register(_wait_at_exit)


def provisional_call(
    selector: Selector, key: tuple[Any, ...], inputs: tuple[Any, ...], kwargs: dict[str, Any], wanted: bool
) -> Callable[..., Any] | None:
    """What a call of `selector` with a signature it has no pick for runs now: the tuned pick once a
    background tuning has ended, else the provisional pick (starting the tuning where `wanted`); None
    where the signature is to be tuned before the call returns."""
    pending = selector._pending.get(key) or (_start(selector, key, inputs, kwargs) if wanted else None)
    if pending is None:
        return None
    if not pending.due([*inputs, *kwargs.values()]):
        return pending.provisional
    call, record = pending.switched(log, selector.name, "pick", "the provisional pick")
    with selector._lock:  # the tuned pick from now on (the provisional one where the tuning failed)
        selector._pending.pop(key, None)
        selector._calls[key] = call
        if record is not None:
            selector.records[key] = selector.last_selection = record
    return call


def wait(timeout: float | None = None) -> bool:
    """Wait until every background tuning of this process has ended (True), or `timeout` seconds
    have passed (False): before capturing CUDA graphs or timing, say (`kernelpick.wait_for_tuning`)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        with _started:
            pending = next(iter(_in_flight), None)
        if pending is None:
            return True
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        if not pending.done.wait(left):
            return False


def allowed(values: Sequence[Any]) -> bool:
    """Whether a key met with `values` can be tuned in the background: where a provisional pick can stand
    in safely (docs/selection.md says where), in a job of several ranks only where they tune together."""
    if in_graph() or capturing(values):
        return False
    if any(isinstance(v, torch.Tensor) and not (v.is_floating_point() or v.is_complex()) for v in values):
        return False
    import torch.distributed as dist

    several = dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1
    if several and rank_job() is None:
        warn_once(
            log,
            "background ranks",
            "tuning in the background is off for this job of several ranks (KERNELPICK_RANKS off): its "
            "ranks could switch picks at different calls; they tune before the call returns",
        )
        return False
    return True


def submit(
    job: Pending[Any], tune: Callable[[], Any], logger: logging.Logger, who: str, running: object, tuned: str
) -> None:
    """Say in the front's `logger` that `who` (a front and key) runs `running` while its `tuned` are
    tuned, and queue `tune` for the tuning thread, to run in the caller's context (its settings) and keep
    what it returns in `job`. The workers' zygote is forked here, in the caller's thread: forked from the
    tuning thread, it could inherit a lock the caller held, for good (a CPU worker deadlocked on the
    interpreter's)."""
    logger.info("%s: running %s while %s are tuned in the background", who, running, tuned)
    fork_zygote_early()
    global _thread
    with _started:
        _in_flight.add(job)
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_tune_queued, name="kernelpick-background", daemon=True)
            _thread.start()
    context = contextvars.copy_context()
    context.run(beside_the_program.set, True)  # what it measures here, it times beside the caller's calls
    _queue.put((context, job, tune))


def _start(
    selector: Selector, key: tuple[Any, ...], inputs: tuple[Any, ...], kwargs: dict[str, Any]
) -> Pending[Callable[..., Any]] | None:
    """Queue the tuning of `key` and bind the provisional pick, or None where it is not wanted or
    the selector's reference is not one of its choices."""
    if selector.input_gen is not None or not allowed([*inputs, *kwargs.values()]):
        return None
    if selector.check is not None:  # inputs the operation does not take fail at once, as before
        selector.check(*inputs, **kwargs)
    check_measurable(selector.name, inputs, kwargs)
    signature = Signature.of(inputs, kwargs, selector.key)
    try:
        target = selector._reference_target(signature)
    except ConfigError:  # a reference space with no choice for these inputs: tuned before the call
        return None
    if not isinstance(target, Choice):
        return None
    tune = functools.partial(_tuned, selector, key, inputs, dict(kwargs))
    pending = Pending(target.callable_for(signature))
    pending.ranks = rank_switch(selector.name, signature.device.name, signature.to_data())
    row = CandidateResult(target.digest, target.description(), UNMEASURED, name=target.name)
    note = "provisional: the reference runs while the choices are tuned in the background"
    record = TuningRecord.of_selection(
        selector.name, key, signature, (row,), target.digest, 0.0, False, note=note, provisional=True
    )
    with selector._lock:
        if key in selector._pending:  # another thread started it meanwhile
            return selector._pending[key]
        selector._pending[key] = pending
        selector.records[key] = selector.last_selection = record
    submit(pending, tune, log, f"{selector.name}{signature}", target.name, "the choices")
    return pending


def _tune_queued() -> None:  # the tuning thread
    while True:
        context, job, tune = _queue.get()
        try:
            job.outcome, job.record = context.run(tune)
        except BaseException as error:  # kept for the switch, which says it
            job.error = error
        finally:
            del tune  # the caller's tensors (its arguments) are not held until the next job
            if job.ranks is not None:
                job.ranks.agree(job.calls, ok=job.error is None)
            job.done.set()
            with _started:
                _in_flight.discard(job)


def _tuned(
    selector: Selector, key: tuple[Any, ...], inputs: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Callable[..., Any], TuningRecord]:
    """`key` tuned on a `shadow` of `selector`: its pick's call and record."""
    copied = shadow(selector, _calls=Calls(), records={}, _pending={}, _lock=threading.RLock())
    return copied._select(key, inputs, kwargs), copied.records[key]
