"""`kernelpick tune SPEC.py`: run a spec's tuning jobs here, on several local GPUs, or over a Ray cluster."""

from __future__ import annotations

import logging
import os
import statistics
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, BrokenExecutor, Executor, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from kernelpick import settings
from kernelpick.device import describe
from kernelpick.errors import ConfigError, KernelpickError
from kernelpick.jobs.device_process import DeviceProcess
from kernelpick.jobs.spec import Job, JobOutcome, Journal, Spec, load_spec
from kernelpick.store.base import StoredRow
from kernelpick.store.copying import replay
from kernelpick.store.default import default_store, recording
from kernelpick.workers.plan import ready_to_tune, tune_elsewhere

log = logging.getLogger("kernelpick.tune")


def run_job(
    spec_path: str, job_name: str, device: str | None = None, *, source: str | None = None
) -> JobOutcome:
    """Run one job of a spec in this process and say how it went (errors are data, not raised).

    Args:
        spec_path: the spec file.
        job_name: which job.
        device: where to run it (default: the current GPU, else the CPU).
        source: the spec's text, used when `spec_path` is not on this machine (a Ray node elsewhere).
    """
    where = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    model = describe(where).name
    started = time.perf_counter()
    # A job tunes before it returns: a provisional pick would end the job untuned (`KERNELPICK_BACKGROUND`).
    with recording() as recorder, settings.override(background=False):
        try:
            spec = load_spec(_local_copy(spec_path, source))
            spec.job(job_name).run(where)
            if where.type == "cuda":
                torch.cuda.synchronize(where)
            error = ""
        except Exception as failure:  # a job's failure is reported with the others, not raised
            error = f"{type(failure).__name__}: {failure}"
            log.debug("job %s failed:\n%s", job_name, traceback.format_exc())
    return JobOutcome(
        job_name,
        model,
        time.perf_counter() - started,
        error,
        tuple(recorder.kernels),
        tuple(recorder.saved),
        tuple(recorder.keys),
    )


def _local_copy(spec_path: str, source: str | None) -> Path:
    """The spec file on this machine: its own path when it is here with the same text, else a copy
    in a folder of this process's own (`mkdtemp`: private, unpredictable), made once per text.

    Not a shared folder of a predictable name: another local user could have made it first, and
    have this one write through a symlink there, or import code planted beside the spec.
    """
    path = Path(spec_path)
    if source is None or (path.is_file() and path.read_text() == source):
        return path
    key = (path.name, source)
    copy = _copies.get(key)
    if copy is None:
        copy = Path(tempfile.mkdtemp(prefix="kernelpick-spec-")) / path.name
        descriptor = os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as stream:
            stream.write(source)
        _copies[key] = copy
    return copy


#: The spec copies this process made, by file name and text.
_copies: dict[tuple[str, str], Path] = {}


@dataclass
class TuneRun:
    """A run of a spec's jobs: which ran where, how they went, and what was skipped as done."""

    spec: Spec
    journal: Journal
    device: str  # the device model the jobs ran on
    outcomes: list[JobOutcome] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def kernels(self) -> list[str]:
        """The kernels and selectors the spec's finished jobs tuned, in this run or an earlier one."""
        return sorted(self.journal.kernels(self.device))

    def tuned(self, row: StoredRow) -> bool:
        """Whether a stored row is of a key the spec's finished jobs tuned (in this run or an earlier
        one): what `kernelpick tune --export` exports, and nothing else the store holds."""
        keys, unkeyed = self.journal.keys(self.device)
        return row.key.digest in keys or row.key.kernel in unkeyed

    @property
    def failed(self) -> list[JobOutcome]:
        return [o for o in self.outcomes if not o.ok]


#: Called after each job with its outcome (a progress bar, say).
Progress = Callable[[JobOutcome], None]


