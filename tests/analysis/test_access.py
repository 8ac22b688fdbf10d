"""The provenance walk on hand-built programs: the cases Triton cannot express, and the rules one at a time;
the op tables: what counts as understood, and which types hold addresses."""

from __future__ import annotations

import pytest

from kernelpick.analysis.access import (
    READ_OPERAND,
    WRITE_OPERAND,
    find_accesses,
    is_address_type,
    is_understood,
)
from kernelpick.analysis.functions import FLOW, Function, Op, Program

PTR = "!tt.ptr<f32>"
I32 = "i32"
I64 = "i64"


def kernel(params: list[str], ops: list[Op], *, helpers: tuple[Function, ...] = ()) -> Program:
    """A kernel named `k` whose parameters are values 0..n-1, of the given printed types."""
    main = Function("k", tuple(range(len(params))), tuple(params), tuple(ops), ((),))
    return Program({"k": main, **{f.name: f for f in helpers}}, "k")


def test_store_writes_its_pointer_and_load_reads_its_pointer() -> None:
    program = kernel(
        [PTR, PTR],
        [Op("tt.load", (0,), (10,)), Op("tt.addptr", (1, 10), (11,)), Op("tt.store", (11, 10), ())],
    )
    found = find_accesses(program, ["x", "y"])
    assert (found.written, found.read) == ({1}, {0})
    assert found.write_doubts == found.read_doubts == ()


def test_offsets_do_not_carry_provenance() -> None:
    """`y + x` where x is a pointer-derived integer offset: only y is written."""
    program = kernel(
        [PTR, PTR],
        [Op("tt.ptr_to_int", (0,), (10,)), Op("tt.addptr", (1, 10), (11,)), Op("tt.store", (11, 10), ())],
    )
    assert find_accesses(program, ["x", "y"]).written == {1}


def test_integer_base_plus_offset_keeps_the_base_only() -> None:
    program = kernel(
        [PTR, I32],
        [
            Op("tt.ptr_to_int", (0,), (10,)),
            Op("arith.extsi", (1,), (11,)),
            Op("arith.addi", (11, 10), (12,)),
            Op("tt.int_to_ptr", (12,), (13,)),
            Op("tt.store", (13, 1), ()),
        ],
    )
    found = find_accesses(program, ["x", "n"])
    assert found.written == {0}
    assert found.write_doubts == ()


def test_address_made_from_an_integer_argument_is_a_doubt() -> None:
    program = kernel([PTR, I64], [Op("tt.int_to_ptr", (1,), (10,)), Op("tt.store", (10, 0), ())])
    found = find_accesses(program, ["x", "address"])
    assert found.written == frozenset()
    assert found.write_doubts == ("writes through an address computed from integer argument `address`",)


def test_address_from_a_constant_is_a_doubt() -> None:
    program = kernel(
        [PTR],
        [Op("arith.constant", (), (10,)), Op("tt.int_to_ptr", (10,), (11,)), Op("tt.store", (11, 0), ())],
    )
    assert "not derived from any argument" in find_accesses(program, ["x"]).write_doubts[0]


def test_one_flow_per_loop_result_keeps_siblings_apart() -> None:
    """A loop carrying (a, b) where only the second result is stored through."""
    program = kernel(
        [PTR, PTR],
        [
            Op(FLOW, (0, 21), (20,)),  # iter arg 0 <- init a, yield 0
            Op(FLOW, (1, 23), (22,)),  # iter arg 1 <- init b, yield 1
            Op("tt.addptr", (20, 0), (21,)),
            Op("tt.addptr", (22, 0), (23,)),
            Op("tt.load", (20,), (24,)),
            Op(FLOW, (0, 21), (30,)),  # result 0
            Op(FLOW, (1, 23), (31,)),  # result 1
            Op("scf.for", (0, 1), ()),
            Op("tt.store", (31, 24), ()),
        ],
    )
    found = find_accesses(program, ["a", "b"])
    assert (found.written, found.read) == ({1}, {0})


def test_select_ignores_its_condition() -> None:
    program = kernel(
        [PTR, PTR, PTR],
        [Op("tt.load", (2,), (10,)), Op("arith.select", (10, 0, 1), (11,)), Op("tt.store", (11, 10), ())],
    )
    assert find_accesses(program, ["a", "b", "c"]).written == {0, 1}


def test_store_through_loaded_pointer_names_where_it_was_loaded_from() -> None:
    program = kernel([PTR, PTR], [Op("tt.load", (0,), (10,)), Op("tt.store", (10, 1), ())])
    found = find_accesses(program, ["table", "x"])
    assert found.write_doubts == (
        "writes through a pointer loaded from `table`: a tensor that is not an argument, or any argument",
    )
    assert found.writes_elsewhere == found.write_doubts  # no copy of `table` keeps what it points to


def test_read_only_helper_result_is_not_a_write() -> None:
    """The helper returns a value loaded through its parameter: the caller's argument is only read."""
    helper = Function("read", (100,), (PTR,), (Op("tt.load", (100,), (101,)),), ((101,),))
    program = kernel(
        [PTR, PTR],
        [
            Op("tt.call", (0,), (10,), callee="read"),
            Op("tt.addptr", (1, 10), (11,)),
            Op("tt.store", (11, 10), ()),
        ],
        helpers=(helper,),
    )
    found = find_accesses(program, ["index", "out"])
    assert (found.written, found.read) == ({1}, {0})


