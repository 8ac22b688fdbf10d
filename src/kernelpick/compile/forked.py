"""Forked compilers: a batch's Triton compiles run in forked children, then loaded in the parent."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import selectors
import shutil
import signal
import statistics
import tempfile
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelpick.compile.claims import ClaimWait, compile_claim
from kernelpick.threads import Threads

log = logging.getLogger("kernelpick.compile")

#: How much lower forked compilers run than the process that forked them (`os.nice`).
COMPILER_NICENESS = 5
#: Seconds a forked compiler waits for a config another process of the host is compiling, when its
#: batch has no compile timeout (with one, the timeout ends the wait: the config took too long).
CLAIM_WAIT_S = 300.0
#: How often compiling that may be stopped from another thread looks whether it was.
_STOP_POLL_S = 0.1
#: Seconds a compile may always take under `patience`, however quick the others were: longer than a
#: batch of configs that can win takes; slower batches hold large 2-warp tiles, which run far slower
#: than the best (docs/benchmarks.md, "Compile times, and what patience gave up").
PATIENCE_FLOOR_S = 8.0


@dataclass(frozen=True, slots=True)
class Patience:
    """How long a batch of compiles waits for its stragglers: once half of the batch has compiled, a
    config still compiling after `factor` times their median (and at least `floor_s`) is given up. A
    search sets it: one config that takes minutes to compile would hold up every later proposal."""

    factor: float
    floor_s: float = PATIENCE_FLOOR_S

    def limit_s(self, compiled_s: Sequence[float], jobs: int) -> float | None:
        """Seconds a config may compile for, given the compile times of those done so far."""
        if not compiled_s or 2 * len(compiled_s) < jobs:
            return None
        return max(self.floor_s, self.factor * statistics.median(compiled_s))


class ChildCompileError(Exception):
    """A compile that failed in a forked child; the message carries the child's exception."""


class OutOfResources(ChildCompileError):
    """Named like Triton's error so that `classify` maps it the same way."""


class CompilerCrashed(ChildCompileError):
    """The forked child compiling a config died before reporting on it; `classify` maps it to crashed."""


class CompileTimeout(ChildCompileError):
    """A config compiled for longer than the compile timeout; its compiler was killed."""


class CompileSkipped(CompileTimeout):
    """A config compiled far longer than the rest of its batch (`Patience`); its compiler was killed."""


class CompileStopped(Exception):
    """Compiling was stopped from another thread (the tuning was interrupted); the compilers were killed."""


#: The errors a child reports that the parent raises as they are (others: `ChildCompileError`).
_REPORTED = {error.__name__: error for error in (OutOfResources, CompileTimeout, CompileSkipped)}


@dataclass(slots=True)
class _Child:
    """A forked compiler: its process, unread output, and the config it is compiling since when."""

    pid: int
    pending: bytes = b""
    config: int | None = None
    since: float = 0.0