def tune_spec(
    spec_path: Path | str,
    *,
    ray_address: str | None = None,
    devices: Sequence[str] = (),
    resume: bool = True,
    progress: Progress | None = None,
    on_start: Callable[[int, list[str]], None] | None = None,
) -> TuneRun:
    """Run every job of a spec not finished yet.

    Args:
        spec_path: the spec file (`kernelpick.jobs`).
        ray_address: run on this Ray cluster ("auto", "ray://host:10001", or "local" to start one
            here); None runs without Ray.
        devices: without Ray, the local GPUs to run on in parallel (e.g. ["0", "1"]), one process
            each; empty runs the jobs in this process, on the current GPU (else the CPU).
        resume: skip jobs the journal says finished on this device model.
        progress: called after each job.
        on_start: called once with how many jobs will run and the names of those skipped.

    Raises:
        ConfigError: the spec cannot be loaded; Ray is asked for but not installed.
    """
    started = time.perf_counter()
    if ray_address is not None or devices:
        tune_elsewhere()  # importing the spec here starts no workers: the device processes or actors tune
    spec = load_spec(spec_path, reload=True)  # its kernels new: none remembers a tuning from before
    journal = Journal.for_spec(spec)
    runner: _Runner
    if ray_address is not None:
        runner = _RayRunner(spec, ray_address)
    elif devices:
        runner = _ProcessRunner(spec, devices)
    else:
        runner = _LocalRunner(spec)
    try:
        model = runner.device_model()
        last_seconds = journal.seconds(model)  # kept by --fresh too: they rank the jobs
        if not resume:
            journal.forget()
        done = journal.finished()
        run = TuneRun(spec, journal, model)
        todo = [job for job in spec.jobs if (job.name, model) not in done]
        if runner.parallel:
            todo = longest_first(todo, last_seconds)
        run.skipped = [job.name for job in spec.jobs if (job.name, model) in done]
        if on_start is not None:
            on_start(len(todo), run.skipped)
        for outcome in runner.run(todo):
            if outcome.rows and runner.remote:
                try:
                    replay(outcome.rows, default_store())
                except (ValueError, KeyError, TypeError) as error:  # one node's bad rows fail its job alone
                    log.warning("job %s: the results its node sent were refused: %s", outcome.job, error)
                    outcome = replace(outcome, error=f"the results its node sent were refused: {error}")
            journal.record(outcome)
            run.outcomes.append(outcome)
            if progress is not None:
                progress(outcome)
    finally:
        runner.close()
    run.seconds = time.perf_counter() - started
    return run


def longest_first(jobs: Sequence[Job], seconds: Mapping[str, float]) -> list[Job]:
    """The jobs in the order a run on several devices deals them: the longest first.

    Each device takes the next job when it is free, so in this order a long job is never left to
    start last, with the other devices idle until it ends (the longest-processing-time rule).

    Args:
        jobs: the jobs to run.
        seconds: how long jobs took when they last ran (`Journal.seconds`), by name.

    Returns:
        The jobs ordered by their estimated seconds, longest first: the seconds a job last took;
        else its `cost`, scaled to seconds by the jobs that have both (as it is when none has
        seconds); else the median of the other jobs' estimates. Equal estimates keep the spec's
        order, and so does a spec of which nothing is known.
    """
    known = {job.name: seconds[job.name] for job in jobs if job.name in seconds}
    ratios = [known[job.name] / job.cost for job in jobs if job.name in known and job.cost]
    scale = statistics.median(ratios) if ratios else (None if known else 1.0)
    estimates = dict(known)
    for job in jobs:
        if job.name not in estimates and job.cost is not None and scale is not None:
            estimates[job.name] = job.cost * scale
    unknown = statistics.median(estimates.values()) if estimates else 0.0
    return sorted(jobs, key=lambda job: -estimates.get(job.name, unknown))


class _Runner:
    remote = True  # whether jobs store into another process's view of the store
    parallel = False  # whether jobs run at once on several devices (then dealt longest first)

    def device_model(self) -> str:
        raise NotImplementedError

    def run(self, jobs: Sequence[Job]) -> Iterator[JobOutcome]:
        raise NotImplementedError

    def close(self) -> None:
        pass


