"""The tuned call's hot path: generated fast keys agree with exact keys, and never serve a wrong entry."""

from __future__ import annotations

import torch

from kernelpick.tune.dispatch import Dispatcher, call_shape, exact_key, generate_fast_key

POSITIONS = [(3, "n"), (4, "MODE")]


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
    assert dispatch.lookup((x, x, x, 128), {}) == "tensor-entry"
    assert dispatch.lookup((x, None, x, 128), {}) is None  # .dtype of None: falls back
    assert dispatch.lookup((x, x, x, 128, 7), {}) is None  # another arity
    assert dispatch.lookup((x, x, x, 128), {"MODE": 3}) is None  # another keyword set


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
    assert dispatch.lookup((5,), {}) is None
