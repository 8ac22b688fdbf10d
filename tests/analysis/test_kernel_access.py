"""`analyze` and `KernelAccess`: the corpus, the argument kinds users pass, wrappers, errors, memoization, speed."""

from __future__ import annotations

import gc
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import torch
import triton
import triton.language as tl
from access_corpus import BLOCK, CASES, Case, copy, f32, i32
from corpus_support import TRITON_ELEMENT_TYPES, f8, triton_typed
from torch._subclasses.fake_tensor import FakeTensorMode
from triton._utils import canonicalize_dtype, type_canonicalisation_dict
from triton.backends.compiler import GPUTarget
from triton.compiler.compiler import make_backend
from triton.tools.tensor_descriptor import TensorDescriptor

from kernelpick.analysis import KernelAccess, analyze, clear_cache, written_arguments
from kernelpick.analysis.kernel_access import analyze_uncached
from kernelpick.compile.target import default_target
from kernelpick.errors import AnalysisError, KernelpickError

REQUIRED_CONSTRUCTS = [
    "scf.for",
    "scf.while",
    "scf.if",
    "pointer chosen by branch",
    "pointer advanced in loop",
    "one yield per result",
    "tt.reduce",
    "tt.scan",
    "tt.call",
    "nested noinline helpers",
    "noinline helper only reads",
    "tl.make_block_ptr",
    "tl.advance in a loop",
    "host TensorDescriptor",
    "tl.make_tensor_descriptor",
    "tl.atomic_add",
    "tl.atomic_max",
    "tl.atomic_min",
    "tl.atomic_and",
    "tl.atomic_or",
    "tl.atomic_xor",
    "tl.atomic_xchg",
    "tl.atomic_cas",
    "tl.where on pointers",
    "ptr -> int64 -> ptr",
    "tl.cast(bitcast=True) ptr <-> int",
    "pure tl.inline_asm_elementwise",
    "impure tl.inline_asm_elementwise",
    "early return",
    "store through a loaded pointer",
]


@pytest.fixture(autouse=True)
def fresh_cache() -> None:
    clear_cache()


def test_corpus_is_large_and_covers_every_construct() -> None:
    assert len({case.kernel for case in CASES}) >= 30
    covered = {construct for case in CASES for construct in case.constructs}
    assert [c for c in REQUIRED_CONSTRUCTS if c not in covered] == []


def _check(case: Case, access: KernelAccess) -> None:
    assert set(access.mutated) == set(case.written), f"{case.name}: {access}"
    assert set(access.read) == set(case.read), f"{case.name}: {access}"
    assert access.certain == case.certain, f"{case.name}: {access.reason}"
    if case.certain:
        assert access.reason == ""
    else:
        assert case.reason in access.reason
    assert case.elsewhere in access.writes_elsewhere and bool(case.elsewhere) == bool(access.writes_elsewhere)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_corpus(case: Case) -> None:
    if not case.available:
        pytest.skip(case.unavailable_because)
    args, kwargs = case.arguments()
    _check(case, analyze(case.kernel, *args, **kwargs))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_corpus_after_ttir_passes(case: Case) -> None:
    """The same answers after Triton's TTIR passes (helpers inlined, block pointers rewritten to pointers in 3.6)."""
    if not case.available:
        pytest.skip(case.unavailable_because)
    args, kwargs = case.arguments()
    _check(case, analyze_uncached(case.kernel, args, kwargs, stage="ttir"))


def test_results_are_in_signature_order() -> None:
    from access_corpus import reductions

    access = analyze(reductions, f32(), f32(), i32(), BLOCK=BLOCK)
    assert access.arg_names == ("x_ptr", "out_ptr", "index_ptr")
    assert access.mutated == ("out_ptr", "index_ptr")


