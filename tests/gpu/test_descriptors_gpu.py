"""TMA descriptors on a Hopper GPU: host descriptors whose block shapes the configs' hooks set, and
descriptors made on the device with the program's allocator, timed in the workers."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import torch
import triton
import triton.language as tl

import kernelpick
from kernelpick.store import MemoryStore
from tests.tune.test_descriptors import expected, launch, matmul_tma, set_block_shapes

pytestmark = pytest.mark.gpu


def hopper() -> bool:
    return torch.cuda.get_device_capability()[0] >= 9


def test_a_tutorial_tma_matmul_whose_hooks_set_block_shapes_tunes_every_config() -> None:
    if not hopper():
        pytest.skip("TMA descriptors need sm_90")
    configs = [
        triton.Config(
            {"BLOCK_M": 128, "BLOCK_N": n, "BLOCK_K": k, "SUBTILE": s},
            num_stages=stages,
            num_warps=8,
            pre_hook=set_block_shapes,
        )
        for n in (128, 256)
        for k in (64, 128)
        for stages in (3, 4)
        for s in (False, True)
    ]
    kernel = kernelpick.autotune(configs, key=["M", "N", "K"], store=MemoryStore())(matmul_tma)
    a = torch.randn(1024, 1024, device="cuda", dtype=torch.float16)
    b = torch.randn(1024, 1024, device="cuda", dtype=torch.float16)
    c = torch.empty(1024, 1024, device="cuda", dtype=torch.float16)
    launch(kernel, a, b, c)
    torch.testing.assert_close(c, expected(a, b), atol=0.5, rtol=0.02)
    statuses = [r.status for r in kernel.last_tuning.results.values()]
    # Too much shared memory is a resource failure; a compile error would mean placeholder shapes.
    assert set(statuses) <= {"ok", "out_of_resources"} and statuses.count("ok") >= 8, statuses
    assert kernel.timed_here  # hooks are the user's code: timed where they run


@triton.jit
def scale_by_device_descriptors(x_ptr, out_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    x_desc = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, BLOCK_N])
    out_desc = tl.make_tensor_descriptor(
        out_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, BLOCK_N]
    )
    offsets = [tl.program_id(0) * BLOCK_M, tl.program_id(1) * BLOCK_N]
    out_desc.store(offsets, x_desc.load(offsets) * 2)


DEVICE_DESCRIPTOR_CONFIGS = [triton.Config({"BLOCK_M": m, "BLOCK_N": 64}) for m in (32, 64, 128)]


def _device_descriptor_call(kernel: Any) -> None:
    x = torch.randn(1024, 512, device="cuda")
    out = torch.empty_like(x)
    kernel[lambda meta: (1024 // meta["BLOCK_M"], 512 // meta["BLOCK_N"])](x, out, 1024, 512)
    torch.testing.assert_close(out, 2 * x)


def test_device_descriptors_are_timed_in_the_workers_with_the_programs_allocator() -> None:
    if not hopper():
        pytest.skip("TMA descriptors need sm_90")
    triton.set_allocator(lambda size, alignment, stream: torch.empty(size, device="cuda", dtype=torch.int8))
    kernel = kernelpick.autotune(
        DEVICE_DESCRIPTOR_CONFIGS, key=["M", "N"], store=MemoryStore(), isolate=True
    )(scale_by_device_descriptors)
    _device_descriptor_call(kernel)
    assert {r.status for r in kernel.last_tuning.results.values()} == {"ok"}
    assert kernel.timed_here == {}


def test_an_allocator_closing_over_the_calls_tensors_costs_the_workers_nothing() -> None:
    if not hopper():
        pytest.skip("TMA descriptors need sm_90")
    lock = threading.Lock()  # neither a lock nor a tensor crosses: the workers allocate their own
    x = torch.randn(1024, 512, device="cuda")

    def locked_allocator(size: int, alignment: int, stream: int | None) -> torch.Tensor:
        with lock:
            return torch.empty(size, device=x.device, dtype=torch.int8)

    triton.set_allocator(locked_allocator)
    kernel = kernelpick.autotune(
        DEVICE_DESCRIPTOR_CONFIGS, key=["M", "N"], store=MemoryStore(), isolate=True
    )(scale_by_device_descriptors)
    _device_descriptor_call(kernel)
    assert {r.status for r in kernel.last_tuning.results.values()} == {"ok"}
    assert kernel.timed_here == {}
