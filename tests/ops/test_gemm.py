"""Tests of kernelpick.ops: mm, addmm and bmm on CPU, the Triton templates run in the interpreter."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import kernelpick
from kernelpick import Config, Selector, TuningRequired, extern, ops, settings, template
from kernelpick.bench.verify import tolerance_for
from kernelpick.device import DeviceInfo
from kernelpick.engine.choice import Choice
from kernelpick.engine.record import SelectionRecord
from kernelpick.engine.signature import Signature, signature_key
from kernelpick.errors import ConfigError
from kernelpick.ops.gemm import HalfPrecisionOnly, torch_addmm
from kernelpick.ops.gemm_configs import decode_configs
from kernelpick.ops.gemm_templates import (
    PERSISTENT_TMA_SOURCE,
    SKINNY_GEMM,
    _output,
    _persistent_grid,
)
from kernelpick.select.template import TritonTemplate
from kernelpick.store import default_store
from kernelpick.store.deploy import tables
from kernelpick.store.sqlite import SQLiteStore
from kernelpick.store.table import export_table


def record_of(name: str) -> SelectionRecord:
    record = ops.selector(name).last_selection
    assert record is not None
    return record


def template_rows(record: SelectionRecord) -> list[str]:
    return [r.name for r in record.candidates if r.description["kind"] == "template"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_mm_is_correct_and_its_templates_pass_verification(dtype: torch.dtype) -> None:
    a, b = torch.randn(32, 48, dtype=dtype), torch.randn(48, 24, dtype=dtype)
    out = ops.mm(a, b)
    assert out.dtype == dtype and out.shape == (32, 24)
    torch.testing.assert_close(out, torch.mm(a, b))
    record = record_of("mm")
    assert len(template_rows(record)) == 2  # the interpreter's two configs; no TMA on a CPU
    assert all(r.result.ok for r in record.candidates), [
        (r.name, r.result.message) for r in record.candidates
    ]


def test_mm_with_a_transposed_b_is_another_signature_and_still_correct() -> None:
    a, weight = torch.randn(20, 40), torch.randn(36, 40)
    ops.mm(a, weight.t().contiguous())
    out = ops.mm(a, weight.t())  # the usual `x @ W.T` layout
    torch.testing.assert_close(out, a @ weight.t())
    record = record_of("mm")
    assert "stride=[1, 40]" in str(record.signature)
    assert all(r.result.ok for r in record.candidates)


@pytest.mark.parametrize("activation", [None, "relu", "gelu", "silu"])
def test_addmm_fuses_bias_and_activation(activation: str | None) -> None:
    bias, a, b = torch.randn(24), torch.randn(16, 32), torch.randn(32, 24)
    out = ops.addmm(bias, a, b, activation=activation)
    torch.testing.assert_close(out, torch_addmm(bias, a, b, activation=activation))
    record = record_of("addmm" if activation is None else f"addmm_{activation}")
    rows = template_rows(record)
    expected = "bias" if activation is None else f"bias+{activation}"
    assert rows and all(
        name.startswith(f"triton_addmm[{expected}] ") for name in rows if "_decode" not in name
    )
    assert all(name.startswith(f"triton_addmm_decode[{expected}] ") for name in rows if "_decode" in name)
    assert all(r.result.ok for r in record.candidates), [
        (r.name, r.result.message) for r in record.candidates
    ]


def test_addmm_relu_also_offers_cublaslt_fused_epilogue() -> None:
    bias, a, b = torch.randn(24), torch.randn(16, 32), torch.randn(32, 24)
    torch.testing.assert_close(ops.addmm(bias, a, b, activation="relu"), F.relu(torch.addmm(bias, a, b)))
    results = {r.name: r.result for r in record_of("addmm_relu").candidates}
    assert results["torch._addmm_activation[relu]"].ok


def _gpu_signature(dtype: torch.dtype) -> Signature:
    bias, a, b = (
        torch.randn(24, dtype=dtype),
        torch.randn(16, 32, dtype=dtype),
        torch.randn(32, 24, dtype=dtype),
    )
    gpu = DeviceInfo("cuda", 0, "NVIDIA H200", (9, 0), 50 << 20, 132)
    return dataclasses.replace(Signature.of((bias, a, b), {}), device=gpu)


def test_tanh_gelu_epilogue_is_offered_for_half_precision_on_gpus_only() -> None:
    [space] = [s for s in ops.selector("addmm_gelu").spaces if isinstance(s, HalfPrecisionOnly)]
    assert space.name == "torch._addmm_activation[gelu_tanh]"
    assert [c.name for c in space.choices_for(_gpu_signature(torch.bfloat16))] == [space.name]
    assert space.choices_for(_gpu_signature(torch.float16))
    # float32 keeps exact GELU: it resolves the approximation's difference
    assert space.choices_for(_gpu_signature(torch.float32)) == []
    bias, a, b = torch.randn(24), torch.randn(16, 32), torch.randn(32, 24)
    ops.addmm(bias, a, b, activation="gelu")
    assert space.name not in {r.name for r in record_of("addmm_gelu").candidates}  # CPU: not offered


def test_tanh_gelu_differs_from_exact_gelu_within_half_precision_tolerance_only() -> None:
    # What HalfPrecisionOnly rests on: at most 4.7e-4 apart, inside the tolerance of fp16 and bf16
    # outputs of unit RMS, outside float32's.
    x = torch.linspace(-10, 10, 200_001, dtype=torch.float64)
    difference = (F.gelu(x, approximate="tanh") - F.gelu(x)).abs()
    worst = int(difference.argmax())
    assert 4.6e-4 < float(difference[worst]) < 4.8e-4 and abs(abs(float(x[worst])) - 2.7) < 0.01
    tolerance = {dtype: tolerance_for(dtype) for dtype in (torch.float16, torch.bfloat16, torch.float32)}
    assert all(float(difference[worst]) < tolerance[dtype].atol for dtype in (torch.float16, torch.bfloat16))
    assert float(difference[worst]) > tolerance[torch.float32].atol


def test_addmm_takes_every_bias_torch_broadcasts() -> None:
    a, b = torch.randn(16, 32), torch.randn(32, 24)
    for bias in (torch.randn(16, 24), torch.randn(16, 1), torch.randn(1, 24)):
        torch.testing.assert_close(ops.addmm(bias, a, b, activation="relu"), F.relu(torch.addmm(bias, a, b)))
        assert all(r.result.ok for r in record_of("addmm_relu").candidates)


def test_addmm_refuses_an_unknown_activation() -> None:
    with pytest.raises(ConfigError, match="activation 'tanh' is not supported"):
        ops.addmm(torch.randn(4), torch.randn(4, 4), torch.randn(4, 4), activation="tanh")


def test_bmm_is_correct_and_its_template_handles_the_batch() -> None:
    a, b = torch.randn(3, 16, 40), torch.randn(3, 40, 24)
    torch.testing.assert_close(ops.bmm(a, b), torch.bmm(a, b))
    record = record_of("bmm")
    assert template_rows(record) and all(r.result.ok for r in record.candidates)


def test_bfloat16_on_a_cpu_offers_only_torch() -> None:
    a, b = torch.randn(16, 16, dtype=torch.bfloat16), torch.randn(16, 16, dtype=torch.bfloat16)
    torch.testing.assert_close(ops.mm(a, b), torch.mm(a, b))
    assert [r.name for r in record_of("mm").candidates] == ["torch.mm"]


def test_an_unknown_op_is_named() -> None:
    with pytest.raises(
        ConfigError,
        match=r"has no operation .conv.; it has mm, mm_tf32, bmm, bmm_tf32, addmm, addmm_tf32, addmm_relu",
    ):
        ops.selector("conv")


@pytest.mark.parametrize("transposed_b", [False, True])
def test_the_persistent_tma_template_runs_in_the_interpreter(transposed_b: bool) -> None:
    configs = [Config({"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "GROUP_M": 2})]
    bias, a = torch.randn(40), torch.randn(48, 32)
    b = torch.randn(40, 32).t() if transposed_b else torch.randn(32, 40)
    # the template without its sm_90 requirement: Triton's interpreter runs tensor descriptors
    interpreted = TritonTemplate(
        "interpreted_gemm_tma",
        PERSISTENT_TMA_SOURCE,
        inputs=("A", "B"),
        output=_output,
        grid=_persistent_grid,
    )
    choice = template(
        interpreted,
        configs=configs,
        arguments=("bias", "A", "B"),
        epilogue=lambda signature: ops.gemm._EPILOGUES["silu"],
        constants={"NUM_SMS": 3, "ALLOW_TF32": False},
    )
    selector = Selector(
        "tma", [extern(lambda bias, a, b: torch_addmm(bias, a, b, activation="silu"), name="torch"), choice]
    )
    selector.tune(bias, a, b)
    record = selector.last_selection
    assert record is not None
    assert all(r.result.ok for r in record.candidates), [
        (r.name, r.result.message) for r in record.candidates
    ]
    assert any(r.name != "torch" for r in record.candidates), "the TMA template was not run"  # not skipped


# Decode sizes: N and K multiples of no tile, K of no BLOCK_K and of no split (the interpreter's
# decode configs: BLOCK_K 32 unsplit and 16 in two or more slices).
DECODE_SIZES = [(1, 40, 72), (3, 37, 100), (16, 24, 130)]


def decode_choices(name: str, *inputs: torch.Tensor) -> list[Choice]:
    return [c for c in ops.selector(name).choices_for(*inputs) if "_decode" in c.name]


def assert_each_runs_like(
    choices: list[Choice], inputs: tuple[torch.Tensor, ...], expected: torch.Tensor
) -> None:
    # A template sums K products in another order than torch: in float32 an element of a sum of 130
    # standard normal products (about 11 in size) can differ by more than 1e-5, torch's default atol
    # (seen twice in eight runs of tests/ops: 1.06e-5). The tolerance grows with K as the rounding does.
    depth = inputs[-1].shape[-2]
    atol = 1e-6 * depth if expected.dtype == torch.float32 else None
    rtol = 1.3e-6 if expected.dtype == torch.float32 else None
    signature = Signature.of(inputs, {})
    for choice in choices:
        out = choice.callable_for(signature)(*inputs)
        torch.testing.assert_close(
            out, expected, atol=atol, rtol=rtol, msg=lambda text, name=choice.name: f"{name}: {text}"
        )


@pytest.mark.parametrize(("m", "n", "k"), DECODE_SIZES)
def test_mm_at_decode_sizes_offers_the_skinny_template_and_each_of_its_configs_is_correct(
    m: int, n: int, k: int
) -> None:
    a, weight = torch.randn(m, k), torch.randn(n, k)
    torch.testing.assert_close(ops.mm(a, weight.t()), a @ weight.t())
    record = record_of("mm")
    decode = [r for r in record.candidates if r.name.startswith("triton_mm_decode")]
    assert decode and all(r.result.ok for r in decode), [(r.name, r.result.message) for r in decode]
    choices = decode_choices("mm", a, weight.t())
    assert any("SPLIT_K=2" in c.name for c in choices)  # the two-pass split-K variant is among them
    gemv = [c for c in choices if "BLOCK_M=16," not in c.name]  # the form without tl.dot
    assert bool(gemv) == (m <= 4) and len(gemv) < len(choices)
    assert_each_runs_like(choices, (a, weight.t()), a @ weight.t())
    b = torch.randn(k, n)  # a row-major B reads along N: the other GEMV tiling
    assert_each_runs_like(decode_choices("mm", a, b), (a, b), a @ b)


@pytest.mark.parametrize(("m", "n", "k"), DECODE_SIZES[:2])
def test_addmm_at_decode_sizes_fuses_bias_and_relu_into_the_skinny_template(m: int, n: int, k: int) -> None:
    a, weight = torch.randn(m, k), torch.randn(n, k)
    for bias in (torch.randn(n), torch.randn(m, n)):
        expected = torch.relu(torch.addmm(bias, a, weight.t()))
        torch.testing.assert_close(ops.addmm(bias, a, weight.t(), activation="relu"), expected)
        choices = decode_choices("addmm_relu", bias, a, weight.t())
        assert choices and all(c.name.startswith("triton_addmm_decode[bias+relu]") for c in choices)
        assert any("SPLIT_K=1" in c.name for c in choices) and any("SPLIT_K=2" in c.name for c in choices)
        # split along K, the epilogue runs once, in the reduction: relu of the whole sum
        assert_each_runs_like(choices, (bias, a, weight.t()), expected)


@pytest.mark.parametrize("m", [1, 3])
def test_bmm_at_decode_sizes_offers_the_skinny_template_for_each_batch(m: int) -> None:
    a, b = torch.randn(2, m, 72), torch.randn(2, 72, 40)
    torch.testing.assert_close(ops.bmm(a, b), torch.bmm(a, b))
    choices = decode_choices("bmm", a, b)
    assert any("SPLIT_K=2" in c.name for c in choices)
    assert_each_runs_like(choices, (a, b), torch.bmm(a, b))


def test_bfloat16_on_a_cpu_gets_the_gemv_form_which_needs_no_tl_dot() -> None:
    a, weight = torch.randn(2, 72, dtype=torch.bfloat16), torch.randn(40, 72, dtype=torch.bfloat16)
    torch.testing.assert_close(ops.mm(a, weight.t()), a @ weight.t())
    decode = [r for r in record_of("mm").candidates if "_decode" in r.name]
    assert decode and all(r.result.ok and "BLOCK_M=2," in r.name for r in decode)


def test_decode_choices_are_offered_up_to_16_rows_and_each_m_is_a_selection_of_its_own() -> None:
    weight = torch.randn(40, 72)

    def offered(m: int) -> bool:
        return bool(decode_choices("mm", torch.empty(m, 72), weight.t()))

    assert offered(1) and offered(16)
    assert not offered(17) and not offered(2048)
    # A selection is keyed by exact sizes: M = 1 and M = 2048 never share a pick.
    assert signature_key((torch.empty(1, 72), weight.t()), {}, None) != signature_key(
        (torch.empty(2048, 72), weight.t()), {}, None
    )
    other = torch.randn(40, 56)  # a K no other test uses: these signatures are new to the selector
    for m in (1, 2):
        ops.mm(torch.randn(m, 56), other.t())
        assert record_of("mm").signature.inputs[0].size == (m, 56)  # a new selection for each M


class ExternLast:
    """Times the extern at 100 ms and every config at 1 ms (a sleep in the extern was not enough:
    a busy 2-core machine ran an interpreted config slower than 0.2 s)."""

    name = "scripted"

    def measure(self, candidate: Any, budget: Any, cutoff_ms: float | None = None) -> list[float]:
        candidate.run()
        return [100.0 if candidate.name == "slow_mm" else 1.0] * 5

    def measure_interleaved(self, candidates: Any, budget: Any) -> list[list[float]]:
        return [self.measure(c, budget) for c in candidates]


def test_a_tabled_decode_winner_is_not_taken_for_a_large_m(tmp_path: Path) -> None:
    # A deployment table's nearest key gives a new M the winner of the nearest tabled M, if that
    # choice is offered for it: a decode config won at M = 3 is at M = 4, not at M = 2048.
    def choices() -> list[object]:
        return [
            extern(torch.mm, name="slow_mm"),
            template(
                SKINNY_GEMM, configs=decode_configs(0, 1), constants={"ALLOW_TF32": False, "NUM_SMS": 4}
            ),
        ]

    weight = torch.randn(40, 72)
    with settings.override(cache_dir=tmp_path / "tuning-machine"):
        Selector("decode", choices(), timer=ExternLast())(torch.randn(3, 72), weight.t())
        store = default_store()
        assert isinstance(store, SQLiteStore)
        path = export_table(store.rows()).write(tmp_path / "table.json")
    assert json.loads(path.read_text())["entries"][0]["choice"]["kind"] == "template"
    tables().clear()
    kernelpick.load_table(path)
    try:
        selector = Selector("decode", choices())
        with settings.override(no_tuning=True):
            a = torch.randn(4, 72)  # nearest to the tabled M = 3, where the same configs are offered
            torch.testing.assert_close(selector(a, weight.t()), a @ weight.t())
            assert "nearest key" in selector.last_selection.note  # type: ignore[union-attr]
            with pytest.raises(TuningRequired):
                selector(torch.randn(2048, 72), weight.t())
    finally:
        tables().clear()


def template_sources(name: str, *inputs: torch.Tensor) -> dict[str, str]:
    """Each template choice's rendered source's digest, by the choice's name."""
    descriptions = [c.description() for c in ops.selector(name).choices_for(*inputs)]
    return {d["name"]: d["source_sha256"] for d in descriptions if d["kind"] == "template"}


