"""Compile every config of a kernel at once, before any is benchmarked, and say which ones failed."""

from __future__ import annotations

import collections
import importlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Executor
from contextlib import contextmanager
from contextvars import ContextVar, copy_context
from dataclasses import dataclass, replace
from typing import Any, Literal

from triton.compiler.compiler import make_backend
from triton.runtime import driver, jit

from kernelpick.compile.claims import claims_folder
from kernelpick.compile.forked import (
    CompilerCrashed,
    CompileSkipped,
    CompileTimeout,
    Patience,
    _ForkedExecutor,
)
from kernelpick.compile.target import FALLBACK_TARGET, specialize
from kernelpick.compile.unwrap import unwrap
from kernelpick.config import Config
from kernelpick.threads import Threads

log = logging.getLogger("kernelpick.compile")

CompileStatus = Literal["ok", "compile_error", "out_of_resources", "crashed", "timeout", "skipped"]

_patience: ContextVar[Patience | None] = ContextVar("kernelpick_compile_patience", default=None)
_warm_lock = threading.Lock()
_warm = False


@contextmanager
def patience(factor: float) -> Iterator[None]:
    """Compiles started in this context give up their stragglers (`Patience`); 0 waits for all."""
    token = _patience.set(Patience(factor) if factor > 0 else None)
    try:
        yield
    finally:
        _patience.reset(token)


def current_patience() -> float:
    """The patience compiles started now would have (`patience`'s factor; 0: they wait for all)."""
    found = _patience.get()
    return 0.0 if found is None else found.factor


@contextmanager
def compiling_beside(compile_all: Callable[[threading.Event], object]) -> Iterator[None]:
    """Run `compile_all(stop)` in a thread of its own (with this context's settings and patience)
    while the block runs: the workers time what it compiles as it goes. Leaving the block waits for
    it, and its own failure is raised before the block's; a block left by an interruption (Ctrl-C,
    SIGTERM) sets `stop` first, so that nothing more is compiled (`compile_each`'s `stop`)."""
    stop = threading.Event()
    with Threads(1, thread_name_prefix="kernelpick-compile") as compiler:
        compiling = compiler.submit(copy_context().run, compile_all, stop)
        try:
            yield
        except Exception:
            compiling.result()  # the compilers' own failure, if any, comes first
            raise
        except BaseException:
            stop.set()
            compiling.exception()
            raise
        compiling.result()


@dataclass(frozen=True, slots=True)
class CompileOutcome:
    """Whether one config compiled, and if not, why; the seconds its compiler spent on it where known
    (forked compilers; in the interpreter, lowering it to TTIR), else None (threads, earlier, or none)."""

    status: CompileStatus
    message: str = ""
    seconds: float | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass(frozen=True)
class CompileJob:
    """One compile: `kernel` (a `triton.jit` function, possibly under `triton.heuristics`) for these
    launch arguments under `config`; `grid` is what Triton's warm-up call wants (unused by it).
    `companions`: the other kernels one call launches with it (a split-K GEMM's reduction), compiled
    in the same batch; the job's outcome is their first failure, else its own."""

    kernel: Any
    args: Sequence[Any]
    kwargs: Mapping[str, Any]
    config: Config
    grid: Any = (1,)
    companions: tuple[CompileJob, ...] = ()


def shortened(text: str) -> str:
    """`text` with its middle cut where it is over 2,000 characters: an error's start and end say most."""
    return text if len(text) <= 2000 else text[:1000] + "\n...\n" + text[-1000:]


def classify(error: BaseException) -> tuple[CompileStatus, str]:
    """Map a compile-time exception to a status and a one-paragraph message."""
    name = type(error).__name__
    text = shortened(str(error).strip() or name)
    status: CompileStatus = "out_of_resources" if name == "OutOfResources" else "compile_error"
    if isinstance(error, CompilerCrashed):
        status = "crashed"
    elif isinstance(error, CompileSkipped):
        status = "skipped"
    elif isinstance(error, CompileTimeout):
        status = "timeout"
    return status, f"{name}: {text}" if not text.startswith(name) else text