class _LocalRunner(_Runner):
    """Jobs one after another in this process."""

    remote = False

    def __init__(self, spec: Spec) -> None:
        self.spec = spec

    def device_model(self) -> str:
        return _device_model()

    def run(self, jobs: Sequence[Job]) -> Iterator[JobOutcome]:
        kept_up = settings.from_environ(job_environment())  # its workers stay up between jobs
        for job in jobs:
            with settings.override(worker_idle_s=kept_up.worker_idle_s):
                outcome = run_job(str(self.spec.path), job.name)
            yield outcome


class _ProcessRunner(_Runner):
    """One process per local GPU, each taking the next job when it is free."""

    parallel = True

    def __init__(self, spec: Spec, devices: Sequence[str]) -> None:
        # GPUs counted through NVML, not torch.cuda.is_available(): no process forked after a CUDA call
        # can use CUDA (`zygote._in_bad_fork`), and the zygote that forks the device processes comes later.
        count = torch.cuda.device_count()
        if not count:
            raise ConfigError("--devices needs CUDA GPUs; without them run the jobs here (no --devices)")
        _check_devices(devices, count)
        self.spec = spec
        self.pools = [self._pool(device) for device in devices]
        # Every device process starts now, all at once, and gets ready for its first job (imports
        # the spec, starts its workers: seconds), not when its first job comes.
        self.ready = [pool.submit(_ready, str(spec.path)) for pool in self.pools]

    @staticmethod
    def _pool(device: str) -> Executor:
        """One device's process: `device` as this process numbers its GPUs, told to the process as
        the machine names it (`settings.visible_device`). Forked by this process's zygote (torch and
        kernelpick imported; this process uses no CUDA: it hands its tuning to these), else a new
        interpreter, as a worker is (`jobs.device_process`)."""
        return DeviceProcess(int(device), _pin, (settings.visible_device(int(device)), job_environment()))

    def device_model(self) -> str:
        try:
            return self.ready[0].result()
        except BrokenExecutor as error:
            raise KernelpickError(f"--devices: {error}") from error

    def run(self, jobs: Sequence[Job]) -> Iterator[JobOutcome]:
        queue = list(jobs)
        running: dict[Future[JobOutcome], Executor] = {}
        for pool in self.pools:
            if queue:
                running[pool.submit(run_job, str(self.spec.path), queue.pop(0).name)] = pool
        while running:
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                pool = running.pop(future)
                yield future.result()
                if queue:
                    running[pool.submit(run_job, str(self.spec.path), queue.pop(0).name)] = pool

    def close(self) -> None:
        # All at once: a device's process takes a while to end (its workers stop too), and ended one
        # after another, the end of a run would grow with its GPUs.
        with ThreadPoolExecutor(len(self.pools), thread_name_prefix="kernelpick-close") as closing:
            list(closing.map(lambda pool: pool.shutdown(cancel_futures=True), self.pools))


def _check_devices(devices: Sequence[str], count: int) -> None:
    """Refuse `--devices` that do not name distinct GPUs this process sees, by index.

    Raises:
        ConfigError: an entry is not an index of a visible GPU, or names one twice.
    """
    for device in devices:
        if not device.isdigit() or int(device) >= count:
            raise ConfigError(
                f"--devices names GPU {device!r}, but this process sees GPUs 0 to {count - 1}: "
                "give their indices, e.g. --devices 0,1"
            )
    twice = sorted({d for d in devices if devices.count(d) > 1})
    if twice:
        raise ConfigError(
            f"--devices names GPU {twice[0]} twice: each device's process needs a GPU of its own"
        )


def job_environment() -> dict[str, str]:
    """The settings of a process that tunes the job's keys, as variables: the command's, its GPU
    workers kept up between keys (unless the command's own setting says otherwise)."""
    return {"KERNELPICK_WORKER_IDLE": "3600", **settings.as_environment()}


