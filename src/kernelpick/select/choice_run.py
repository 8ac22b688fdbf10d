"""One choice of a selector as something the benchmarker times, and the warm-up before timing."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from kernelpick import settings
from kernelpick.bench.device import DeviceInfo
from kernelpick.select.choice import Choice
from kernelpick.select.inputs import ExampleInputs


class ChoiceRun:
    """One choice as a `Benchmarkable`: its hot-path callable on the example inputs."""

    def __init__(
        self, choice: Choice, call: Callable[..., Any], example: ExampleInputs, *, restore: bool
    ) -> None:
        self.name = choice.name
        self.digest = choice.digest
        self._call = call
        self._example = example
        self._restore = restore  # only choices seen writing their inputs pay for restoring them

    def setup(self) -> None:
        if self._restore:
            self._example.restore()

    def run(self) -> None:
        self._call(*self._example.args, **self._example.kwargs)

    def teardown(self) -> None:
        pass


def warm_up(runs: Sequence[ChoiceRun], device: DeviceInfo) -> None:
    """Run the choices in turn for `select_warmup_ms` (at least once each) before any is timed.

    After compilation the GPU has idled and may have clocked down: without this, whichever choice
    is timed first (the library kernel, usually) would be timed on idle clocks and could lose for it.
    """
    deadline = time.perf_counter() + settings.current().select_warmup_ms / 1e3
    while True:
        for run in runs:
            run.setup()
            run.run()
            run.teardown()
        synchronize(device)
        if time.perf_counter() >= deadline:
            return


def synchronize(device: DeviceInfo) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device.index)