@pytest.mark.usefixtures("either_shapes")
@pytest.mark.parametrize(("m", "n", "k"), [(1, 40, 72), (3, 37, 100), (16, 24, 130), (33, 48, 64)])
def test_with_sizes_passed_or_baked_every_template_is_correct(m: int, n: int, k: int) -> None:
    a, weight, bias = torch.randn(m, k), torch.randn(n, k), torch.randn(n)
    assert_each_runs_like(
        list(ops.selector("mm").choices_for(a, weight.t())), (a, weight.t()), a @ weight.t()
    )
    expected = torch.relu(torch.addmm(bias, a, weight.t()))
    addmm = [c for c in ops.selector("addmm_relu").choices_for(bias, a, weight.t())]
    assert_each_runs_like(addmm, (bias, a, weight.t()), expected)
    batch = torch.randn(2, m, k), torch.randn(2, k, n)
    assert_each_runs_like(list(ops.selector("bmm").choices_for(*batch)), batch, torch.bmm(*batch))


def test_by_default_one_source_serves_every_shape_of_a_config() -> None:
    # Two shapes whose N and K divide into the same tiles: each config of the GEMM template renders
    # the same source for both, so Triton compiles it once (its cache is keyed by the source and the
    # arguments' specialization: sizes divisible by 16 alike). The split-K decode template's splits
    # are sized by K: its sources differ.
    first = template_sources("mm", torch.randn(16, 64), torch.randn(128, 64).t())
    second = template_sources("mm", torch.randn(16, 128), torch.randn(64, 128).t())
    shared = {name for name in first.keys() & second.keys() if name.startswith("triton_mm ")}
    assert shared and all(first[name] == second[name] for name in shared)


