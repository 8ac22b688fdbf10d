"""A Triton IR module turned into plain functions of ops, with structured control flow made explicit."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: The name of the ops made here for values that flow along control-flow edges. A flow op says "each
#: of my results may hold any of my operands", and one is made per result, so that a loop or branch
#: yielding several values keeps them apart: a pointer written through after an `scf.if` does not
#: taint its untouched sibling.
FLOW = "kernelpick.flow"

#: Ops that end a block; they are folded into flow ops or function returns, never kept.
TERMINATORS = frozenset(
    {
        "scf.yield",
        "scf.condition",
        "tt.return",
        "tt.reduce.return",
        "tt.scan.return",
        "tt.map_elementwise.return",
        "cf.br",
        "cf.cond_br",
    }
)

#: Ops with regions whose data flow is modelled exactly below.
_STRUCTURED = frozenset({"scf.for", "scf.while", "scf.if", "tt.reduce", "tt.scan"})

#: Ops with regions that only compute values (no control transfer out, no memory effect of their own);
#: their regions are connected by the coarse rule of `_flow_everything`.
REGION_COMPUTE = frozenset({"tt.map_elementwise", "scf.execute_region"})


@dataclass(frozen=True, slots=True)
class Op:
    """One operation: its name, the ids of the values it uses and defines, and what the analysis needs of its attributes.

    Attributes:
        name: the MLIR op name (`tt.store`, `arith.addi`, ...) or `FLOW`.
        operands: ids of the values used.
        results: ids of the values defined.
        callee: the called function's symbol, for `tt.call`.
        pure: the `pure` attribute of inline assembly and external calls (None elsewhere).
    """

    name: str
    operands: tuple[int, ...]
    results: tuple[int, ...]
    callee: str | None = None
    pure: bool | None = None


@dataclass(frozen=True, slots=True)
class Function:
    """One `tt.func`: its parameters (value ids and printed types), its ops (nested regions flattened) and its returns."""

    name: str
    params: tuple[int, ...]
    param_types: tuple[str, ...]
    ops: tuple[Op, ...]
    returns: tuple[tuple[int, ...], ...]


@dataclass(frozen=True, slots=True)
class Program:
    """Every function of a module, by symbol name, and the name of the kernel (the public entry function)."""

    functions: Mapping[str, Function]
    entry: str


@dataclass(slots=True)
class _Block:
    args: tuple[int, ...]
    terminator: str
    operands: tuple[int, ...]
    handle: Any  # the binding's block, kept only while the walk runs (for a function's parameter types)


@dataclass(slots=True)
class _Builder:
    """State of one walk: the ops of the function being visited, and the blocks seen so far by region."""

    ops: list[Op] = field(default_factory=list)
    returns: list[tuple[int, ...]] = field(default_factory=list)
    regions: dict[int, list[_Block]] = field(default_factory=dict)
    functions: dict[str, Function] = field(default_factory=dict)


def _values(count: int, get: Callable[[int], Any]) -> tuple[int, ...]:
    return tuple(get(i).id() for i in range(count))


def convert_module(module: Any) -> Program:
    """Convert a Triton IR module (any stage up to TTIR) into a `Program` of plain data.

    Args:
        module: the module returned by `Specialization.lower`.

    Returns:
        The module's functions. Ops this module does not understand are kept by name; the access
        analysis treats them conservatively. Nothing in them refers to Triton's IR objects, so the
        caller can drop the module (Triton 3.6 prints nanobind leak warnings at exit for IR objects
        that outlive the analysis).
    """
    # Triton's Python bindings, not the printed IR: what every Triton 3.x has (`module.walk`,
    # `operation.get_name/get_operand/get_result/get_region/get_block`, `value.id`,
    # `block.get_argument`, the symbol and boolean attribute getters) gives exact operands, results,
    # regions and block arguments, while the printed form changes between releases (quoted generic
    # ops, custom assembly formats, elided `scf.yield`, locations) and would need a parser for each.
    # The walk is post-order: when an op with regions is visited, its blocks and their terminators
    # are known, which is all the conversion needs.
    state = _Builder()
    failure: list[BaseException] = []

    def visit(op: Any) -> None:
        if failure:
            return
        try:
            _visit(state, op)
        except Exception as error:  # re-raised below, outside the C++ walk
            failure.append(error)

    module.walk(visit)
    if failure:
        raise failure[0]
    entry = str(module.get_entry_func_name())
    return Program(functions=state.functions, entry=entry)


def _visit(state: _Builder, op: Any) -> None:
    name: str = op.get_name()
    if name == "builtin.module":
        return
    operands = _values(op.get_num_operands(), op.get_operand)
    if name in TERMINATORS:
        _record_terminator(state, op, name, operands)
        return
    results = _values(op.get_num_results(), op.get_result)
    regions = [op.get_region(i).id() for i in range(op.get_num_regions())]
    if name == "tt.func":
        _close_function(state, op, regions)
        return
    if regions:
        blocks = [state.regions.pop(region, []) for region in regions]
        if name in _STRUCTURED:
            _flow_structured(state.ops, name, operands, results, blocks)
        else:
            _flow_everything(state.ops, operands, results, blocks)
        # The flow ops define the results; the op itself stays, without them, for its name.
        state.ops.append(Op(name, operands, ()))
        return
    callee = op.get_flat_symbol_ref_attr("callee") if name == "tt.call" else None
    pure = (
        op.get_bool_attr("pure") if name in ("tt.elementwise_inline_asm", "tt.extern_elementwise") else None
    )
    state.ops.append(Op(name, operands, results, callee, pure))


def _record_terminator(state: _Builder, op: Any, name: str, operands: tuple[int, ...]) -> None:
    """Register the terminator's block (every block ends with exactly one) under its region."""
    block = op.get_block()
    region = block.get_parent()
    args = _values(block.get_num_arguments(), block.get_argument)
    state.regions.setdefault(region.id(), []).append(_Block(args, name, operands, block))
    if name == "tt.return":
        state.returns.append(operands)