def test_real_cpu_meta_and_fake_tensors_give_the_same_answer() -> None:
    real = analyze(copy, torch.zeros(64), torch.zeros(64), 64, BLOCK=16)
    meta = analyze(copy, torch.empty(64, device="meta"), torch.empty(64, device="meta"), 64, BLOCK=16)
    with FakeTensorMode() as mode:
        x, y = mode.from_tensor(torch.zeros(64)), torch.empty(64)
        fake = analyze(copy, x, y, 64, BLOCK=16)
    assert real.mutated == meta.mutated == fake.mutated == ("y_ptr",)
    assert real.read == meta.read == fake.read == ("x_ptr",)


def test_keyword_arguments_and_positional_arguments_agree() -> None:
    by_name = analyze(copy, x_ptr=f32(), y_ptr=f32(), n=8, BLOCK=16)
    mixed = analyze(copy, f32(), y_ptr=f32(), n=8, BLOCK=16)
    assert by_name.mutated == mixed.mutated == ("y_ptr",)


def test_real_tensor_descriptors_are_accepted() -> None:
    from access_corpus import host_descriptors

    a = TensorDescriptor.from_tensor(torch.zeros(32, 32), [16, 16])
    b = TensorDescriptor.from_tensor(torch.zeros(32, 32), [16, 16])
    access = analyze(host_descriptors, a, b)
    assert (access.read, access.mutated) == (("a_desc",), ("b_desc",))


