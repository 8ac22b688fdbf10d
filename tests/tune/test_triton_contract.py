"""The drop-in contract: every test here runs against `triton.autotune` and `kernelpick.autotune` alike.

A user switches by changing one import, so whatever `triton.autotune` does that these tests check,
`kernelpick.autotune` must do too. Kernels are defined inside the tests, the way Triton's own
autotuner tests define them. Without a GPU, the `triton` side runs in Triton's interpreter
(`TRITON_INTERPRET`, which `triton.autotune` needs on a CPU) and is timed with a wall-clock
`do_bench`; the `kernelpick` side runs as a kernelpick user's code runs on a CPU, with no setting.
Where the installed Triton lacks a behaviour (an older release), its side of that test is skipped
with the reason; kernelpick's side always runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import torch
import triton
import triton.language as tl
from triton.runtime.errors import OutOfResources

import kernelpick
from kernelpick.compile.launch import interpreting
from kernelpick.store import MemoryStore

GPU = torch.cuda.is_available()
TRITON = tuple(int(part) for part in triton.__version__.split(".")[:2])


def wall_clock_do_bench(kernel_call: Callable[[], object], quantiles: Any) -> list[float]:
    """Triton's `do_bench(kernel_call, quantiles)` on the CPU clock: what a CPU-only Triton user passes."""
    times = []
    for _ in range(3):
        start = time.perf_counter()
        kernel_call()
        times.append((time.perf_counter() - start) * 1e3)
    return [sorted(times)[1]] * (len(quantiles) if quantiles else 1)


def quick_do_bench(kernel_call: Callable[[], object], quantiles: Any) -> Any:
    """Triton's tests' `do_bench`: a very short timing on a GPU, the wall clock on a CPU."""
    if GPU:
        return triton.testing.do_bench(kernel_call, quantiles=quantiles, warmup=1, rep=1)
    return wall_clock_do_bench(kernel_call, quantiles)


@dataclass(frozen=True)
class Tuner:
    """One side of the contract: its name, its decorator, and the device its tests run on."""

    name: str
    autotune: Callable[..., Any]
    device: str

    def needs(self, reason: str, *, when: bool) -> None:
        """Skip Triton's side where the installed Triton lacks a behaviour (never kernelpick's)."""
        if self.name == "triton" and when:
            pytest.skip(f"triton.autotune {triton.__version__}: {reason}")


def _kernelpick_autotune(*args: Any, **kwargs: Any) -> Any:
    # A store of its own per decoration: each test starts from nothing, as Triton's cache-less runs do.
    return kernelpick.autotune(*args, store=MemoryStore(), **kwargs)


@pytest.fixture(params=["triton", "kernelpick"])
def tuner(request: pytest.FixtureRequest) -> Iterator[Tuner]:
    device = "cuda" if GPU else "cpu"
    if request.param == "kernelpick":
        yield Tuner("kernelpick", _kernelpick_autotune, device)
        return
    with triton.knobs.runtime.scope(), triton.knobs.autotuning.scope():
        triton.knobs.runtime.interpret = not GPU
        if GPU:
            yield Tuner("triton", triton.autotune, device)
            return
        # What TRITON_INTERPRET=1 at start-up also does: Triton's own @triton.jit helpers
        # (tl.cdiv, ...), decorated before the knob was set, run interpreted too.
        with interpreting():
            yield Tuner("triton", triton.autotune, device)


@pytest.fixture
def knobs() -> Iterator[Any]:
    """`triton.knobs.autotuning`, restored after the test."""
    with triton.knobs.autotuning.scope():
        yield triton.knobs.autotuning


def copy_kernel(tuner: Tuner, **autotune: Any) -> Any:
    """`dst[i] = src[i]` in blocks of BLOCK_SIZE, tuned over two block sizes (a fresh kernel per call)."""
    configs = autotune.pop("configs", [triton.Config({"BLOCK_SIZE": 32}), triton.Config({"BLOCK_SIZE": 128})])

    @tuner.autotune(configs=configs, key=["N"], **autotune)
    @triton.jit
    def _kernel(dst, src, N, BLOCK_SIZE: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        x = tl.load(src + offsets, mask=offsets < N)
        tl.store(dst + offsets, x, mask=offsets < N)

    return _kernel


def grid_for(n: int) -> Callable[[dict[str, Any]], tuple[int]]:
    return lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)