@pytest.mark.usefixtures("shapes_baked")
def test_with_sizes_baked_each_shape_renders_its_own_source() -> None:
    first = template_sources("mm", torch.randn(16, 64), torch.randn(128, 64).t())
    second = template_sources("mm", torch.randn(16, 128), torch.randn(64, 128).t())
    shared = first.keys() & second.keys()
    assert shared and all(first[name] != second[name] for name in shared)


def test_fresh_selectors_are_made_within_the_block_and_the_earlier_ones_are_back_after() -> None:
    from kernelpick.ops.gemm import fresh_selectors

    before = ops.selector("mm")
    with fresh_selectors():
        within = ops.selector("mm")
        assert within is not before and ops.selector("mm") is within
    assert ops.selector("mm") is before


def test_inputs_that_do_not_fit_fail_at_once_with_torchs_error_and_store_nothing() -> None:
    # Not after compiling every choice, as a list of five failures, stored for the signature for good.
    tuned_before = len(ops.selector("mm").records)  # the selector is the process's: others tuned it
    a, b = torch.randn(4, 5), torch.randn(6, 7)
    with pytest.raises(RuntimeError, match=r"must have same reduction dim"):
        ops.mm(a, b)
    with pytest.raises(RuntimeError, match=r"must have same reduction dim"):
        ops.addmm(torch.randn(7), a, b, activation="relu")
    with pytest.raises(RuntimeError, match=r"batch2"):
        ops.bmm(torch.randn(2, 4, 5), torch.randn(3, 5, 7))
    from kernelpick.store import default_store

    assert list(default_store().rows()) == []  # type: ignore[attr-defined]
    assert len(ops.selector("mm").records) == tuned_before  # nothing was tuned


