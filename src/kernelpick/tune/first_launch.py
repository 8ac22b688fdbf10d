"""The first launch of a pick from a store or a table: compiled before it runs, and dropped if it fails."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kernelpick.bench.benchmarker import classify_run_error
from kernelpick.bench.result import BenchmarkResult, Status
from kernelpick.compile.precompile import classify
from kernelpick.config import Config
from kernelpick.device import DeviceInfo
from kernelpick.engine.tuning import Tuning
from kernelpick.errors import StoreError
from kernelpick.store import CandidateResult
from kernelpick.tune.dispatch import Entry

if TYPE_CHECKING:
    from kernelpick.tune.autotuner import Autotuner

log = logging.getLogger("kernelpick.tune")

#: Compile outcomes that say a config cannot run here (a compile timed out or put off says nothing).
_FAILED = ("compile_error", "out_of_resources", "crashed")


class FirstLaunch:
    """The `run` of a key's entry until its pick `best`, which came from a store or a table, has launched
    once on `device`, its first launch checked: then the plain entry replaces `wrapped`, which holds this."""

    def __init__(
        self, tuner: Autotuner, key: tuple[Any, ...], tuning: Tuning, best: Config, device: DeviceInfo
    ) -> None:
        self.tuner, self.key, self.tuning, self.best, self.device = tuner, key, tuning, best, device
        self.plain = tuner._entry(best, device)
        self.wrapped: Entry = (self.plain[0], self, self.plain[2])  # in the dispatcher's tables

    def __call__(self, *args: Any, grid: Any, warmup: bool = False, **kwargs: Any) -> Any:
        _, run, launch_kwargs = self.plain
        own = {name: value for name, value in kwargs.items() if name not in launch_kwargs}
        failure: tuple[Status, str] | None = None  # why the pick does not compile for this call, unrun
        if not self.device.interpreter:
            try:
                run(*args, grid=grid, warmup=True, **kwargs)  # what the launch compiles, kept for it
            except Exception as error:
                failure = classify(error)
        else:
            [outcome] = self.tuner._call(grid).warm_up([self.best], args, own)
            failure = (outcome.status, outcome.message) if outcome.status in _FAILED else None
        if failure is not None:
            self._drop(*failure)
            return self.tuner.run(*args, grid=grid, warmup=warmup, **own)  # tuned again, launched
        try:
            result = run(*args, grid=grid, warmup=warmup, **kwargs)
        except Exception as error:  # it may have written: raised, but not picked again
            self._drop(*classify_run_error(error))
            raise
        self.tuner._dispatch.swap(self.key, self.wrapped, self.plain)
        return result

    def _drop(self, status: Status, message: str) -> None:
        """Mark the pick failed in the store and forget it: the next tuning of the key measures every
        config, reading neither the store nor tables (another stored pick may be as bad)."""
        self.tuner._dispatch.swap(self.key, self.wrapped, None)
        self.tuner._distrusted.add(self.key)
        fails = "kernel `%s`: the pick %s stored for %s fails here (%s); it is marked failed, and the key measured again"
        log.warning(fails, self.tuner.name, self.best, self.tuning.described, " ".join(message.split())[:300])
        if self.tuning.store is None:
            return
        failed = BenchmarkResult.failed(
            status, f"{message} (on its first launch, picked from a store or table)"
        )
        try:
            self.tuning.store.save(
                self.tuning.key, [CandidateResult(self.best.digest, self.best.to_dict(), failed)]
            )
        except StoreError as error:
            log.warning(
                "kernel `%s`: the failed pick could not be marked in the store: %s", self.tuner.name, error
            )
