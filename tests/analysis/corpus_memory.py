"""Corpus kernels for block pointers, tensor descriptors, atomics, integer <-> pointer casts, loaded pointers and inline assembly."""

from __future__ import annotations

import triton
import triton.language as tl
from corpus_support import (
    BLOCK,
    HAS_ATOMIC_LOAD_STORE,
    HAS_BLOCK_POINTERS,
    Case,
    blocked,
    descriptor,
    f32,
    i32,
    i64,
)

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
def descriptor_reduce_gather_scatter(a_desc, b_desc, rows_desc, index_ptr):
    b_desc.atomic_add([0, 0], a_desc.load([0, 0]))
    rows = tl.load(index_ptr + tl.arange(0, 16))
    rows_desc.scatter(rows_desc.gather(rows, 0) * 2, rows, 0)


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


CASES: list[Case] = [
    Case(
        "block_pointer_matmul",
        block_pointer_matmul,
        lambda: ((f32(4096), f32(4096), f32(4096), 64, 64, 64), {"BM": 16, "BN": 16, "BK": 16}),
        ("a_ptr", "b_ptr"),
        ("c_ptr",),
        ("tl.make_block_ptr", "tl.advance in a loop"),
        available=HAS_BLOCK_POINTERS,
        unavailable_because="Triton 3.9 removed block pointers",
    ),
    Case(
        "block_pointer_copy_loop",
        block_pointer_copy_loop,
        lambda: ((f32(), f32(), 64), blocked()),
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
        "descriptor_reduce_gather_scatter",
        descriptor_reduce_gather_scatter,
        lambda: ((descriptor(), descriptor(), descriptor(block=(1, BLOCK)), i32()), {}),
        ("a_desc", "b_desc", "index_ptr", "rows_desc"),
        ("b_desc", "rows_desc"),
        ("descriptor atomic_add", "descriptor gather", "descriptor scatter"),
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
            (lambda: ((i32(), i32()), blocked())),
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
        lambda: ((f32(), f32(), f32()), blocked()),
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
        lambda: ((f32(), f32()), blocked()),
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
        elsewhere="integer argument `address`",
    ),
    Case(
        "pointer_table_store",
        pointer_table_store,
        lambda: ((i64(8), f32()), blocked()),
        ("table_ptr", "x_ptr"),
        ("table_ptr", "x_ptr"),
        ("store through a loaded pointer",),
        certain=False,
        reason="writes through a pointer loaded from `table_ptr`",
        elsewhere="writes through a pointer loaded from `table_ptr`",
    ),
    Case(
        "pointer_table_load",
        pointer_table_load,
        lambda: ((i64(8), f32()), blocked()),
        ("out_ptr", "table_ptr"),
        ("out_ptr",),
        ("load through a loaded pointer",),
        certain=False,
        reason="reads through a pointer loaded from `table_ptr`",
    ),
    Case(
        "pure_inline_asm",
        pure_inline_asm,
        lambda: ((f32(), f32()), blocked()),
        ("x_ptr",),
        ("y_ptr",),
        ("pure tl.inline_asm_elementwise",),
    ),
    Case(
        "impure_inline_asm",
        impure_inline_asm,
        lambda: ((f32(), f32(), f32()), blocked()),
        ("x_ptr", "y_ptr", "z_ptr"),
        ("x_ptr", "y_ptr", "z_ptr"),
        ("impure tl.inline_asm_elementwise",),
        certain=False,
        reason="not pure",
    ),
]