def compile_each(
    makers: Sequence[Callable[[], CompileJob | CompileOutcome | None]],
    *,
    interpreter: bool,
    workers: int,
    mode: str = "thread",
    phases: dict[str, float] | None = None,
    meanwhile: Callable[[], object] | None = None,
    timeout_s: float | None = None,
    on_ready: Callable[[int], object] | None = None,
    stop: threading.Event | None = None,
) -> list[CompileOutcome | None]:
    """Make each candidate's compile job, then compile them all in parallel, whatever their kernels:
    the configs of one kernel or the choices of a selection alike.

    Args:
        makers: each candidate's compile job, or its outcome when it has nothing to compile or failed
            before compiling (None: compiled earlier); a maker's own failure is that candidate's outcome.
        interpreter: True on CPU devices: lower to TTIR only.
        workers: jobs compiled at once.
        mode: "thread" or "process" (docs/design.md, "Compiling").
        phases: where the seconds of the steps go (`compile_jobs`, then in the process mode the
            forked compilers' steps), for tuning reports.
        meanwhile: work for this thread to do while the compilers run (called exactly once).
        timeout_s: in the process mode, how long one job may compile before its compiler is killed
            (`timeout`); within `patience(...)`, a straggler is given up sooner (`skipped`).
        on_ready: called from this thread with a candidate's index once it can run: at once for an
            ok outcome without a job; in the process mode as each compiles (another process can then
            load it from Triton's cache), else at the end.
        stop: in the process mode, once set from another thread, the compilers are killed and
            `CompileStopped` is raised.

    Returns:
        One outcome per candidate, in order (a job with companions: one for all of them). Kernels
        that compiled are in Triton's caches, so the first launch of each does not compile again.
    """
    started = time.perf_counter()
    phases = {} if phases is None else phases
    outcomes: list[CompileOutcome | None] = []
    # Companions are compiled in the same batch as their job: a job's outcome is its kernels' first
    # failure, else ok with their seconds summed where known, and it is ready once all compiled.
    kernels: list[CompileJob] = []
    owner: list[int] = []  # by kernel: the index of its candidate
    for index, make in enumerate(makers):
        try:
            found = make()
        except Exception as error:  # a choice's own bug is that choice's failure
            found = CompileOutcome(*classify(error))
        outcomes.append(None if isinstance(found, CompileJob) else found)
        if isinstance(found, CompileJob):
            for part in (found, *found.companions):
                kernels.append(replace(part, companions=()))
                owner.append(index)
        elif found is not None and found.ok and on_ready is not None:
            on_ready(index)
    phases["compile_jobs"] = time.perf_counter() - started
    waiting = collections.Counter(owner)

    def compiled(kernel: int) -> None:
        waiting[owner[kernel]] -= 1
        if waiting[owner[kernel]] == 0 and on_ready is not None:
            on_ready(owner[kernel])

    # The forked mode queues job numbers in one pipe buffer (64 KiB): plenty for any real space.
    forking = not interpreter and mode == "process" and hasattr(os, "fork") and 0 < len(kernels) < 16_000
    if forking:
        forked = _ForkedExecutor(workers, timeout_s, _patience.get(), stop, claims_folder(), compiled)
        results = _compile_all(kernels, forked, meanwhile)
        phases.update(forked.phases)
    elif not kernels or interpreter:
        if meanwhile is not None:
            meanwhile()
        with Threads(max_workers=max(1, workers), thread_name_prefix="kernelpick-lower") as pool:
            results = list(pool.map(_lower, kernels))
    else:
        with Threads(max_workers=max(1, workers), thread_name_prefix="kernelpick-compile") as pool:
            results = _compile_all(kernels, pool, meanwhile)
    grouped: dict[int, list[CompileOutcome]] = {}
    for kernel, result in enumerate(results):
        grouped.setdefault(owner[kernel], []).append(result)
        if result.ok and not forking:  # the forked mode announced each as it compiled
            compiled(kernel)
    for index, parts in grouped.items():
        failed = next((o for o in parts if not o.ok), None)
        seconds = [o.seconds for o in parts if o.seconds is not None]
        outcomes[index] = failed or CompileOutcome("ok", "", sum(seconds) if seconds else None)
    return outcomes


