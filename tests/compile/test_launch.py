"""compile/launch.py: plain `@triton.jit` kernels run in Triton's interpreter on CPU tensors, and leave
Triton able to compile afterwards."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

import pytest
import torch
import triton
import triton.language as tl
from triton.runtime.jit import JITFunction

from kernelpick.compile.launch import interpret, launcher, runner
from kernelpick.compile.target import specialize
from tests.tune.kernels import add_kernel


@triton.jit
def _scaled(x, scale):
    return x * scale


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, n_cols, stride, scale, BLOCK: tl.constexpr):
    """out[row] = scale * sum(x[row, :]), in blocks of BLOCK columns, through a helper."""
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, tl.cdiv(n_cols, BLOCK)):
        cols = start * BLOCK + tl.arange(0, BLOCK)
        acc += _scaled(tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=0.0), scale)
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


@triton.heuristics({"EVEN": lambda named: named["n"] % named["BLOCK"] == 0})
@triton.jit
def scale_kernel(x_ptr, n, factor, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        tl.store(x_ptr + offsets, tl.load(x_ptr + offsets) * factor)
    else:
        tl.store(x_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n) * factor, mask=offsets < n)


@triton.jit
def broken_helper_call_kernel(x_ptr, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    tl.store(x_ptr + offsets, _scaled(tl.load(x_ptr + offsets)))  # `scale` is missing


@triton.jit
def slow_kernel(x_ptr, steps, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    for _ in range(0, steps):
        tl.store(x_ptr + offsets, tl.load(x_ptr + offsets) + 1.0)


def run_row_sum(x: torch.Tensor, scale: float = 2.0, block: int = 16) -> torch.Tensor:
    out = torch.empty(x.shape[0])
    interpret(row_sum_kernel, x, out, x.shape[1], x.stride(0), scale, BLOCK=block, grid=(x.shape[0],))
    return out


def test_a_plain_kernel_runs_on_cpu_tensors() -> None:
    x, y = torch.arange(100, dtype=torch.float32), torch.full((100,), 0.5)
    out = torch.zeros(100)
    interpret(add_kernel, x, y, out, 100, BLOCK=32, grid=(triton.cdiv(100, 32),))
    assert torch.equal(out, x + y)


def test_a_callable_grid_sees_the_meta_parameters() -> None:
    x, y = torch.ones(70), torch.ones(70)
    out = torch.zeros(70)
    interpret(add_kernel, x, y, out, 70, BLOCK=16, grid=lambda meta: (triton.cdiv(70, meta["BLOCK"]),))
    assert torch.equal(out, torch.full((70,), 2.0))


def test_a_callable_grid_gets_the_plain_arguments_as_on_a_gpu() -> None:
    # Triton 3.6's interpreter would pass one-element arrays, which NumPy 2.4 cannot make a loop
    # bound of once `triton.cdiv` has run on them.
    seen: dict[str, object] = {}

    def grid(meta: dict[str, object]) -> tuple[int]:
        seen.update(meta)
        return (triton.cdiv(meta["n"], meta["BLOCK"]),)  # type: ignore[arg-type]

    x, y, out = torch.ones(70), torch.ones(70), torch.zeros(70)
    interpret(add_kernel, x, y, out, 70, BLOCK=16, num_warps=4, grid=grid)
    assert torch.equal(out, torch.full((70,), 2.0))
    assert seen["n"] == 70 and type(seen["n"]) is int and seen["BLOCK"] == 16
    assert seen["x_ptr"] is x and "num_warps" not in seen  # arguments only, as Triton's launch


def test_helpers_reductions_and_cdiv_are_interpreted() -> None:
    x = torch.randn(5, 37)
    assert torch.allclose(run_row_sum(x), 2.0 * x.sum(dim=1), atol=1e-5)


def test_strided_rows_are_read_through_their_stride() -> None:
    x = torch.randn(4, 50)[:, 3:40]
    assert torch.allclose(run_row_sum(x, scale=1.0, block=8), x.sum(dim=1), atol=1e-5)


def test_triton_still_compiles_after_interpreting() -> None:
    # The interpreter patches triton.language while it runs; left patched, every later
    # compilation in the process breaks.
    originals = (tl.load, tl.store, tl.sum, tl.arange, tl.core.tensor.__add__, JITFunction.__call__)
    x = torch.randn(3, 20)
    run_row_sum(x)
    assert (tl.load, tl.store, tl.sum, tl.arange, tl.core.tensor.__add__, JITFunction.__call__) == originals
    out = torch.empty(3)
    ttir = str(specialize(row_sum_kernel, (x, out, 20, 20, 2.0), {"BLOCK": 16}).lower("ttir"))
    assert "tt.func public @row_sum_kernel" in ttir
    assert "tt.reduce" in ttir


def test_a_failing_kernel_leaves_triton_unpatched() -> None:
    x = torch.zeros(4)
    with pytest.raises(Exception, match="scale"):
        interpret(broken_helper_call_kernel, x, BLOCK=4, grid=(1,))
    assert JITFunction.__call__.__name__ == "__call__"
    ttir = str(specialize(add_kernel, (x, x, x, 4), {"BLOCK": 4}).lower("ttir"))
    assert "tt.func public @add_kernel" in ttir


@pytest.mark.parametrize(("n", "even"), [(64, True), (50, False)])
def test_heuristics_wrapped_kernels_get_their_computed_values(n: int, even: bool) -> None:
    x = torch.arange(64, dtype=torch.float32)
    expected = x.clone()
    expected[:n] *= 3.0
    interpret(scale_kernel, x, n, 3.0, BLOCK=16, grid=(triton.cdiv(n, 16),))
    assert torch.equal(x, expected)


def test_objects_that_are_not_kernels_are_refused() -> None:
    with pytest.raises(TypeError, match="cannot run function in Triton's interpreter"):
        interpret(lambda: None, grid=(1,))


def test_launcher_in_interpreter_mode() -> None:
    launch = launcher(add_kernel, interpreter=True)
    x, y, out = torch.ones(10), torch.ones(10), torch.zeros(10)
    launch(x, y, out, 10, grid=(1,), BLOCK=16)
    assert torch.equal(out, torch.full((10,), 2.0))


def test_an_interpreted_runner_has_tritons_run_signature() -> None:
    run = runner(add_kernel, interpreter=True)
    x, y, out = torch.ones(10), torch.ones(10), torch.zeros(10)
    assert run(x, y, out, 10, grid=(1,), warmup=True, BLOCK=16) is None
    assert torch.equal(out, torch.zeros(10))  # a warm-up launches nothing
    run(x, y, out, 10, grid=(1,), warmup=False, BLOCK=16)
    assert torch.equal(out, torch.full((10,), 2.0))


def test_kernels_interpreted_from_several_threads_give_right_answers() -> None:
    inputs = [torch.randn(3, 33) for _ in range(4)]
    outputs: list[torch.Tensor | None] = [None] * len(inputs)

    def work(index: int) -> None:
        outputs[index] = run_row_sum(inputs[index])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(inputs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for x, out in zip(inputs, outputs):
        assert out is not None and torch.allclose(out, 2.0 * x.sum(dim=1), atol=1e-5)


def test_lowering_while_another_thread_interprets() -> None:
    # The interpreter patches triton.language for the whole process while it runs; code generation
    # in another thread (precompiling, analysis) must not build IR with the patched functions.
    x = torch.zeros(16)
    worker = threading.Thread(
        target=interpret, args=(slow_kernel, x, 3000), kwargs={"BLOCK": 16, "grid": (1,)}
    )
    started = time.perf_counter()
    worker.start()
    time.sleep(0.02)
    y = torch.ones(64)
    overlapped = worker.is_alive()
    ttir = str(specialize(add_kernel, (y, y, y, 64), {"BLOCK": 64}).lower("ttir"))
    worker.join()
    assert overlapped, f"the interpretation took only {time.perf_counter() - started:.3f} s"
    assert "tt.func public @add_kernel" in ttir
    assert torch.equal(x, torch.full((16,), 3000.0))


@triton.jit
def _fixed_kernel(x_ptr, n):  # type: ignore[no-untyped-def]
    pass


@triton.jit
def _constexpr_kernel(x_ptr, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    pass


class _Compiled:
    """A compiled kernel's stand-in: `compiled[grid](*args)` records the launch."""

    def __init__(self, launches: list[tuple[object, ...]]) -> None:
        self.launches = launches

    def __getitem__(self, grid: tuple[int, ...]) -> object:
        return lambda *args: self.launches.append(("compiled", grid, *args))