@dataclass(eq=False)
class _ForkedExecutor(Executor):
    """Collects Triton's compile calls, runs them in forked children, then loads the results. A child
    that dies (a crash in LLVM or ptxas) takes only its own configs down: reported crashed, never run."""

    workers: int
    timeout_s: float | None = None
    patience: Patience | None = None
    stop: threading.Event | None = None
    claims: Path | None = None  # the compile claims' folder; None: children compile unclaimed
    on_compiled: Callable[[int], object] | None = None  # with a config index, as each compiles
    jobs: list[tuple[Callable[[], Any], Future[Any]]] = field(default_factory=list)
    configs: list[int] = field(default_factory=list)  # the config index of each job
    phases: dict[str, float] = field(default_factory=dict)  # seconds by step: in children, loading here
    seconds: dict[int, float] = field(default_factory=dict)  # by job: how long its child spent on it
    waited: dict[int, float] = field(default_factory=dict)  # by job: seconds waited for another's claim
    _launchers: str | None = None  # a folder of markers: the launchers a child builds

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        self.jobs.append((lambda: fn(*args, **kwargs), future))
        return future

    def run(self, meanwhile: Callable[[], object] | None = None) -> None:
        try:
            self._run(meanwhile)
        finally:  # Triton's `AsyncCompileMode` waits for every future: one left pending, forever
            for _, future in self.jobs:
                if not future.done():
                    future.set_exception(CompileStopped("compiling ended before this config was loaded"))

    def _run(self, meanwhile: Callable[[], object] | None) -> None:
        started = time.perf_counter()
        self._launchers = tempfile.mkdtemp(prefix="kernelpick-launchers-")
        try:
            # Children take job numbers from a shared pipe, one at a time, so that a child that drew
            # quick configs goes on to the next instead of idling while another works through slow ones.
            queue_read, queue_write = os.pipe()
            os.write(queue_write, b"".join(index.to_bytes(4, "little") for index in range(len(self.jobs))))
            os.close(queue_write)
            running: dict[int, _Child] = {}  # by read end
            for _ in range(min(self.workers, len(self.jobs))):
                read_end, write_end = os.pipe()
                running[read_end] = _Child(fork(self._child, queue_read, read_end, write_end))
                os.close(write_end)
            os.close(queue_read)
            if meanwhile is not None:
                meanwhile()  # while the children compile
            reports = self._collect(running)
        finally:
            shutil.rmtree(self._launchers, ignore_errors=True)
        self.phases["compile_children"] = time.perf_counter() - started
        if self.waited:
            # Configs another process of the host was compiling: loaded from its binary, not compiled.
            self.phases["compile_claimed_elsewhere"] = float(len(self.waited))
            self.phases["compile_claim_wait"] = sum(self.waited.values())
            log.debug(
                "%d of %d configs were compiling in another process: waited %.1f s for them",
                len(self.waited),
                len(self.jobs),
                self.phases["compile_claim_wait"],
            )
        started = time.perf_counter()

        def load(job: Callable[[], Any], future: Future[Any]) -> None:
            try:
                future.set_result(job())  # a hit in Triton's cache, filled by the child
            except BaseException as error:  # any: a future left pending would be waited on forever
                future.set_exception(error)

        # Loading is mostly file reads: a few threads overlap them (each started as a load comes).
        with Threads(max_workers=max(1, min(8, len(self.jobs)))) as pool:
            for index, (job, future) in enumerate(self.jobs):
                report = reports.get(index)
                if report is None:
                    future.set_exception(
                        CompilerCrashed("the compiler process crashed while compiling this config")
                    )
                elif report["error"] is not None:
                    kind = _REPORTED.get(report["type"], ChildCompileError)
                    future.set_exception(kind(f"{report['type']}: {report['error']}"))
                else:
                    pool.submit(load, job, future)
        self.phases["compile_load"] = time.perf_counter() - started

    def _collect(self, running: dict[int, _Child]) -> dict[int, dict[str, Any]]:
        """Read every child's reports; kill a child whose config outlives its limit (`_limit`)."""
        reports: dict[int, dict[str, Any]] = {}
        compiled_s: list[float] = []  # how long each config that compiled took
        watch = selectors.DefaultSelector()
        for read_end in running:
            watch.register(read_end, selectors.EVENT_READ)
        limit = self._limit(compiled_s)
        try:
            while running:
                if self.stop is not None and self.stop.is_set():
                    raise CompileStopped("compiling was stopped; the compilers were killed")
                busy = [child.since for child in running.values() if child.config is not None]
                wait = (
                    None if limit is None or not busy else max(0.0, min(busy) + limit[0] - time.monotonic())
                )
                if self.stop is not None:  # looked at again this often
                    wait = _STOP_POLL_S if wait is None else min(wait, _STOP_POLL_S)
                for key, _ in watch.select(wait):
                    child = running[key.fd]
                    chunk = os.read(key.fd, 65536)
                    if not chunk:  # the child is done (or died)
                        self._forget(watch, running, key.fd)
                        continue
                    *lines, child.pending = (child.pending + chunk).split(b"\n")
                    for line in lines:
                        report = json.loads(line)
                        if report.get("started"):
                            child.config, child.since = report["index"], time.monotonic()
                        else:
                            reports[report["index"]] = report
                            child.config = None
                            self.seconds[report["index"]] = time.monotonic() - child.since
                            if report.get("waited_s"):
                                self.waited[report["index"]] = report["waited_s"]
                            if report["error"] is None:
                                compiled_s.append(self.seconds[report["index"]])
                                if self.on_compiled is not None:
                                    self.on_compiled(self.configs[report["index"]])
                limit = self._limit(compiled_s)
                if limit is None:
                    continue
                seconds, kind, error = limit
                for fd, child in list(running.items()):
                    if child.config is not None and time.monotonic() - child.since > seconds:
                        self.seconds[child.config] = time.monotonic() - child.since
                        reports[child.config] = {"index": child.config, "error": error, "type": kind}
                        self._forget(watch, running, fd, kill=True)
        except BaseException:  # interrupted (Ctrl-C, or `stop` from another thread): their work is not wanted
            for fd in list(running):
                self._forget(watch, running, fd, kill=True)
            raise
        return reports

    def seconds_by_config(self) -> dict[int, float]:
        """How long a child spent on each config it was given (by config index), once `run` is done."""
        return {self.configs[job]: seconds for job, seconds in self.seconds.items()}

    def _limit(self, compiled_s: Sequence[float]) -> tuple[float, str, str] | None:
        """How long a config may compile, with the report of one that outlives it: the patience's
        limit when nearer (`CompileSkipped`), else the timeout's (None: no limit)."""
        if self.patience is not None:
            straggler = self.patience.limit_s(compiled_s, len(self.jobs))
            if straggler is not None and (self.timeout_s is None or straggler < self.timeout_s):
                return (
                    straggler,
                    "CompileSkipped",
                    f"compiling took over {straggler:.0f} s, {self.patience.factor:g}x the median of the "
                    f"{len(compiled_s)} configs compiled beside it; the search went on without it "
                    "(KERNELPICK_SEARCH_PATIENCE)",
                )
        if self.timeout_s is None:
            return None
        return (
            self.timeout_s,
            "CompileTimeout",
            f"compiling took over {self.timeout_s:g} s; the compiler was killed",
        )

    @staticmethod
    def _forget(
        watch: selectors.BaseSelector, running: dict[int, _Child], fd: int, *, kill: bool = False
    ) -> None:
        """Stop watching a child; one to `kill` is killed and waited for (none is left behind), one that
        finished in a thread of its own: a child of a process holding torch and CUDA is slow to exit."""
        watch.unregister(fd)
        os.close(fd)
        pid = running.pop(fd).pid
        if kill:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        else:
            threading.Thread(target=os.waitpid, args=(pid, 0), name="kernelpick-reap", daemon=True).start()

    def _claim(self, index: int) -> contextlib.AbstractContextManager[ClaimWait]:
        """The claim on job `index`'s compile, named by the Triton cache key that `AsyncCompileMode`
        puts on the job's future as `_key` (a job without one is compiled unclaimed)."""
        key = getattr(self.jobs[index][1], "_key", None)
        if self.claims is None or not isinstance(key, str):
            return contextlib.nullcontext(ClaimWait(False, 0.0))
        wait_s = self.timeout_s if self.timeout_s is not None else CLAIM_WAIT_S
        return compile_claim(self.claims, key, wait_s)

    def _build_launcher(self, kernel: Any) -> None:  # pragma: no cover - child only
        """Put the launcher of `kernel` (Triton's `CompiledKernel`) into Triton's cache, unless another
        child of this batch builds it. Only with the parent's driver: making one here could touch CUDA."""
        from triton.runtime import driver

        active = getattr(driver, "_active", None)
        src, metadata = getattr(kernel, "src", None), getattr(kernel, "metadata", None)
        signature = getattr(src, "signature", None)
        if self._launchers is None or active is None or not isinstance(signature, dict):
            return
        shape = repr((list(signature.values()), getattr(metadata, "tensordesc_meta", None)))
        marker = os.path.join(self._launchers, hashlib.sha256(shape.encode()).hexdigest())
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return  # built by another child of this batch
        try:
            active.launcher_cls(src, metadata)
        except Exception as error:  # the kernel's first launch builds it instead, and says what fails
            log.debug("no launcher built for %s: %s", getattr(kernel, "name", "?"), error)

    def _child(self, queue: int, read_end: int, write_end: int) -> int:  # pragma: no cover - child only
        os.close(read_end)
        # Ctrl-C reaches the whole foreground process group: the parent decides, and kills the
        # compilers when it stops; a SIGTERM handler of the tuning's is the parent's alone.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        # Compilers fill every core; what waits on them must not wait for a core as well: the
        # worker processes importing torch as they start, the parent feeding configs to them.
        os.nice(COMPILER_NICENESS)
        try:
            with os.fdopen(write_end, "w", buffering=1) as stream:  # a line at a time
                # Reads of 4 bytes from a pipe are atomic: each job number goes to exactly one child.
                while len(number := os.read(queue, 4)) == 4:
                    index = int.from_bytes(number, "little")
                    stream.write(json.dumps({"index": index, "started": True}) + "\n")
                    report: dict[str, Any] = {"index": index, "error": None, "type": None}
                    with self._claim(index) as claim:
                        try:
                            self._build_launcher(self.jobs[index][0]())
                        except Exception as error:
                            report.update(error=str(error)[:4000], type=type(error).__name__)
                    report["waited_s"] = claim.waited_s
                    stream.write(json.dumps(report) + "\n")
        except BrokenPipeError:  # the parent is gone (killed, or it gave up on us): nobody to tell
            return 1
        return 0


def fork(child: Callable[..., int], *args: Any) -> int:
    """Fork a process that runs `child(*args)` and exits with the status it returns (1, its traceback on
    stderr, where it raises); the child's pid."""
    with warnings.catch_warnings():
        # Python warns of fork() beside threads, whose locks stay held in the child: ours hold none
        # when they fork or are made new in it (console.warn_once's); a module's import lock would be
        # held for good, so the workers' zygote is forked before a compiling thread starts
        # (`WorkerPool.start_soon`).
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            code = child(*args)
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)  # unflushed: what the caller's buffers held is the caller's to write
    return pid
