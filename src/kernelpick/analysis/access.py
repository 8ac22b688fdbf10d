"""Which kernel parameters a program reads and writes: pointer provenance over plain functions of ops."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kernelpick.analysis.functions import FLOW, REGION_COMPUTE, Function, Op, Program

# What each Triton op does to memory and to the provenance of the pointers it computes: the tables
# below cover the ops of every supported Triton release (3.4 to 3.9 at least). An op missing from
# them is not understood, and the analysis then answers conservatively rather than guess.

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


@dataclass(frozen=True, slots=True)
class Loaded:
    """Memory contents: a value loaded through a pointer derived from these parameters of the function."""

    sources: frozenset[int]


@dataclass(frozen=True, slots=True)
class Opaque:
    """A value the analysis cannot follow, and why."""

    why: str


#: A parameter of the function (its index), memory contents, or something unknown.
Origin = int | Loaded | Opaque
Origins = frozenset[Origin]

_NONE: Origins = frozenset()


@dataclass(frozen=True, slots=True)
class Summary:
    """What one function does, in terms of its own parameters.

    Attributes:
        writes: origins of every address the function (or its callees) writes through.
        reads: origins of every address it reads through.
        results: for each returned value, the origins it may hold.
        hazards: reasons the function may touch any memory (impure assembly, ops not understood, recursion).
    """

    writes: Origins
    reads: Origins
    results: tuple[Origins, ...]
    hazards: frozenset[str]


@dataclass(frozen=True, slots=True)
class ParameterAccess:
    """The kernel's accesses by TTIR parameter index, and why either set had to be conservative.

    Attributes:
        written: indices of address parameters that may be written.
        read: indices of address parameters that may be read.
        write_doubts: why the written set is not exact (empty when it is).
        read_doubts: why the read set is not exact (empty when it is).
        writes_elsewhere: those write doubts that reach memory no parameter names (through a
            pointer loaded from memory, or an address made from an integer).
    """

    written: frozenset[int]
    read: frozenset[int]
    write_doubts: tuple[str, ...]
    read_doubts: tuple[str, ...]
    writes_elsewhere: tuple[str, ...] = ()


def find_accesses(program: Program, param_names: Sequence[str]) -> ParameterAccess:
    """Analyze the program's kernel: which of its parameters it may write and read.

    Args:
        program: the module's functions, from `convert_module`.
        param_names: the user-facing name of each TTIR parameter of the kernel (used in reasons).

    Returns:
        The parameters written and read, with the reasons for any conservative answer.
    """
    kernel = program.functions[program.entry]
    summary = _Summarizer(program).summary(program.entry)
    hazards = sorted(summary.hazards)
    written, write_doubts, elsewhere = _interpret(summary.writes, kernel, param_names, "writes")
    read, read_doubts, _ = _interpret(summary.reads, kernel, param_names, "reads")
    return ParameterAccess(
        written=written,
        read=read,
        write_doubts=tuple(hazards + write_doubts),
        read_doubts=tuple(hazards + read_doubts),
        writes_elsewhere=tuple(elsewhere),
    )


def _interpret(
    origins: Origins, kernel: Function, names: Sequence[str], verb: str
) -> tuple[frozenset[int], list[str], list[str]]:
    """Split origins into exact address parameters and reasons for doubt, and those of the reasons
    that reach memory no parameter names."""
    params: set[int] = set()
    doubts: set[str] = set()
    elsewhere: set[str] = set()
    for origin in origins:
        if isinstance(origin, int):
            if is_address_type(kernel.param_types[origin]):
                params.add(origin)
            else:
                elsewhere.add(f"{verb} through an address computed from integer argument `{names[origin]}`")
        elif isinstance(origin, Loaded):
            sources = sorted({names[i] for i in origin.sources})
            where = " or ".join(f"`{s}`" for s in sources) if sources else "memory"
            elsewhere.add(
                f"{verb} through a pointer loaded from {where}: a tensor that is not an argument, or any argument"
            )
        else:
            doubts.add(origin.why)
    return frozenset(params), sorted(doubts | elsewhere), sorted(elsewhere)


def _parameters(origins: Iterable[Origin]) -> frozenset[int]:
    """The parameters among origins, including those that memory contents were loaded through."""
    found: set[int] = set()
    for origin in origins:
        if isinstance(origin, int):
            found.add(origin)
        elif isinstance(origin, Loaded):
            found.update(origin.sources)
    return frozenset(found)


class _Summarizer:
    """Summaries of the program's functions, each computed once; a call back into an open summary is recursion."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self.done: dict[str, Summary] = {}
        self.open: set[str] = set()

    def summary(self, name: str) -> Summary:
        if name in self.done:
            return self.done[name]
        function = self.program.functions[name]
        self.open.add(name)
        try:
            result = _FunctionWalk(function, self).run()
        finally:
            self.open.discard(name)
        self.done[name] = result
        return result

    def callee(self, op: Op) -> Summary:
        """The summary of the function `op` calls, or a conservative one where that cannot be had."""
        name = op.callee
        everything: Origins = frozenset(range(len(op.operands)))
        if name is None or name not in self.program.functions:
            why = f"calls `{name}`, whose body is not in the module"
        elif name in self.open:
            why = f"calls `{name}` recursively"
        else:
            return self.summary(name)
        unknown = frozenset({Opaque(why)})
        return Summary(everything, everything, (everything | unknown,) * len(op.results), frozenset({why}))


