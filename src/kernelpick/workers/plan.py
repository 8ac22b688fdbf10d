"""When to isolate, on which devices, and with which settings a worker runs."""

from __future__ import annotations

import atexit
import dataclasses
import logging
import multiprocessing
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from kernelpick import settings
from kernelpick.device import DeviceInfo, describe
from kernelpick.errors import SettingsError
from kernelpick.workers.pool import pool_for
from kernelpick.workers.zygote import fork_zygote

log = logging.getLogger("kernelpick.workers")

#: True in a worker process: what it measures, it measures itself.
inside_worker = False
_started_early = False
#: True in a process that hands its tuning to others (`tune_elsewhere`).
_tuning_elsewhere = False


def isolation_wanted(device: DeviceInfo, requested: bool | None) -> bool:
    """`requested` when given, else the `KERNELPICK_ISOLATE` setting (auto: on for GPUs); never in a worker."""
    if inside_worker:
        return False
    if requested is not None:
        return requested
    mode = settings.current().isolate
    return mode == "on" or (mode == "auto" and not device.interpreter)


def worker_devices(device: DeviceInfo) -> list[int | None]:
    """The GPUs that measure in parallel: those of `KERNELPICK_DEVICES` (default: every visible GPU;
    in a rank of a `torch.distributed` job, the rank's own GPU, since the other ranks use theirs) of
    the model tuned for, since results from another model would not be comparable.

    Raises:
        SettingsError: `KERNELPICK_DEVICES` is not a comma-separated list of visible GPU indices.
    """
    if device.interpreter:
        return [None]
    count = torch.cuda.device_count()
    text = settings.current().devices.strip()
    if not text and _one_rank_of_several():
        return [device.index if device.index is not None else torch.cuda.current_device()]
    try:
        wanted = [int(part) for part in text.split(",") if part.strip()] if text else list(range(count))
    except ValueError:
        raise SettingsError(
            f"KERNELPICK_DEVICES={text!r} is not a comma-separated list of GPU indices"
        ) from None
    if invalid := [index for index in wanted if not 0 <= index < count]:
        raise SettingsError(
            f"KERNELPICK_DEVICES names GPU {invalid[0]}, but GPUs 0 to {count - 1} are visible"
        )
    if twice := sorted({index for index in wanted if wanted.count(index) > 1}):
        raise SettingsError(
            f"KERNELPICK_DEVICES names GPU {twice[0]} twice: two workers on one GPU would time each "
            "other's runs"
        )
    same = [i for i in wanted if describe(torch.device("cuda", i)).name == device.name]
    return list(same or [device.index if device.index is not None else 0])


def _one_rank_of_several() -> bool:
    """Whether this process is one of several ranks on this machine (`torchrun` says so), or a rank
    of a `torch.distributed` job of two or more ranks."""
    if settings.local_ranks() > 1:
        return True
    import torch.distributed as dist

    return bool(dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1)


def worker_settings() -> dict[str, Any]:
    """The caller's settings as plain data, for a worker: no nested isolation, compiles in threads
    (the caller compiled every config already; a worker only loads them from Triton's cache)."""
    data = {
        field.name: str(value) if isinstance(value, Path) else value
        for field in dataclasses.fields(settings.Settings)
        if (value := getattr(settings.current(), field.name)) is not None
    }
    # The folder this process writes rendered kernels to, which a worker imports them from.
    data.update(isolate="off", compile_mode="thread", cache_dir=str(settings.cache_dir_or_temporary()))
    return data


def start_workers(device: torch.device | str | None = None, *, wait: bool = False) -> bool:
    """Start the isolation workers for `device` now, so that the first tuning does not wait for them.

    Each worker imports torch and Triton and makes a CUDA context: seconds, once per process. A
    long-running job can start them while it loads its model or data. The workers are those a
    tuning on `device` would use (`KERNELPICK_DEVICES`, GPUs of its model).

    Args:
        device: the device tuning will run on (default: the current GPU, else the CPU).
        wait: block until every worker is ready (default: start them in the background; the next
            tuning waits for them if it comes first).

    Returns:
        Whether workers are wanted there (`KERNELPICK_ISOLATE`): False means nothing was started.

    Raises:
        IsolationError: with `wait`, a worker did not start.
    """
    fork_zygote_early()  # before anything here can initialize CUDA
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    info = describe(torch.device(device))
    if not isolation_wanted(info, None):
        return False
    pool = pool_for(worker_devices(info))
    (pool.start if wait else pool.start_soon)()
    return True


