# Copyright (c) the kernelpick authors. BSD-3-Clause license.
"""FlashAttention in Triton as Tri Dao's `flash_attn_triton.py` writes it: `@triton.heuristics` for
EVEN_M, EVEN_N and EVEN_HEADDIM (computed from each config's block sizes) over `@triton.jit`, under
`autotune`, keyed on the sequence lengths rounded to 32 (arguments the kernel never reads); any sequence
length and head dimension up to 128; a backward pass tuned over SEQUENCE_PARALLEL, whose configs'
`pre_hook` zeroes the fp32 dQ accumulator that one config adds to with atomics.

flash-attn leaves its forward's autotune commented out (one fixed config); here both passes are tuned,
the forward over that commented-out list. Attention bias is left out.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import triton
import triton.language as tl

from tests.tune.real_kernels.base import Autotune, Case, Inputs, Size, generator, launch

EVEN = {
    "EVEN_M": lambda args: args["seqlen_q"] % args["BLOCK_M"] == 0,
    "EVEN_N": lambda args: args["seqlen_k"] % args["BLOCK_N"] == 0,
    "EVEN_HEADDIM": lambda args: args["headdim"] == args["BLOCK_HEADDIM"],
}


def init_to_zero(name: str) -> Any:
    return lambda nargs: nargs[name].zero_()


def forward_configs() -> list[triton.Config]:
    return [
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 128}, num_warps=4, num_stages=1),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 128}, num_warps=8, num_stages=1),
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 64}, num_warps=4, num_stages=1),
    ]


def backward_configs() -> list[triton.Config]:
    return [
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "SEQUENCE_PARALLEL": parallel}, num_warps=8, num_stages=1,
                      pre_hook=init_to_zero("DQ"))
        for parallel in (False, True)
    ]  # fmt: skip


def tiny_forward_configs() -> list[triton.Config]:
    return [
        triton.Config({"BLOCK_M": m, "BLOCK_N": n}, num_warps=4, num_stages=1)
        for m, n in ((16, 16), (32, 32))
    ]


def tiny_backward_configs() -> list[triton.Config]:
    return [
        triton.Config({"BLOCK_M": 16, "BLOCK_N": 16, "SEQUENCE_PARALLEL": False}, num_warps=4, num_stages=1,
                      pre_hook=init_to_zero("DQ")),
        triton.Config({"BLOCK_M": 32, "BLOCK_N": 32, "SEQUENCE_PARALLEL": True}, num_warps=4, num_stages=1,
                      pre_hook=init_to_zero("DQ")),
    ]  # fmt: skip


@triton.jit
def _load_rows(ptrs, rows, seqlen, dims, headdim, EVEN_ROWS: tl.constexpr, EVEN_HEADDIM: tl.constexpr):
    # Masks only where the heuristics say a block may overhang the sequence or the head dimension.
    if EVEN_ROWS:
        if EVEN_HEADDIM:
            return tl.load(ptrs)
        else:
            return tl.load(ptrs, mask=dims[None, :] < headdim, other=0.0)
    else:
        if EVEN_HEADDIM:
            return tl.load(ptrs, mask=rows[:, None] < seqlen, other=0.0)
        else:
            return tl.load(ptrs, mask=(rows[:, None] < seqlen) & (dims[None, :] < headdim), other=0.0)


@triton.jit
def _store_rows(
    ptrs, value, rows, seqlen, dims, headdim, EVEN_ROWS: tl.constexpr, EVEN_HEADDIM: tl.constexpr
):
    if EVEN_ROWS:
        if EVEN_HEADDIM:
            tl.store(ptrs, value)
        else:
            tl.store(ptrs, value, mask=dims[None, :] < headdim)
    else:
        if EVEN_HEADDIM:
            tl.store(ptrs, value, mask=rows[:, None] < seqlen)
        else:
            tl.store(ptrs, value, mask=(rows[:, None] < seqlen) & (dims[None, :] < headdim))


def make_fwd_kernel(autotune: Autotune, configs: list[triton.Config]) -> Any:
    @autotune(configs=configs, key=["CACHE_KEY_SEQLEN_Q", "CACHE_KEY_SEQLEN_K", "IS_CAUSAL", "BLOCK_HEADDIM"])
    @triton.heuristics(EVEN)
    @triton.jit
    def _fwd_kernel(
        Q, K, V, Out, Lse,
        softmax_scale,
        stride_qb, stride_qh, stride_qm,
        stride_kb, stride_kh, stride_kn,
        stride_vb, stride_vh, stride_vn,
        stride_ob, stride_oh, stride_om,
        nheads, seqlen_q, seqlen_k, seqlen_q_rounded, headdim,
        CACHE_KEY_SEQLEN_Q, CACHE_KEY_SEQLEN_K,
        IS_CAUSAL: tl.constexpr,
        BLOCK_HEADDIM: tl.constexpr,
        EVEN_M: tl.constexpr, EVEN_N: tl.constexpr, EVEN_HEADDIM: tl.constexpr,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    ):  # fmt: skip
        start_m = tl.program_id(0)
        off_hb = tl.program_id(1)
        off_b = off_hb // nheads
        off_h = off_hb % nheads
        rows = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = tl.arange(0, BLOCK_N)
        dims = tl.arange(0, BLOCK_HEADDIM)
        q_ptrs = Q + off_b * stride_qb + off_h * stride_qh + (rows[:, None] * stride_qm + dims[None, :])
        k_ptrs = K + off_b * stride_kb + off_h * stride_kh + (cols[:, None] * stride_kn + dims[None, :])
        v_ptrs = V + off_b * stride_vb + off_h * stride_vh + (cols[:, None] * stride_vn + dims[None, :])

        lse_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
        m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
        acc_o = tl.zeros([BLOCK_M, BLOCK_HEADDIM], dtype=tl.float32)
        q = _load_rows(q_ptrs, rows, seqlen_q, dims, headdim, EVEN_M & EVEN_N, EVEN_HEADDIM)
        end_n = seqlen_k if not IS_CAUSAL else tl.minimum((start_m + 1) * BLOCK_M, seqlen_k)
        for start_n in range(0, end_n, BLOCK_N):
            start_n = tl.multiple_of(start_n, BLOCK_N)
            k = _load_rows(k_ptrs + start_n * stride_kn, start_n + cols, seqlen_k, dims, headdim,
                           EVEN_M & EVEN_N, EVEN_HEADDIM)  # fmt: skip
            qk = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
            qk += tl.dot(q, tl.trans(k))
            if not EVEN_N:  # keys past the end must not enter the softmax
                qk += tl.where((start_n + cols)[None, :] < seqlen_k, 0, float("-inf"))
            if IS_CAUSAL:
                qk += tl.where(rows[:, None] >= (start_n + cols)[None, :], 0, float("-inf"))
            m_ij = tl.maximum(tl.max(qk, 1) * softmax_scale, lse_i)
            p = tl.exp(qk * softmax_scale - m_ij[:, None])
            l_ij = tl.sum(p, 1)
            acc_o = acc_o * tl.exp(m_i - m_ij)[:, None]
            v = _load_rows(v_ptrs + start_n * stride_vn, start_n + cols, seqlen_k, dims, headdim,
                           EVEN_M & EVEN_N, EVEN_HEADDIM)  # fmt: skip
            acc_o += tl.dot(p.to(v.dtype), v)
            m_i = m_ij
            lse_i = m_ij + tl.log(tl.exp(lse_i - m_ij) + l_ij)

        acc_o = acc_o * tl.exp(m_i - lse_i)[:, None]
        tl.store(Lse + off_hb * seqlen_q_rounded + rows, lse_i)  # rounded up: no mask
        out_ptrs = Out + off_b * stride_ob + off_h * stride_oh + (rows[:, None] * stride_om + dims[None, :])
        _store_rows(out_ptrs, acc_o, rows, seqlen_q, dims, headdim, EVEN_M, EVEN_HEADDIM)

    return _fwd_kernel


@triton.jit
def _bwd_preprocess_do_o_dot(
    Out, DO, Delta,
    stride_ob, stride_oh, stride_om,
    stride_dob, stride_doh, stride_dom,
    nheads, seqlen_q, seqlen_q_rounded, headdim,
    BLOCK_M: tl.constexpr, BLOCK_HEADDIM: tl.constexpr,
):  # fmt: skip
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    off_hb = tl.program_id(1)
    off_b = off_hb // nheads
    off_h = off_hb % nheads
    dims = tl.arange(0, BLOCK_HEADDIM)
    mask = (rows[:, None] < seqlen_q) & (dims[None, :] < headdim)
    o = tl.load(
        Out + off_b * stride_ob + off_h * stride_oh + rows[:, None] * stride_om + dims[None, :],
        mask=mask,
        other=0.0,
    ).to(tl.float32)
    do = tl.load(DO + off_b * stride_dob + off_h * stride_doh + rows[:, None] * stride_dom + dims[None, :],
                 mask=mask, other=0.0).to(tl.float32)  # fmt: skip
    tl.store(Delta + off_hb * seqlen_q_rounded + rows, tl.sum(o * do, axis=1))


@triton.jit
def _bwd_kernel_one_col_block(
    start_n,
    Q, K, V,
    DO, DQ, DK, DV,
    LSE, D,
    softmax_scale,
    stride_qm, stride_kn, stride_vn,
    stride_dom, stride_dqm, stride_dkn, stride_dvn,
    seqlen_q, seqlen_k, headdim,
    ATOMIC_ADD: tl.constexpr,
    IS_CAUSAL: tl.constexpr,
    BLOCK_HEADDIM: tl.constexpr,
    EVEN_M: tl.constexpr, EVEN_N: tl.constexpr, EVEN_HEADDIM: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    # dK and dV of one block of keys; its share of dQ, added to every block of queries it sees.
    begin_m = 0 if not IS_CAUSAL else ((start_n * BLOCK_N) // BLOCK_M) * BLOCK_M  # a multiple of BLOCK_M
    keys = start_n * BLOCK_N + tl.arange(0, BLOCK_N)
    local_rows = tl.arange(0, BLOCK_M)
    dims = tl.arange(0, BLOCK_HEADDIM)
    q_ptrs = Q + ((begin_m + local_rows)[:, None] * stride_qm + dims[None, :])
    do_ptrs = DO + ((begin_m + local_rows)[:, None] * stride_dom + dims[None, :])
    dq_ptrs = DQ + ((begin_m + local_rows)[:, None] * stride_dqm + dims[None, :])
    dv = tl.zeros([BLOCK_N, BLOCK_HEADDIM], dtype=tl.float32)
    dk = tl.zeros([BLOCK_N, BLOCK_HEADDIM], dtype=tl.float32)
    dv_ptrs = DV + (keys[:, None] * stride_dvn + dims[None, :])
    dk_ptrs = DK + (keys[:, None] * stride_dkn + dims[None, :])
    if begin_m >= seqlen_q:  # no query sees these keys (causal, seqlen_k > seqlen_q)
        _store_rows(dv_ptrs, dv, keys, seqlen_k, dims, headdim, EVEN_M & EVEN_N, EVEN_HEADDIM)
        _store_rows(dk_ptrs, dk, keys, seqlen_k, dims, headdim, EVEN_M & EVEN_N, EVEN_HEADDIM)
        return
    k = _load_rows(K + (keys[:, None] * stride_kn + dims[None, :]), keys, seqlen_k, dims, headdim,
                   EVEN_M & EVEN_N, EVEN_HEADDIM)  # fmt: skip
    v = _load_rows(V + (keys[:, None] * stride_vn + dims[None, :]), keys, seqlen_k, dims, headdim,
                   EVEN_M & EVEN_N, EVEN_HEADDIM)  # fmt: skip
    for start_m in range(begin_m, tl.cdiv(seqlen_q, BLOCK_M) * BLOCK_M, BLOCK_M):
        start_m = tl.multiple_of(start_m, BLOCK_M)
        rows = start_m + local_rows
        q = _load_rows(q_ptrs, rows, seqlen_q, dims, headdim, EVEN_M, EVEN_HEADDIM)
        qk = tl.dot(q, tl.trans(k))  # recompute P = softmax(Q K^T)
        if not EVEN_N:
            qk = tl.where(keys[None, :] < seqlen_k, qk, float("-inf"))
        if IS_CAUSAL:
            qk = tl.where(rows[:, None] >= keys[None, :], qk, float("-inf"))
        if not (EVEN_M & EVEN_HEADDIM):
            tl.debug_barrier()  # flash-attn: races otherwise, at some head dimensions
        lse_i = tl.load(LSE + rows)
        p = tl.exp(qk * softmax_scale - lse_i[:, None])
        do = _load_rows(do_ptrs, rows, seqlen_q, dims, headdim, EVEN_M & EVEN_HEADDIM, EVEN_M & EVEN_HEADDIM)
        dv += tl.dot(tl.trans(p.to(do.dtype)), do)
        if not (EVEN_M & EVEN_HEADDIM):
            tl.debug_barrier()
        dp = tl.dot(do, tl.trans(v))
        delta = tl.load(D + rows)
        ds = (p * (dp - delta[:, None]) * softmax_scale).to(q.dtype)
        dk += tl.dot(tl.trans(ds), q)
        if not (EVEN_M & EVEN_HEADDIM):
            tl.debug_barrier()
        if not ATOMIC_ADD:  # one program per head walks every key block: no other writer
            dq = _load_rows(dq_ptrs, rows, seqlen_q, dims, headdim, EVEN_M, EVEN_HEADDIM)
            dq += tl.dot(ds, k)
            _store_rows(dq_ptrs, dq, rows, seqlen_q, dims, headdim, EVEN_M, EVEN_HEADDIM)
        else:  # key blocks run in parallel (SEQUENCE_PARALLEL): they add to dQ together
            if EVEN_M & EVEN_HEADDIM:
                tl.atomic_add(dq_ptrs, tl.dot(ds, k))
            else:
                tl.atomic_add(
                    dq_ptrs, tl.dot(ds, k), mask=(rows[:, None] < seqlen_q) & (dims[None, :] < headdim)
                )
        q_ptrs += BLOCK_M * stride_qm
        do_ptrs += BLOCK_M * stride_dom
        dq_ptrs += BLOCK_M * stride_dqm
    _store_rows(dv_ptrs, dv, keys, seqlen_k, dims, headdim, EVEN_M & EVEN_N, EVEN_HEADDIM)
    _store_rows(dk_ptrs, dk, keys, seqlen_k, dims, headdim, EVEN_M & EVEN_N, EVEN_HEADDIM)


def make_bwd_kernel(autotune: Autotune, configs: list[triton.Config]) -> Any:
    @autotune(configs=configs, key=["CACHE_KEY_SEQLEN_Q", "CACHE_KEY_SEQLEN_K", "IS_CAUSAL", "BLOCK_HEADDIM"])
    @triton.heuristics(EVEN)
    @triton.jit
    def _bwd_kernel(
        Q, K, V,
        DO, DQ, DK, DV,
        LSE, D,
        softmax_scale,
        stride_qb, stride_qh, stride_qm,
        stride_kb, stride_kh, stride_kn,
        stride_vb, stride_vh, stride_vn,
        stride_dob, stride_doh, stride_dom,
        stride_dqb, stride_dqh, stride_dqm,
        stride_dkb, stride_dkh, stride_dkn,
        stride_dvb, stride_dvh, stride_dvn,
        nheads, seqlen_q, seqlen_k, seqlen_q_rounded, headdim,
        CACHE_KEY_SEQLEN_Q, CACHE_KEY_SEQLEN_K,
        IS_CAUSAL: tl.constexpr,
        BLOCK_HEADDIM: tl.constexpr,
        SEQUENCE_PARALLEL: tl.constexpr,
        EVEN_M: tl.constexpr, EVEN_N: tl.constexpr, EVEN_HEADDIM: tl.constexpr,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    ):  # fmt: skip
        off_hb = tl.program_id(1)
        off_b = off_hb // nheads
        off_h = off_hb % nheads
        Q += off_b * stride_qb + off_h * stride_qh
        K += off_b * stride_kb + off_h * stride_kh
        V += off_b * stride_vb + off_h * stride_vh
        DO += off_b * stride_dob + off_h * stride_doh
        DQ += off_b * stride_dqb + off_h * stride_dqh
        DK += off_b * stride_dkb + off_h * stride_dkh
        DV += off_b * stride_dvb + off_h * stride_dvh
        D += off_hb * seqlen_q_rounded
        LSE += off_hb * seqlen_q_rounded
        if not SEQUENCE_PARALLEL:
            for start_n in range(0, tl.cdiv(seqlen_k, BLOCK_N)):
                _bwd_kernel_one_col_block(
                    start_n, Q, K, V, DO, DQ, DK, DV, LSE, D, softmax_scale,
                    stride_qm, stride_kn, stride_vn, stride_dom, stride_dqm, stride_dkn, stride_dvn,
                    seqlen_q, seqlen_k, headdim,
                    ATOMIC_ADD=False, IS_CAUSAL=IS_CAUSAL, BLOCK_HEADDIM=BLOCK_HEADDIM,
                    EVEN_M=EVEN_M, EVEN_N=EVEN_N, EVEN_HEADDIM=EVEN_HEADDIM, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                )  # fmt: skip
        else:
            _bwd_kernel_one_col_block(
                tl.program_id(0), Q, K, V, DO, DQ, DK, DV, LSE, D, softmax_scale,
                stride_qm, stride_kn, stride_vn, stride_dom, stride_dqm, stride_dkn, stride_dvn,
                seqlen_q, seqlen_k, headdim,
                ATOMIC_ADD=True, IS_CAUSAL=IS_CAUSAL, BLOCK_HEADDIM=BLOCK_HEADDIM,
                EVEN_M=EVEN_M, EVEN_N=EVEN_N, EVEN_HEADDIM=EVEN_HEADDIM, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
            )  # fmt: skip

    return _bwd_kernel


def build(autotune: Autotune, forward: list[triton.Config], backward: list[triton.Config]) -> Any:
    """`flash_attn_func(q, k, v, causal, softmax_scale)`: q, k, v as (batch, seqlen, nheads, headdim)."""
    fwd_kernel = make_fwd_kernel(autotune, forward)
    bwd_kernel = make_bwd_kernel(autotune, backward)

    def _flash_attn_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
                            softmax_scale: float | None) -> tuple[torch.Tensor, torch.Tensor, float]:  # fmt: skip
        batch, seqlen_q, nheads, d = q.shape
        seqlen_k = k.shape[1]
        assert k.shape == v.shape == (batch, seqlen_k, nheads, d)
        assert d <= 128, "FlashAttention only supports head dimensions up to 128"
        assert q.dtype == k.dtype == v.dtype and q.dtype in (torch.float16, torch.bfloat16)
        softmax_scale = softmax_scale or 1.0 / math.sqrt(d)
        seqlen_q_rounded = math.ceil(seqlen_q / 128) * 128
        lse = torch.empty((batch, nheads, seqlen_q_rounded), device=q.device, dtype=torch.float32)
        o = torch.empty_like(q)
        block_headdim = max(triton.next_power_of_2(d), 16)
        grid = lambda META: (triton.cdiv(seqlen_q, META["BLOCK_M"]), batch * nheads)  # noqa: E731
        fwd_kernel[grid](
            q, k, v, o, lse, softmax_scale,
            q.stride(0), q.stride(2), q.stride(1),
            k.stride(0), k.stride(2), k.stride(1),
            v.stride(0), v.stride(2), v.stride(1),
            o.stride(0), o.stride(2), o.stride(1),
            nheads, seqlen_q, seqlen_k, seqlen_q_rounded, d,
            seqlen_q // 32, seqlen_k // 32,  # the tuning key: a new tuning per 32 tokens, not per token
            causal, block_headdim,
        )  # fmt: skip
        return o, lse, softmax_scale

    def _flash_attn_backward(do: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                             o: torch.Tensor, lse: torch.Tensor, dq: torch.Tensor, dk: torch.Tensor,
                             dv: torch.Tensor, causal: bool, softmax_scale: float) -> None:  # fmt: skip
        do = do if do.stride(-1) == 1 else do.contiguous()
        batch, seqlen_q, nheads, d = q.shape
        seqlen_k = k.shape[1]
        seqlen_q_rounded = math.ceil(seqlen_q / 128) * 128
        dq_accum = torch.empty_like(q, dtype=torch.float32)  # zeroed by each config's pre_hook
        delta = torch.empty_like(lse)
        block_headdim = max(triton.next_power_of_2(d), 16)
        launch(
            _bwd_preprocess_do_o_dot, (triton.cdiv(seqlen_q, 128), batch * nheads),
            o, do, delta, o.stride(0), o.stride(2), o.stride(1), do.stride(0), do.stride(2), do.stride(1),
            nheads, seqlen_q, seqlen_q_rounded, d, BLOCK_M=128, BLOCK_HEADDIM=block_headdim,
        )  # fmt: skip
        grid = lambda META: (  # noqa: E731
            triton.cdiv(seqlen_k, META["BLOCK_N"]) if META["SEQUENCE_PARALLEL"] else 1,
            batch * nheads,
        )
        bwd_kernel[grid](
            q, k, v, do, dq_accum, dk, dv, lse, delta, softmax_scale,
            q.stride(0), q.stride(2), q.stride(1),
            k.stride(0), k.stride(2), k.stride(1),
            v.stride(0), v.stride(2), v.stride(1),
            do.stride(0), do.stride(2), do.stride(1),
            dq_accum.stride(0), dq_accum.stride(2), dq_accum.stride(1),
            dk.stride(0), dk.stride(2), dk.stride(1),
            dv.stride(0), dv.stride(2), dv.stride(1),
            nheads, seqlen_q, seqlen_k, seqlen_q_rounded, d,
            seqlen_q // 32, seqlen_k // 32,
            causal, block_headdim,
        )  # fmt: skip
        dq.copy_(dq_accum)

    class FlashAttnFunc(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                    softmax_scale: float | None = None) -> torch.Tensor:  # fmt: skip
            q, k, v = (x if x.stride(-1) == 1 else x.contiguous() for x in (q, k, v))
            o, lse, ctx.softmax_scale = _flash_attn_forward(q, k, v, causal, softmax_scale)
            ctx.save_for_backward(q, k, v, o, lse)
            ctx.causal = causal
            return o

        @staticmethod
        def backward(ctx: Any, do: torch.Tensor) -> tuple[Any, ...]:
            q, k, v, o, lse = ctx.saved_tensors
            # flash-attn: tuning bumps the tensors' versions, so autograd would copy them; not here.
            with torch.inference_mode():
                dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
                _flash_attn_backward(do, q, k, v, o, lse, dq, dk, dv, ctx.causal, ctx.softmax_scale)
            return dq, dk, dv, None, None

    return FlashAttnFunc.apply


# -- the case: causal forward and backward, fp16 ---------------------------------------------------


def build_forward_backward(autotune: Autotune, configs: list[triton.Config]) -> Any:
    """The case's configs are the forward's and the backward's together, told apart by SEQUENCE_PARALLEL."""
    forward = [c for c in configs if "SEQUENCE_PARALLEL" not in c.kwargs]
    backward = [c for c in configs if "SEQUENCE_PARALLEL" in c.kwargs]
    flash_attn_func = build(autotune, forward, backward)

    def forward_backward(
        q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dout: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
        o = flash_attn_func(q, k, v, True)
        return (o.detach(), *torch.autograd.grad(o, (q, k, v), dout))

    return forward_backward


def make_inputs(size: Size, device: str) -> Inputs:
    source = generator(device)
    shape = (size["batch"], size["seqlen"], size["nheads"], size["headdim"])
    q, k, v, dout = (
        torch.randn(shape, device=device, dtype=torch.float16, generator=source) for _ in range(4)
    )
    return q, k, v, dout


def attention_ref(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, upcast: bool) -> torch.Tensor:
    """Causal attention in (batch, seqlen, nheads, headdim), in fp32 when `upcast`, as flash-attn's tests."""
    dtype = q.dtype
    if upcast:
        q, k, v = q.float(), k.float(), v.float()
    scores = torch.einsum("bthd,bshd->bhts", q, k / math.sqrt(q.shape[-1]))
    future = torch.triu(torch.ones(scores.shape[-2:], dtype=torch.bool, device=q.device), 1)
    attention = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
    return torch.einsum("bhts,bshd->bthd", attention, v).to(dtype)


def check(inputs: Inputs, outputs: tuple[torch.Tensor, ...]) -> None:
    """flash-attn's test: each of output, dQ, dK and dV at most twice as far from the fp32 reference as
    the same reference computed in fp16 is (plus 1e-3, for the tiny sizes where that is 0)."""
    q, k, v, dout = inputs
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    exact = attention_ref(*leaves, upcast=True)
    exact_values = (exact.detach(), *torch.autograd.grad(exact, leaves, dout))
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    fp16 = attention_ref(*leaves, upcast=False)
    fp16_values = (fp16.detach(), *torch.autograd.grad(fp16, leaves, dout))
    for name, actual, reference, rounded in zip(
        ("out", "dq", "dk", "dv"), outputs, exact_values, fp16_values
    ):
        error = (actual.float() - reference.float()).abs().max().item()
        allowed = 2 * (rounded.float() - reference.float()).abs().max().item() + 1e-3
        assert error <= allowed, f"{name}: max error {error:.3g} against fp32, allowed {allowed:.3g}"


def cases() -> list[Case]:
    return [
        Case(
            name="flash-attn-triton-causal-fp16",
            summary="Tri Dao's Triton FlashAttention style: EVEN_M/N/HEADDIM heuristics under autotune, "
            "fwd and bwd (atomic dQ, zeroing pre_hook), any seqlen and headdim",
            build=build_forward_backward,
            make_inputs=make_inputs,
            check=check,
            configs=lambda: forward_configs() + backward_configs(),
            tiny_configs=lambda: tiny_forward_configs() + tiny_backward_configs(),
            # 48 tokens: BLOCK 16 divides them, BLOCK 32 does not; head dimension 24 pads to 32.
            tiny_size={"batch": 1, "seqlen": 48, "nheads": 1, "headdim": 24},
            sizes=(
                {"batch": 4, "seqlen": 1024, "nheads": 32, "headdim": 64},
                {"batch": 4, "seqlen": 4096, "nheads": 32, "headdim": 128},
                {"batch": 4, "seqlen": 1000, "nheads": 32, "headdim": 80},
            ),
        )
    ]