class _FunctionWalk:
    """The fixed point of origins over one function's ops, then its reads, writes and returns.

    Every value gets the origins it may point into: parameters of its function, memory it was
    loaded from (`Loaded`), or what cannot be followed (`Opaque`). Origins flow forward through the
    ops until nothing changes (loops make cycles); a load starts fresh origins instead of passing its
    pointer's on, and address arithmetic passes on the base pointer's, not the offset's. Each op that
    writes memory then adds its address operand's origins to the written set, each that reads to the
    read set. A call is summarised once per callee in the callee's own parameters (`_Summarizer`) and
    translated at each call site, so a `noinline` helper that only reads its argument never makes it
    look written.
    """

    def __init__(self, function: Function, summarizer: _Summarizer) -> None:
        self.function = function
        self.summarizer = summarizer
        self.address = [is_address_type(t) for t in function.param_types]
        self.origins: dict[int, Origins] = {v: frozenset({i}) for i, v in enumerate(function.params)}
        self.defined: set[int] = set(function.params)
        for op in function.ops:
            self.defined.update(op.results)
        self.hazards: set[str] = set()

    def of(self, value: int) -> Origins:
        if value not in self.defined:
            return frozenset({Opaque(f"uses a value of unknown origin in `{self.function.name}`")})
        return self.origins.get(value, _NONE)

    def union(self, values: Iterable[int]) -> Origins:
        result: set[Origin] = set()
        for value in values:
            result.update(self.of(value))
        return frozenset(result)

    def is_address(self, origins: Origins) -> bool:
        return any(not isinstance(o, int) or self.address[o] for o in origins)

    def run(self) -> Summary:
        ops = [op for op in self.function.ops if op.results]
        changed = True
        while changed:
            changed = False
            for op in ops:
                for result, new in zip(op.results, self.transfer(op), strict=True):
                    old = self.origins.get(result, _NONE)
                    if not new <= old:
                        self.origins[result] = old | new
                        changed = True
        return self.effects()

    def transfer(self, op: Op) -> list[Origins]:
        """The origins of each result of `op`, given the current origins of its operands."""
        name = op.name
        count = len(op.results)
        if name == FLOW:
            return [self.union(op.operands)] * count
        if name in LOADS:
            pointer = self.of(op.operands[0]) if op.operands else _NONE
            return [frozenset({Loaded(_parameters(pointer))})] * count
        if name == "tt.call":
            summary = self.summarizer.callee(op)
            missing = frozenset({Opaque(f"`{op.callee}` returns fewer values than its call site uses")})
            results = list(summary.results[:count]) + [missing] * (count - len(summary.results))
            return [self.translate(origins, op) for origins in results]
        if name in ADDRESS_OPERANDS:
            return [
                self.union(op.operands[i] for i in ADDRESS_OPERANDS[name] if i < len(op.operands))
            ] * count
        if name in BASE_PLUS_OFFSET and len(op.operands) == 2:
            left, right = self.of(op.operands[0]), self.of(op.operands[1])
            left_address, right_address = self.is_address(left), self.is_address(right)
            if left_address and not right_address:
                return [left] * count
            if right_address and not left_address:
                return [right] * count
            return [left | right] * count
        return [self.union(op.operands)] * count

    def translate(self, origins: Origins, call: Op) -> Origins:
        """Callee origins in terms of the caller: parameter i becomes the origins of the call's operand i."""
        result: set[Origin] = set()
        for origin in origins:
            if isinstance(origin, int):
                if origin < len(call.operands):
                    result.update(self.of(call.operands[origin]))
                else:
                    result.add(Opaque(f"calls `{call.callee}` with fewer arguments than it takes"))
            elif isinstance(origin, Loaded):
                sources = (self.of(call.operands[i]) for i in origin.sources if i < len(call.operands))
                result.add(Loaded(_parameters(o for group in sources for o in group)))
            else:
                result.add(origin)
        return frozenset(result)

    def address_of(self, op: Op, index: int, verb: str) -> Origins:
        origins = self.of(op.operands[index]) if index < len(op.operands) else _NONE
        if not origins:
            return frozenset({Opaque(f"{verb} an address not derived from any argument (`{op.name}`)")})
        return origins

    def effects(self) -> Summary:
        writes: set[Origin] = set()
        reads: set[Origin] = set()
        for op in self.function.ops:
            name = op.name
            if name in WRITE_OPERAND:
                writes.update(self.address_of(op, WRITE_OPERAND[name], "writes"))
            if name in READ_OPERAND:
                reads.update(self.address_of(op, READ_OPERAND[name], "reads"))
            if name == "tt.call":
                summary = self.summarizer.callee(op)
                writes.update(self.translate(summary.writes, op))
                reads.update(self.translate(summary.reads, op))
                self.hazards.update(summary.hazards)
            elif name in MAYBE_IMPURE and op.pure is not True:
                self.hazards.add(
                    f"`{name}` is not pure (inline assembly or an external function may access any memory)"
                )
            elif not is_understood(name):
                self.hazards.add(f"op `{name}` is not understood by kernelpick's analysis")
        results: list[Origins] = []
        for returned in self.function.returns:
            for i, value in enumerate(returned):
                origins = self.of(value)
                if i < len(results):
                    results[i] = results[i] | origins
                else:
                    results.append(origins)
        return Summary(frozenset(writes), frozenset(reads), tuple(results), frozenset(self.hazards))
