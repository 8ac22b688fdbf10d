"""A selector's decisions: a row per M (per key for other selectors), what the pick beat, its roofline."""

from __future__ import annotations

import io
import random
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from rich.console import Console

from kernelpick.bench.result import BenchmarkResult, TimingSummary
from kernelpick.bench.verify import VERIFICATION_VERSION
from kernelpick.reports.data import keys_from_store
from kernelpick.reports.decisions import SPEEDUP_NOTE, DecisionGroup, decision_groups, print_decisions
from kernelpick.store.base import StoredRow
from kernelpick.store.keys import Toolchain, TuningKey

H100 = "NVIDIA H100 80GB HBM3"
#: The H100 SXM datasheet's peaks, dense: HBM3 bytes per second and bf16 tensor-core FLOP/s.
H100_BANDWIDTH, H100_BF16, H100_FP8 = 3350e9, 989.5e12, 1979e12
TOOLCHAIN = Toolchain("3.6.0", "2.11.0+cu130", "13.0")


def tensor(size: Sequence[int], stride: Sequence[int], dtype: str = "bfloat16") -> dict[str, Any]:
    return {"dtype": dtype, "size": list(size), "stride": list(stride), "offset": 0, "aligned": True}


def x_times_w_t(m: int, n: int, k: int, dtype: str = "bfloat16") -> list[dict[str, Any]]:
    """A (M, K) row-major and B = W.T (K, N) of a row-major weight W (N, K): what nn.Linear multiplies."""
    return [tensor((m, k), (k, 1), dtype), tensor((k, n), (1, k), dtype)]


def timed(ms: float) -> BenchmarkResult:
    return BenchmarkResult("ok", TimingSummary(ms, ms, ms, ms, 0.0, 50, 0, "cudagraph"))


def extern(name: str) -> dict[str, Any]:
    return {"kind": "extern", "name": name, "callable": name, "out_variant": True}


def template(name: str, **kwargs: int) -> dict[str, Any]:
    config = {"kwargs": kwargs, "num_warps": 4, "num_stages": 3, "num_ctas": 1, "maxnreg": None}
    text = ", ".join(f"{k}={v}" for k, v in kwargs.items())
    return {
        "kind": "template",
        "name": f"{name} {text}, num_warps=4, num_stages=3",
        "template": name,
        "config": config,
    }


DECODE = template("triton_mm_decode", BLOCK_M=1, BLOCK_N=64, BLOCK_K=256, SPLIT_K=4)
TILED = template("triton_mm", BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8)


def rows(
    inputs: Sequence[Any],
    timings: Mapping[str, tuple[Mapping[str, Any], BenchmarkResult]],
    pick: str | None,
    *,
    kernel: str = "kernelpick.ops.mm",
    device: str = H100,
    capability: str = "9.0",
) -> list[StoredRow]:
    """The store rows of one selection: each candidate by name, with its description and result."""
    key = TuningKey(kernel, VERIFICATION_VERSION, device, capability, TOOLCHAIN, (list(inputs), [], None))
    return [
        StoredRow(key, f"digest-{name}", description, result, 1.0e9, name == pick)
        for name, (description, result) in timings.items()
    ]


def mm(
    m: int, n: int, k: int, library_ms: float, decode_ms: float | None, tiled_ms: float, **where: str
) -> list[StoredRow]:
    """A selection of kernelpick.ops.mm for bf16 x @ W.T: torch.mm, the decode template (None: not
    offered), the tiled template; the fastest is picked."""
    timings = {"torch.mm": (extern("torch.mm"), timed(library_ms)), "tiled": (TILED, timed(tiled_ms))}
    if decode_ms is not None:
        timings["decode"] = (DECODE, timed(decode_ms))
    fastest = min(timings, key=lambda name: timings[name][1].cost_ms)
    return rows(x_times_w_t(m, n, k), timings, fastest, **where)


