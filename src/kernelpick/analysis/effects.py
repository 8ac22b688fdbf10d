"""What each Triton op does to memory and to the provenance of the pointers it computes.

The tables cover the ops of every supported Triton release (3.4 to 3.9 at least). An op missing
from them is *not understood*: the analysis then answers conservatively rather than guess.
"""

from __future__ import annotations

from kernelpick.analysis.functions import FLOW, REGION_COMPUTE

#: Ops that write memory, with the index of the operand that says where (a pointer, a tensor of
#: pointers, a block pointer or a tensor descriptor).
WRITE_OPERAND: dict[str, int] = {
    "tt.store": 0,
    "tt.atomic_rmw": 0,
    "tt.atomic_cas": 0,
    "tt.atomic_store": 0,
    "tt.descriptor_store": 0,
    "tt.descriptor_scatter": 0,
    "tt.descriptor_reduce": 0,
    # Releases before 3.4 spelled descriptor stores and device-side tensormap creation this way.
    "tt.experimental_descriptor_store": 0,
    "tt.experimental_tensormap_create": 0,
}

#: Ops that read memory, with the index of the operand that says where.
READ_OPERAND: dict[str, int] = {
    "tt.load": 0,
    "tt.atomic_rmw": 0,
    "tt.atomic_cas": 0,
    "tt.atomic_load": 0,
    "tt.atomic_poll": 0,
    "tt.descriptor_load": 0,
    "tt.descriptor_gather": 0,
    "tt.descriptor_reduce": 0,
    "tt.descriptor_prefetch": 0,
    "tt.experimental_descriptor_load": 0,
    # Reads a tensormap from global memory; the descriptor it makes points wherever that tensormap says.
    "tt.reinterpret_tensor_descriptor": 0,
}

#: Ops whose results are values read from memory: their provenance is the memory, not their operands.
LOADS = frozenset(
    {
        "tt.load",
        "tt.atomic_rmw",
        "tt.atomic_cas",
        "tt.atomic_load",
        "tt.atomic_poll",
        "tt.descriptor_load",
        "tt.descriptor_gather",
        "tt.experimental_descriptor_load",
        "tt.reinterpret_tensor_descriptor",
    }
)

#: Ops whose result points into the same memory as some of their operands only (the others are
#: offsets, shapes, strides or a condition): operand indices that carry provenance.
ADDRESS_OPERANDS: dict[str, tuple[int, ...]] = {
    "tt.addptr": (0,),
    "tt.advance": (0,),
    "tt.make_tensor_ptr": (0,),
    "tt.make_tensor_descriptor": (0,),
    "arith.select": (1, 2),
}

#: Integer ops where one operand is typically a base address and the other an offset: when exactly
#: one operand derives from a pointer, the result derives from that operand only.
BASE_PLUS_OFFSET = frozenset({"arith.addi", "arith.subi"})

#: Ops with no memory effect of their own beyond the tables above; their results derive from all
#: their operands unless `ADDRESS_OPERANDS` says otherwise.
UNDERSTOOD = frozenset(
    {
        FLOW,
        *REGION_COMPUTE,
        "scf.for",
        "scf.while",
        "scf.if",
        "tt.reduce",
        "tt.scan",
        "tt.call",
        "tt.elementwise_inline_asm",
        "tt.extern_elementwise",
        "tt.addptr",
        "tt.advance",
        "tt.make_tensor_ptr",
        "tt.make_tensor_descriptor",
        "tt.splat",
        "tt.unsplat",
        "tt.broadcast",
        "tt.expand_dims",
        "tt.reshape",
        "tt.trans",
        "tt.cat",
        "tt.join",
        "tt.split",
        "tt.make_range",
        "tt.get_program_id",
        "tt.get_num_programs",
        "tt.dot",
        "tt.dot_scaled",
        "tt.fp_to_fp",
        "tt.bitcast",
        "tt.int_to_ptr",
        "tt.ptr_to_int",
        "tt.histogram",
        "tt.gather",
        "tt.clampf",
        "tt.precise_sqrt",
        "tt.precise_divf",
        "tt.approx_divf",
        "tt.mulhiui",
        "tt.print",
        "tt.assert",
        "tt.experimental_tensormap_fenceproxy_acquire",
        "tt.grid_dependency_wait",
        "tt.grid_dependency_launch_dependents",
        "gpu.barrier",
        "ttg.barrier",
        "ub.poison",
        "llvm.intr.assume",
    }
)

#: Dialects whose every op is free of memory effects (arithmetic and math functions).
PURE_DIALECTS = ("arith.", "math.")

#: Ops whose `pure` attribute says whether they may touch memory behind the compiler's back.
MAYBE_IMPURE = frozenset({"tt.elementwise_inline_asm", "tt.extern_elementwise"})


def is_understood(name: str) -> bool:
    """Whether the analysis knows every effect of the op `name`."""
    return (
        name in UNDERSTOOD or name in WRITE_OPERAND or name in READ_OPERAND or name.startswith(PURE_DIALECTS)
    )


def is_address_type(printed_type: str) -> bool:
    """Whether a printed MLIR type holds addresses: a pointer, a tensor of pointers, a block pointer or a descriptor."""
    return "!tt.ptr" in printed_type or "tensordesc" in printed_type
