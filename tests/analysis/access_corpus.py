"""Small Triton kernels written for the access-analysis tests, each with the reads and writes it must report.

Every construct the analysis claims to handle appears here at least once; `Case.constructs` says
which. Arguments are meta tensors unless a case needs something else, so nothing here needs a
GPU or even memory.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice
from triton.tools.tensor_descriptor import TensorDescriptor

TRITON_VERSION = tuple(int(p) for p in triton.__version__.split(".")[:2])
#: Triton 3.9 removed block pointers (`tl.make_block_ptr`, `tl.advance`) in favour of tensor descriptors.
HAS_BLOCK_POINTERS = TRITON_VERSION < (3, 9)
#: `tl.atomic_load` and `tl.atomic_store` arrived after 3.6.
HAS_ATOMIC_LOAD_STORE = hasattr(tl, "atomic_load") and hasattr(tl, "atomic_store")

BLOCK = 16


def f32(n: int = 1024) -> torch.Tensor:
    return torch.empty(n, dtype=torch.float32, device="meta")


def i32(n: int = 1024) -> torch.Tensor:
    return torch.empty(n, dtype=torch.int32, device="meta")


def i64(n: int = 1024) -> torch.Tensor:
    return torch.empty(n, dtype=torch.int64, device="meta")


def descriptor(rows: int = 64, cols: int = 64) -> TensorDescriptor:
    return TensorDescriptor.from_tensor(torch.empty(rows, cols, device="meta"), [BLOCK, BLOCK])


@dataclass(frozen=True)
class Case:
    """One kernel, how to call it, and the answer the analysis must give."""

    name: str
    kernel: Any
    arguments: Callable[[], tuple[tuple[Any, ...], dict[str, Any]]]
    read: tuple[str, ...]
    written: tuple[str, ...]
    constructs: tuple[str, ...]
    certain: bool = True
    reason: str = ""  # a fragment the reason must contain when not certain
    available: bool = True
    unavailable_because: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


# --- straight-line code -------------------------------------------------------------------------


@triton.jit
def copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


@triton.jit
def add_inplace(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(x_ptr + offs, x + tl.load(y_ptr + offs, mask=mask), mask=mask)


@triton.jit
def untouched_arguments(x_ptr, unused_ptr, out_ptr, scale, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * scale, mask=offs < n)


@triton.jit
def scalars_and_none(x_ptr, y_ptr, alpha, maybe, flag, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    if maybe is not None:
        x = x + tl.load(maybe + offs)
    if flag:
        x = x * alpha
    tl.store(x_ptr + offs, x)


@triton.jit
def masked_by_loaded_values(x_ptr, mask_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    keep = tl.load(mask_ptr + offs) != 0
    tl.store(out_ptr + offs, tl.load(x_ptr + offs), mask=keep)


@triton.jit
def gather_scatter(index_ptr, x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    index = tl.load(index_ptr + offs)
    tl.store(out_ptr + index, tl.load(x_ptr + index))


@triton.jit
def matmul(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :])
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)


@triton.jit
def harmless_ops(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.assume(n > 0)
    x = tl.load(x_ptr + offs)
    tl.device_assert(n > 0, "n must be positive")
    tl.debug_barrier()
    tl.store(y_ptr + offs, libdevice.exp(x))


@triton.jit
def tuple_argument(pair, n):
    tl.store(pair[0] + n, tl.load(pair[1] + n))


# --- structured control flow --------------------------------------------------------------------


@triton.jit
def for_accumulate(x_ptr, out_ptr, n, STEPS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for i in range(0, n):
        acc += tl.load(x_ptr + i * BLOCK + offs)
    for _ in tl.static_range(STEPS):
        acc += 1.0
    tl.store(out_ptr + offs, acc)


@triton.jit
def for_pointer_advance(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    src = x_ptr
    dst = out_ptr
    for _ in range(0, n):
        tl.store(dst + offs, tl.load(src + offs))
        src += BLOCK
        dst += BLOCK


@triton.jit
def for_siblings(a_ptr, b_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    pa = a_ptr
    pb = b_ptr
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for _ in range(0, n):
        acc += tl.load(pa + offs)
        pa += BLOCK
        pb += BLOCK
    tl.store(pb + offs, acc)


@triton.jit
def while_loop(x_ptr, y_ptr, n):
    i = 0
    dst = y_ptr
    while i < n:
        tl.store(dst, tl.load(x_ptr + i))
        dst += 1
        i += 1


@triton.jit
def while_siblings(x_ptr, y_ptr, n):
    i = 0
    p = x_ptr
    q = y_ptr
    v = 0.0
    while i < n:
        v += tl.load(p)
        p += 1
        q += 1
        i += 1
    tl.store(q, v)


@triton.jit
def if_pointer_choice(a_ptr, b_ptr, x_ptr, flag, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    if flag > 0:
        p = a_ptr
    else:
        p = b_ptr
    tl.store(p + offs, tl.load(x_ptr + offs))


@triton.jit
def if_siblings(a_ptr, b_ptr, c_ptr, d_ptr, flag):
    if flag > 3:
        p = a_ptr
        q = b_ptr
    else:
        p = c_ptr
        q = d_ptr
    tl.store(p, tl.load(q))


@triton.jit
def if_store_in_branch(a_ptr, b_ptr, x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    v = tl.load(x_ptr + offs)
    if n > 3:
        tl.store(a_ptr + offs, v)
    else:
        v = v * 2
        tl.store(b_ptr + offs, v)
    tl.store(x_ptr + offs, v)


@triton.jit
def nested_loops_if(a_ptr, b_ptr, x_ptr, n, m, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    for i in range(0, n):
        p = x_ptr + i * BLOCK
        for j in range(0, m):
            if (i + j) % 2 == 0:
                dst = a_ptr
            else:
                dst = b_ptr
            tl.store(dst + offs, tl.load(p + offs))


@triton.jit
def where_pointers(a_ptr, b_ptr, x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    target = tl.where(offs < n, a_ptr + offs, b_ptr + offs)
    tl.store(target, tl.load(x_ptr + offs))


@triton.jit
def early_return(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    if pid * BLOCK >= n:
        return
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs))


@triton.jit
def early_return_after_store(x_ptr, y_ptr, z_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    if tl.program_id(0) == n:
        tl.store(z_ptr + offs, tl.load(x_ptr + offs))
        return
    tl.store(y_ptr + offs, tl.load(x_ptr + offs))


@triton.jit
def _product(a, b):
    return a * b


@triton.jit
def _argmax_combine(v1, i1, v2, i2):
    larger = v1 > v2
    return tl.where(larger, v1, v2), tl.where(larger, i1, i2)


@triton.jit
def reductions(x_ptr, out_ptr, index_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr, tl.reduce(x, 0, _product))
    value, index = tl.reduce((x, offs), 0, _argmax_combine)
    tl.store(out_ptr + 1, value)
    tl.store(index_ptr, index)
    tl.store(out_ptr + 2, tl.sum(x, axis=0))


@triton.jit
def scans(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, tl.cumsum(x, 0))
    tl.store(out_ptr + BLOCK + offs, tl.associative_scan(x, 0, _product))


@triton.jit
def _add_pair(a, b):
    return a + b


@triton.jit
def map_elementwise(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(y_ptr + offs, tl.map_elementwise(_add_pair, x, x))


# --- calls into noinline helpers ---------------------------------------------------------------


@triton.jit(noinline=True)
def _store_block(dst, src, pid, BLOCK: tl.constexpr):
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs))


@triton.jit
def noinline_store(x_ptr, out_ptr, BLOCK: tl.constexpr):
    _store_block(out_ptr, x_ptr, tl.program_id(0), BLOCK)


@triton.jit(noinline=True)
def _read_index(index_ptr, i):
    return tl.load(index_ptr + i)


@triton.jit
def noinline_reader(index_ptr, x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    row = _read_index(index_ptr, tl.program_id(0))
    tl.store(out_ptr + row * BLOCK + offs, tl.load(x_ptr + offs))


@triton.jit(noinline=True)
def _load_scalar(src, i):
    return tl.load(src + i)


@triton.jit(noinline=True)
def _store_scalar(dst, i, value):
    tl.store(dst + i, value)


@triton.jit(noinline=True)
def _move(dst, src, i):
    _store_scalar(dst, i, _load_scalar(src, i))


@triton.jit
def noinline_nested(a_ptr, b_ptr, c_ptr):
    pid = tl.program_id(0)
    _move(a_ptr, b_ptr, pid)
    _store_scalar(a_ptr, pid + 1, _load_scalar(c_ptr, pid))


@triton.jit(noinline=True)
def _offset_pointer(p, i):
    return p + i


@triton.jit
def noinline_returns_pointer(x_ptr, y_ptr, n):
    tl.store(_offset_pointer(x_ptr, n), tl.load(_offset_pointer(y_ptr, n)))


@triton.jit
def noinline_memoized(a_ptr, b_ptr, c_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    _store_block(a_ptr, b_ptr, pid, BLOCK)
    _store_block(c_ptr, a_ptr, pid, BLOCK)


@triton.jit(noinline=True)
def _add_to(dst, value):
    tl.atomic_add(dst, value)


@triton.jit
def noinline_atomic(counter_ptr, x_ptr):
    _add_to(counter_ptr, tl.load(x_ptr))


# --- block pointers and tensor descriptors ------------------------------------------------------

if HAS_BLOCK_POINTERS:

    @triton.jit
    def block_pointer_matmul(
        a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr
    ):
        a_block = tl.make_block_ptr(a_ptr, (M, K), (K, 1), (0, 0), (BM, BK), (1, 0))
        b_block = tl.make_block_ptr(b_ptr, (K, N), (N, 1), (0, 0), (BK, BN), (1, 0))
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for _ in range(0, K, BK):
            acc += tl.dot(tl.load(a_block), tl.load(b_block))
            a_block = tl.advance(a_block, (0, BK))
            b_block = tl.advance(b_block, (BK, 0))
        c_block = tl.make_block_ptr(c_ptr, (M, N), (N, 1), (0, 0), (BM, BN), (1, 0))
        tl.store(c_block, acc)

    @triton.jit
    def block_pointer_copy_loop(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        src = tl.make_block_ptr(x_ptr, (n,), (1,), (0,), (BLOCK,), (0,))
        dst = tl.make_block_ptr(y_ptr, (n,), (1,), (0,), (BLOCK,), (0,))
        for _ in range(0, n, BLOCK):
            tl.store(dst, tl.load(src))
            src = tl.advance(src, (BLOCK,))
            dst = tl.advance(dst, (BLOCK,))

else:
    block_pointer_matmul = None
    block_pointer_copy_loop = None


@triton.jit
def host_descriptors(a_desc, b_desc):
    b_desc.store([0, 0], a_desc.load([0, 0]) * 2)


@triton.jit
def host_descriptor_inplace(desc, n):
    for i in range(0, n):
        desc.store([i * 16, 0], desc.load([i * 16, 0]) + 1)


@triton.jit
def device_descriptors(a_ptr, b_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    a = tl.make_tensor_descriptor(a_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    b = tl.make_tensor_descriptor(b_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    for i in range(0, M // BM):
        b.store([i * BM, 0], a.load([i * BM, 0]))


# --- atomics -------------------------------------------------------------------------------------


@triton.jit
def atomic_add(target_ptr, values_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.atomic_add(target_ptr + offs, tl.load(values_ptr + offs))


@triton.jit
def atomic_max(target_ptr, values_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.atomic_max(target_ptr + offs, tl.load(values_ptr + offs))


@triton.jit
def atomic_min(target_ptr, values_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.atomic_min(target_ptr + offs, tl.load(values_ptr + offs))


@triton.jit
def atomic_and(target_ptr, values_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.atomic_and(target_ptr + offs, tl.load(values_ptr + offs))


@triton.jit
def atomic_or(target_ptr, values_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.atomic_or(target_ptr + offs, tl.load(values_ptr + offs))


@triton.jit
def atomic_xor(target_ptr, values_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.atomic_xor(target_ptr + offs, tl.load(values_ptr + offs))


@triton.jit
def atomic_xchg(target_ptr, values_ptr, old_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    old = tl.atomic_xchg(target_ptr + offs, tl.load(values_ptr + offs))
    tl.store(old_ptr + offs, old)


@triton.jit
def atomic_cas(lock_ptr, data_ptr):
    while tl.atomic_cas(lock_ptr, 0, 1) == 1:
        pass
    tl.store(data_ptr, tl.load(data_ptr) + 1)
    tl.atomic_xchg(lock_ptr, 0)


if HAS_ATOMIC_LOAD_STORE:

    @triton.jit
    def atomic_load_store(src_ptr, dst_ptr):
        tl.atomic_store(dst_ptr, tl.atomic_load(src_ptr))

else:
    atomic_load_store = None


# --- integer <-> pointer, loaded pointers, inline assembly ---------------------------------------


@triton.jit
def int_pointer_round_trip(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    address = x_ptr.to(tl.int64) + 64
    target = address.to(tl.pointer_type(tl.float32))
    tl.store(target + offs, tl.load(y_ptr + offs))


@triton.jit
def bitcast_pointer(x_ptr, y_ptr):
    bits = tl.cast(y_ptr, tl.int64, bitcast=True)
    tl.store(tl.cast(bits, tl.pointer_type(tl.float32), bitcast=True), tl.load(x_ptr))


@triton.jit
def integer_address_argument(x_ptr, address):
    target = address.to(tl.pointer_type(tl.float32))
    tl.store(target, tl.load(x_ptr))


@triton.jit
def pointer_table_store(table_ptr, x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    target = tl.load(table_ptr + tl.program_id(0)).to(tl.pointer_type(tl.float32))
    tl.store(target + offs, tl.load(x_ptr + offs))


@triton.jit
def pointer_table_load(table_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    source = tl.load(table_ptr + tl.program_id(0)).to(tl.pointer_type(tl.float32))
    tl.store(out_ptr + offs, tl.load(source + offs))


@triton.jit
def pure_inline_asm(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True, pack=1)
    tl.store(y_ptr + offs, y)


@triton.jit
def impure_inline_asm(x_ptr, y_ptr, z_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=False, pack=1)
    tl.store(y_ptr + offs, y)


def _blocked(**extra: Any) -> dict[str, Any]:
    return {"BLOCK": BLOCK, **extra}


CASES: list[Case] = [
    Case(
        "copy",
        copy,
        lambda: ((f32(), f32(), 1024), _blocked()),
        ("x_ptr",),
        ("y_ptr",),
        ("load", "store", "mask"),
    ),
    Case(
        "add_inplace",
        add_inplace,
        lambda: ((f32(), f32(), 1024), _blocked()),
        ("x_ptr", "y_ptr"),
        ("x_ptr",),
        ("read and written",),
    ),
    Case(
        "untouched_arguments",
        untouched_arguments,
        lambda: ((f32(), f32(), f32(), 2.0, 1024), _blocked()),
        ("x_ptr",),
        ("out_ptr",),
        ("untouched pointer", "float scalar"),
    ),
    Case(
        "scalars_and_none",
        scalars_and_none,
        lambda: ((f32(), f32(), 2.0, None, True), _blocked()),
        ("x_ptr",),
        ("x_ptr",),
        ("None argument", "bool argument"),
    ),
    Case(
        "masked_by_loaded_values",
        masked_by_loaded_values,
        lambda: ((f32(), i32(), f32()), _blocked()),
        ("mask_ptr", "x_ptr"),
        ("out_ptr",),
        ("mask loaded from memory",),
    ),
    Case(
        "gather_scatter",
        gather_scatter,
        lambda: ((i32(), f32(), f32()), _blocked()),
        ("index_ptr", "x_ptr"),
        ("out_ptr",),
        ("offsets loaded from memory",),
    ),
    Case(
        "matmul",
        matmul,
        lambda: ((f32(), f32(), f32(), 64), {"BM": 16, "BN": 16, "BK": 16}),
        ("a_ptr", "b_ptr"),
        ("c_ptr",),
        ("scf.for", "tl.dot"),
    ),
    Case(
        "harmless_ops",
        harmless_ops,
        lambda: ((f32(), f32(), 1024), _blocked()),
        ("x_ptr",),
        ("y_ptr",),
        ("tl.assume", "tl.device_assert", "tl.debug_barrier", "libdevice (pure extern)"),
    ),
    Case(
        "tuple_argument",
        tuple_argument,
        lambda: (((f32(), f32()), 3), {}),
        ("pair",),
        ("pair",),
        ("tuple argument",),
    ),
    Case(
        "for_accumulate",
        for_accumulate,
        lambda: ((f32(), f32(), 8), _blocked(STEPS=3)),
        ("x_ptr",),
        ("out_ptr",),
        ("scf.for", "static_range"),
    ),
    Case(
        "for_pointer_advance",
        for_pointer_advance,
        lambda: ((f32(), f32(), 8), _blocked()),
        ("x_ptr",),
        ("out_ptr",),
        ("scf.for", "pointer advanced in loop"),
    ),
    Case(
        "for_siblings",
        for_siblings,
        lambda: ((f32(), f32(), 8), _blocked()),
        ("a_ptr",),
        ("b_ptr",),
        ("scf.for", "one yield per result"),
    ),
    Case("while_loop", while_loop, lambda: ((f32(), f32(), 8), {}), ("x_ptr",), ("y_ptr",), ("scf.while",)),
    Case(
        "while_siblings",
        while_siblings,
        lambda: ((f32(), f32(), 8), {}),
        ("x_ptr",),
        ("y_ptr",),
        ("scf.while", "one yield per result"),
    ),
    Case(
        "if_pointer_choice",
        if_pointer_choice,
        lambda: ((f32(), f32(), f32(), 5), _blocked()),
        ("x_ptr",),
        ("a_ptr", "b_ptr"),
        ("scf.if", "pointer chosen by branch"),
    ),
    Case(
        "if_siblings",
        if_siblings,
        lambda: ((f32(), f32(), f32(), f32(), 5), {}),
        ("b_ptr", "d_ptr"),
        ("a_ptr", "c_ptr"),
        ("scf.if", "one yield per result"),
    ),
    Case(
        "if_store_in_branch",
        if_store_in_branch,
        lambda: ((f32(), f32(), f32(), 5), _blocked()),
        ("x_ptr",),
        ("a_ptr", "b_ptr", "x_ptr"),
        ("scf.if", "store inside a branch"),
    ),
    Case(
        "nested_loops_if",
        nested_loops_if,
        lambda: ((f32(), f32(), f32(), 4, 4), _blocked()),
        ("x_ptr",),
        ("a_ptr", "b_ptr"),
        ("nested scf.for", "scf.if in a loop"),
    ),
    Case(
        "where_pointers",
        where_pointers,
        lambda: ((f32(), f32(), f32(), 8), _blocked()),
        ("x_ptr",),
        ("a_ptr", "b_ptr"),
        ("tl.where on pointers",),
    ),
    Case(
        "early_return",
        early_return,
        lambda: ((f32(), f32(), 1024), _blocked()),
        ("x_ptr",),
        ("y_ptr",),
        ("early return",),
    ),
    Case(
        "early_return_after_store",
        early_return_after_store,
        lambda: ((f32(), f32(), f32(), 4), _blocked()),
        ("x_ptr",),
        ("y_ptr", "z_ptr"),
        ("early return", "store before return"),
    ),
    Case(
        "reductions",
        reductions,
        lambda: ((f32(), f32(), i32()), _blocked()),
        ("x_ptr",),
        ("index_ptr", "out_ptr"),
        ("tt.reduce", "multi-operand combine region"),
    ),
    Case("scans", scans, lambda: ((f32(), f32()), _blocked()), ("x_ptr",), ("out_ptr",), ("tt.scan",)),
    Case(
        "map_elementwise",
        map_elementwise,
        lambda: ((f32(), f32()), _blocked()),
        ("x_ptr",),
        ("y_ptr",),
        ("tt.map_elementwise",),
    ),
    Case(
        "noinline_store",
        noinline_store,
        lambda: ((f32(), f32()), _blocked()),
        ("x_ptr",),
        ("out_ptr",),
        ("tt.call", "noinline helper writes"),
    ),
    Case(
        "noinline_reader",
        noinline_reader,
        lambda: ((i32(), f32(), f32()), _blocked()),
        ("index_ptr", "x_ptr"),
        ("out_ptr",),
        ("tt.call", "noinline helper only reads"),
    ),
    Case(
        "noinline_nested",
        noinline_nested,
        lambda: ((f32(), f32(), f32()), {}),
        ("b_ptr", "c_ptr"),
        ("a_ptr",),
        ("tt.call", "nested noinline helpers"),
    ),
    Case(
        "noinline_returns_pointer",
        noinline_returns_pointer,
        lambda: ((f32(), f32(), 5), {}),
        ("y_ptr",),
        ("x_ptr",),
        ("tt.call", "helper returns a pointer"),
    ),
    Case(
        "noinline_memoized",
        noinline_memoized,
        lambda: ((f32(), f32(), f32()), _blocked()),
        ("a_ptr", "b_ptr"),
        ("a_ptr", "c_ptr"),
        ("tt.call", "one helper called twice with different roles"),
    ),
    Case(
        "noinline_atomic",
        noinline_atomic,
        lambda: ((f32(1), f32()), {}),
        ("counter_ptr", "x_ptr"),
        ("counter_ptr",),
        ("tt.call", "atomic in a helper"),
    ),
    Case(
        "block_pointer_matmul",
        block_pointer_matmul,
        lambda: ((f32(), f32(), f32(), 64, 64, 64), {"BM": 16, "BN": 16, "BK": 16}),
        ("a_ptr", "b_ptr"),
        ("c_ptr",),
        ("tl.make_block_ptr", "tl.advance in a loop"),
        available=HAS_BLOCK_POINTERS,
        unavailable_because="Triton 3.9 removed block pointers",
    ),
    Case(
        "block_pointer_copy_loop",
        block_pointer_copy_loop,
        lambda: ((f32(), f32(), 64), _blocked()),
        ("x_ptr",),
        ("y_ptr",),
        ("tl.make_block_ptr", "store through a block pointer advanced in a loop"),
        available=HAS_BLOCK_POINTERS,
        unavailable_because="Triton 3.9 removed block pointers",
    ),
    Case(
        "host_descriptors",
        host_descriptors,
        lambda: ((descriptor(), descriptor()), {}),
        ("a_desc",),
        ("b_desc",),
        ("host TensorDescriptor",),
    ),
    Case(
        "host_descriptor_inplace",
        host_descriptor_inplace,
        lambda: ((descriptor(), 4), {}),
        ("desc",),
        ("desc",),
        ("host TensorDescriptor", "in a loop"),
    ),
    Case(
        "device_descriptors",
        device_descriptors,
        lambda: ((f32(4096), f32(4096), 64, 64), {"BM": 16, "BN": 16}),
        ("a_ptr",),
        ("b_ptr",),
        ("tl.make_tensor_descriptor", "in a loop"),
    ),
    *[
        Case(
            f"atomic_{kind}",
            kernel,
            (lambda: ((i32(), i32()), _blocked())),
            ("target_ptr", "values_ptr"),
            ("target_ptr",),
            (f"tl.atomic_{kind}",),
        )
        for kind, kernel in [
            ("add", atomic_add),
            ("max", atomic_max),
            ("min", atomic_min),
            ("and", atomic_and),
            ("or", atomic_or),
            ("xor", atomic_xor),
        ]
    ],
    Case(
        "atomic_xchg",
        atomic_xchg,
        lambda: ((f32(), f32(), f32()), _blocked()),
        ("target_ptr", "values_ptr"),
        ("old_ptr", "target_ptr"),
        ("tl.atomic_xchg", "old value stored"),
    ),
    Case(
        "atomic_cas",
        atomic_cas,
        lambda: ((i32(1), f32(1)), {}),
        ("data_ptr", "lock_ptr"),
        ("data_ptr", "lock_ptr"),
        ("tl.atomic_cas", "spin lock in scf.while"),
    ),
    Case(
        "atomic_load_store",
        atomic_load_store,
        lambda: ((f32(1), f32(1)), {}),
        ("src_ptr",),
        ("dst_ptr",),
        ("tl.atomic_load", "tl.atomic_store"),
        available=HAS_ATOMIC_LOAD_STORE,
        unavailable_because="tl.atomic_load / tl.atomic_store are newer than this Triton",
    ),
    Case(
        "int_pointer_round_trip",
        int_pointer_round_trip,
        lambda: ((f32(), f32()), _blocked()),
        ("y_ptr",),
        ("x_ptr",),
        ("ptr -> int64 -> ptr",),
    ),
    Case(
        "bitcast_pointer",
        bitcast_pointer,
        lambda: ((f32(), f32()), {}),
        ("x_ptr",),
        ("y_ptr",),
        ("tl.cast(bitcast=True) ptr <-> int",),
    ),
    Case(
        "integer_address_argument",
        integer_address_argument,
        lambda: ((f32(), 2**40), {}),
        ("x_ptr",),
        ("x_ptr",),
        ("int64 argument cast to a pointer",),
        certain=False,
        reason="integer argument `address`",
    ),
    Case(
        "pointer_table_store",
        pointer_table_store,
        lambda: ((i64(8), f32()), _blocked()),
        ("table_ptr", "x_ptr"),
        ("table_ptr", "x_ptr"),
        ("store through a loaded pointer",),
        certain=False,
        reason="writes through a pointer loaded from `table_ptr`",
    ),
    Case(
        "pointer_table_load",
        pointer_table_load,
        lambda: ((i64(8), f32()), _blocked()),
        ("out_ptr", "table_ptr"),
        ("out_ptr",),
        ("load through a loaded pointer",),
        certain=False,
        reason="reads through a pointer loaded from `table_ptr`",
    ),
    Case(
        "pure_inline_asm",
        pure_inline_asm,
        lambda: ((f32(), f32()), _blocked()),
        ("x_ptr",),
        ("y_ptr",),
        ("pure tl.inline_asm_elementwise",),
    ),
    Case(
        "impure_inline_asm",
        impure_inline_asm,
        lambda: ((f32(), f32(), f32()), _blocked()),
        ("x_ptr", "y_ptr", "z_ptr"),
        ("x_ptr", "y_ptr", "z_ptr"),
        ("impure tl.inline_asm_elementwise",),
        certain=False,
        reason="not pure",
    ),
]
