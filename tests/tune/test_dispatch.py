"""The tuned call's hot path: generated fast keys agree with exact keys, and never serve a wrong entry."""

from __future__ import annotations

import torch

from kernelpick.tune.dispatch import (
    MISSES,
    Dispatcher,
    call_shape,
    exact_key,
    generate_fast_key,
    specialization_mark,
)

POSITIONS = [(3, "n"), (4, "MODE")]


def fast_entry(dispatch: Dispatcher, args: tuple[object, ...], kwargs: dict[str, object]) -> object:
    """The entry the fast path serves this call, as `Autotuner.run` looks it up (None: the exact path)."""
    try:
        return dispatch.fast[dispatch.fast_key(args, kwargs)]
    except MISSES:
        return None


def test_fast_key_distinguishes_what_the_exact_key_does() -> None:
    x32, x16 = torch.empty(4), torch.empty(4, dtype=torch.float16)
    args = (x32, x32, x32, 128)
    fast = generate_fast_key(call_shape(args, {"MODE": 1}), POSITIONS)
    assert fast is not None
    variants = [
        ((x32, x32, x32, 128), {"MODE": 1}),
        ((x32, x32, x32, 256), {"MODE": 1}),
        ((x32, x16, x32, 128), {"MODE": 1}),
        ((x32, x32, x32, 128), {"MODE": 2}),
    ]
    fast_keys = {fast(a, k) for a, k in variants}
    exact_keys = {exact_key(a, k, POSITIONS) for a, k in variants}
    assert len(fast_keys) == len(exact_keys) == 4


def test_a_call_of_another_shape_misses_the_fast_path_instead_of_getting_a_wrong_entry() -> None:
    dispatch = Dispatcher(POSITIONS)
    x = torch.empty(4)
    dispatch.remember((x, x, x, 128), {}, "tensor-entry")
    assert fast_entry(dispatch, (x, x, x, 128), {}) == "tensor-entry"
    assert fast_entry(dispatch, (x, None, x, 128), {}) is None  # .dtype of None: falls back
    assert fast_entry(dispatch, (x, x, x, 128, 7), {}) is None  # another arity
    assert fast_entry(dispatch, (x, x, x, 128), {"MODE": 3}) is None  # another keyword set


def test_other_shapes_do_not_grow_the_fast_table() -> None:
    dispatch = Dispatcher(POSITIONS)
    x = torch.empty(4)
    dispatch.remember((x, x, x, 128), {}, "first")
    for _ in range(100):
        dispatch.remember((x, x, torch.empty(2), x), {}, "other shape")  # a tensor where an int was
    assert len(dispatch.fast) == 1


def test_calls_without_tensors_use_only_exact_keys() -> None:
    dispatch = Dispatcher([(0, "n")])
    dispatch.remember((5,), {}, "entry")
    assert fast_entry(dispatch, (5,), {}) is None


def test_the_keys_hold_what_triton_specializes_on() -> None:
    """Pointer alignment, integers divisible by 16 or equal to 1: as Triton's specialization says."""
    from triton.backends.compiler import BaseBackend
    from triton.runtime.jit import native_specialize_impl

    x = torch.zeros(64)
    for value in (x, x[1:], x[2:], x[4:], 0, 1, 2, 16, 17, 32, -16, 2**40):
        triton_says = native_specialize_impl(BaseBackend, value, False, True, True)
        mark = specialization_mark(value)
        assert mark == {"D": "D", "": "-"}.get(
            triton_says[1], "1" if triton_says == ("constexpr", 1) else "?"
        )
    assert specialization_mark(2.0) == specialization_mark(None) == "."
    assert specialization_mark(32, align=False) == "-" and specialization_mark(1, align=False) == "1"


SPECIALIZED = [(0, "x_ptr", True), (1, "y_ptr", True), (2, "n", True), (3, "stride", False)]


def test_fast_keys_tell_apart_every_specialization_the_exact_keys_do() -> None:
    x = torch.zeros(64)
    calls = [
        ((x, x, 16, 16), {}),
        ((x, x, 32, 32), {}),  # the same specialization as the first
        ((x[1:], x, 16, 16), {}),  # misaligned pointer
        ((x, x[2:], 16, 16), {}),
        ((x[4:], x, 16, 16), {}),  # aligned again: 16 bytes in
        ((x, x, 17, 16), {}),  # not divisible
        ((x, x, 1, 16), {}),  # equal to 1
        ((x, x, 16, 1), {}),  # no alignment for `stride`, but 1 is still special
        ((x, x, 16, 17), {}),  # the same specialization as the first (stride not on alignment)
    ]
    fast = generate_fast_key(call_shape(*calls[0]), [], SPECIALIZED)
    assert fast is not None
    exact = [exact_key(a, k, [], SPECIALIZED) for a, k in calls]
    for (a, k), key in zip(calls, exact):
        for (b, m), other in zip(calls, exact):
            assert (fast(a, k) == fast(b, m)) == (key == other), (a[2:], b[2:])
    assert len(set(exact)) == 6
    assert exact[2][-2] == "x_ptr:- y_ptr:D n:D stride:-"


def test_a_value_of_another_kind_in_a_specialized_slot_misses_the_fast_path() -> None:
    dispatch = Dispatcher([], SPECIALIZED)
    x = torch.zeros(64)
    dispatch.remember((x, x, 16, 16), {}, "ints")
    assert fast_entry(dispatch, (x, x, 32, 16), {}) == "ints"
    for other in (16.0, None, "16"):
        assert fast_entry(dispatch, (x, x, other, 16), {}) is None
        assert fast_entry(dispatch, (x, x, 16, other), {}) is None
    dispatch.remember((x, x, 16.0, 16), {}, "float")  # another shape: exact keys only
    assert fast_entry(dispatch, (x, x, 16, 16), {}) == "ints" and len(dispatch.fast) == 1


def test_slots_holding_other_values_are_pinned_by_type() -> None:
    dispatch = Dispatcher([], [(0, "x_ptr", True), (1, "scale", True)])
    x = torch.zeros(8)
    dispatch.remember((x, 2.5), {}, "float")
    assert fast_entry(dispatch, (x, 0.5), {}) == "float"
    assert fast_entry(dispatch, (x, 16), {}) is None  # an integer there specializes: the exact path decides


def test_fast_keys_of_descriptors_tell_apart_what_their_exact_keys_do() -> None:
    from triton.tools.tensor_descriptor import TensorDescriptor

    x16, x32 = torch.empty(64, 64, dtype=torch.float16), torch.empty(64, 64)
    calls = [
        ((TensorDescriptor.from_tensor(x16, [16, 16]), 64), {}),
        ((TensorDescriptor.from_tensor(x16, [32, 16]), 64), {}),  # another block shape
        ((TensorDescriptor.from_tensor(x32, [16, 16]), 64), {}),  # another dtype
        ((TensorDescriptor.from_tensor(x16, [16, 16]), 128), {}),  # another key value
    ]
    for blocks, distinct in ((True, 4), (False, 3)):
        fast = generate_fast_key(call_shape(*calls[0]), [(1, "n")], blocks=blocks)
        assert fast is not None  # a call of descriptors alone has a fast path
        assert len({fast(a, k) for a, k in calls}) == distinct
        assert len({exact_key(a, k, [(1, "n")], blocks=blocks) for a, k in calls}) == distinct
    dispatch = Dispatcher([(1, "n")])
    dispatch.remember(*calls[0], "descriptor-entry")
    assert fast_entry(dispatch, *calls[0]) == "descriptor-entry"
    assert fast_entry(dispatch, (x16, 64), {}) is None  # a tensor where the descriptor was: the exact path
