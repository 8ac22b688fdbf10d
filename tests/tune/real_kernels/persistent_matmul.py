# Copyright (c) the kernelpick authors. BSD-3-Clause license.
"""Tutorial 09's five matmuls, written as the tutorial writes them, fp16 and fp8 (e4m3, B given as N x K):

- `matmul_kernel`: one program per tile of C;
- `matmul_kernel_persistent`: NUM_SMS programs striding over the tiles (`tl.range(..., flatten=True)`);
- `matmul_kernel_tma`: host `TensorDescriptor`s made with a placeholder [1, 1] block, whose block shapes
  each config's `pre_hook` sets (reading EPILOGUE_SUBTILE with `nargs.get`);
- `matmul_kernel_tma_persistent`: the same, persistent, with an EPILOGUE_SUBTILE config axis;
- `matmul_kernel_descriptor_persistent`: descriptors made on the device (`tl.make_tensor_descriptor`,
  memory from `triton.set_allocator`), keyed on FLATTEN, with `prune_invalid_configs`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from tests.tune.real_kernels.base import (
    Autotune,
    Case,
    Inputs,
    Size,
    TutorialCall,
    capability,
    generator,
    processor_count,
)
from tests.tune.real_kernels.limits import interpreter_fp8_problem

FP8 = torch.float8_e4m3fn


def matmul_get_configs(pre_hook: Callable[[dict[str, Any]], None] | None = None) -> list[triton.Config]:
    """The tutorial's 24 configs: BLOCK_SIZE_M 128, BLOCK_SIZE_N 128 or 256, BLOCK_SIZE_K 64 or 128,
    2 to 4 stages, 4 or 8 warps."""
    return [
        triton.Config(
            {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": n, "BLOCK_SIZE_K": k, "GROUP_SIZE_M": 8},
            num_stages=stages,
            num_warps=warps,
            pre_hook=pre_hook,
        )
        for n in (128, 256)
        for k in (64, 128)
        for stages in (2, 3, 4)
        for warps in (4, 8)
    ]


def matmul_tma_persistent_get_configs(
    pre_hook: Callable[[dict[str, Any]], None] | None = None,
) -> list[triton.Config]:
    """The tutorial's 48 configs: `matmul_get_configs` with EPILOGUE_SUBTILE on and off."""
    return [
        triton.Config({**config.kwargs, "EPILOGUE_SUBTILE": subtile}, num_stages=config.num_stages,
                      num_warps=config.num_warps, pre_hook=pre_hook)
        for config in matmul_get_configs()
        for subtile in (True, False)
    ]  # fmt: skip


