# Copyright (c) the kernelpick authors. BSD-3-Clause license.
"""Chunked causal linear attention as flash-linear-attention (fla) writes its chunk kernels: `@triton.heuristics`
(USE_OFFSETS, USE_INITIAL_STATE, STORE_FINAL_STATE: whether optional tensors are None) over
`@triton.autotune(configs=[triton.Config({...}, num_warps=w, ...)], key=["BT", ...])` over
`@triton.jit(do_not_specialize=["T"])`; `tl.make_block_ptr` loads with boundary checks; a loop over
chunks of BT tokens carrying a [K, V] state; variable-length batches through `offsets` (cumulative
sequence lengths) and chunk indices.

Two kernels, as fla's `chunk` path: `chunk_fwd_kernel_h` writes the state at the start of every chunk;
`chunk_fwd_kernel_o` gives each chunk's output, o = scale * (q @ h + tril(q @ k^T) @ v).
"""

from __future__ import annotations

import itertools
from typing import Any

import torch
import triton
import triton.language as tl

from tests.tune.real_kernels.base import (
    Autotune,
    Case,
    Inputs,
    Size,
    generator,
    relative_rmse,
)
from tests.tune.real_kernels.limits import block_pointer_problem

STATE_HEURISTICS = {
    "USE_INITIAL_STATE": lambda args: args["h0"] is not None,
    "STORE_FINAL_STATE": lambda args: args["ht"] is not None,
    "USE_OFFSETS": lambda args: args["offsets"] is not None,
}


def state_configs() -> list[triton.Config]:
    return [
        triton.Config({"BK": bk, "BV": bv}, num_warps=w, num_stages=s)
        for bk in (32, 64)
        for bv in (32, 64)
        for w in (2, 4, 8)
        for s in (2, 3, 4)
    ]


def output_configs() -> list[triton.Config]:
    return [triton.Config({}, num_warps=w, num_stages=s) for w in (2, 4, 8) for s in (2, 3, 4)]


def tiny_state_configs() -> list[triton.Config]:
    return [
        triton.Config({"BK": 16, "BV": 32}, num_warps=2),
        triton.Config({"BK": 32, "BV": 16}, num_warps=4),
    ]


def tiny_output_configs() -> list[triton.Config]:
    return [triton.Config({}, num_warps=w) for w in (2, 4)]


def make_state_kernel(autotune: Autotune, configs: list[triton.Config]) -> Any:
    @triton.heuristics(STATE_HEURISTICS)
    @autotune(configs=configs, key=["BT"])
    @triton.jit(do_not_specialize=["T"])
    def chunk_fwd_kernel_h(
        k, v, h, h0, ht,
        offsets, chunk_offsets,
        T,
        H: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
        BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
        USE_INITIAL_STATE: tl.constexpr, STORE_FINAL_STATE: tl.constexpr, USE_OFFSETS: tl.constexpr,
    ):  # fmt: skip
        i_k, i_v, i_nh = tl.program_id(0), tl.program_id(1), tl.program_id(2)
        i_n, i_h = i_nh // H, i_nh % H
        if USE_OFFSETS:
            bos, eos = tl.load(offsets + i_n).to(tl.int32), tl.load(offsets + i_n + 1).to(tl.int32)
            T = eos - bos
            NT = tl.cdiv(T, BT)
            boh = tl.load(chunk_offsets + i_n).to(tl.int32)  # this sequence's first chunk among all
        else:
            bos, eos = i_n * T, i_n * T + T
            NT = tl.cdiv(T, BT)
            boh = i_n * NT

        b_h = tl.zeros([BK, BV], dtype=tl.float32)
        if USE_INITIAL_STATE:
            p_h0 = tl.make_block_ptr(
                h0 + i_nh * K * V, (K, V), (V, 1), (i_k * BK, i_v * BV), (BK, BV), (1, 0)
            )
            b_h = tl.load(p_h0, boundary_check=(0, 1)).to(tl.float32)
        for i_t in range(NT):
            # The state before chunk i_t, then chunk i_t's keys and values added to it.
            p_h = tl.make_block_ptr(
                h + ((boh + i_t) * H + i_h) * K * V, (K, V), (V, 1), (i_k * BK, i_v * BV), (BK, BV), (1, 0)
            )
            tl.store(p_h, b_h.to(p_h.dtype.element_ty), boundary_check=(0, 1))
            p_k = tl.make_block_ptr(
                k + (bos * H + i_h) * K, (K, T), (1, H * K), (i_k * BK, i_t * BT), (BK, BT), (0, 1)
            )
            p_v = tl.make_block_ptr(
                v + (bos * H + i_h) * V, (T, V), (H * V, 1), (i_t * BT, i_v * BV), (BT, BV), (1, 0)
            )
            b_k = tl.load(p_k, boundary_check=(0, 1))
            b_v = tl.load(p_v, boundary_check=(0, 1))
            b_h += tl.dot(b_k, b_v)  # fmt: skip
        if STORE_FINAL_STATE:
            p_ht = tl.make_block_ptr(
                ht + i_nh * K * V, (K, V), (V, 1), (i_k * BK, i_v * BV), (BK, BV), (1, 0)
            )
            tl.store(p_ht, b_h.to(p_ht.dtype.element_ty), boundary_check=(0, 1))

    return chunk_fwd_kernel_h


