"""Tests of input signatures and the hot-path key."""

from __future__ import annotations

import pytest
import torch

import kernelpick
from kernelpick.engine.signature import POSITIONAL_KEYS, Calls, Signature, positional_caller, signature_key
from kernelpick.errors import ConfigError
from kernelpick.tensors import TensorSpec, example_tensor, is_aligned


def test_the_key_tells_apart_everything_that_selects_a_tuning() -> None:
    a = torch.randn(8, 8)
    same = torch.randn(8, 8)
    variants = [
        a.t(),  # strides
        torch.randn(8, 8, dtype=torch.float64),  # dtype
        torch.randn(8, 9)[:, :8],  # strides of a slice
        torch.randn(65)[1:].view(8, 8),  # storage offset
        torch.randn(4, 8),  # sizes
    ]
    key = signature_key((a,), {}, None)
    assert signature_key((same,), {}, None) == key
    keys = {signature_key((v,), {}, None) for v in variants}
    assert len(keys) == len(variants) and key not in keys


def test_the_key_has_keyword_arguments_in_any_order_and_the_user_key() -> None:
    a = torch.randn(4)
    assert signature_key((a,), {"x": 1, "y": 2}, None) == signature_key((a,), {"y": 2, "x": 1}, None)
    assert signature_key((a,), {}, lambda t: t.numel() > 2) != signature_key((a,), {}, lambda t: 0)


def test_a_signature_is_plain_data_for_the_store() -> None:
    a = torch.randn(3, 4).t()
    signature = Signature.of((a, 2.5), {"activation": "relu"}, key=lambda a, s, **k: "k")
    assert signature.to_data() == [
        [{"dtype": "float32", "size": [4, 3], "stride": [1, 4], "offset": 0, "aligned": True}, 2.5],
        [["activation", "relu"]],
        "k",
    ]
    assert str(signature) == "(float32[4, 3] stride=[1, 4], 2.5, activation='relu', key='k')"
    assert signature.device.type == "cpu"


def test_inputs_on_two_devices_are_refused() -> None:
    with pytest.raises(ConfigError, match="several devices"):
        Signature.of((torch.empty(2), torch.empty(2, device="meta")), {})


def test_broadcast_strides_follow_torch() -> None:
    bias = TensorSpec.of(torch.empty(5))
    assert bias.broadcast_strides((3, 5)) == (0, 1)
    column = TensorSpec.of(torch.empty(3, 1))
    assert column.broadcast_strides((3, 5)) == (1, 0)
    assert TensorSpec.of(torch.empty(3, 5)).broadcast_strides((3, 5)) == (5, 1)
    with pytest.raises(ValueError, match="does not broadcast"):
        TensorSpec.of(torch.empty(4)).broadcast_strides((3, 5))


def test_storage_length_covers_strided_views() -> None:
    view = torch.empty(10, 70)[2:, 3:67]
    spec = TensorSpec.of(view)
    assert spec.storage_length == view.storage_offset() + (8 - 1) * 70 + (64 - 1) + 1
    assert TensorSpec.contiguous((2, 3, 4), torch.float16, torch.device("cpu")).stride == (12, 4, 1)


def misaligned_storage(count: int) -> torch.Tensor:
    """`count` float32 values in a storage that starts 4 bytes past a 16-byte boundary (offset 0)."""
    storage = torch.zeros(count + 1).untyped_storage()[4:]
    return torch.empty(0).set_(storage, 0, (count,), (1,))


def test_the_key_tells_apart_misaligned_data_at_the_same_offset() -> None:
    aligned, misaligned = torch.zeros(8), misaligned_storage(8)
    assert aligned.storage_offset() == misaligned.storage_offset() == 0
    assert is_aligned(aligned) and not is_aligned(misaligned)
    assert signature_key((aligned,), {}, None) != signature_key((misaligned,), {}, None)
    assert Signature.of((aligned,), {}) != Signature.of((misaligned,), {})
    assert str(Signature.of((misaligned,), {})) == "(float32[8] misaligned)"


