"""How a selection ranks its choices (issue 38, item 3): by device time as a CUDA graph replays them,
or by the larger of device and host time as eager calls run them (`KERNELPICK_MEASURE`)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

import kernelpick
from kernelpick import settings
from kernelpick.bench.pick import pick
from kernelpick.bench.result import BenchmarkResult, TimingSummary
from kernelpick.engine import tuning
from kernelpick.engine.tuning import for_graphs, measured_as
from kernelpick.errors import SettingsError
from kernelpick.select.selector_op import traceable_pick
from kernelpick.store import MemoryStore


def timed(device_ms: float, host_ms: float | None) -> BenchmarkResult:
    return BenchmarkResult("ok", TimingSummary.of([device_ms] * 5).with_host(host_ms))


def test_eager_costs_a_call_the_larger_of_its_device_and_host_time() -> None:
    launch_bound, device_bound, untimed = timed(0.009, 0.020), timed(0.050, 0.020), timed(0.010, None)
    assert (launch_bound.cost("eager"), launch_bound.cost("graph"), launch_bound.cost_ms) == (
        0.020,
        0.009,
        0.009,
    )
    assert device_bound.cost("eager") == 0.050
    assert untimed.cost("eager") == 0.010  # no host time measured (a CPU, a kernel's configs): device time
    assert BenchmarkResult.failed("timeout", "killed").cost("eager") == float("inf")


def test_the_two_rankings_pick_differently_where_the_faster_kernel_is_slower_to_launch() -> None:
    results = {"torch.mm": timed(0.012, 0.006), "triton": timed(0.009, 0.020)}
    assert pick(results, "torch.mm").best == "triton"  # 25 % faster on the device
    assert pick(results, "torch.mm", measure="eager").best == "torch.mm"
    assert (
        pick(results, "triton", measure="eager").best == "torch.mm"
    )  # 40 % less per call: beats a reference


def test_automatically_eager_calls_rank_as_eager_and_graphs_by_device_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    x = torch.ones(2)
    assert settings.current().measure == "auto" and measured_as([x]) == "eager"
    with for_graphs():
        assert measured_as([x]) == "graph"
    assert measured_as([x]) == "eager"  # the context ends
    monkeypatch.setattr(tuning, "capturing", lambda values: True)  # as in torch.cuda.graph(...)'s capture
    assert measured_as([x]) == "graph"
    with settings.override(measure="eager"):
        assert measured_as([x]) == "eager"  # the setting decides where it is not auto
    with settings.override(measure="graph"):
        monkeypatch.setattr(tuning, "capturing", lambda values: False)
        assert measured_as([x]) == "graph"


def test_the_setting_is_checked() -> None:
    with pytest.raises(
        SettingsError, match=r"KERNELPICK_MEASURE='replay' is not one of 'auto', 'graph', 'eager'"
    ):
        settings.from_environ({"KERNELPICK_MEASURE": "replay"})


def stored_selector() -> tuple[kernelpick.Selector, MemoryStore]:
    """A selector of two PyTorch functions whose store holds GPU-like figures: `torch.matmul` faster on
    the device, `torch.mm` (the reference) faster to launch."""
    store = MemoryStore()
    selector = kernelpick.Selector(
        "ranked_mm", [kernelpick.extern(torch.mm), kernelpick.extern(torch.matmul)], store=store
    )
    a = torch.randn(8, 8)
    with settings.override(isolate="off"):
        selector(a, a)  # measured on the CPU (no host times): then the store's figures are replaced
    figures = {"torch.mm": timed(0.012, 0.006), "torch.matmul": timed(0.009, 0.020)}
    record = selector.last_selection
    assert record is not None
    names = {row.digest: row.name for row in record.candidates}
    for rows in store._rows.values():
        for digest, row in rows.items():
            rows[digest] = replace(row, result=figures[names[digest]])
    store.picks.clear()
    selector.clear()
    return selector, store


def test_a_selection_ranks_as_the_call_runs_and_its_table_shows_the_other_ranking() -> None:
    selector, _ = stored_selector()
    a = torch.randn(8, 8)
    with settings.override(isolate="off"):
        selector(a, a)
        eager = selector.last_selection
        assert eager is not None and eager.from_store
        assert (eager.measured_as, eager.best) == ("eager", "torch.mm")
        assert eager.to_dict()["measured_as"] == "eager"
        text = " ".join(" ".join(str(line) for line in _rendered(eager.table())).split())
        assert "ranked by device or host time, the larger (eager)" in text
        assert "ranked by device time alone (graph), torch.matmul (device 0.0090 ms, host 0.0200 ms)" in text
        selector.clear()
        with settings.override(measure="graph"):
            selector(a, a)
        graph = selector.last_selection
        assert graph is not None and (graph.measured_as, graph.best) == ("graph", "torch.matmul")


def test_a_compiled_graph_runs_its_own_ranking_s_pick_after_an_eager_selection() -> None:
    selector, _ = stored_selector()
    a = torch.randn(8, 8)
    with settings.override(isolate="off"):
        selector(a, a)  # eager: torch.mm
        assert selector.last_selection.best == "torch.mm"
        assert traceable_pick(selector, a, a) is torch.matmul  # what the graph runs: by device time
        assert selector.last_selection.best == "torch.mm"  # eager calls keep theirs


def _rendered(table: object) -> list[str]:
    import io

    from rich.console import Console

    console = Console(file=io.StringIO(), width=400)
    console.print(table)
    return console.file.getvalue().splitlines()  # type: ignore[attr-defined]


def _binder(calls: dict[str, object]) -> object:
    def bind(digest: str) -> object:
        return calls[digest]

    return bind


def test_a_cuda_pick_runs_the_graph_rankings_choice_inside_a_capture_where_the_rankings_differ(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A template 25 % faster on the device but slower to launch: eager calls run torch.mm, a
    # captured graph (device time alone) the template.
    results = {"torch.mm": timed(0.012, 0.006), "triton": timed(0.009, 0.020)}
    calls = {"torch.mm": lambda *a: "torch.mm ran", "triton": lambda *a: "triton ran"}
    capturing_now = [False]
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: capturing_now[0])
    eager_pick = calls["torch.mm"]
    call = tuning.in_captures_too(
        eager_pick, "torch.mm", results, "torch.mm", "eager", _binder(calls), "cuda"
    )
    assert call is not eager_pick
    assert call(1, 2) == "torch.mm ran"
    capturing_now[0] = True
    assert call(1, 2) == "triton ran"
    # Selected inside a capture first (ranked as a graph): eager calls run the eager ranking's pick.
    call = tuning.in_captures_too(
        calls["triton"], "triton", results, "torch.mm", "graph", _binder(calls), "cuda"
    )
    assert call(1, 2) == "triton ran"
    capturing_now[0] = False
    assert call(1, 2) == "torch.mm ran"


def test_one_callable_serves_both_where_the_rankings_agree_the_device_is_no_gpu_or_the_setting_chooses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    differ = {"torch.mm": timed(0.012, 0.006), "triton": timed(0.009, 0.020)}
    agree = {"torch.mm": timed(0.012, 0.006), "triton": timed(0.006, 0.005)}
    calls = {"torch.mm": lambda *a: "torch.mm ran", "triton": lambda *a: "triton ran"}
    mm, bind = calls["torch.mm"], _binder(calls)
    assert (
        tuning.in_captures_too(calls["triton"], "triton", agree, "torch.mm", "eager", bind, "cuda")
        is calls["triton"]
    )
    assert tuning.in_captures_too(mm, "torch.mm", differ, "torch.mm", "eager", bind, "cpu") is mm
    with settings.override(measure="eager"):
        assert tuning.in_captures_too(mm, "torch.mm", differ, "torch.mm", "eager", bind, "cuda") is mm

    def unloadable(digest: str) -> object:
        raise RuntimeError("its kernel no longer loads")

    assert tuning.in_captures_too(mm, "torch.mm", differ, "torch.mm", "eager", unloadable, "cuda") is mm


def test_a_selector_records_the_graph_rankings_pick_in_a_capture_and_runs_its_own_outside(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kernelpick.select import selector as selector_module

    ran: list[str] = []

    def reference_mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        ran.append("reference_mm")
        return torch.mm(a, b)

    def device_fast_mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        ran.append("device_fast_mm")
        return torch.mm(a, b)

    store = MemoryStore()
    selector = kernelpick.Selector(
        "captured_mm", [kernelpick.extern(reference_mm), kernelpick.extern(device_fast_mm)], store=store
    )
    a = torch.randn(8, 8)
    with settings.override(isolate="off"):
        selector(a, a)  # measured on the CPU; then the store gets GPU-like figures
    figures = {"reference_mm": timed(0.012, 0.006), "device_fast_mm": timed(0.009, 0.020)}
    names = {row.digest: row.name for row in selector.last_selection.candidates}  # type: ignore[union-attr]
    for rows in store._rows.values():
        for digest, row in rows.items():
            rows[digest] = replace(row, result=figures[names[digest]])
    store.picks.clear()
    selector.clear()
    # As on a GPU: the CPU has no capture, so the device is said to be CUDA and the capture faked.
    real = tuning.in_captures_too
    monkeypatch.setattr(selector_module, "in_captures_too", lambda *args: real(*args[:-1], "cuda"))
    capturing_now = [False]
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: capturing_now[0])
    with settings.override(isolate="off"):
        selector(a, a)  # an eager call selects from the stored figures: the reference, faster to launch
    assert selector.last_selection is not None and selector.last_selection.best == "reference_mm"
    ran.clear()
    selector(a, a)
    capturing_now[0] = True
    selector(a, a)  # inside a capture: device time alone ranks
    capturing_now[0] = False
    selector(a, a)
    assert ran == ["reference_mm", "device_fast_mm", "reference_mm"]