def groups_of(*selections: list[StoredRow]) -> list[DecisionGroup]:
    return decision_groups(keys_from_store([row for selection in selections for row in selection]))


def rendered(groups: Sequence[DecisionGroup], width: int) -> list[str]:
    """What `print_decisions` prints at `width` columns."""
    out = io.StringIO()
    print_decisions(Console(file=out, width=width), groups)
    return out.getvalue().splitlines()


def test_each_m_is_a_row_in_order_and_the_other_sizes_make_a_group() -> None:
    selections = [
        mm(m, 4096, 4096, 0.01 * m + 0.02, 0.015 if m <= 16 else None, 0.012 * m) for m in (1, 16, 4096, 128)
    ]
    selections.append(mm(1, 14336, 4096, 0.06, 0.05, 0.2))
    random.Random(0).shuffle(selections)
    groups = groups_of(*selections)
    assert [(g.shape, [d.label for d in g.decisions]) for g in groups] == [
        ("N=4096, K=4096, bfloat16, B column-major", ["1", "16", "128", "4096"]),
        ("N=14336, K=4096, bfloat16, B column-major", ["1"]),
    ]
    lines = rendered(groups, 100)
    assert lines[:2] == [
        f"DECISIONS kernelpick.ops.mm on {H100} (sm_90)",
        "N=4096, K=4096, bfloat16, B column-major",
    ]
    first_cells = [line.split()[0] for line in lines[3:7]]
    assert first_cells == ["1", "16", "128", "4096"]


def test_the_speedup_compares_a_template_with_the_library_and_the_library_with_the_best_template() -> None:
    decode_wins = mm(1, 4096, 4096, library_ms=0.0235, decode_ms=0.0181, tiled_ms=0.03)
    library_wins = mm(2048, 4096, 4096, library_ms=0.0886, decode_ms=None, tiled_ms=0.0921)
    one, two = groups_of(decode_wins, library_wins)[0].decisions
    assert one.pick is not None and one.pick.name == DECODE["name"] and one.versus is not None
    assert one.versus.name == "torch.mm" and one.speedup == pytest.approx(0.0235 / 0.0181)
    assert two.pick is not None and two.pick.name == "torch.mm"
    assert two.versus is not None and two.versus.name == TILED["name"]
    assert two.speedup == pytest.approx(0.0921 / 0.0886)
    lines = rendered(groups_of(decode_wins, library_wins), 100)
    assert lines[2].split() == [
        "M",
        "pick",
        "ms/call",
        "vs",
        "vs",
        "ms",
        "speedup",
        "%",
        "mem",
        "%",
        "compute",
        "FLOP/B",
        "bound",
    ]
    assert lines[3].split()[:6] == ["1", "triton_mm_decode", "0.0181", "torch.mm", "0.0235", "1.30×"]
    assert lines[4].split()[:6] == ["2048", "torch.mm", "0.0886", "triton_mm", "0.0921", "1.04×"]
    assert SPEEDUP_NOTE.split()[0] in " ".join(lines)


def test_a_selector_of_one_kind_is_compared_with_its_runner_up() -> None:
    timings = {"a": (extern("torch.mm"), timed(2.0)), "b": (extern("numpy.matmul"), timed(3.0))}
    (group,) = groups_of(rows(x_times_w_t(8, 8, 8), timings, "a"))
    (decision,) = group.decisions
    assert decision.versus is not None and decision.versus.name == "numpy.matmul" and decision.speedup == 1.5