def _flow(ops: list[Op], result: int, *sources: int | None) -> None:
    ops.append(Op(FLOW, tuple(s for s in sources if s is not None), (result,)))


def _at(values: tuple[int, ...], index: int) -> int | None:
    return values[index] if index < len(values) else None


def _flow_structured(
    ops: list[Op], name: str, operands: tuple[int, ...], results: tuple[int, ...], blocks: list[list[_Block]]
) -> None:
    """Connect an `scf`/`tt.reduce`/`tt.scan` op's operands, block arguments, terminators and results, one value at a time."""
    if any(len(region) > 1 for region in blocks):
        _flow_everything(ops, operands, results, blocks)
        return
    first = [region[0] if region else None for region in blocks]
    if name == "scf.for":
        body = first[0]
        if body is None or not body.args:
            _flow_everything(ops, operands, results, blocks)
            return
        _flow(ops, body.args[0], *operands[:3])
        for i, carried in enumerate(body.args[1:]):
            _flow(ops, carried, _at(operands, 3 + i), _at(body.operands, i))
        for i, result in enumerate(results):
            _flow(ops, result, _at(operands, 3 + i), _at(body.operands, i))
    elif name == "scf.while":
        before, after = [*first, None, None][:2]
        if before is None or after is None:
            _flow_everything(ops, operands, results, blocks)
            return
        forwarded = before.operands[1:]  # scf.condition(%cond) %forwarded...
        for i, arg in enumerate(before.args):
            _flow(ops, arg, _at(operands, i), _at(after.operands, i))
        for i, arg in enumerate(after.args):
            _flow(ops, arg, _at(forwarded, i))
        for i, result in enumerate(results):
            _flow(ops, result, _at(forwarded, i))
    elif name == "scf.if":
        for i, result in enumerate(results):
            _flow(ops, result, *(_at(branch.operands, i) for branch in first if branch is not None))
    else:  # tt.reduce, tt.scan: the combine region takes (accumulated..., current...) for each operand
        combine = first[0]
        if combine is None or not operands:
            _flow_everything(ops, operands, results, blocks)
            return
        count = len(operands)
        for j, arg in enumerate(combine.args):
            _flow(ops, arg, operands[j % count], _at(combine.operands, j % count))
        for i, result in enumerate(results):
            _flow(ops, result, _at(operands, i), _at(combine.operands, i))


def _flow_everything(
    ops: list[Op], operands: tuple[int, ...], results: tuple[int, ...], blocks: list[list[_Block]]
) -> None:
    """The coarse rule for regions of unusual shape: every block argument and result may hold any operand or yielded value."""
    sources = list(operands)
    for region in blocks:
        for block in region:
            sources.extend(block.operands)
    for region in blocks:
        for block in region:
            for arg in block.args:
                ops.append(Op(FLOW, tuple(sources), (arg,)))
    for result in results:
        ops.append(Op(FLOW, tuple(sources), (result,)))


def _close_function(state: _Builder, op: Any, regions: list[int]) -> None:
    blocks = state.regions.pop(regions[0], []) if regions else []
    name = str(op.get_str_attr("sym_name"))
    params: tuple[int, ...] = ()
    types: tuple[str, ...] = ()
    if blocks:
        # Blocks are registered in order, so the first is the entry block, whose arguments are the parameters.
        entry = blocks[0].handle
        params = blocks[0].args
        types = tuple(str(entry.get_argument(i).get_type()) for i in range(len(params)))
    # Early returns leave branches between blocks of the body; their successors are not exposed by
    # the bindings, so every non-entry block argument may hold any value passed by any branch.
    branch_operands: list[int] = []
    for block in blocks:
        if block.terminator == "cf.cond_br":
            branch_operands.extend(block.operands[1:])
        elif block.terminator == "cf.br":
            branch_operands.extend(block.operands)
    for block in blocks[1:]:
        for arg in block.args:
            state.ops.append(Op(FLOW, tuple(branch_operands), (arg,)))
    if blocks:
        # A declaration without a body is left out: calls to it are then answered conservatively.
        state.functions[name] = Function(name, params, types, tuple(state.ops), tuple(state.returns))
    state.ops = []
    state.returns = []