def test_a_fixed_launch_binds_once_then_launches_the_compiled_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelpick.compile import launch as module

    launches: list[tuple[object, ...]] = []
    device = [0]

    def run(self: object, *args: object, grid: object, warmup: bool, **options: object) -> _Compiled:
        launches.append(("run", grid, *args))
        return _Compiled(launches)

    monkeypatch.setattr(type(_fixed_kernel), "run", run)
    monkeypatch.setattr(module, "_current_device", lambda: device[0])
    launch = module.fixed_launcher(_fixed_kernel, interpreter=False)
    assert isinstance(launch, module.FixedLaunch)
    launch("x", 7, grid=(4,), num_warps=4)
    launch("x", 7, grid=(4,), num_warps=4)
    device[0] = 1  # another current device: the kernel is not loaded there, Triton's run finds out
    launch("x", 7, grid=(4,), num_warps=4)
    assert launches == [("run", (4,), "x", 7), ("compiled", (4, 1, 1), "x", 7), ("run", (4,), "x", 7)]
    launches.clear()
    constexpr = module.fixed_launcher(_constexpr_kernel, interpreter=False)
    constexpr("x", grid=(2,), BLOCK=16)
    constexpr("x", grid=(2,), BLOCK=16)
    assert [entry[0] for entry in launches] == ["run", "run"], "a constexpr parameter is bound each call"
    assert module.fixed_launcher(_fixed_kernel, interpreter=True) is not launch


def test_a_fixed_launch_runs_on_its_tensors_gpu_whatever_the_current_device(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # As torch.mm does: `kernelpick.ops.mm` of tensors on cuda:1 while cuda:0 is current launches on
    # cuda:1 (Triton alone launches on the current device, where cuda:1's memory is not reachable).
    from kernelpick.compile import launch as module

    launches: list[tuple[object, ...]] = []
    device, entered = [0], []

    def run(self: object, *args: object, grid: object, warmup: bool, **options: object) -> _Compiled:
        launches.append(("run", device[0], *args))
        return _Compiled(launches)

    @contextlib.contextmanager
    def on(index: int) -> Iterator[None]:
        entered.append(index)
        before, device[0] = device[0], index
        try:
            yield
        finally:
            device[0] = before

    monkeypatch.setattr(type(_fixed_kernel), "run", run)
    monkeypatch.setattr(module, "_current_device", lambda: device[0])
    monkeypatch.setattr(torch.cuda, "device", on)
    launch = module.fixed_launcher(_fixed_kernel, interpreter=False, index=1)
    launch("x", 7, grid=(4,))
    launch("x", 7, grid=(4,))
    assert launches == [("run", 1, "x", 7), ("compiled", (4, 1, 1), "x", 7)]
    assert entered == [1, 1] and device == [0]
    device[0] = 1  # the caller's own current device is the tensors': no switch
    launch("x", 7, grid=(4,))
    assert entered == [1, 1] and launches[-1][0] == "compiled"
