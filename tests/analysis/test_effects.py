"""The op tables: what counts as understood, and which types hold addresses."""

from __future__ import annotations

import pytest

from kernelpick.analysis.effects import READ_OPERAND, WRITE_OPERAND, is_address_type, is_understood


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