def warm_up_compiler() -> None:
    """Compute what Triton's first compile in this process computes once (its cache key's parts) and
    import what its first specialization of an argument imports, while the program still sets up.

    Raises:
        Exception: whatever Triton raises without a usable GPU backend (callers ignore it).
    """
    global _warm
    with _warm_lock:
        if _warm:
            return
        _warm_up()
        _warm = True


def _warm_up() -> None:
    mangle_type = getattr(jit, "mangle_type", None)
    if mangle_type is not None:
        mangle_type(0)
    # Triton 3.6 keeps `triton_key` with the compiler, later releases with the cache.
    for module in ("triton.runtime.cache", "triton.compiler.compiler"):
        triton_key = getattr(importlib.import_module(module), "triton_key", None)
        if triton_key is not None:
            break
    # Hashing Triton's files (its shared library most: file reads and hashing, without the GIL) and
    # setting up the GPU driver took 0.78 and 0.53 s one after the other on an H200 host (py-spy of
    # bench/autotune_vs_triton.py's cold kernelpick run, 2026-11-30): both at once.
    with Threads(1, thread_name_prefix="kernelpick-triton-key") as hashing:
        hashed = hashing.submit(triton_key or (lambda: None))
        make_backend(driver.active.get_current_target()).hash()
        hashed.result()


def _lower(job: CompileJob) -> CompileOutcome:
    start = time.perf_counter()
    try:
        unwrapped = unwrap(job.kernel, job.args, {**job.kwargs, **job.config.all_kwargs()})
        if unwrapped.problem:  # a `triton.heuristics` function raised
            raise RuntimeError(unwrapped.problem)
        specialize(unwrapped.kernel, job.args, unwrapped.kwargs, target=FALLBACK_TARGET).lower("ttir")
    except Exception as error:  # every compiler failure becomes data
        return CompileOutcome(*classify(error), time.perf_counter() - start)
    return CompileOutcome("ok", "", time.perf_counter() - start)


def _compile_all(
    jobs: Sequence[CompileJob], executor: Executor, meanwhile: Callable[[], object] | None
) -> list[CompileOutcome]:
    """Compile in `executor` (a `_ForkedExecutor` announces each job as it compiles: `compile_each`)."""
    from triton.runtime._async_compile import AsyncCompileMode

    start = time.perf_counter()
    try:  # the first config's cache key needs it: waited for where it already runs, not done twice
        warm_up_compiler()
    except Exception as error:  # each compile says what fails
        log.debug("no compiler warm-up: %s", error)
    forked = executor if isinstance(executor, _ForkedExecutor) else None
    pending: list[Any] = []  # by job: Triton's future (or kernel), or the outcome of a failed submit
    # ignore_errors: failures are collected below; Triton 3.6 would re-raise them on exit and then
    # leave its async mode switched on for this thread.
    with AsyncCompileMode(executor, ignore_errors=True):
        for index, job in enumerate(jobs):
            try:
                submitted = len(forked.jobs) if forked is not None else 0
                pending.append(
                    job.kernel.warmup(*job.args, grid=job.grid, **job.kwargs, **job.config.all_kwargs())
                )
                if forked is not None:
                    if len(forked.jobs) > submitted:
                        forked.configs.append(index)
                    elif forked.on_compiled is not None:  # compiled earlier here (or in Triton's cache)
                        forked.on_compiled(index)
            except Exception as error:  # code generation can fail before anything is submitted
                pending.append(CompileOutcome(*classify(error)))
        if forked is not None:
            forked.phases["compile_submit"] = time.perf_counter() - start
            forked.run(meanwhile)
        elif meanwhile is not None:
            meanwhile()  # while the pool's threads compile
        seconds = forked.seconds_by_config() if forked is not None else {}
        outcomes = []
        for index, found in enumerate(pending):
            if not isinstance(found, CompileOutcome):
                try:
                    # A config compiled earlier in this process comes back as the kernel itself.
                    if hasattr(found, "result"):
                        found.result()
                    found = CompileOutcome("ok", "", seconds.get(index))
                except Exception as error:
                    found = CompileOutcome(*classify(error), seconds.get(index))
            outcomes.append(found)
    return outcomes
