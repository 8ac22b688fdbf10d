"""The never-lose rule in autotuning: a `default` config, or the stored incumbent, is kept unless
another config beats it by more than the measured spread."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
import torch
import triton

import kernelpick
from kernelpick.bench.timers import Benchmarkable, TimingBudget
from kernelpick.errors import ConfigError
from kernelpick.store import MemoryStore
from tests.tune.kernels import add_kernel, grid_1d

SPACE = [triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128}), triton.Config({"BLOCK": 256})]


class SpreadTimer:
    """Times each config at a set median, its runs up to 4 % off (a spread of 3 %)."""

    name = "scripted"

    def __init__(self, medians: dict[int, float]) -> None:
        self.medians = medians

    def _samples(self, candidate: Benchmarkable) -> list[float]:
        candidate.setup()
        candidate.run()
        candidate.teardown()
        median = self.medians[int(candidate.name.split("BLOCK=")[1].split(",")[0])]
        return [median * 0.96, median * 0.98, median, median * 1.02, median * 1.04]

    def measure(
        self, candidate: Benchmarkable, budget: TimingBudget, cutoff_ms: float | None = None
    ) -> list[float]:
        return self._samples(candidate)

    def measure_interleaved(
        self, candidates: Sequence[Benchmarkable], budget: TimingBudget
    ) -> list[list[float]]:
        return [self._samples(c) for c in candidates]


def tuned(medians: dict[int, float], **options: object) -> kernelpick.Autotuner:
    kernel = kernelpick.autotune(SPACE, key=["n"], store=MemoryStore(), **options)(add_kernel)  # type: ignore[arg-type]
    kernel.timer = SpreadTimer(medians)
    return kernel


def launch(kernel: kernelpick.Autotuner) -> None:
    x, y, out = torch.randn(300), torch.randn(300), torch.empty(300)
    kernel[grid_1d(300)](x, y, out, 300)
    torch.testing.assert_close(out, x + y)


def test_the_default_config_stays_when_the_fastest_is_within_the_spread() -> None:
    kernel = tuned({64: 1.0, 128: 0.99, 256: 1.5}, default=0)
    launch(kernel)
    assert kernel.best_config.kwargs == {"BLOCK": 64}
    assert kernel.last_tuning is not None
    assert kernel.last_tuning.note.startswith("kept the reference BLOCK=64")


def test_a_clearly_faster_config_replaces_the_default() -> None:
    kernel = tuned({64: 1.0, 128: 0.8, 256: 1.5}, default=SPACE[0])
    launch(kernel)
    assert kernel.best_config.kwargs == {"BLOCK": 128}
    assert kernel.last_tuning is not None and kernel.last_tuning.note == ""


def test_without_a_default_the_fastest_wins() -> None:
    kernel = tuned({64: 1.0, 128: 0.99, 256: 1.5})
    launch(kernel)
    assert kernel.best_config.kwargs == {"BLOCK": 128}


def test_the_stored_incumbent_is_kept_against_a_new_config_inside_the_spread() -> None:
    store = MemoryStore()
    first = kernelpick.autotune(SPACE[:2], key=["n"], store=store)(add_kernel)
    first.timer = SpreadTimer({64: 1.0, 128: 1.2})
    launch(first)
    assert first.best_config.kwargs == {"BLOCK": 64}
    grown = kernelpick.autotune(SPACE, key=["n"], store=store)(add_kernel)  # one config added
    grown.timer = SpreadTimer({64: 1.0, 128: 1.2, 256: 0.99})
    launch(grown)
    assert grown.best_config.kwargs == {"BLOCK": 64}
    assert grown.last_tuning is not None and "kept the reference BLOCK=64" in grown.last_tuning.note


@pytest.mark.parametrize("default", [3, triton.Config({"BLOCK": 32}), "BLOCK=64"])
def test_a_default_that_is_not_one_of_the_configs_fails_at_decoration(default: object) -> None:
    with pytest.raises(ConfigError, match="default"):
        kernelpick.autotune(SPACE, key=["n"], default=default)(add_kernel)