def test_a_slice_is_misaligned_from_its_offset_and_tensors_without_data_too() -> None:
    x = torch.zeros(64)
    assert [is_aligned(x[i:]) for i in (0, 1, 2, 3, 4)] == [True, False, False, False, True]
    meta = torch.empty(64, device="meta")
    assert [is_aligned(meta[i:]) for i in (0, 1, 4)] == [True, False, True]
    assert Signature.of((x[1:],), {}).to_data()[0][0]["aligned"] is False


def test_example_inputs_keep_the_misalignment_of_the_real_ones() -> None:
    generator = torch.Generator().manual_seed(0)
    for real in (misaligned_storage(8), torch.zeros(9)[1:], torch.zeros(8)):
        spec = TensorSpec.of(real)
        example = example_tensor(spec, generator)
        assert TensorSpec.of(example) == spec
        assert is_aligned(example) == is_aligned(real)


def test_the_hot_path_of_known_inputs_finds_what_the_key_finds_and_hands_the_rest_on() -> None:
    a, b = torch.randn(4, 3), torch.randn(3, 2)
    calls = Calls()
    calls[POSITIONAL_KEYS[2]((a, b))] = lambda x, y: ("found", x.shape, y.shape)
    handed_on: list[tuple[object, ...]] = []

    def slow(*inputs: object) -> str:
        handed_on.append(inputs)
        return "slow"

    call = positional_caller(2)(calls, slow)
    assert call(a, b) == ("found", a.shape, b.shape)
    assert call(a, b.t().contiguous().t()) == "slow"  # other strides: another key
    assert call(a, 3) == "slow"  # not a tensor
    assert call(torch.nn.Parameter(a), b) == "slow"  # a subclass keys as the selector's slow path does
    assert len(handed_on) == 3 and positional_caller(2) is positional_caller(2)  # generated once


def test_the_hot_path_guards_a_key_it_found_and_runs_a_call_only_for_inputs_of_that_very_key() -> None:
    # Dynamo's guards check dtypes, devices, sizes and strides in one call; the front is keyed by
    # each tensor's element count, offset and address modulo 16: the rest of the key.
    a, b = torch.randn(4, 6), torch.randn(6, 6)
    calls = Calls()
    ran: list[str] = []

    def pick(name: str):
        def run(x: torch.Tensor, y: torch.Tensor) -> str:
            ran.append(name)
            return name

        return run

    for x, y, name in [
        (a, b, "plain"),
        (a, b.t(), "transposed"),  # the same count, offset and alignment; other strides
        (a.double(), b.double(), "double"),
        (torch.randn(5, 6)[1:], b, "offset"),  # offset 6 floats: aligned, another offset
        (torch.randn(25)[1:].view(4, 6), b, "misaligned"),
    ]:
        calls[POSITIONAL_KEYS[2]((x, y))] = pick(name)
    call = positional_caller(2)(calls, lambda *inputs: "slow")
    cases = [
        (torch.randn(4, 6), torch.randn(6, 6), "plain"),
        (torch.randn(4, 6), torch.randn(6, 6).t(), "transposed"),
        (torch.randn(4, 6).double(), torch.randn(6, 6).double(), "double"),
        (torch.randn(5, 6)[1:], torch.randn(6, 6), "offset"),
        (torch.randn(25)[1:].view(4, 6), torch.randn(6, 6), "misaligned"),
        # The guard checks more than the key (whether a tensor requires grad): the key finds it.
        (torch.randn(4, 6, requires_grad=True), torch.randn(6, 6), "plain"),
    ]
    for _ in range(3):  # the first round makes keys, the next ones find the front
        for x, y, expected in cases:
            assert call(x, y) == expected
    # One guard for each place called: "transposed" and "double" share plain's counts, offsets and
    # alignments, so their calls make their keys (and find their own picks) every time.
    assert sorted(check_call[1](a, b) for check_call in calls.front.values()) == [
        "misaligned",
        "offset",
        "plain",
    ]
    calls[POSITIONAL_KEYS[2]((a, b))] = pick("retuned")  # a switch: the guards go with it
    assert not calls.front
    assert call(torch.randn(4, 6), torch.randn(6, 6)) == "retuned"
    calls.clear()
    assert call(a, b) == "slow" and not calls.front