def fork_zygote_early(requested: bool | None = None) -> None:
    """Fork the zygote that forks workers (`kernelpick.workers.zygote`) if this process will want
    workers: `requested` (a front's `isolate=True`), `KERNELPICK_ISOLATE` is `on`, or `auto` on a
    machine with a GPU (asked of NVML, which leaves CUDA untouched: no process forked after CUDA
    started can use it)."""
    try:
        current = settings.current()
    except SettingsError:  # said where the settings are used (`kernelpick settings` lists them all)
        return
    if inside_worker or current.no_tuning:
        return
    if requested or current.isolate == "on" or (current.isolate == "auto" and _gpu_present()):
        fork_zygote(spawn=True)  # a new interpreter if CUDA was used


def _gpu_present() -> bool:
    """Whether this machine has an NVIDIA GPU, without initializing CUDA in this process: as NVML
    counts them, else as the driver's control device says. NVML does not start in a process forked
    from one that used it ("Can't initialize NVML": a device process of `kernelpick tune --devices`,
    forked by the command's zygote), which still wants a zygote of its own for its workers."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns where NVML does not start
        try:
            count = int(torch.cuda._device_count_nvml())
        except Exception:  # no NVML at all
            count = -1
    return count > 0 if count >= 0 else _driver_present()


def _driver_present() -> bool:
    """Whether an NVIDIA driver exposes its control device here."""
    return Path("/dev/nvidiactl").exists()


def start_early(requested: bool | None) -> None:
    """Get ready for the first tuning in the background, once per process: fork the workers' zygote
    where workers are wanted (`fork_zygote_early`: before this or the program's threads can hold a
    lock it would keep), and if it has a GPU, start the isolation workers (unless `requested` is
    False or `KERNELPICK_ISOLATE=off`) and warm Triton's compiler up.

    Called when a tuned kernel or a selector is made, usually as the user's modules are imported, so
    that the workers' seconds of starting pass while the program still sets up. Nothing happens in a
    `multiprocessing` child: a data loader's worker that imports the program's modules would start
    workers of its own.
    """
    global _started_early
    if _started_early or _tuning_elsewhere or inside_worker or multiprocessing.parent_process() is not None:
        return
    if settings.current().no_tuning:
        return
    _started_early = True
    fork_zygote_early(requested)  # now, before the program can use CUDA or start threads
    # A rank's GPU is not known yet (the program sets it later): its workers start at its first tuning.
    isolate = requested is not False and settings.current().isolate != "off" and not _one_rank_of_several()

    from kernelpick.compile.precompile import warm_up_compiler

    def run(what: str, work: Callable[[], object]) -> None:
        try:
            if torch.cuda.is_available():
                work()
        except Exception as error:  # the first tuning does it again, and says what went wrong
            log.debug("no %s early: %s", what, error)

    # Beside each other: the warm-up (Triton's driver, built by a C compiler in a fresh cache, and
    # its cache key) is the longer, and the first compile waits for it (docs/benchmarks.md).
    early = [
        threading.Thread(target=run, args=("compiler warm-up", warm_up_compiler), name="kernelpick-warm-up")
    ]
    if isolate:
        early.append(
            threading.Thread(target=run, args=("workers", start_workers), name="kernelpick-start-early")
        )
    for thread in early:
        thread.daemon = True
        thread.start()
    # A program that ends while they still set CUDA up waits for them: ended inside CUDA's C++ as the
    # interpreter finalized, a thread aborted it (bench/results/shutdown_probes-h200.json, "before").
    atexit.register(_join, early, EARLY_JOIN_S)


#: Seconds a program that ends waits for `start_early`'s threads at most.
EARLY_JOIN_S = 60.0


def _join(threads: list[threading.Thread], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))


def tune_elsewhere() -> None:
    """Say that this process hands its tuning to other processes (`kernelpick tune --devices` and
    `--ray`): `start_early` readies nothing here from now on, as its workers and warm-up would idle
    beside those of the processes that tune."""
    global _tuning_elsewhere
    _tuning_elsewhere = True


def ready_to_tune() -> None:
    """In a process kernelpick started to tune (a device process of `kernelpick tune --devices`, or a
    Ray actor): `start_early`, before its first job rather than in it."""
    global _tuning_elsewhere
    _tuning_elsewhere = False  # this process tunes, whatever the one it was forked from does
    start_early(None)
