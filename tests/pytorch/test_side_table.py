"""The kernel side table: stable ids, lookups both ways, equal constants shared, thread safety."""

from __future__ import annotations

import threading

import pytest

from kernelpick.errors import KernelpickError, OperatorError
from kernelpick.pytorch.side_table import SideTable, side_table
from tests.pytorch.kernels import add_kernel, increment_kernel


def test_a_kernel_keeps_its_id_and_is_found_both_ways() -> None:
    table = SideTable()
    first = table.add_kernel(add_kernel)
    second = table.add_kernel(increment_kernel)
    assert first != second
    assert table.add_kernel(add_kernel) == first
    assert table.kernel(first) is add_kernel and table.kernel(second) is increment_kernel
    assert table.kernel_id(increment_kernel) == second
    assert table.kernel_id(object()) is None


def test_equal_constants_share_an_id_and_look_alike_values_do_not() -> None:
    table = SideTable()
    assert table.add_constant((1, "a")) == table.add_constant((1, "a"))
    ids = {table.add_constant(v) for v in (1, 1.0, True, 0.0, -0.0, (1,), (1.0,))}
    assert len(ids) == 7
    unhashable = {"grid": [1, 2]}
    assert table.add_constant(unhashable) == table.add_constant(unhashable)
    assert table.add_constant({"grid": [1, 2]}) != table.add_constant(unhashable)
    assert table.constant(table.add_constant(unhashable)) is unhashable


def test_unknown_ids_raise_an_error_that_says_why() -> None:
    table = SideTable()
    with pytest.raises(OperatorError, match="valid only in the process that traced"):
        table.kernel(3)
    with pytest.raises(KernelpickError, match="no constant has id 0"):
        table.constant(0)


def test_concurrent_adds_give_one_id_per_object() -> None:
    table = SideTable()
    kernels = [object() for _ in range(64)]
    seen: list[list[int]] = []
    barrier = threading.Barrier(8)

    def add_all() -> None:
        barrier.wait()
        seen.append(
            [table.add_kernel(k) for k in kernels] + [table.add_constant(("c", i)) for i in range(64)]
        )

    threads = [threading.Thread(target=add_all) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(seen) == 8 and all(ids == seen[0] for ids in seen)
    assert sorted(seen[0][:64]) == list(range(64)) and sorted(seen[0][64:]) == list(range(64))
    assert table.sizes() == (64, 64)
    assert all(table.kernel(i) is k for i, k in zip(seen[0], kernels))


def test_the_process_table_is_shared() -> None:
    assert side_table.kernel(side_table.add_kernel(add_kernel)) is add_kernel