def make_output_kernel(autotune: Autotune, configs: list[triton.Config]) -> Any:
    @triton.heuristics({"USE_OFFSETS": lambda args: args["offsets"] is not None})
    @autotune(configs=configs, key=["BT", "BK", "BV"])
    @triton.jit(do_not_specialize=["T"])
    def chunk_fwd_kernel_o(
        q, k, v, h, o,
        offsets, indices,
        scale,
        T,
        H: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
        BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
        USE_OFFSETS: tl.constexpr,
    ):  # fmt: skip
        i_v, i_t, i_bh = tl.program_id(0), tl.program_id(1), tl.program_id(2)
        i_b, i_h = i_bh // H, i_bh % H
        if USE_OFFSETS:
            i_tg = i_t  # this chunk among all: where its state is
            i_n, i_t = tl.load(indices + i_t * 2).to(tl.int32), tl.load(indices + i_t * 2 + 1).to(tl.int32)
            bos, eos = tl.load(offsets + i_n).to(tl.int32), tl.load(offsets + i_n + 1).to(tl.int32)
            T = eos - bos
        else:
            NT = tl.cdiv(T, BT)
            i_tg = i_b * NT + i_t
            bos, eos = i_b * T, i_b * T + T

        rows = tl.arange(0, BT)
        causal = rows[:, None] >= rows[None, :]
        b_o = tl.zeros([BT, BV], dtype=tl.float32)
        b_s = tl.zeros([BT, BT], dtype=tl.float32)
        for i_k in range(tl.cdiv(K, BK)):
            p_q = tl.make_block_ptr(
                q + (bos * H + i_h) * K, (T, K), (H * K, 1), (i_t * BT, i_k * BK), (BT, BK), (1, 0)
            )
            p_k = tl.make_block_ptr(
                k + (bos * H + i_h) * K, (K, T), (1, H * K), (i_k * BK, i_t * BT), (BK, BT), (0, 1)
            )
            p_h = tl.make_block_ptr(
                h + (i_tg * H + i_h) * K * V, (K, V), (V, 1), (i_k * BK, i_v * BV), (BK, BV), (1, 0)
            )
            b_q = tl.load(p_q, boundary_check=(0, 1))
            b_k = tl.load(p_k, boundary_check=(0, 1))
            b_h = tl.load(p_h, boundary_check=(0, 1))
            b_o += tl.dot(b_q, b_h.to(b_q.dtype))  # what earlier chunks left in the state
            b_s += tl.dot(b_q, b_k)  # within the chunk
        b_s = tl.where(causal, b_s, 0)
        p_v = tl.make_block_ptr(
            v + (bos * H + i_h) * V, (T, V), (H * V, 1), (i_t * BT, i_v * BV), (BT, BV), (1, 0)
        )
        b_v = tl.load(p_v, boundary_check=(0, 1))
        b_o = (b_o + tl.dot(b_s.to(b_v.dtype), b_v)) * scale
        p_o = tl.make_block_ptr(
            o + (bos * H + i_h) * V, (T, V), (H * V, 1), (i_t * BT, i_v * BV), (BT, BV), (1, 0)
        )
        tl.store(p_o, b_o.to(p_o.dtype.element_ty), boundary_check=(0, 1))  # fmt: skip

    return chunk_fwd_kernel_o