def test_helper_writes_are_translated_to_the_call_site() -> None:
    helper = Function(
        "move",
        (100, 101),
        (PTR, PTR),
        (Op("tt.load", (101,), (102,)), Op("tt.store", (100, 102), ())),
        ((),),
    )
    program = kernel(
        [PTR, PTR, PTR],
        [Op("tt.call", (0, 1), (), callee="move"), Op("tt.call", (2, 0), (), callee="move")],
        helpers=(helper,),
    )
    found = find_accesses(program, ["a", "b", "c"])
    assert (found.written, found.read) == ({0, 2}, {0, 1})


def test_loaded_pointer_in_a_helper_is_reported_with_the_callers_name() -> None:
    helper = Function(
        "indirect", (100,), (PTR,), (Op("tt.load", (100,), (101,)), Op("tt.store", (101, 101), ())), ((),)
    )
    program = kernel([PTR], [Op("tt.call", (0,), (), callee="indirect")], helpers=(helper,))
    assert "loaded from `table`" in find_accesses(program, ["table"]).write_doubts[0]


def test_recursion_is_answered_conservatively() -> None:
    """Triton cannot compile a recursive kernel today; the guard still keeps the analysis finite and honest."""
    ping = Function("ping", (100,), (PTR,), (Op("tt.call", (100,), (), callee="pong"),), ((),))
    pong = Function(
        "pong",
        (200,),
        (PTR,),
        (Op("tt.call", (200,), (), callee="ping"), Op("tt.load", (200,), (201,))),
        ((),),
    )
    program = kernel([PTR, PTR], [Op("tt.call", (0,), (), callee="ping")], helpers=(ping, pong))
    found = find_accesses(program, ["x", "y"])
    assert any("recursively" in d for d in found.write_doubts)
    assert 0 in found.written


def test_call_to_a_function_missing_from_the_module_is_a_doubt() -> None:
    program = kernel([PTR], [Op("tt.call", (0,), (), callee="elsewhere")])
    assert "whose body is not in the module" in find_accesses(program, ["x"]).write_doubts[0]


def test_unknown_op_is_a_doubt_for_reads_and_writes() -> None:
    program = kernel([PTR], [Op("tt.future_op", (0,), ())])
    found = find_accesses(program, ["x"])
    assert (
        found.write_doubts
        == found.read_doubts
        == ("op `tt.future_op` is not understood by kernelpick's analysis",)
    )


def test_impure_inline_asm_is_a_doubt_and_pure_is_not() -> None:
    pure = kernel([PTR], [Op("tt.elementwise_inline_asm", (0,), (10,), pure=True)])
    impure = kernel([PTR], [Op("tt.elementwise_inline_asm", (0,), (10,), pure=False)])
    assert find_accesses(pure, ["x"]).write_doubts == ()
    assert "not pure" in find_accesses(impure, ["x"]).write_doubts[0]


def test_value_of_unknown_origin_is_a_doubt() -> None:
    program = kernel([PTR], [Op("tt.store", (999, 0), ())])
    assert "unknown origin" in find_accesses(program, ["x"]).write_doubts[0]


def test_loop_carried_pointer_reaches_a_fixed_point() -> None:
    """p = a; loop { q = p; p = b + 1 }; store q: both a and b may be written, found only by iterating."""
    program = kernel(
        [PTR, PTR],
        [
            Op("tt.store", (12, 0), ()),
            Op(FLOW, (11,), (12,)),
            Op(FLOW, (0, 13), (11,)),
            Op("tt.addptr", (1, 0), (13,)),
        ],
    )
    assert find_accesses(program, ["a", "b"]).written == {0, 1}


@pytest.mark.parametrize(
    "name", ["arith.addi", "math.exp", "tt.store", "tt.load", "tt.call", "scf.for", "tt.dot"]
)
def test_known_ops_are_understood(name: str) -> None:
    assert is_understood(name)


@pytest.mark.parametrize("name", ["tt.some_new_op", "ttg.local_store", "llvm.store", "cf.switch"])
def test_unknown_ops_are_not(name: str) -> None:
    assert not is_understood(name)


def test_every_atomic_both_reads_and_writes() -> None:
    for name in ("tt.atomic_rmw", "tt.atomic_cas"):
        assert name in WRITE_OPERAND and name in READ_OPERAND


@pytest.mark.parametrize(
    ("printed", "address"),
    [
        ("!tt.ptr<f32>", True),
        ("tensor<16x!tt.ptr<f16>>", True),
        ("!tt.ptr<tensor<16x16xf32>>", True),
        ("!tt.tensordesc<tensor<16x16xf32>>", True),
        ("!tt.tensordesc<16x16xf32>", True),
        ("i32", False),
        ("i64", False),
        ("f32", False),
        ("tensor<16xi64>", False),
    ],
)
def test_address_types(printed: str, address: bool) -> None:
    assert is_address_type(printed) is address