def test_the_roofline_is_the_share_of_each_datasheet_limit_and_names_the_one_that_binds() -> None:
    decode = mm(1, 4096, 4096, library_ms=0.0235, decode_ms=0.0181, tiled_ms=0.03)
    prefill = mm(8192, 4096, 4096, library_ms=0.3799, decode_ms=None, tiled_ms=0.3976)
    group = groups_of(decode, prefill)[0]
    one, big = group.decisions
    # M = 1 streams the weight once: 2 bytes a value of A (1×4096), W (4096×4096) and the output (1×4096).
    moved, flops = (4096 + 4096 * 4096 + 4096) * 2, 2 * 4096 * 4096
    found = one.roofline
    assert found is not None and (found.bytes, found.flops) == (moved, flops)
    assert found.memory_percent == pytest.approx(100 * moved / 0.0181e-3 / H100_BANDWIDTH)  # 55.3 %
    assert found.compute_percent == pytest.approx(100 * flops / 0.0181e-3 / H100_BF16)
    assert found.intensity == pytest.approx(flops / moved) and found.bound == "memory"
    assert found.ridge == pytest.approx(H100_BF16 / H100_BANDWIDTH)  # 295 FLOP per byte
    big_moved, big_flops = (8192 * 4096 * 2 + 4096 * 4096) * 2, 2 * 8192 * 4096 * 4096
    found = big.roofline
    assert found is not None and found.bound == "compute"
    assert found.compute_percent == pytest.approx(100 * big_flops / 0.3799e-3 / H100_BF16)  # 73.1 %
    assert found.memory_percent == pytest.approx(100 * big_moved / 0.3799e-3 / H100_BANDWIDTH)
    lines = rendered([group], 100)
    assert lines[3].split()[6:] == ["55.4%", "0.2%", "1.0", "memory"]
    assert lines[4].split()[6:] == ["13.2%", "73.1%", "1638", "compute"]
    assert (
        "roofline: the H100 SXM5 80GB datasheet's 3350 GB/s and 989.5 TFLOP/s (bfloat16); ridge point 295 FLOP/B"
        in " ".join(" ".join(lines).split())
    )


def test_fp8_products_count_one_byte_a_value_and_the_fp8_peak() -> None:
    inputs = [
        *x_times_w_t(16, 4096, 4096, "float8_e4m3fn"),
        tensor((16, 1), (1, 1), "float32"),
        tensor((1, 4096), (4096, 1), "float32"),
        tensor((4096,), (1,), "bfloat16"),
    ]
    timings = {
        "torch._scaled_mm[bias]": (extern("torch._scaled_mm[bias]"), timed(0.012)),
        "triton_scaled_mm": (
            template("triton_scaled_mm[bias]", BLOCK_M=16, BLOCK_N=64, BLOCK_K=128),
            timed(0.010),
        ),
    }
    (group,) = groups_of(
        rows(inputs, timings, "triton_scaled_mm", kernel="kernelpick.ops.scaled_mm_bias_bf16")
    )
    assert (
        group.shape == "N=4096, K=4096, float8_e4m3fn to bfloat16, B column-major, scales per row, bias (N)"
    )
    found = group.decisions[0].roofline
    moved = 16 * 4096 + 4096 * 4096 + (16 + 4096) * 4 + 4096 * 2 + 16 * 4096 * 2
    assert found is not None and found.bytes == moved and found.peak_tflops == H100_FP8 / 1e12
    assert (
        group.decisions[0].pick is not None and group.cells(group.decisions[0])[1] == "triton_scaled_mm[bias]"
    )
    # An A100 has no fp8 tensor cores: the share of its bandwidth, no share of a compute peak, no bound.
    (ampere,) = groups_of(
        rows(
            inputs,
            timings,
            "triton_scaled_mm",
            kernel="kernelpick.ops.scaled_mm_bias_bf16",
            device="NVIDIA A100-SXM4-80GB",
            capability="8.0",
        )
    )
    assert ampere.cells(ampere.decisions[0])[6:] == [
        f"{100 * moved / 0.010e-3 / 2039e9:.1f}%",
        "-",
        f"{2 * 16 * 4096 * 4096 / moved:.1f}",
        "-",
    ]
    assert ampere.caption == "roofline: the A100 SXM4 80GB datasheet has no compute peak for float8_e4m3fn"