def prepare_chunk_indices(offsets: torch.Tensor, chunk_size: int) -> torch.Tensor:
    """(sequence, chunk within it) for every chunk of a variable-length batch, as int32 pairs."""
    counts = triton.cdiv(offsets[1:] - offsets[:-1], chunk_size).tolist()
    pairs = [(n, t) for n, count in enumerate(counts) for t in range(count)]
    return torch.tensor(pairs, dtype=torch.int32, device=offsets.device).flatten()


def prepare_chunk_offsets(offsets: torch.Tensor, chunk_size: int) -> torch.Tensor:
    """Where each sequence's chunks start among all chunks of the batch."""
    counts = triton.cdiv(offsets[1:] - offsets[:-1], chunk_size)
    return torch.cat([counts.new_zeros(1), counts.cumsum(0)]).to(torch.int32)


def build(autotune: Autotune, configs: list[triton.Config]) -> Any:
    """`chunk_linear_attn(q, k, v, scale, initial_state, output_final_state, offsets, chunk_size)`, with the
    case's configs the state kernel's (those with BK) and the output kernel's together."""
    state_kernel = make_state_kernel(autotune, [c for c in configs if "BK" in c.kwargs])
    output_kernel = make_output_kernel(autotune, [c for c in configs if "BK" not in c.kwargs])

    def chunk_linear_attn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float | None = None,
                          initial_state: torch.Tensor | None = None, output_final_state: bool = False,
                          offsets: torch.Tensor | None = None, chunk_size: int = 64
                          ) -> tuple[torch.Tensor, torch.Tensor | None]:  # fmt: skip
        B, T, H, K = q.shape
        V = v.shape[-1]
        if offsets is not None and B != 1:
            raise ValueError(f"a variable-length batch is given flattened, batch size 1, not {B}")
        scale = K**-0.5 if scale is None else scale
        BT = chunk_size
        N = B if offsets is None else len(offsets) - 1
        if offsets is None:
            chunks, indices, chunk_offsets = B * triton.cdiv(T, BT), None, None
        else:
            indices, chunk_offsets = prepare_chunk_indices(offsets, BT), prepare_chunk_offsets(offsets, BT)
            chunks = len(indices) // 2
        h = k.new_empty(chunks, H, K, V)
        ht = q.new_empty(N, H, K, V, dtype=torch.float32) if output_final_state else None
        state_grid = lambda META: (triton.cdiv(K, META["BK"]), triton.cdiv(V, META["BV"]), N * H)  # noqa: E731
        state_kernel[state_grid](
            k, v, h, initial_state, ht, offsets, chunk_offsets, T, H=H, K=K, V=V, BT=BT,
        )  # fmt: skip
        o = torch.empty_like(v)
        BK, BV = min(64, max(16, triton.next_power_of_2(K))), min(64, max(16, triton.next_power_of_2(V)))
        output_grid = (triton.cdiv(V, BV), chunks if offsets is not None else triton.cdiv(T, BT), B * H)
        output_kernel[output_grid](
            q, k, v, h, o, offsets, indices, scale, T, H=H, K=K, V=V, BT=BT, BK=BK, BV=BV,
        )  # fmt: skip
        return o, ht

    return chunk_linear_attn


# -- cases ---------------------------------------------------------------------------------------


def make_inputs(size: Size, device: str) -> Inputs:
    source = generator(device)
    B, T, H, K, V = size["B"], size["T"], size["H"], size["K"], size["V"]
    q, k = (torch.randn((B, T, H, K), device=device, generator=source).half() for _ in range(2))
    v = torch.randn((B, T, H, V), device=device, generator=source).half()
    lengths = [length for name, length in sorted(size.items()) if name.startswith("len")]
    if lengths:  # a variable-length batch of these sequences, flattened into one
        offsets = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], device=device)
        assert B == 1 and offsets[-1] == T
        initial_state = torch.randn((len(lengths), H, K, V), device=device, generator=source)
        return q, k, v, initial_state, offsets, size["BT"]
    initial_state = torch.randn((B, H, K, V), device=device, generator=source)
    return q, k, v, initial_state, None, size["BT"]