@pytest.mark.parametrize("bias", [(6,), (1, 6), (4, 1), (4, 6), ()])
def test_inputs_that_plainly_fit_are_let_through_without_torchs_meta_check(bias: tuple[int, ...]) -> None:
    a, b = torch.randn(4, 5), torch.randn(5, 6)
    for name, inputs in [("mm", (a, b)), ("addmm", (torch.randn(bias), a, b)), ("bmm", (a[None], b[None]))]:
        ops.selector(name).check(*inputs)  # torch's own operation takes these too
        getattr(torch, name)(*inputs)
    for bad in [(7,), (2, 6), (4, 2)]:  # what the plain test refuses goes to torch's
        with pytest.raises(RuntimeError):
            ops.selector("addmm").check(torch.randn(bad), a, b)


def test_a_first_call_does_not_wait_for_torchs_symbolic_shapes_to_import() -> None:
    # Torch's shape checks on meta tensors import sympy (about a second on the 2-core CPU): a first
    # call tuned in the background returned only after it.
    program = (
        "import sys, time, torch\n"
        "from kernelpick import ops\n"
        "a, b = torch.randn(4, 5), torch.randn(5, 6)\n"
        "ops.selector('mm').check(a, b)\n"
        "print('sympy' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.stdout.split() == ["False"], done.stderr[-2000:]
