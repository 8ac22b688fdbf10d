"""`Measurement.measure`: a GPU is warmed up before timing unless it timed something a moment before."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from kernelpick import settings
from kernelpick.bench import measure
from kernelpick.bench.inputs import Example
from kernelpick.bench.measure import Candidate, Measurement
from kernelpick.bench.result import BenchmarkResult
from kernelpick.device import DeviceInfo


def _gpu(index: int) -> DeviceInfo:
    return DeviceInfo("cuda", index, "NVIDIA H200", (9, 0), 60 << 20, 132)


@pytest.fixture
def warmed(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int | None, list[str]]]:
    """The warm-ups `Measurement.measure` makes (device index, candidates), on a GPU it only thinks it
    has: the candidates run on the CPU, nothing is synchronized, and timing returns a fixed result."""
    calls: list[tuple[int | None, list[str]]] = []
    monkeypatch.setattr(measure, "_warm_until", {})
    monkeypatch.setattr(measure, "synchronize", lambda device: None)
    monkeypatch.setattr(
        measure, "warm_up", lambda runs, device, ms: calls.append((device.index, [r.name for r in runs]))
    )

    def timed(runs: dict[str, Any], timer: Any, **options: Any) -> dict[str, BenchmarkResult]:
        return {digest: BenchmarkResult.failed("timeout", "not timed here") for digest in runs}

    monkeypatch.setattr(measure, "benchmark", timed)
    return calls


def _measure(device: DeviceInfo, *names: str) -> None:
    example = Example((torch.ones(4),), {})
    candidates = {name: Candidate(name, lambda x: x + 1) for name in names}
    Measurement(example, device).measure(candidates, timer=None, budgets={})  # type: ignore[arg-type]


def test_a_gpu_that_timed_others_a_moment_before_is_not_warmed_up_again(
    warmed: list[tuple[int | None, list[str]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [1000.0]
    monkeypatch.setattr(measure.time, "monotonic", lambda: now[0])
    _measure(_gpu(0), "a", "b")
    assert warmed == [(0, ["a", "b"])]  # the first measurement on the device warms it up
    now[0] += measure.WARM_FOR_S - 0.5
    _measure(_gpu(0), "c")  # the next key, right after: clocks are up
    _measure(_gpu(1), "d")  # another GPU was idle all along
    assert warmed == [(0, ["a", "b"]), (1, ["d"])]
    now[0] += measure.WARM_FOR_S + 0.5
    _measure(_gpu(0), "e")  # idle longer than WARM_FOR_S since its last timing: warmed up again
    assert warmed[-1] == (0, ["e"])


def test_nothing_is_warmed_up_when_the_setting_is_zero_or_every_candidate_failed(
    warmed: list[tuple[int | None, list[str]]],
) -> None:
    with settings.override(select_warmup_ms=0.0):
        _measure(_gpu(0), "a")
    measure._warm_until.clear()
    example = Example((torch.ones(4),), {})

    def broken(x: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("illegal memory access")

    Measurement(example, _gpu(0)).measure({"bad": Candidate("bad", broken)}, timer=None, budgets={})  # type: ignore[arg-type]
    assert warmed == []
    assert measure._warm_until == {}  # a device that timed nothing is not taken for warm