# -- calling ------------------------------------------------------------------------------------


@pytest.mark.parametrize("use_cuda_graph", [False, True])
def test_arguments_by_position_and_by_name_in_any_order(tuner: Tuner, use_cuda_graph: bool) -> None:
    if use_cuda_graph and not GPU:
        pytest.skip("CUDA graphs need a GPU")
    M, N = 1024, 16
    src = torch.randn(M * N, device=tuner.device)
    dst = torch.empty(M * N, device=tuner.device)
    configs = [triton.Config(kwargs={"BLOCK_SIZE_M": 32}), triton.Config(kwargs={"BLOCK_SIZE_M": 128})]

    def bench(kernel_call: Callable[[], object], quantiles: Any) -> Any:
        if use_cuda_graph:
            return triton.testing.do_bench_cudagraph(kernel_call, quantiles=quantiles)
        return quick_do_bench(kernel_call, quantiles)

    @tuner.autotune(configs=configs, key=["M"], do_bench=bench)
    @triton.jit
    def _kernel(dst, src, stride_m: tl.constexpr, M, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_M: tl.constexpr):
        offsets_m = tl.program_id(0) * stride_m + tl.arange(0, BLOCK_SIZE_M)
        offsets_n = tl.arange(0, BLOCK_SIZE_N)
        x = tl.load(src + offsets_m[:, None] * BLOCK_SIZE_N + offsets_n[None, :])
        tl.store(dst + offsets_m[:, None] * BLOCK_SIZE_N + offsets_n[None, :], x)

    grid = lambda meta: (triton.cdiv(N, meta["BLOCK_SIZE_M"]),)  # noqa: E731
    _kernel[grid](dst, src, N, M, N)
    _kernel[grid](dst=dst, src=src, M=M // 2, stride_m=N, BLOCK_SIZE_N=N)
    assert len(_kernel.cache) == 2


def test_a_dtype_argument_in_the_key_with_cache_results(tuner: Tuner) -> None:
    # Triton 3.6 writes its cache file as JSON, which has no type for tl.float32 (on a GPU; the
    # interpreter caches nothing).
    tuner.needs("cache_results fails on a dtype in the key", when=GPU and TRITON < (3, 7))
    M, N = 1024, 16
    src = torch.randn(M * N, device=tuner.device)
    dst = torch.empty(M * N, device=tuner.device)
    configs = [triton.Config(kwargs={"BLOCK_SIZE_M": 32}), triton.Config(kwargs={"BLOCK_SIZE_M": 128})]

    @tuner.autotune(configs=configs, key=["DTYPE"], cache_results=True, do_bench=quick_do_bench)
    @triton.jit
    def _kernel(
        dst,
        src,
        stride_m: tl.constexpr,
        DTYPE: tl.constexpr,
        BLOCK_SIZE_N: tl.constexpr,
        BLOCK_SIZE_M: tl.constexpr,
    ):
        offsets_m = tl.program_id(0) * stride_m + tl.arange(0, BLOCK_SIZE_M)
        offsets_n = tl.arange(0, BLOCK_SIZE_N)
        x = tl.load(src + offsets_m[:, None] * BLOCK_SIZE_N + offsets_n[None, :])
        x = x.to(DTYPE)
        tl.store(dst + offsets_m[:, None] * BLOCK_SIZE_N + offsets_n[None, :], x)

    grid = lambda meta: (triton.cdiv(N, meta["BLOCK_SIZE_M"]),)  # noqa: E731
    _kernel[grid](dst, src, N, tl.float32, N)
    assert len(_kernel.cache) == 1


def test_the_default_benchmarker(tuner: Tuner) -> None:
    tuner.needs("its default benchmarker needs a GPU driver", when=not GPU)
    N = 1024
    src = torch.randn(N, device=tuner.device)
    dst = torch.empty(N, device=tuner.device)
    kernel = copy_kernel(tuner)
    kernel[grid_for(N)](dst, src, N)
    assert len(kernel.cache) == 1
    torch.testing.assert_close(dst, src)


def test_a_new_key_value_tunes_again_and_a_seen_one_does_not(tuner: Tuner) -> None:
    calls: list[int] = []

    def bench(kernel_call: Callable[[], object], quantiles: Any) -> Any:
        calls.append(1)
        return quick_do_bench(kernel_call, quantiles)

    kernel = copy_kernel(tuner, do_bench=bench)
    src = torch.randn(256, device=tuner.device)
    dst = torch.empty(256, device=tuner.device)
    kernel[grid_for(256)](dst, src, 256)
    tuned_once = len(calls)
    kernel[grid_for(256)](dst, src, 256)
    assert len(calls) == tuned_once == 2  # one timing per config
    kernel[grid_for(200)](dst, src, 200)
    assert len(calls) == 4
    assert len(kernel.cache) == 2
    torch.testing.assert_close(dst[:200], src[:200])


def test_best_config_is_one_of_the_configs_given(tuner: Tuner) -> None:
    configs = [triton.Config({"BLOCK_SIZE": 32}), triton.Config({"BLOCK_SIZE": 128})]
    kernel = copy_kernel(tuner, configs=configs, do_bench=quick_do_bench)
    src = torch.randn(1024, device=tuner.device)
    dst = torch.empty(1024, device=tuner.device)
    kernel[grid_for(1024)](dst, src, 1024)
    assert kernel.best_config in configs
    assert kernel.best_config == min(kernel.configs_timings, key=kernel.configs_timings.get)
    assert set(kernel.configs_timings) == set(configs)
    assert all(kernel.configs_timings[config] is not None for config in configs)
    torch.testing.assert_close(dst, src)


# -- restoring what the benchmarks write ---------------------------------------------------------


@pytest.mark.parametrize("by_name", [False, True])
def test_restore_value(tuner: Tuner, by_name: bool) -> None:
    N = 1024
    src = torch.zeros(N, device=tuner.device)
    configs = [triton.Config(kwargs={"BLOCK_SIZE": 32}), triton.Config(kwargs={"BLOCK_SIZE": 128})]

    @tuner.autotune(configs=configs, key=["N"], restore_value=["src"], do_bench=quick_do_bench)
    @triton.jit
    def _kernel(src, N, BLOCK_SIZE: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        x = tl.load(src + offsets, mask=offsets < N) + 1
        tl.store(src + offsets, x, mask=offsets < N)

    if by_name:
        _kernel[grid_for(N)](src=src, N=N)
    else:
        _kernel[grid_for(N)](src, N)
    torch.testing.assert_close(src, torch.ones_like(src))


def fill_kernel(tuner: Tuner, **autotune: Any) -> Any:
    """Stores ones into `src`, or into `dst` when `src` is None (an optional argument, as kernels
    with an extra buffer used only sometimes take it)."""
    configs = [triton.Config(kwargs={"BLOCK_SIZE": 32}), triton.Config(kwargs={"BLOCK_SIZE": 128})]

    @tuner.autotune(configs=configs, key=["N"], do_bench=quick_do_bench, **autotune)
    @triton.jit
    def _kernel(src, dst, N, BLOCK_SIZE: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = offsets < N
        if src is not None:
            tl.store(src + offsets, tl.full([BLOCK_SIZE], 1, dtype=src.dtype.element_ty), mask=mask)
        else:
            tl.store(dst + offsets, tl.full([BLOCK_SIZE], 1, dtype=dst.dtype.element_ty), mask=mask)

    return _kernel


@pytest.mark.parametrize("src_is_none", [False, True])
@pytest.mark.parametrize("by_name", [False, True])
def test_reset_to_zero_with_an_optional_argument(tuner: Tuner, by_name: bool, src_is_none: bool) -> None:
    tuner.needs("its default pre_hook zeroes None", when=src_is_none and TRITON < (3, 7))
    N = 1024
    dst = torch.full((N,), 2.0, device=tuner.device)
    src = None if src_is_none else dst
    kernel = fill_kernel(tuner, reset_to_zero=["src"])
    if by_name:
        kernel[grid_for(N)](src=src, dst=dst, N=N)
    else:
        kernel[grid_for(N)](src, dst, N)
    torch.testing.assert_close(dst, torch.ones_like(dst))


@pytest.mark.parametrize("by_name", [False, True])
def test_restore_value_with_an_optional_argument(tuner: Tuner, by_name: bool) -> None:
    tuner.needs("its default pre_hook clones None", when=TRITON < (3, 7))
    N = 1024
    dst = torch.full((N,), 2.0, device=tuner.device)
    kernel = fill_kernel(tuner, restore_value=["src"])
    if by_name:
        kernel[grid_for(N)](src=None, dst=dst, N=N)
    else:
        kernel[grid_for(N)](None, dst, N)
    torch.testing.assert_close(dst, torch.ones_like(dst))


# -- hooks --------------------------------------------------------------------------------------


def test_every_pre_hook_is_paired_with_one_post_hook(tuner: Tuner) -> None:
    # On a GPU the first config asks for 64 stages of a 4096-float block: more shared memory than
    # any GPU has, so it fails, and the post_hook is told so.
    N = 4096
    src = torch.zeros(N, device=tuner.device)
    configs = [triton.Config(kwargs={"BLOCK_SIZE": 4096}), triton.Config(kwargs={"BLOCK_SIZE": 32})]
    values = {"counter": 0, "exceptions": 0, "post_hooks": 0}

    def pre_hook(nargs: dict[str, Any], reset_only: bool = False) -> None:
        # Triton calls it once more after tuning, with reset_only=True and no post_hook: it resets
        # the real arguments, which kernelpick's benchmarks never touched.
        if not reset_only:
            values["counter"] += 1

    def post_hook(*args: Any, exception: BaseException | None) -> None:
        values["counter"] -= 1
        values["post_hooks"] += 1
        if exception is not None:
            values["exceptions"] += 1
        assert values["counter"] == 0

    @tuner.autotune(
        configs=configs, key=["N"], do_bench=quick_do_bench, pre_hook=pre_hook, post_hook=post_hook
    )
    @triton.heuristics({"N_STAGES": lambda nargs: 64 if nargs["N"] == 4096 and GPU else 2})
    @triton.jit
    def _kernel(src, N, N_STAGES: tl.constexpr, BLOCK_SIZE: tl.constexpr):
        offsets = tl.arange(0, BLOCK_SIZE)
        max_iters = tl.cdiv(N, BLOCK_SIZE)
        for _ in tl.range(max_iters, num_stages=N_STAGES):
            x = tl.load(src + offsets, mask=offsets < N)
            tl.store(src + offsets, x, mask=offsets < N)
            offsets += BLOCK_SIZE

    _kernel[(1,)](src, N)
    assert values["counter"] == 0
    assert values["post_hooks"] > 0
    assert (values["exceptions"] > 0) is GPU
    assert _kernel.best_config == configs[1] or not GPU


def test_a_resource_failure_reaches_the_post_hook(tuner: Tuner) -> None:
    if not GPU:
        pytest.skip("thread limits exist on a GPU only")
    x = torch.empty(1024, device=tuner.device, dtype=torch.float32)
    y = torch.empty_like(x)
    output = torch.empty_like(x)
    configs = [triton.Config({}, num_warps=128), triton.Config({}, num_warps=4)]
    seen: list[BaseException] = []

    def post_hook(*args: Any, exception: BaseException | None) -> None:
        if exception is not None:
            seen.append(exception)

    @tuner.autotune(configs=configs, key=["BLOCK_SIZE"], do_bench=quick_do_bench, post_hook=post_hook)
    @triton.jit
    def add_kernel(x_ptr, y_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = offsets < n_elements
        tl.store(
            output_ptr + offsets,
            tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask),
            mask=mask,
        )

    add_kernel[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK_SIZE"]),)](
        x, y, output, x.numel(), BLOCK_SIZE=128
    )
    warp_size = triton.runtime.driver.active.get_current_target().warp_size
    assert seen and f"out of resource: threads, Required: {128 * warp_size}" in str(seen[0])
    assert isinstance(seen[0], OutOfResources)


def test_a_config_pre_hook_runs_before_each_launch_of_its_config(tuner: Tuner) -> None:
    N = 256
    seen: list[int] = []

    def zero_dst(nargs: dict[str, Any]) -> None:
        seen.append(nargs["BLOCK_SIZE"])
        nargs["dst"].zero_()

    configs = [
        triton.Config({"BLOCK_SIZE": 32}, pre_hook=zero_dst),
        triton.Config({"BLOCK_SIZE": 128}, pre_hook=zero_dst),
    ]
    kernel = copy_kernel(tuner, configs=configs, do_bench=quick_do_bench)
    src = torch.randn(N, device=tuner.device)
    dst = torch.empty(N, device=tuner.device)
    kernel[grid_for(N)](dst, src, N)
    torch.testing.assert_close(dst, src)
    assert set(seen) == {32, 128}
    assert seen[-1] == kernel.best_config.kwargs["BLOCK_SIZE"]  # the real launch's hook comes last


# -- pruning ------------------------------------------------------------------------------------


@pytest.mark.parametrize("with_perf_model", [False, True])
def test_prune_configs_by(tuner: Tuner, with_perf_model: bool) -> None:
    N = 1024
    src = torch.randn(N, device=tuner.device)
    dst = torch.empty(N, device=tuner.device)
    records: dict[str, bool] = {}

    def early_config_prune(configs: Any, named_args: dict[str, Any], **kwargs: Any) -> Any:
        records["run_early_config_prune"] = True
        if kwargs.get("N") == 1024:
            records["capture_kwargs"] = True
        if set(named_args) == {"dst", "src"}:  # the call's positional arguments, by name
            records["capture_named_args"] = True
        return [configs[0]]

    def perf_model(*args: Any, **kwargs: Any) -> float:
        records["run_perf_model"] = True
        return float(kwargs["BLOCK_SIZE"])

    prune: dict[str, Any] = (
        {"perf_model": perf_model, "top_k": 1}
        if with_perf_model
        else {"early_config_prune": early_config_prune}
    )
    kernel = copy_kernel(tuner, prune_configs_by=prune, do_bench=quick_do_bench)
    kernel[grid_for(N)](dst, src, N=N)
    torch.testing.assert_close(src, dst)
    if with_perf_model:
        assert records == {"run_perf_model": True}
    else:
        assert records == {"run_early_config_prune": True, "capture_kwargs": True, "capture_named_args": True}


def test_a_fractional_top_k_keeps_at_least_one_config(tuner: Tuner) -> None:
    tuner.needs("a fraction of two configs keeps none", when=TRITON < (3, 7))
    N = 1024
    src = torch.randn(N, device=tuner.device)
    dst = torch.empty(N, device=tuner.device)

    def perf_model(*args: Any, **kwargs: Any) -> float:
        return float(kwargs["BLOCK_SIZE"])

    kernel = copy_kernel(
        tuner, prune_configs_by={"perf_model": perf_model, "top_k": 0.3}, do_bench=quick_do_bench
    )
    kernel[grid_for(N)](dst, src, N=N)
    torch.testing.assert_close(src, dst)


def test_a_fractional_top_k_counts_what_early_pruning_kept(tuner: Tuner) -> None:
    tuner.needs("its top_k fraction counts every config", when=TRITON < (3, 7))
    configs = [triton.Config({"BLOCK_SIZE": 2**b}) for b in range(4, 14)]
    estimated: list[int] = []
    timed: list[int] = []

    def bench(kernel_call: Callable[[], object], quantiles: Any) -> Any:
        result = quick_do_bench(kernel_call, quantiles)
        return result

    def early_config_prune(configs: Any, named_args: dict[str, Any], **kwargs: Any) -> Any:
        return configs[:6]

    def perf_model(*args: Any, **kwargs: Any) -> float:
        estimated.append(kwargs["BLOCK_SIZE"])
        return float(kwargs["BLOCK_SIZE"])

    def pre_hook(nargs: dict[str, Any], reset_only: bool = False) -> None:
        if not reset_only:
            timed.append(nargs["BLOCK_SIZE"])

    kernel = copy_kernel(
        tuner,
        configs=configs,
        do_bench=bench,
        pre_hook=pre_hook,
        prune_configs_by={"early_config_prune": early_config_prune, "perf_model": perf_model, "top_k": 0.5},
    )
    src = torch.randn(4096, device=tuner.device)
    dst = torch.empty(4096, device=tuner.device)
    kernel[grid_for(4096)](dst, src, 4096)
    assert estimated == [16, 32, 64, 128, 256, 512]
    assert set(timed) == {16, 32, 64}
    torch.testing.assert_close(src, dst)


@pytest.mark.parametrize("prune_kind", ["early_config_prune", "perf_model"])
def test_pruned_to_one_config_nothing_is_benchmarked(tuner: Tuner, knobs: Any, prune_kind: str) -> None:
    tuner.needs("it benchmarks a single config left by pruning", when=TRITON < (3, 7))
    N = 1024
    src = torch.randn(N, device=tuner.device)
    dst = torch.empty(N, device=tuner.device)
    configs = [triton.Config(kwargs={"BLOCK_SIZE": 32}), triton.Config(kwargs={"BLOCK_SIZE": 128})]
    heard: list[dict[str, Any]] = []
    if hasattr(knobs, "listener"):
        knobs.listener = lambda **kwargs: heard.append(kwargs)

    def do_not_bench(kernel_call: Callable[[], object], quantiles: Any) -> Any:
        raise AssertionError("a single config left by pruning must not be benchmarked")

    if prune_kind == "early_config_prune":
        prune: dict[str, Any] = {"early_config_prune": lambda configs, named_args, **kwargs: [configs[1]]}
    else:
        prune = {"perf_model": lambda **kwargs: 0 if kwargs["BLOCK_SIZE"] == 128 else 1, "top_k": 1}
    kernel = copy_kernel(tuner, configs=configs, prune_configs_by=prune, do_bench=do_not_bench)
    kernel[grid_for(N)](dst, src, N=N)
    torch.testing.assert_close(src, dst)
    assert kernel.best_config == configs[1]
    assert heard == []


def test_pruned_to_no_config_raises_tritons_error(tuner: Tuner) -> None:
    tuner.needs("it fails with an unrelated error when pruning leaves nothing", when=TRITON < (3, 7))
    N = 1024
    src = torch.randn(N, device=tuner.device)
    dst = torch.empty(N, device=tuner.device)
    kernel = copy_kernel(
        tuner, prune_configs_by={"early_config_prune": lambda configs, named_args, **kwargs: []}
    )
    with pytest.raises(triton.TritonError) as error:
        kernel[grid_for(N)](dst, src, N=N)
    assert str(error.value) == (  # Triton's own test checks it word for word
        "Autotuner error: No valid autotuner configs after pruning. "
        "`early_config_prune` should return at least one config."
    )


# -- heuristics ---------------------------------------------------------------------------------


def test_heuristics_under_the_tuner(tuner: Tuner) -> None:
    configs = [triton.Config({}, num_warps=1), triton.Config({}, num_warps=4)]

    @tuner.autotune(configs=configs, key=["N"], do_bench=quick_do_bench)
    @triton.heuristics({"BLOCK_SIZE": lambda nargs: triton.next_power_of_2(nargs["N"])})
    @triton.jit
    def _kernel(dst, src, N, BLOCK_SIZE: tl.constexpr):
        offsets = tl.arange(0, BLOCK_SIZE)
        tl.store(dst + offsets, tl.load(src + offsets, mask=offsets < N) * 2, mask=offsets < N)

    src = torch.randn(100, device=tuner.device)
    dst = torch.empty(100, device=tuner.device)
    _kernel[(1,)](dst, src, 100)
    torch.testing.assert_close(dst, src * 2)


def test_heuristics_over_the_tuner(tuner: Tuner) -> None:
    configs = [triton.Config({"BLOCK_SIZE": 32}), triton.Config({"BLOCK_SIZE": 128})]

    @triton.heuristics({"SCALE": lambda nargs: 3.0 if nargs["N"] > 64 else 1.0})
    @tuner.autotune(configs=configs, key=["N"], do_bench=quick_do_bench)
    @triton.jit
    def _kernel(dst, src, N, SCALE: tl.constexpr, BLOCK_SIZE: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        tl.store(dst + offsets, tl.load(src + offsets, mask=offsets < N) * SCALE, mask=offsets < N)

    src = torch.randn(1000, device=tuner.device)
    dst = torch.empty(1000, device=tuner.device)
    _kernel[grid_for(1000)](dst, src, 1000)
    torch.testing.assert_close(dst, src * 3)


# -- errors -------------------------------------------------------------------------------------


def test_an_unknown_key_name_is_refused_at_decoration(tuner: Tuner) -> None:
    tuner.needs("it ignores unknown names", when=TRITON < (3, 7))
    with pytest.raises(ValueError, match="N_typo"):
        copy_kernel(tuner, configs=[triton.Config({"BLOCK_SIZE": 32})], reset_to_zero=["N_typo"])


def test_a_meta_parameter_given_by_the_call_and_a_config_is_refused(tuner: Tuner) -> None:
    kernel = copy_kernel(tuner, do_bench=quick_do_bench)
    src = torch.randn(64, device=tuner.device)
    with pytest.raises(ValueError, match="BLOCK_SIZE"):
        kernel[(1,)](torch.empty_like(src), src, 64, BLOCK_SIZE=64)


def test_a_config_that_cannot_compile_is_passed_over(tuner: Tuner) -> None:
    # tl.arange needs a power of two: the 48-wide config fails to compile, on any device.
    tuner.needs("the interpreter's compile errors are not compile errors", when=not GPU)
    configs = [triton.Config({"BLOCK_SIZE": 48}), triton.Config({"BLOCK_SIZE": 64})]
    kernel = copy_kernel(tuner, configs=configs, do_bench=quick_do_bench)
    src = torch.randn(256, device=tuner.device)
    dst = torch.empty(256, device=tuner.device)
    with pytest.raises(triton.CompilationError) if tuner.name == "triton" else _no_error():
        kernel[grid_for(256)](dst, src, 256)
    if tuner.name == "kernelpick":
        assert kernel.best_config == configs[1]
        torch.testing.assert_close(dst, src)


def test_every_config_out_of_resources_raises_out_of_resources(tuner: Tuner) -> None:
    if not GPU:
        pytest.skip("resource limits exist on a GPU only")
    configs = [triton.Config({}, num_warps=128), triton.Config({}, num_warps=64)]
    kernel = copy_kernel(
        tuner,
        configs=[triton.Config({"BLOCK_SIZE": 32}, num_warps=w) for w in (64, 128)],
        do_bench=quick_do_bench,
    )
    del configs
    src = torch.randn(256, device=tuner.device)
    with pytest.raises(OutOfResources):
        kernel[grid_for(256)](torch.empty_like(src), src, 256)


class _no_error:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return False


# -- what Triton's knobs ask for ----------------------------------------------------------------


def test_the_print_knob_reports_each_tuning(
    tuner: Tuner, knobs: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    knobs.print = True
    kernel = copy_kernel(tuner, do_bench=quick_do_bench)
    src = torch.randn(256, device=tuner.device)
    kernel[grid_for(256)](torch.empty_like(src), src, 256)
    out = capsys.readouterr().out
    assert "_kernel" in out
    assert f"BLOCK_SIZE: {kernel.best_config.kwargs['BLOCK_SIZE']}" in out


def test_the_listener_knob_hears_each_tuning(tuner: Tuner, knobs: Any) -> None:
    if not hasattr(knobs, "listener"):
        pytest.skip(f"triton {triton.__version__} has no autotuning listener")
    tuner.needs("its listener looks for a JITFunction, which the interpreter does not make", when=not GPU)
    heard: list[dict[str, Any]] = []
    knobs.listener = lambda **kwargs: heard.append(kwargs)
    kernel = copy_kernel(tuner, do_bench=quick_do_bench)
    src = torch.randn(256, device=tuner.device)
    kernel[grid_for(256)](torch.empty_like(src), src, 256)
    kernel[grid_for(256)](torch.empty_like(src), src, 256)
    (tuning,) = heard
    assert set(tuning) == {"fn", "key", "best_config", "configs_timings", "duration", "cache_hit"}
    assert tuning["best_config"] == kernel.best_config
    assert tuning["cache_hit"] is False and tuning["duration"] > 0
    assert tuning["fn"].__name__ == "_kernel"
    assert set(tuning["configs_timings"]) == set(kernel.configs_timings)


# -- warm-up and IR overrides --------------------------------------------------------------------


def test_warmup_compiles_without_running(tuner: Tuner) -> None:
    tuner.needs("its warm-up needs a GPU driver", when=not GPU)
    kernel = copy_kernel(tuner, do_bench=quick_do_bench)
    src = torch.randn(256, device=tuner.device)
    dst = torch.zeros(256, device=tuner.device)
    compiled = kernel.warmup(dst, src, 256, grid=(1,))
    assert len(compiled) == 2
    assert torch.count_nonzero(dst) == 0


TTIR_TIMES_TEN = r"""
module {
  tt.func public @_kernel(%arg0: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %arg1: !tt.ptr<f32> {tt.divisibility = 16 : i32}, %arg2: i32 {tt.divisibility = 16 : i32}) attributes {noinline = false} {
    %cst = arith.constant dense<1.000000e+01> : tensor<32xf32>
    %c32_i32 = arith.constant 32 : i32
    %0 = tt.get_program_id x : i32
    %1 = arith.muli %0, %c32_i32 : i32
    %2 = tt.make_range {end = 32 : i32, start = 0 : i32} : tensor<32xi32>
    %3 = tt.splat %1 : i32 -> tensor<32xi32>
    %4 = arith.addi %3, %2 : tensor<32xi32>
    %5 = tt.splat %arg2 : i32 -> tensor<32xi32>
    %6 = arith.cmpi slt, %4, %5 : tensor<32xi32>
    %7 = tt.splat %arg1 : !tt.ptr<f32> -> tensor<32x!tt.ptr<f32>>
    %8 = tt.addptr %7, %4 : tensor<32x!tt.ptr<f32>>, tensor<32xi32>
    %9 = tt.load %8, %6 : tensor<32x!tt.ptr<f32>>
    %10 = arith.mulf %9, %cst : tensor<32xf32>
    %11 = tt.splat %arg0 : !tt.ptr<f32> -> tensor<32x!tt.ptr<f32>>
    %12 = tt.addptr %11, %4 : tensor<32x!tt.ptr<f32>>, tensor<32xi32>
    tt.store %12, %10, %6 : tensor<32x!tt.ptr<f32>>
    tt.return
  }
}
"""


def test_an_ir_override_replaces_the_kernels_ir(tuner: Tuner, tmp_path: Any) -> None:
    if not GPU or torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("the override's IR is written for sm_90 and newer")
    path = tmp_path / "override.ttir"
    path.write_text(TTIR_TIMES_TEN)
    N = 1024
    src = torch.randn(N, device=tuner.device)
    dst = torch.empty(N, device=tuner.device)
    kernel = copy_kernel(
        tuner,
        configs=[triton.Config(kwargs={"BLOCK_SIZE": 32, "ir_override": str(path)})],
        do_bench=quick_do_bench,
    )
    kernel[grid_for(N)](dst, src, N=N)
    torch.testing.assert_close(src * 10, dst)
