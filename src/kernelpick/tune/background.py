"""A tuned kernel's keys tuned in the background (`autotune(background=True)`, `KERNELPICK_BACKGROUND`)."""

from __future__ import annotations

import functools
import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from kernelpick.bench.timers import UserBenchTimer
from kernelpick.device import describe, device_of
from kernelpick.engine.record import TuningRecord
from kernelpick.select.background import UNMEASURED, Pending, allowed, rank_switch, shadow, submit
from kernelpick.tune.dispatch import Entry, describe_key
from kernelpick.tune.first_launch import FirstLaunch

if TYPE_CHECKING:
    from kernelpick.tune.autotuner import Autotuner

log = logging.getLogger("kernelpick.tune")


def provisional_entry(
    tuner: Autotuner, key: tuple[Any, ...], args: tuple[Any, ...], kwargs: dict[str, Any], grid: Any
) -> Entry | None:
    """The entry a new key's calls run while its configs are tuned in the background (tuning queued
    now; the tuner wants it: its `background`, else the setting), or None where the key is to be tuned
    before the call returns."""
    if tuner._call(grid).runs_here() is not None or isinstance(tuner.timer, UserBenchTimer):
        return None
    named = tuner._named(args, kwargs)
    if not allowed(list(named.values())):
        return None
    device = describe(device_of(named.values()))
    configs = tuner._configs_for(device, args, kwargs)
    if len(configs) < 2:
        return None
    config = tuner.default if tuner.default in configs else configs[0]
    tune = functools.partial(_tuned, tuner, key, grid, args, dict(kwargs))
    pending = KernelPending(tuner, key, tuner._entry(config, device))
    pending.ranks = rank_switch(tuner.tuning_key(key, device).digest)
    record = TuningRecord.of_configs(
        tuner.name,
        key,
        device,
        {config: UNMEASURED},
        config,
        0.0,
        False,
        key_text=describe_key(tuner._key_names, key),
        note="provisional: runs while the configs are tuned in the background",
        provisional=True,
    )
    with tuner._lock:
        existing: Entry | None = tuner._dispatch.entries.get(key)
        if existing is not None:  # another thread met the key meanwhile
            return existing
        tuner.tunings[key] = tuner.last_tuning = record
        tuner._dispatch.entries[key] = pending.wrapped
    submit(pending, tune, log, f"kernel `{tuner.name}`{record.key_text}", config, "its configs")
    return pending.wrapped


class KernelPending(Pending[Entry]):
    """A key's configs tuned in the background, and the `run` of its entry meanwhile (`wrapped`, in the
    dispatcher's tables): the `provisional` config's launch, until the first call after the tuning switches."""

    def __init__(self, tuner: Autotuner, key: tuple[Any, ...], provisional: Entry) -> None:
        super().__init__(provisional)
        self.tuner, self.key = tuner, key
        self.wrapped: Entry = (provisional[0], self, provisional[2])

    def __call__(self, *args: Any, grid: Any, warmup: bool = False, **kwargs: Any) -> Any:
        if self.due([*args, *kwargs.values()]):
            tuner, own = self.tuner, {k: v for k, v in kwargs.items() if k not in self.provisional[2]}
            entry, record = self.switched(log, f"kernel `{tuner.name}`", "config", str(self.provisional[0]))
            tuner._dispatch.swap(self.key, self.wrapped, entry)
            if record is not None:
                tuner._keep(self.key, record)
            return tuner.run(*args, grid=grid, warmup=warmup, **own)  # the pick, or the provisional
        return self.provisional[1](*args, grid=grid, warmup=warmup, **kwargs)


def _tuned(
    tuner: Autotuner, key: tuple[Any, ...], grid: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Entry, TuningRecord]:
    """`key` tuned on a `shadow` of `tuner`: its entry and record."""
    copied = shadow(
        tuner,
        _dispatch=replace(tuner._dispatch),  # its tables empty
        tunings={},
        cache={},  # a plain dict: nothing clears the shadow's
        _distrusted=set(tuner._distrusted),
    )
    entry = copied._tune(key, args, kwargs, grid)  # no lock taken: the shadow tunes this key alone
    if isinstance(entry[1], FirstLaunch):  # a stored pick: its first launch swaps itself (or drops
        entry[1].tuner = tuner  # the pick) in the kernel's own tables, which the switch puts it in
    return entry, copied.tunings[key]