def tiny_configs(
    pre_hook: Callable[[dict[str, Any]], None] | None = None, subtile: bool = False
) -> list[triton.Config]:
    # BLOCK_SIZE_K 32: the least an fp8 dot takes on a GPU.
    extra = ({"EPILOGUE_SUBTILE": True}, {"EPILOGUE_SUBTILE": False}) if subtile else ({}, {})
    return [
        triton.Config({"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8, **extra[0]},
                      num_stages=3, num_warps=4, pre_hook=pre_hook),
        triton.Config({"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8, **extra[1]},
                      num_stages=2, num_warps=4, pre_hook=pre_hook),
    ]  # fmt: skip


def matmul_tma_set_block_size_hook(nargs: dict[str, Any]) -> None:
    """Each config's block shapes onto the descriptors the host made with a [1, 1] placeholder."""
    subtile = nargs.get("EPILOGUE_SUBTILE", False)
    block_m, block_n, block_k = nargs["BLOCK_SIZE_M"], nargs["BLOCK_SIZE_N"], nargs["BLOCK_SIZE_K"]
    nargs["a_desc"].block_shape = [block_m, block_k]
    nargs["b_desc"].block_shape = [block_n, block_k]
    nargs["c_desc"].block_shape = [block_m, block_n // 2] if subtile else [block_m, block_n]


def prune_invalid_configs(
    configs: list[triton.Config], named_args: dict[str, Any], **kwargs: Any
) -> list[triton.Config]:
    # Without flattening (Hopper with warp specialization) the subtiled epilogue is left out.
    flatten = kwargs["FLATTEN"]
    return [c for c in configs if not (c.kwargs.get("EPILOGUE_SUBTILE", True) and flatten is False)]


@triton.jit
def _compute_pid(tile_id, num_pid_in_group, num_pid_m, GROUP_SIZE_M, NUM_SMS):
    group = tile_id // num_pid_in_group
    first_m = group * GROUP_SIZE_M
    rows = min(num_pid_m - first_m, GROUP_SIZE_M)
    pid_m = first_m + (tile_id % rows)
    pid_n = (tile_id % num_pid_in_group) // rows
    return pid_m, pid_n


@triton.jit
def _store_tile(c_desc, accumulator, offs_m, offs_n, dtype: tl.constexpr, BLOCK_SIZE_M: tl.constexpr,
                BLOCK_SIZE_N: tl.constexpr, EPILOGUE_SUBTILE: tl.constexpr):  # fmt: skip
    # The subtiled epilogue stores two BLOCK_SIZE_M x BLOCK_SIZE_N / 2 halves, which needs less shared
    # memory for the output and leaves more for pipeline stages.
    if EPILOGUE_SUBTILE:
        halves = tl.permute(tl.reshape(accumulator, (BLOCK_SIZE_M, 2, BLOCK_SIZE_N // 2)), (0, 2, 1))
        left, right = tl.split(halves)
        c_desc.store([offs_m, offs_n], left.to(dtype))
        c_desc.store([offs_m, offs_n + BLOCK_SIZE_N // 2], right.to(dtype))
    else:
        c_desc.store([offs_m, offs_n], accumulator.to(dtype))


def make_matmul_kernel(autotune: Autotune, configs: list[triton.Config]) -> Any:
    @autotune(configs=configs, key=["M", "N", "K"])
    @triton.jit
    def matmul_kernel(
        a_ptr, b_ptr, c_ptr,
        M, N, K,
        stride_am, stride_ak,
        stride_bk, stride_bn,
        stride_cm, stride_cn,
        BLOCK_SIZE_M: tl.constexpr,
        BLOCK_SIZE_N: tl.constexpr,
        BLOCK_SIZE_K: tl.constexpr,
        GROUP_SIZE_M: tl.constexpr,
    ):  # fmt: skip
        pid = tl.program_id(axis=0)
        num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
        num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
        pid_m, pid_n = _compute_pid(pid, GROUP_SIZE_M * num_pid_n, num_pid_m, GROUP_SIZE_M, 1)

        rows = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
        cols = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
        # Out-of-range rows and columns read row or column 0 (not stored): no mask in the loads.
        rows = tl.max_contiguous(tl.multiple_of(tl.where(rows < M, rows, 0), BLOCK_SIZE_M), BLOCK_SIZE_M)
        cols = tl.max_contiguous(tl.multiple_of(tl.where(cols < N, cols, 0), BLOCK_SIZE_N), BLOCK_SIZE_N)
        ks = tl.arange(0, BLOCK_SIZE_K)
        a_block = a_ptr + rows[:, None] * stride_am + ks[None, :] * stride_ak
        b_block = b_ptr + ks[:, None] * stride_bk + cols[None, :] * stride_bn

        accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
        for step in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
            k_left = K - step * BLOCK_SIZE_K
            a = tl.load(a_block, mask=ks[None, :] < k_left, other=0.0)
            b = tl.load(b_block, mask=ks[:, None] < k_left, other=0.0)
            accumulator = tl.dot(a, b, accumulator)
            a_block += BLOCK_SIZE_K * stride_ak
            b_block += BLOCK_SIZE_K * stride_bk

        if c_ptr.dtype.element_ty == tl.float8e4nv:
            c = accumulator.to(tl.float8e4nv)
        else:
            c = accumulator.to(tl.float16)
        c_rows = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
        c_cols = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
        c_block = c_ptr + stride_cm * c_rows[:, None] + stride_cn * c_cols[None, :]
        tl.store(c_block, c, mask=(c_rows[:, None] < M) & (c_cols[None, :] < N))

    return matmul_kernel


def make_matmul_kernel_persistent(autotune: Autotune, configs: list[triton.Config]) -> Any:
    @autotune(configs=configs, key=["M", "N", "K"])
    @triton.jit
    def matmul_kernel_persistent(
        a_ptr, b_ptr, c_ptr,
        M, N, K,
        stride_am, stride_ak,
        stride_bk, stride_bn,
        stride_cm, stride_cn,
        BLOCK_SIZE_M: tl.constexpr,
        BLOCK_SIZE_N: tl.constexpr,
        BLOCK_SIZE_K: tl.constexpr,
        GROUP_SIZE_M: tl.constexpr,
        NUM_SMS: tl.constexpr,
    ):  # fmt: skip
        start_pid = tl.program_id(axis=0)
        num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
        num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
        k_tiles = tl.cdiv(K, BLOCK_SIZE_K)
        num_tiles = num_pid_m * num_pid_n
        num_pid_in_group = GROUP_SIZE_M * num_pid_n
        ks = tl.arange(0, BLOCK_SIZE_K)
        # The epilogue keeps its own tile counter: Blackwell's pipeliner cannot use one value in both
        # the prologue and the epilogue.
        tile_id_c = start_pid - NUM_SMS

        for tile_id in tl.range(start_pid, num_tiles, NUM_SMS, flatten=True):
            pid_m, pid_n = _compute_pid(tile_id, num_pid_in_group, num_pid_m, GROUP_SIZE_M, NUM_SMS)
            rows = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
            cols = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
            rows = tl.max_contiguous(tl.multiple_of(tl.where(rows < M, rows, 0), BLOCK_SIZE_M), BLOCK_SIZE_M)
            cols = tl.max_contiguous(tl.multiple_of(tl.where(cols < N, cols, 0), BLOCK_SIZE_N), BLOCK_SIZE_N)

            accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
            for step in range(k_tiles):
                offs_k = step * BLOCK_SIZE_K + ks
                a = tl.load(
                    a_ptr + rows[:, None] * stride_am + offs_k[None, :] * stride_ak,
                    mask=ks[None, :] < K - step * BLOCK_SIZE_K,
                    other=0.0,
                )
                b = tl.load(
                    b_ptr + offs_k[:, None] * stride_bk + cols[None, :] * stride_bn,
                    mask=ks[:, None] < K - step * BLOCK_SIZE_K,
                    other=0.0,
                )
                accumulator = tl.dot(a, b, accumulator)  # fmt: skip

            tile_id_c += NUM_SMS
            pid_m, pid_n = _compute_pid(tile_id_c, num_pid_in_group, num_pid_m, GROUP_SIZE_M, NUM_SMS)
            c_rows = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
            c_cols = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
            if c_ptr.dtype.element_ty == tl.float8e4nv:
                c = accumulator.to(tl.float8e4nv)
            else:
                c = accumulator.to(tl.float16)
            tl.store(c_ptr + stride_cm * c_rows[:, None] + stride_cn * c_cols[None, :], c,
                     mask=(c_rows[:, None] < M) & (c_cols[None, :] < N))  # fmt: skip

    return matmul_kernel_persistent


def make_matmul_kernel_tma(autotune: Autotune, configs: list[triton.Config]) -> Any:
    @autotune(configs=configs, key=["M", "N", "K", "WARP_SPECIALIZE"])
    @triton.jit
    def matmul_kernel_tma(
        a_desc, b_desc, c_desc,
        M, N, K,
        BLOCK_SIZE_M: tl.constexpr,
        BLOCK_SIZE_N: tl.constexpr,
        BLOCK_SIZE_K: tl.constexpr,
        GROUP_SIZE_M: tl.constexpr,
        FP8_OUTPUT: tl.constexpr,
        WARP_SPECIALIZE: tl.constexpr,
    ):  # fmt: skip
        dtype = tl.float8e4nv if FP8_OUTPUT else tl.float16
        pid = tl.program_id(axis=0)
        num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
        num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
        pid_m, pid_n = _compute_pid(pid, GROUP_SIZE_M * num_pid_n, num_pid_m, GROUP_SIZE_M, 1)
        offs_m = pid_m * BLOCK_SIZE_M
        offs_n = pid_n * BLOCK_SIZE_N

        accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
        for step in tl.range(tl.cdiv(K, BLOCK_SIZE_K), warp_specialize=WARP_SPECIALIZE):
            a = a_desc.load([offs_m, step * BLOCK_SIZE_K])
            b = b_desc.load([offs_n, step * BLOCK_SIZE_K])  # B is N x K: its tile is used transposed
            accumulator = tl.dot(a, b.T, accumulator)
        c_desc.store([offs_m, offs_n], accumulator.to(dtype))

    return matmul_kernel_tma


def make_matmul_kernel_tma_persistent(autotune: Autotune, configs: list[triton.Config]) -> Any:
    @autotune(configs=configs, key=["M", "N", "K", "WARP_SPECIALIZE"])
    @triton.jit
    def matmul_kernel_tma_persistent(
        a_desc, b_desc, c_desc,
        M, N, K,
        BLOCK_SIZE_M: tl.constexpr,
        BLOCK_SIZE_N: tl.constexpr,
        BLOCK_SIZE_K: tl.constexpr,
        GROUP_SIZE_M: tl.constexpr,
        FP8_OUTPUT: tl.constexpr,
        EPILOGUE_SUBTILE: tl.constexpr,
        NUM_SMS: tl.constexpr,
        WARP_SPECIALIZE: tl.constexpr,
    ):  # fmt: skip
        dtype = tl.float8e4nv if FP8_OUTPUT else tl.float16
        start_pid = tl.program_id(axis=0)
        num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
        num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
        k_tiles = tl.cdiv(K, BLOCK_SIZE_K)
        num_tiles = num_pid_m * num_pid_n
        num_pid_in_group = GROUP_SIZE_M * num_pid_n
        tile_id_c = start_pid - NUM_SMS

        # Warp specialization works on Blackwell; elsewhere this is a software-pipelined loop.
        for tile_id in tl.range(start_pid, num_tiles, NUM_SMS, flatten=True, warp_specialize=WARP_SPECIALIZE):
            pid_m, pid_n = _compute_pid(tile_id, num_pid_in_group, num_pid_m, GROUP_SIZE_M, NUM_SMS)
            offs_m = pid_m * BLOCK_SIZE_M
            offs_n = pid_n * BLOCK_SIZE_N
            accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
            for step in range(k_tiles):
                a = a_desc.load([offs_m, step * BLOCK_SIZE_K])
                b = b_desc.load([offs_n, step * BLOCK_SIZE_K])
                accumulator = tl.dot(a, b.T, accumulator)

            tile_id_c += NUM_SMS
            pid_m, pid_n = _compute_pid(tile_id_c, num_pid_in_group, num_pid_m, GROUP_SIZE_M, NUM_SMS)
            _store_tile(c_desc, accumulator, pid_m * BLOCK_SIZE_M, pid_n * BLOCK_SIZE_N, dtype,
                        BLOCK_SIZE_M, BLOCK_SIZE_N, EPILOGUE_SUBTILE)  # fmt: skip

    return matmul_kernel_tma_persistent


def make_matmul_kernel_descriptor_persistent(autotune: Autotune, configs: list[triton.Config]) -> Any:
    @autotune(
        configs=configs,
        key=["M", "N", "K", "WARP_SPECIALIZE", "FLATTEN"],
        prune_configs_by={"early_config_prune": prune_invalid_configs},
    )
    @triton.jit
    def matmul_kernel_descriptor_persistent(
        a_ptr, b_ptr, c_ptr,
        M, N, K,
        BLOCK_SIZE_M: tl.constexpr,
        BLOCK_SIZE_N: tl.constexpr,
        BLOCK_SIZE_K: tl.constexpr,
        GROUP_SIZE_M: tl.constexpr,
        EPILOGUE_SUBTILE: tl.constexpr,
        NUM_SMS: tl.constexpr,
        WARP_SPECIALIZE: tl.constexpr,
        FLATTEN: tl.constexpr,
    ):  # fmt: skip
        dtype = c_ptr.dtype.element_ty
        start_pid = tl.program_id(axis=0)
        num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
        num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
        k_tiles = tl.cdiv(K, BLOCK_SIZE_K)
        num_tiles = num_pid_m * num_pid_n
        num_pid_in_group = GROUP_SIZE_M * num_pid_n

        # Made on the device: their memory comes from the allocator given to `triton.set_allocator`.
        a_desc = tl.make_tensor_descriptor(
            a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_SIZE_M, BLOCK_SIZE_K]
        )
        b_desc = tl.make_tensor_descriptor(
            b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BLOCK_SIZE_N, BLOCK_SIZE_K]
        )
        c_desc = tl.make_tensor_descriptor(
            c_ptr,
            shape=[M, N],
            strides=[N, 1],
            block_shape=[BLOCK_SIZE_M, BLOCK_SIZE_N // 2 if EPILOGUE_SUBTILE else BLOCK_SIZE_N],
        )
        tile_id_c = start_pid - NUM_SMS

        for tile_id in tl.range(
            start_pid, num_tiles, NUM_SMS, flatten=FLATTEN, warp_specialize=WARP_SPECIALIZE
        ):
            pid_m, pid_n = _compute_pid(tile_id, num_pid_in_group, num_pid_m, GROUP_SIZE_M, NUM_SMS)
            offs_m = pid_m * BLOCK_SIZE_M
            offs_n = pid_n * BLOCK_SIZE_N
            accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
            for step in range(k_tiles):
                a = a_desc.load([offs_m, step * BLOCK_SIZE_K])
                b = b_desc.load([offs_n, step * BLOCK_SIZE_K])
                accumulator = tl.dot(a, b.T, accumulator)

            tile_id_c += NUM_SMS
            pid_m, pid_n = _compute_pid(tile_id_c, num_pid_in_group, num_pid_m, GROUP_SIZE_M, NUM_SMS)
            _store_tile(c_desc, accumulator, pid_m * BLOCK_SIZE_M, pid_n * BLOCK_SIZE_N, dtype,
                        BLOCK_SIZE_M, BLOCK_SIZE_N, EPILOGUE_SUBTILE)  # fmt: skip

    return matmul_kernel_descriptor_persistent


# -- host wrappers: as the tutorial's, each taking B as N x K (the tutorial's `b`, transposed for the
# -- pointer kernels)


def _is_hopper(device: torch.device) -> bool:
    return device.type == "cuda" and torch.cuda.get_device_capability(device)[0] == 9


def build_matmul(autotune: Autotune, configs: list[triton.Config]) -> Callable[..., torch.Tensor]:
    kernel = make_matmul_kernel(autotune, configs)

    def matmul(a: torch.Tensor, b_nk: torch.Tensor) -> torch.Tensor:
        b = b_nk.T  # K x N, strided
        assert a.shape[1] == b.shape[0], "Incompatible dimensions"
        assert a.dtype == b.dtype, "Incompatible dtypes"
        M, K = a.shape
        N = b.shape[1]
        c = torch.empty((M, N), device=a.device, dtype=a.dtype)
        grid = lambda META: (triton.cdiv(M, META["BLOCK_SIZE_M"]) * triton.cdiv(N, META["BLOCK_SIZE_N"]),)  # noqa: E731
        kernel[grid](
            a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1)
        )
        return c

    return matmul


def build_matmul_persistent(autotune: Autotune, configs: list[triton.Config]) -> Callable[..., torch.Tensor]:
    kernel = make_matmul_kernel_persistent(autotune, configs)

    def matmul_persistent(a: torch.Tensor, b_nk: torch.Tensor) -> torch.Tensor:
        b = b_nk.T
        assert a.shape[1] == b.shape[0], "Incompatible dimensions"
        assert a.dtype == b.dtype, "Incompatible dtypes"
        num_sms = processor_count(str(a.device))
        M, K = a.shape
        N = b.shape[1]
        c = torch.empty((M, N), device=a.device, dtype=a.dtype)
        grid = lambda META: (  # noqa: E731
            min(num_sms, triton.cdiv(M, META["BLOCK_SIZE_M"]) * triton.cdiv(N, META["BLOCK_SIZE_N"])),
        )
        kernel[grid](
            a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
            NUM_SMS=num_sms,
        )  # fmt: skip
        return c

    return matmul_persistent


def _placeholder_descriptors(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> list[TensorDescriptor]:
    # The block shape is not known until a config is chosen: its pre_hook sets it.
    placeholder = [1, 1]
    return [TensorDescriptor.from_tensor(t, placeholder) for t in (a, b, c)]


def build_matmul_tma(autotune: Autotune, configs: list[triton.Config]) -> Callable[..., torch.Tensor]:
    kernel = make_matmul_kernel_tma(autotune, configs)

    def matmul_tma(a: torch.Tensor, b: torch.Tensor, warp_specialize: bool = False) -> torch.Tensor:
        assert a.shape[1] == b.shape[1], "Incompatible dimensions"  # b is N x K
        assert a.dtype == b.dtype, "Incompatible dtypes"
        M, K = a.shape
        N = b.shape[0]
        c = torch.empty((M, N), device=a.device, dtype=a.dtype)
        a_desc, b_desc, c_desc = _placeholder_descriptors(a, b, c)

        def grid(META: dict[str, Any]) -> tuple[int]:
            return (triton.cdiv(M, META["BLOCK_SIZE_M"]) * triton.cdiv(N, META["BLOCK_SIZE_N"]),)

        kernel[grid](
            a_desc, b_desc, c_desc, M, N, K, FP8_OUTPUT=a.dtype == FP8, WARP_SPECIALIZE=warp_specialize
        )
        return c

    return matmul_tma


def build_matmul_tma_persistent(
    autotune: Autotune, configs: list[triton.Config]
) -> Callable[..., torch.Tensor]:
    kernel = make_matmul_kernel_tma_persistent(autotune, configs)

    def matmul_tma_persistent(
        a: torch.Tensor, b: torch.Tensor, warp_specialize: bool = False
    ) -> torch.Tensor:
        assert a.shape[1] == b.shape[1], "Incompatible dimensions"
        assert a.dtype == b.dtype, "Incompatible dtypes"
        M, K = a.shape
        N = b.shape[0]
        c = torch.empty((M, N), device=a.device, dtype=a.dtype)
        num_sms = processor_count(str(a.device))
        a_desc, b_desc, c_desc = _placeholder_descriptors(a, b, c)

        def grid(META: dict[str, Any]) -> tuple[int]:
            return (
                min(num_sms, triton.cdiv(M, META["BLOCK_SIZE_M"]) * triton.cdiv(N, META["BLOCK_SIZE_N"])),
            )

        kernel[grid](
            a_desc, b_desc, c_desc, M, N, K,
            FP8_OUTPUT=a.dtype == FP8, NUM_SMS=num_sms, WARP_SPECIALIZE=warp_specialize,
        )  # fmt: skip
        return c

    return matmul_tma_persistent


def build_matmul_descriptor_persistent(
    autotune: Autotune, configs: list[triton.Config]
) -> Callable[..., torch.Tensor]:
    kernel = make_matmul_kernel_descriptor_persistent(autotune, configs)

    def matmul_descriptor_persistent(
        a: torch.Tensor, b: torch.Tensor, warp_specialize: bool = False
    ) -> torch.Tensor:
        assert a.shape[1] == b.shape[1], "Incompatible dimensions"
        assert a.dtype == b.dtype, "Incompatible dtypes"
        M, K = a.shape
        N = b.shape[0]
        c = torch.empty((M, N), device=a.device, dtype=a.dtype)
        num_sms = processor_count(str(a.device))

        def alloc_fn(size: int, alignment: int, stream: int | None) -> torch.Tensor:
            return torch.empty(size, device=a.device, dtype=torch.int8)

        triton.set_allocator(alloc_fn)
        # Hopper's warp specialization does not work with a flattened loop.
        flatten = not (warp_specialize and _is_hopper(a.device))

        def grid(META: dict[str, Any]) -> tuple[int]:
            return (
                min(num_sms, triton.cdiv(M, META["BLOCK_SIZE_M"]) * triton.cdiv(N, META["BLOCK_SIZE_N"])),
            )

        kernel[grid](a, b, c, M, N, K, NUM_SMS=num_sms, WARP_SPECIALIZE=warp_specialize, FLATTEN=flatten)
        return c

    return matmul_descriptor_persistent


# -- inputs and checks --------------------------------------------------------------------------


def make_inputs(dtype: torch.dtype) -> Callable[[Size, str], Inputs]:
    def inputs(size: Size, device: str) -> Inputs:
        # The tutorial's: normal fp16, converted to the dtype; B kept as N x K.
        source = generator(device)
        a = torch.randn((size["M"], size["K"]), device=device, dtype=torch.float16, generator=source).to(
            dtype
        )
        b = torch.randn((size["N"], size["K"]), device=device, dtype=torch.float16, generator=source).to(
            dtype
        )
        return a, b

    return inputs


def check(inputs: Inputs, output: torch.Tensor) -> None:
    """The tutorial's `torch.allclose(expect, actual.to(expect.dtype), atol=1.0)`, against the fp32 product
    rounded to the output's dtype. In fp8 (e4m3, 3 mantissa bits) two correct roundings of nearly equal
    sums may be one step apart, 1/8 of the value (the tutorial compares with its own naive kernel)."""
    a, b = inputs
    expected = (a.float() @ b.float().T).to(output.dtype).float()
    rtol = 2**-3 if output.dtype == FP8 else 1e-5
    torch.testing.assert_close(output.float(), expected, atol=1.0, rtol=rtol)


# -- what each case needs ------------------------------------------------------------------------


def needs_tma(device: str) -> str | None:
    cc = capability(device)
    if cc is not None and cc[0] < 9:
        return f"tensor descriptors (TMA) need compute capability 9.0 or newer, this GPU has {cc[0]}.{cc[1]}"
    return None


def needs_fp8(device: str) -> str | None:
    cc = capability(device)
    if cc is not None and cc < (8, 9):
        return f"fp8 e4m3 needs compute capability 8.9 or newer, this GPU has {cc[0]}.{cc[1]}"
    return interpreter_fp8_problem() if cc is None else None


def needs_all(*needs: Callable[[str], str | None]) -> Callable[[str], str | None]:
    def unsupported(device: str) -> str | None:
        return next((reason for need in needs if (reason := need(device))), None)

    return unsupported


@dataclass(frozen=True, slots=True)
class Variant:
    """One of the tutorial's five kernels: its host wrapper's builder, its configs, how the tutorial calls it."""

    build: Callable[[Autotune, list[triton.Config]], Any]
    configs: Callable[[], list[triton.Config]]
    tiny_configs: Callable[[], list[triton.Config]]
    descriptors: bool  # reads and writes through tensor descriptors (TMA)
    tutorial_call: Callable[[Any, Inputs], Any]  # B given as N x K, transposed for the pointer kernels


def _with_hook(
    configs: Callable[..., list[triton.Config]], **kwargs: Any
) -> Callable[[], list[triton.Config]]:
    return lambda: configs(**kwargs)


VARIANTS = {
    "matmul": Variant(
        build_matmul, matmul_get_configs, tiny_configs, False,
        lambda module, inputs: module.matmul(inputs[0], inputs[1].T),
    ),
    "matmul_persistent": Variant(
        build_matmul_persistent, matmul_get_configs, tiny_configs, False,
        lambda module, inputs: module.matmul_persistent(inputs[0], inputs[1].T),
    ),
    "matmul_tma": Variant(
        build_matmul_tma,
        _with_hook(matmul_get_configs, pre_hook=matmul_tma_set_block_size_hook),
        _with_hook(tiny_configs, pre_hook=matmul_tma_set_block_size_hook),
        True,
        lambda module, inputs: module.matmul_tma(*inputs, False),
    ),
    "matmul_tma_persistent": Variant(
        build_matmul_tma_persistent,
        _with_hook(matmul_tma_persistent_get_configs, pre_hook=matmul_tma_set_block_size_hook),
        _with_hook(tiny_configs, pre_hook=matmul_tma_set_block_size_hook, subtile=True),
        True,
        lambda module, inputs: module.matmul_tma_persistent(*inputs, False),
    ),
    "matmul_descriptor_persistent": Variant(
        build_matmul_descriptor_persistent,
        matmul_tma_persistent_get_configs,
        _with_hook(tiny_configs, subtile=True),
        True,
        lambda module, inputs: module.matmul_descriptor_persistent(*inputs, False),
    ),
}  # fmt: skip

#: The variants run in fp8 (the tutorial's `--prec fp8`): the persistent and TMA ones, as issue 37 asks.
FP8_VARIANTS = ("matmul_persistent", "matmul_tma", "matmul_tma_persistent", "matmul_descriptor_persistent")


def cases() -> list[Case]:
    found = []
    for dtype, label in ((torch.float16, "fp16"), (FP8, "fp8")):
        for name, variant in VARIANTS.items():
            if dtype == FP8 and name not in FP8_VARIANTS:
                continue
            needs = [needs_tma] if variant.descriptors else []
            if dtype == FP8:
                needs.append(needs_fp8)
            found.append(
                Case(
                    name=f"09-{name}-{label}",
                    summary=f"tutorial 09: {name} in {label}",
                    build=variant.build,
                    make_inputs=make_inputs(dtype),
                    check=check,
                    configs=variant.configs,
                    tiny_configs=variant.tiny_configs,
                    tiny_size={"M": 48, "N": 64, "K": 64},
                    sizes=({"M": 4096, "N": 4096, "K": 4096},),
                    unsupported=needs_all(*needs),
                    tutorial=TutorialCall("09-persistent-matmul.py", variant.tutorial_call),
                )
            )
    return found