@triton.autotune(
    configs=[triton.Config({"BLOCK": 32}, num_warps=4), triton.Config({"BLOCK": 64}, num_warps=8)],
    key=["n"],
)
@triton.jit
def tuned_scale(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def heuristic_copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        tl.store(out_ptr + offs, tl.load(x_ptr + offs))
    else:
        tl.store(x_ptr + offs, tl.load(out_ptr + offs, mask=offs < n), mask=offs < n)


@triton.autotune(configs=[triton.Config({"BLOCK": 16})], key=["n"])
@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def tuned_heuristic_copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        tl.store(out_ptr + offs, tl.load(x_ptr + offs))
    else:
        tl.store(x_ptr + offs, tl.load(out_ptr + offs, mask=offs < n), mask=offs < n)


def test_triton_autotune_wrapper_uses_first_config() -> None:
    access = analyze(tuned_scale, f32(), f32(), 100)
    assert (access.kernel_name, access.read, access.mutated) == ("tuned_scale", ("x_ptr",), ("out_ptr",))
    assert "BLOCK" not in access.arg_names


def test_triton_heuristics_wrapper_computes_its_values_from_the_arguments() -> None:
    even = analyze(heuristic_copy, f32(), f32(), 64, BLOCK=16)
    odd = analyze(heuristic_copy, f32(), f32(), 65, BLOCK=16)
    assert even.mutated == ("out_ptr",)
    assert odd.mutated == ("x_ptr",)


def test_nested_autotune_and_heuristics() -> None:
    assert analyze(tuned_heuristic_copy, f32(), f32(), 64).mutated == ("out_ptr",)
    assert analyze(tuned_heuristic_copy, f32(), f32(), 65).mutated == ("x_ptr",)


def test_missing_argument_is_a_clear_error() -> None:
    with pytest.raises(AnalysisError, match=r"takes 4 arguments, got 3: missing `BLOCK`"):
        analyze(copy, f32(), f32(), 8)


def test_unknown_keyword_is_a_clear_error() -> None:
    with pytest.raises(AnalysisError, match=r"no argument `BLOK`.*its arguments are x_ptr, y_ptr, n, BLOCK"):
        analyze(copy, f32(), f32(), 8, BLOK=16)


def test_argument_of_a_type_triton_cannot_pass_is_a_clear_error() -> None:
    with pytest.raises(AnalysisError, match="cannot be specialized"):
        analyze(copy, f32(), "not a tensor", 8, BLOCK=16)


def test_a_list_argument_is_named() -> None:
    with pytest.raises(
        AnalysisError, match=r"argument `y_ptr` is a list: Triton passes tensors.*pass a tuple"
    ):
        analyze(copy, f32(), [1.0, 2.0], 8, BLOCK=16)


def test_not_a_kernel_is_a_clear_error() -> None:
    with pytest.raises(AnalysisError, match=r"expected a @triton\.jit function"):
        analyze(lambda x: x, f32())
    assert issubclass(AnalysisError, KernelpickError)


def test_kernel_that_does_not_compile_gets_a_conservative_answer() -> None:
    access = analyze(copy, f32(), f32(), 8, BLOCK=15)  # tl.arange needs a power of two
    assert not access.certain
    assert "Triton could not generate TTIR" in access.reason and "power of 2" in access.reason
    assert access.mutated == access.read == ("x_ptr", "y_ptr")
    with pytest.raises(AnalysisError, match="no TTIR"):
        access.ttir()


def test_a_kernel_decorated_under_triton_interpret_is_analyzed_like_any_other() -> None:
    from triton.runtime.interpreter import InterpretedFunction

    interpreted = InterpretedFunction(copy.fn)  # what triton.jit makes under TRITON_INTERPRET=1
    access = analyze(interpreted, f32(), f32(), 8, BLOCK=16)
    assert access == analyze(copy, f32(), f32(), 8, BLOCK=16)
    assert access.certain and access.mutated == ("y_ptr",) and access.read == ("x_ptr",)


@triton.jit
def arange_of_15(x_ptr):
    return tl.load(x_ptr + tl.arange(0, 15))


@triton.jit
def calls_a_helper_that_does_not_compile(x_ptr, y_ptr):
    tl.store(y_ptr + tl.arange(0, 16), arange_of_15(x_ptr))


def test_an_error_in_a_helper_is_reported_with_triton_s_own_message() -> None:
    access = analyze(calls_a_helper_that_does_not_compile, f32(), f32())
    assert not access.certain
    assert access.reason == (
        "Triton could not generate TTIR: arange's range must be a power of 2 "
        "(at `return tl.load(x_ptr + tl.arange(0, 15))`)"
    )


def test_failing_heuristic_gets_a_conservative_answer() -> None:
    def needs_data(args: dict[str, object]) -> int:
        raise RuntimeError("this heuristic reads tensor data, which meta tensors do not have")

    @triton.heuristics({"BLOCK": needs_data})
    @triton.jit
    def pointer_heuristic(x_ptr, y_ptr, BLOCK: tl.constexpr):
        tl.store(y_ptr, tl.load(x_ptr))

    access = analyze(pointer_heuristic, f32(), f32())
    assert not access.certain and "heuristic for `BLOCK` raised" in access.reason
    assert access.mutated == ("x_ptr", "y_ptr")


def test_answers_are_memoized_per_specialization() -> None:
    args = (f32(), f32(), 1000)
    start = time.perf_counter()
    first = analyze(copy, *args, BLOCK=32)
    first_seconds = time.perf_counter() - start
    start = time.perf_counter()
    second = analyze(copy, f32(8), f32(8), 999, BLOCK=32)  # other sizes and values, same specialization
    second_seconds = time.perf_counter() - start
    assert second is first
    assert second_seconds < first_seconds / 5
    assert analyze(copy, *args, BLOCK=64) is not first  # another constexpr value
    assert analyze(copy, f32(), f32(), 1, BLOCK=32) is not first  # Triton specializes the value 1


def test_concurrent_callers_get_one_answer() -> None:
    results: list[KernelAccess] = []

    def work() -> None:
        results.append(analyze(copy, f32(), f32(), 8, BLOCK=128))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 4
    assert all(r is results[0] for r in results)
    assert analyze(copy, f32(), f32(), 8, BLOCK=128) is results[0]


def test_written_arguments_is_the_mutated_set() -> None:
    assert written_arguments(copy, (f32(), f32(), 8), {"BLOCK": 16}) == ("y_ptr",)


def test_ttir_and_per_argument_access() -> None:
    access = analyze(copy, f32(), f32(), 8, BLOCK=16)
    assert "tt.func public @copy" in access.ttir()
    assert [access.access(n) for n in access.arg_names] == ["read", "written", "untouched"]
    with pytest.raises(AnalysisError, match="no argument `z`"):
        access.access("z")


def test_median_analysis_time_per_small_kernel() -> None:
    """Uncached, TTIR generation included; the target is 10 ms, the bound generous so that a busy CI passes."""
    cases = [c for c in CASES if c.available][:20]
    for case in cases[:3]:  # warm Triton's own caches (imports, codegen tables) once
        args, kwargs = case.arguments()
        analyze_uncached(case.kernel, args, kwargs)
    times = []
    for case in cases:
        args, kwargs = case.arguments()
        start = time.perf_counter()
        analyze_uncached(case.kernel, args, kwargs)
        times.append(time.perf_counter() - start)
    median_ms = statistics.median(times) * 1e3
    print(f"median analysis time over {len(cases)} kernels: {median_ms:.1f} ms (triton {triton.__version__})")
    assert median_ms < 100


def _live_ir_objects() -> int:
    from triton._C.libtriton import ir

    kinds = {ir.module, ir.context, ir.operation, ir.value, ir.block, ir.region, ir.function}
    gc.collect()
    return sum(type(o) in kinds for o in gc.get_objects())


def test_no_triton_ir_object_outlives_the_analysis() -> None:
    """IR objects kept past the analysis make Triton print nanobind leak warnings at exit: none may survive."""
    before = _live_ir_objects()
    answers = []
    for case in CASES[:12]:
        args, kwargs = case.arguments()
        answers.append(analyze(case.kernel, *args, **kwargs))
    assert "tt.func" in answers[0].ttir()
    assert _live_ir_objects() <= before


def _raises(error: Exception) -> Callable[..., Any]:
    def step(*args: object, **kwargs: object) -> Any:
        raise error

    return step


@pytest.mark.parametrize(
    ("step", "reason"),
    [
        ("lower", "Triton could not generate TTIR: RuntimeError: defect"),
        ("convert_module", "the TTIR could not be read: RuntimeError: defect"),
        ("ttir_parameter_names", "the TTIR's parameters could not be matched to the kernel's arguments: "),
        ("find_accesses", "the analysis failed: RuntimeError: defect"),
    ],
)
def test_a_failure_in_any_step_gives_a_conservative_answer_naming_it(
    step: str, reason: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import kernelpick.analysis.kernel_access as module
    from kernelpick.compile.target import Specialization

    owner: Any = Specialization if step == "lower" else module
    monkeypatch.setattr(owner, step, _raises(RuntimeError("defect")))
    access = analyze_uncached(copy, (f32(), f32(), 8), {"BLOCK": 16})
    assert not access.certain
    assert access.reason.startswith(reason) and access.reason.endswith("RuntimeError: defect")
    assert access.mutated == access.read == ("x_ptr", "y_ptr")


def test_a_long_failure_is_quoted_short(monkeypatch: pytest.MonkeyPatch) -> None:
    import kernelpick.analysis.kernel_access as module

    monkeypatch.setattr(module, "find_accesses", _raises(ValueError("x" * 5000)))
    access = analyze_uncached(copy, (f32(), f32(), 8), {"BLOCK": 16})
    assert access.reason.startswith("the analysis failed: ValueError: xxx") and len(access.reason) < 400


def test_unexpected_ttir_signature_gives_a_conservative_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    import kernelpick.analysis.kernel_access as module

    monkeypatch.setattr(module, "ttir_parameter_names", lambda spec: ["x_ptr"])
    access = analyze_uncached(copy, (f32(), f32(), 8), {"BLOCK": 16})
    assert not access.certain and "has 3 parameters where 1 were expected" in access.reason


# Element types. Triton names them as `canonicalize_dtype` does (fp8e4nv for torch.float8_e4m3fn);
# the fp8 types a target lacks (NVIDIA GPUs lack AMD's fnuz ones) make code generation fail.


def _target_compiles(triton_name: str) -> bool:
    options = make_backend(default_target()).parse_options({})
    return not triton_name.startswith("fp8") or triton_name in options.supported_fp8_dtypes


#: Every torch dtype Triton takes as a pointer's element type.
TORCH_DTYPES = sorted(
    {
        d
        for d in vars(torch).values()
        if isinstance(d, torch.dtype) and str(d).split(".")[-1] in type_canonicalisation_dict
    },
    key=str,
)
TORCH_FP8_DTYPES = [d for d in TORCH_DTYPES if canonicalize_dtype(d).startswith("fp8")]


def _check_copy(access: KernelAccess, triton_name: str) -> None:
    if _target_compiles(triton_name):
        assert access.certain, access.reason
        assert (access.read, access.mutated) == (("x_ptr",), ("y_ptr",))
    else:
        assert not access.certain and access.mutated == access.read == ("x_ptr", "y_ptr")
        assert access.reason.startswith("Triton could not generate TTIR") and triton_name in access.reason


def test_torch_s_fp8_dtypes_are_among_those_analyzed() -> None:
    assert {torch.float8_e4m3fn, torch.float8_e5m2} <= set(TORCH_FP8_DTYPES)


@pytest.mark.parametrize("dtype", TORCH_DTYPES, ids=str)
def test_a_kernel_over_any_torch_dtype_triton_takes_is_analyzed(dtype: torch.dtype) -> None:
    tensor = torch.empty(64, dtype=dtype, device="meta")
    _check_copy(analyze(copy, tensor, tensor, 64, BLOCK=16), canonicalize_dtype(dtype))


@pytest.mark.parametrize("dtype", TRITON_ELEMENT_TYPES, ids=str)
def test_a_kernel_over_any_triton_element_type_is_analyzed(dtype: tl.dtype) -> None:
    """Through `triton.reinterpret`, fp8 types torch has no dtype for (fp8e4b15) included."""
    _check_copy(analyze(copy, triton_typed(dtype), triton_typed(dtype), 64, BLOCK=16), str(dtype))


@triton.jit
def dequantize(q_ptr, scale_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """fp8 to bf16 with a per-tensor scale, as fp8 GEMM epilogues and dequantization kernels write it."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    values = tl.load(q_ptr + offs, mask=mask).to(tl.float32) * tl.load(scale_ptr)
    tl.store(out_ptr + offs, values.to(tl.bfloat16), mask=mask)


@triton.jit
def scale_in_place(x_ptr, scale_ptr, n, BLOCK: tl.constexpr):
    """x *= scale in x's own (fp8) type: tuned on the real x, every benchmark run would scale it again."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    values = tl.load(x_ptr + offs, mask=mask).to(tl.float32) * tl.load(scale_ptr)
    tl.store(x_ptr + offs, values.to(x_ptr.dtype.element_ty), mask=mask)


@pytest.mark.parametrize("dtype", TORCH_FP8_DTYPES, ids=str)
def test_fp8_kernels_get_certain_answers_where_the_target_compiles_fp8(dtype: torch.dtype) -> None:
    q, scale, out = torch.empty(64, dtype=dtype), torch.ones(1), torch.empty(64, dtype=torch.bfloat16)
    converted = analyze(dequantize, q, scale, out, 64, BLOCK=16)
    in_place = analyze(scale_in_place, q, scale, 64, BLOCK=16)
    if not _target_compiles(canonicalize_dtype(dtype)):
        assert not converted.certain and not in_place.certain
        assert canonicalize_dtype(dtype) in converted.reason
        return
    assert converted.certain and in_place.certain
    assert (converted.read, converted.mutated) == (("q_ptr", "scale_ptr"), ("out_ptr",))
    assert (in_place.read, in_place.mutated) == (("x_ptr", "scale_ptr"), ("x_ptr",))


def test_amd_s_fp8_types_get_certain_answers_on_an_amd_target(monkeypatch: pytest.MonkeyPatch) -> None:
    import kernelpick.compile.target as target

    monkeypatch.setattr(target, "default_target", lambda: GPUTarget("hip", "gfx942", 64))
    for dtype in (torch.float8_e4m3fnuz, torch.float8_e5m2fnuz):
        q = torch.empty(64, dtype=dtype, device="meta")
        access = analyze_uncached(
            dequantize, (q, f32(1), torch.empty(64, dtype=torch.bfloat16), 64), {"BLOCK": 16}
        )
        assert access.certain and (access.read, access.mutated) == (("q_ptr", "scale_ptr"), ("out_ptr",))


@pytest.mark.parametrize("dtype", [t for t in TRITON_ELEMENT_TYPES if str(t).startswith("fp8")], ids=str)
def test_fp8_conversion_of_every_triton_fp8_type_is_analyzed(dtype: tl.dtype) -> None:
    access = analyze(
        dequantize, triton_typed(dtype), f32(1), torch.empty(64, dtype=torch.bfloat16), 64, BLOCK=16
    )
    if _target_compiles(str(dtype)):
        assert access.certain and (access.read, access.mutated) == (("q_ptr", "scale_ptr"), ("out_ptr",))
    else:
        assert not access.certain and str(dtype) in access.reason


def test_a_triton_type_that_asks_its_ir_value_for_something_gives_a_conservative_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As an fp8 type once asked a stand-in IR builder for `options.supported_fp8_dtypes`: no exception escapes."""

    real = tl.pointer_type._unflatten_ir

    def asks_its_value(self: tl.dtype, handles: Any, cursor: int) -> tuple[Any, int]:
        handles[cursor].get_type()  # as a later release might: code generation gives it a real IR value
        return real(self, handles, cursor)

    monkeypatch.setattr(tl.pointer_type, "_unflatten_ir", asks_its_value)
    access = analyze_uncached(copy, (f8(), f8(), 8), {"BLOCK": 16})
    assert not access.certain and access.mutated == access.read == ("x_ptr", "y_ptr")
    assert access.reason == (
        "the TTIR's parameters could not be matched to the kernel's arguments: "
        "AttributeError: 'NoneType' object has no attribute 'get_type'"
    )


def test_code_generation_asking_the_builder_for_an_unknown_attribute_gives_a_conservative_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_to_ir = tl.dtype.to_ir

    def asks_more(self: tl.dtype, builder: Any) -> Any:
        if self.is_fp8():
            return builder.get_fp8_type_of_a_later_release()
        return real_to_ir(self, builder)

    monkeypatch.setattr(tl.dtype, "to_ir", asks_more)
    access = analyze_uncached(copy, (f8(), f8(), 8), {"BLOCK": 16})
    assert not access.certain and access.mutated == access.read == ("x_ptr", "y_ptr")
    assert access.reason.startswith("Triton could not generate TTIR: ")
    assert "get_fp8_type_of_a_later_release" in access.reason


# What the tuner relies on: `kernelpick.autotune` copies what the analysis says is written.


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2], ids=str)
def test_autotune_of_an_fp8_kernel_runs_in_the_interpreter(dtype: torch.dtype) -> None:
    import kernelpick
    from kernelpick.store import MemoryStore

    space = [triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 64})]
    tuned = kernelpick.autotune(space, key=["n"], store=MemoryStore())(scale_in_place)
    x, scale = torch.linspace(-8, 8, 200).to(dtype), torch.tensor([2.0])
    assert tuned.accesses((x, scale, 200), {}) == (["x_ptr"], ["x_ptr", "scale_ptr"])
    expected = (x.float() * 2).to(dtype)
    tuned[lambda meta: (triton.cdiv(200, meta["BLOCK"]),)](x, scale, 200)
    assert len(tuned.last_tuning.results) == 2
    assert torch.equal(x.view(torch.uint8), expected.view(torch.uint8))  # scaled once, not once per run