def _pin(device: str, environment: dict[str, str]) -> None:
    """A device process's start: its settings and GPU, then ready to tune before its first job comes."""
    settings.adopt_environment({**environment, "CUDA_VISIBLE_DEVICES": device})
    ready_to_tune()


def _device_model() -> str:
    return describe(torch.device("cuda" if torch.cuda.is_available() else "cpu")).name


def _ready(spec_path: str) -> str:
    """A device process's first task: the spec imported (its kernels and selectors made: its first
    job does not wait for that; `_pin` started the workers already), then its GPU's model."""
    try:
        load_spec(spec_path)
    except Exception as error:  # each job then fails and says why
        log.debug("the spec did not import in a device process: %s", error)
    return _device_model()


class _RayRunner(_Runner):
    """One actor per GPU of the cluster (per CPU when it has none), each taking the next job when free."""

    parallel = True

    def __init__(self, spec: Spec, address: str) -> None:
        try:
            import ray
        except ImportError:
            raise ConfigError("--ray needs Ray: pip install 'kernelpick[ray]'") from None
        self.ray: Any = ray  # untyped here: Ray's stubs differ between releases
        self.spec = spec
        self.started_here = not self.ray.is_initialized()
        if self.started_here:
            if address == "local":
                self.ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False)
            else:
                self.ray.init(address=address, log_to_driver=False, configure_logging=False)
        resources = self.ray.cluster_resources()
        gpus = int(resources.get("GPU", 0))
        count = gpus or max(1, int(resources.get("CPU", 1)) // 2)
        options: dict[str, Any] = {"num_gpus": 1, "num_cpus": 1} if gpus else {"num_cpus": 1}
        options["runtime_env"] = {"env_vars": job_environment()}
        actor = self.ray.remote(_TuneActor).options(**options)
        source = spec.path.read_text()
        self.actors = [actor.remote(str(spec.path), source) for _ in range(count)]
        log.info("Ray: %d actors (%s)", count, f"{gpus} GPUs" if gpus else "no GPUs: one per 2 CPUs")

    def device_model(self) -> str:
        models: set[str] = set(self.ray.get([a.device_model.remote() for a in self.actors]))
        if len(models) > 1:
            raise KernelpickError(
                f"the Ray cluster has GPUs of {len(models)} models ({', '.join(sorted(models))}): a run tunes "
                "for one model; start a cluster of one model, or one run per model with its own cluster"
            )
        return models.pop()

    def run(self, jobs: Sequence[Job]) -> Iterator[JobOutcome]:
        queue = [job.name for job in jobs]
        running: dict[Any, tuple[Any, str]] = {}  # a job's future -> (its actor, its name)

        def give(actor: Any) -> None:
            if queue:
                name = queue.pop(0)
                running[actor.run.remote(name)] = (actor, name)

        for actor in self.actors:
            give(actor)
        while running:
            finished, _ = self.ray.wait(list(running), num_returns=1)
            for reference in finished:
                actor, name = running.pop(reference)
                try:
                    outcome = self.ray.get(reference)
                except self.ray.exceptions.RayError as error:  # the actor died: the job failed, carry on
                    yield JobOutcome(name, "?", 0.0, f"the Ray actor running it died: {error}")
                    if not running and queue:
                        raise KernelpickError(
                            f"every Ray actor died; {len(queue)} jobs did not run"
                        ) from error
                    continue
                yield outcome
                give(actor)

    def close(self) -> None:
        for actor in self.actors:
            self.ray.kill(actor)
        if self.started_here:
            self.ray.shutdown()


class _TuneActor:
    """A Ray actor that owns one GPU (or CPU slot) and runs jobs of one spec."""

    def __init__(self, spec_path: str, source: str) -> None:
        settings.reload()  # the driver's settings came as environment variables
        self.spec_path, self.source = spec_path, source
        ready_to_tune()  # as a device process of --devices: workers started before the first job

    def device_model(self) -> str:
        return _device_model()

    def run(self, job_name: str) -> JobOutcome:
        return run_job(self.spec_path, job_name, source=self.source)