def test_where_the_peaks_are_unknown_it_says_so_instead_of_percentages() -> None:
    on_cpu = mm(16, 64, 48, library_ms=0.002, decode_ms=None, tiled_ms=13.0, device="cpu", capability="")
    unknown_gpu = mm(16, 64, 48, 0.002, None, 0.004, device="NVIDIA GeForce RTX 9090", capability="12.0")
    for selection, device in ((on_cpu, "cpu"), (unknown_gpu, "NVIDIA GeForce RTX 9090")):
        (group,) = groups_of(selection)
        assert group.roofline_with_peaks is None and [c.header for c in group.columns()][-1] == "speedup"
        assert group.caption == f"no roofline: kernelpick knows no datasheet peaks for {device}"
        assert group.cells(group.decisions[0])[:3] == ["16", "torch.mm", "0.0020"]


def test_another_selector_has_a_row_per_key_and_no_roofline() -> None:
    selections = [
        rows(
            [tensor((n,), (1,), "float32"), n],
            {"add": (extern("torch.add"), timed(n / 1e4))},
            "add",
            kernel="add",
        )
        for n in (1000, 20, 300)
    ]
    (group,) = groups_of(*selections)
    assert group.shape == "" and group.columns()[0].header == "key"
    assert [d.label for d in group.decisions] == [
        "(float32[20], 20)",
        "(float32[300], 300)",
        "(float32[1000], 1000)",
    ]
    assert (
        group.caption == ""
        and group.decisions[0].versus is None
        and group.cells(group.decisions[0])[3:] == ["-", "-", "-"]
    )


def test_a_key_without_a_pick_says_why() -> None:
    failed = BenchmarkResult.failed("compile_error", "out of resource: shared memory")
    interrupted = rows(x_times_w_t(1, 64, 64), {"torch.mm": (extern("torch.mm"), timed(1.0))}, None)
    broken = rows(x_times_w_t(2, 64, 64), {"tiled": (TILED, failed)}, None)
    cells = [g.cells(d)[:3] for g in groups_of(interrupted, broken) for d in g.decisions]
    assert cells == [["1", "unfinished", "-"], ["2", "all failed", "-"]]


def test_a_kernel_tuned_under_two_toolchains_gets_a_table_for_each() -> None:
    old = [
        StoredRow(
            TuningKey(
                r.key.kernel,
                r.key.source,
                r.key.device,
                r.key.capability,
                Toolchain("3.5.0", "2.10.0", "12.9"),
                r.key.inputs,
            ),
            r.candidate,
            r.description,
            r.result,
            r.created,
            r.picked,
        )
        for r in mm(16, 64, 64, 1.0, 0.5, 2.0)
    ]
    groups = groups_of(old, mm(16, 64, 64, 1.0, 0.7, 2.0))
    assert [g.toolchain for g in groups] == [
        "triton 3.5.0, torch 2.10.0, CUDA 12.9",
        "triton 3.6.0, torch 2.11.0+cu130, CUDA 13.0",
    ]
    assert groups[0].title.endswith("(sm_90), triton 3.5.0, torch 2.10.0, CUDA 12.9")


@pytest.mark.parametrize("width", [80, 100])
def test_the_tables_fit_the_width_dropping_the_intensity_then_the_names_compared_with(width: int) -> None:
    selections = [
        mm(m, 28672, 4096, 0.01 * m, 0.02 if m == 1 else None, 0.011 * m) for m in (1, 16, 128, 2048, 8192)
    ]
    lines = rendered(groups_of(*selections), width)
    assert max(len(line) for line in lines) <= width
    header = lines[2].split()
    assert ("FLOP/B" in header) == (width >= 100)
    assert header[:3] == ["M", "pick", "ms/call"] and header[-1] == "bound" and "speedup" in header
    assert all(len(line.split()) >= 8 for line in lines[3:8])  # every row on one line
