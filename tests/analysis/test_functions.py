"""Converting Triton IR into plain functions of ops: structure, flow ops, and no IR object kept."""

from __future__ import annotations

from typing import Any

import pytest
from access_corpus import (
    BLOCK,
    descriptor,
    early_return,
    f32,
    for_siblings,
    host_descriptors,
    noinline_store,
    while_siblings,
)

from kernelpick.analysis.functions import FLOW, Function, Op, Program, convert_module
from kernelpick.compile.target import specialize


def convert(kernel: Any, args: tuple[Any, ...], kwargs: dict[str, Any], stage: str = "ttir") -> Program:
    module = specialize(kernel, args, kwargs).lower(stage)
    try:
        return convert_module(module)
    finally:
        del module


def test_program_is_plain_data() -> None:
    program = convert(noinline_store, (f32(), f32()), {"BLOCK": BLOCK})
    assert program.entry == "noinline_store"
    for function in program.functions.values():
        assert isinstance(function, Function)
        assert all(type(v) is int for v in function.params)
        assert all(type(t) is str for t in function.param_types)
        for op in function.ops:
            assert type(op) is Op and type(op.name) is str
            assert all(type(v) is int for v in (*op.operands, *op.results))


def test_kernel_parameters_and_their_types() -> None:
    program = convert(host_descriptors, (descriptor(), descriptor()), {})
    kernel = program.functions[program.entry]
    # A host descriptor is the descriptor plus two i32 sizes and two i64 strides.
    assert len(kernel.params) == 10
    assert "tensordesc" in kernel.param_types[0] and "tensordesc" in kernel.param_types[5]
    assert kernel.param_types[1:5] == ("i32", "i32", "i64", "i64")


def test_noinline_helper_is_its_own_function_called_by_name() -> None:
    program = convert(noinline_store, (f32(), f32()), {"BLOCK": BLOCK})
    calls = [op for op in program.functions[program.entry].ops if op.name == "tt.call"]
    assert len(calls) == 1 and calls[0].callee in program.functions
    assert len(program.functions[calls[0].callee].params) == 3


def _flows(function: Function) -> list[Op]:
    return [op for op in function.ops if op.name == FLOW]


def test_for_loop_makes_one_flow_per_value() -> None:
    program = convert(for_siblings, (f32(), f32(), 8), {"BLOCK": BLOCK})
    kernel = program.functions[program.entry]
    loop = next(op for op in kernel.ops if op.name == "scf.for")
    assert loop.results == ()  # its results are defined by flows, one each
    flows = _flows(kernel)
    # induction variable + 3 carried values + 3 results
    assert len(flows) == 7
    assert all(len(f.results) == 1 for f in flows)
    a_ptr, b_ptr = kernel.params[0], kernel.params[1]
    assert sum(a_ptr in f.operands for f in flows) == 2 and sum(b_ptr in f.operands for f in flows) == 2
    assert not any(a_ptr in f.operands and b_ptr in f.operands for f in flows)


def test_while_loop_connects_condition_operands_to_the_after_region_and_results() -> None:
    program = convert(while_siblings, (f32(), f32(), 8), {})
    kernel = program.functions[program.entry]
    flows = _flows(kernel)
    # 4 before-region args, 4 after-region args, 4 results
    assert len(flows) == 12
    assert not any(kernel.params[0] in f.operands and kernel.params[1] in f.operands for f in flows)


def test_early_return_before_ttir_passes_keeps_every_return() -> None:
    program = convert(early_return, (f32(), f32(), 64), {"BLOCK": BLOCK}, stage="source")
    kernel = program.functions[program.entry]
    assert len(kernel.returns) == 2
    assert any(op.name == "tt.store" for op in kernel.ops)


class _BrokenOp:
    def get_name(self) -> str:
        raise RuntimeError("binding exploded")


class _Module:
    def walk(self, visit: Any) -> None:
        visit(_BrokenOp())
        visit(_BrokenOp())

    def get_entry_func_name(self) -> str:
        return "k"


def test_errors_inside_the_walk_are_raised_after_it() -> None:
    with pytest.raises(RuntimeError, match="binding exploded"):
        convert_module(_Module())