def build_case(autotune: Autotune, configs: list[triton.Config]) -> Any:
    chunk_linear_attn = build(autotune, configs)

    def run(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, initial_state: torch.Tensor,
            offsets: torch.Tensor | None, chunk_size: int) -> tuple[torch.Tensor, torch.Tensor | None]:  # fmt: skip
        return chunk_linear_attn(q, k, v, None, initial_state, True, offsets, chunk_size)

    return run


def naive_linear_attn(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, h0: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """One sequence ([T, H, K]), in fp32: o_t = scale * q_t (h0 + sum_{s<=t} k_s^T v_s); the final state."""
    q, k, v = q.float() * q.shape[-1] ** -0.5, k.float(), v.float()
    scores = torch.einsum("thk,shk->hts", q, k).tril()
    o = torch.einsum("hts,shv->thv", scores, v) + torch.einsum("thk,hkv->thv", q, h0)
    return o, h0 + torch.einsum("thk,thv->hkv", k, v)


def sequences(tensor: torch.Tensor, offsets: torch.Tensor | None) -> list[torch.Tensor]:
    """Each sequence of a batch ([B, T, ...]) or of a flattened variable-length one, as a [T, ...] view."""
    if offsets is None:
        return list(tensor)
    bounds = offsets.tolist()
    return [tensor[0, start:end] for start, end in itertools.pairwise(bounds)]


def check(inputs: Inputs, outputs: tuple[torch.Tensor, torch.Tensor]) -> None:
    """fla's test: output and final state within 0.005 of the fp32 reference, as the ratio of the root mean
    square error to the reference's root mean square."""
    q, k, v, h0, offsets, _ = inputs
    o, ht = outputs
    expected_o = torch.zeros_like(o, dtype=torch.float32)
    expected_h = torch.zeros_like(ht)
    parts = zip(*(sequences(t, offsets) for t in (q, k, v, expected_o)))
    for n, (q_n, k_n, v_n, o_n) in enumerate(parts):
        o_n[:], expected_h[n] = naive_linear_attn(q_n, k_n, v_n, h0[n])
    for name, actual, expected in (("o", o, expected_o), ("ht", ht, expected_h)):
        ratio = relative_rmse(actual, expected)
        assert ratio <= 0.005, f"{name}: relative RMSE {ratio:.4f} > 0.005"


#: Variable-length batches: sequences of these lengths, flattened into one (B = 1, T their sum).
VARLEN_TINY = {"B": 1, "T": 56, "H": 2, "K": 32, "V": 32, "BT": 16, "len0": 13, "len1": 27, "len2": 16}
VARLEN_SIZE = {"B": 1, "T": 16384, "H": 16, "K": 128, "V": 128, "BT": 64,
               "len0": 1000, "len1": 4096, "len2": 3000, "len3": 8288}  # fmt: skip


def cases() -> list[Case]:
    configs = lambda: state_configs() + output_configs()  # noqa: E731
    tiny = lambda: tiny_state_configs() + tiny_output_configs()  # noqa: E731
    return [
        Case(
            name="fla-chunk-linear-attn-fp16",
            summary="fla style: heuristics over autotune (Config({}, num_warps=w), key BT), make_block_ptr, "
            "chunked state loop, do_not_specialize T, initial and final state",
            build=build_case,
            make_inputs=make_inputs,
            check=check,
            configs=configs,
            tiny_configs=tiny,
            tiny_size={"B": 2, "T": 40, "H": 2, "K": 32, "V": 32, "BT": 16},
            sizes=({"B": 4, "T": 4096, "H": 16, "K": 128, "V": 128, "BT": 64},),
            unsupported=lambda device: block_pointer_problem(),
        ),
        Case(
            name="fla-chunk-linear-attn-varlen-fp16",
            summary="fla style, a variable-length batch: USE_OFFSETS from cu_seqlens, chunk indices",
            build=build_case,
            make_inputs=make_inputs,
            check=check,
            configs=configs,
            tiny_configs=tiny,
            tiny_size=VARLEN_TINY,
            sizes=(VARLEN_SIZE,),
            unsupported=lambda device: block_pointer_problem(),
        ),
    ]
