"""Tests of call-path timing: a run counts as the larger of its device and host time."""

from __future__ import annotations

import time
from collections.abc import Sequence

import pytest

from kernelpick.bench.timers import Benchmarkable, TimingBudget
from kernelpick.select import timing
from kernelpick.select.timing import CallPathTimer


class Sleeper:
    name = "sleeper"

    def setup(self) -> None:
        pass

    def run(self) -> None:
        time.sleep(0.002)  # 2 ms of host time

    def teardown(self) -> None:
        pass


class DeviceTimer:
    """Stands in for CUDA events (there is no GPU here): runs the candidate, reports a fixed device time."""

    def __init__(self, device_ms: float) -> None:
        self.device_ms = device_ms

    def measure(
        self, candidate: Benchmarkable, budget: TimingBudget, cutoff_ms: float | None = None
    ) -> list[float]:
        for _ in range(3):  # an estimate and warm-up runs, not reported
            candidate.run()
        samples = []
        for _ in range(4):
            candidate.setup()
            candidate.run()
            candidate.teardown()
            samples.append(self.device_ms)
        return samples

    def measure_interleaved(
        self, candidates: Sequence[Benchmarkable], budget: TimingBudget
    ) -> list[list[float]]:
        return [self.measure(c, budget) for c in candidates]


BUDGET = TimingBudget(0.0, 0.0, 4, 4)


def test_launch_bound_runs_count_their_host_time() -> None:
    samples = CallPathTimer(DeviceTimer(0.01)).measure(Sleeper(), BUDGET)
    assert len(samples) == 4 and all(s >= 2.0 for s in samples)


def test_device_bound_runs_count_their_device_time() -> None:
    samples = CallPathTimer(DeviceTimer(50.0)).measure(Sleeper(), BUDGET)
    assert samples == [50.0] * 4


def test_interleaved_rounds_combine_per_candidate() -> None:
    samples = CallPathTimer(DeviceTimer(0.01)).measure_interleaved([Sleeper(), Sleeper()], BUDGET)
    assert [len(s) for s in samples] == [4, 4] and min(map(min, samples)) >= 2.0


def test_on_a_gpu_the_device_is_drained_after_each_run_outside_the_timing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Otherwise the host runs ahead until a launch blocks on a full queue, and that wait (the
    # device's own time, the L2 flushes' too) would count as the call's host time.
    import torch

    calls: list[object] = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: calls.append(("drain", device)))
    monkeypatch.setattr(timing, "_lead", lambda device, cycles: calls.append(("lead", cycles)))
    timer = DeviceTimer(0.01)
    timer.device = torch.device("cuda", 0)  # type: ignore[attr-defined]
    CallPathTimer(timer).measure(Sleeper(), BUDGET)
    # once per timed run: a lead kernel queued before it (the GPU is busy while the host launches
    # the run), a drain after it, from its teardown
    assert calls == [("lead", timing.LEAD_CYCLES), ("drain", torch.device("cuda", 0))] * 4


@pytest.mark.gpu
def test_on_a_gpu_the_lead_kernel_keeps_the_hosts_launch_out_of_the_device_time() -> None:
    import torch

    from kernelpick.bench.device import describe
    from kernelpick.bench.timers import CudaEventTimer

    x = torch.zeros(1024, device="cuda")

    class LateLaunch:
        name = "late launch"

        def setup(self) -> None:
            pass

        def run(self) -> None:
            deadline = time.perf_counter() + 60e-6  # 60 µs of host work before the launch
            while time.perf_counter() < deadline:
                pass
            x.add_(1.0)

        def teardown(self) -> None:
            pass

    timer = CallPathTimer(CudaEventTimer(describe(torch.device("cuda"))))
    budget = TimingBudget(0.0, 0.0, 30, 30)

    def median_ms(lead: object) -> float:
        device_ms = timer.timer.measure(timing._HostTimed(LateLaunch(), timer._drain, lead), budget)
        return sorted(device_ms)[len(device_ms) // 2]

    without, with_lead = median_ms(None), median_ms(timer._lead)
    # On an H200 the flush alone covers ~30 µs of the host's ~75: without the lead the add (a few
    # µs) reads ~50 µs; with it, ~20 µs.
    assert with_lead < 0.7 * without, (with_lead, without)