def test_inputs_that_need_gradients_go_to_differentiable_and_never_into_the_front() -> None:
    # kernelpick.ops sends them through autograd, and tests for them only where the front misses.
    a, b = torch.randn(4, 6), torch.randn(6, 6)
    needing = a.clone().requires_grad_()
    calls = Calls()
    calls[POSITIONAL_KEYS[2]((a, b))] = lambda x, y: "found"
    call = positional_caller(2)(calls, lambda *inputs: "slow", lambda *inputs: "differentiable")
    with torch.no_grad():
        assert call(needing, b) == call(needing, b) == "found"  # no gradients without grad mode
    assert not calls.front  # yet not put in front: the guard would let it through with grad mode on
    assert call(needing, b) == "differentiable"
    assert call(torch.nn.Parameter(a), b) == "differentiable"  # not a plain tensor
    assert call(a, b) == call(a, b) == "found" and len(calls.front) == 1
    assert call(needing, b) == "differentiable"  # the front's guard refuses it
    assert call(3, needing) == "differentiable" and call(3, b) == "slow"
    assert positional_caller(2)(calls, lambda *inputs: "slow")(needing, b) == "found"  # none given


def test_a_selector_picked_afresh_runs_its_new_pick_on_the_positional_path() -> None:
    import copy
    import pickle

    selector = kernelpick.Selector("guarded", [kernelpick.extern(torch.mm), kernelpick.extern(torch.matmul)])
    call = selector.positional(2)
    a, b = torch.randn(8, 8), torch.randn(8, 8)
    for _ in range(3):
        torch.testing.assert_close(call(a, b), a @ b)
    assert len(selector._calls.front) == 1
    selector.clear()
    assert not selector._calls.front
    torch.testing.assert_close(call(a, b), a @ b)  # selects again
    assert (
        type(copy.copy(selector._calls)) is Calls
        and type(pickle.loads(pickle.dumps(selector._calls))) is Calls
    )


def test_a_tensor_passed_twice_is_guarded_as_such() -> None:
    # Dynamo's guard refuses one tensor given twice: `ops.scaled_mm(a, b, one, one)` is common.
    a, w, one = torch.randn(16, 32), torch.randn(32, 32), torch.ones(())
    calls = Calls()
    calls[POSITIONAL_KEYS[4]((a, w.t(), one, one))] = lambda *inputs: "found"
    call = positional_caller(4)(calls, lambda *inputs: "slow")
    assert call(a, w.t(), one, one) == "found"
    ((check, _),) = calls.front.values()
    assert check(a, w.t(), one, one)  # what a hit checks
    assert not check(a, w.t(), one, torch.ones(()))  # another pattern: the key decides
    assert call(a, w.t(), one, torch.ones(())) == "found"


def test_a_guard_of_several_repeated_tensors_checks_each_repeat_and_the_others() -> None:
    a, w, s = torch.randn(16, 32), torch.randn(32, 32), torch.ones(())
    calls = Calls()
    calls[POSITIONAL_KEYS[5]((s, a, s, w, a))] = lambda *inputs: "found"
    assert positional_caller(5)(calls, lambda *inputs: "slow")(s, a, s, w, a) == "found"
    ((check, _),) = calls.front.values()
    t, b, column_major = torch.ones(()), torch.randn(16, 32), torch.randn(32, 16).t()
    assert check(s, a, s, w, a) and check(t, b, t, torch.randn(32, 32), b)  # the pattern and metadata
    assert not check(torch.ones(()), a, torch.ones(()), w, a)  # x2 is not x0
    assert not check(t, b, t, w, b.clone())  # x4 is not x1
    assert not check(t, b, t, w.double(), b)  # the distinct ones' guard decides the rest
    assert not check(t, column_major, t, w, column_major)
