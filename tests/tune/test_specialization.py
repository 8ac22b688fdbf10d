"""A config tuned for one Triton specialization (aligned pointers, integers divisible by 16) is never
reused for another: misaligned slices and n = 17 are tuned on their own, in this process and from the store."""

from __future__ import annotations

import torch
import triton

import kernelpick
from kernelpick.store import MemoryStore
from kernelpick.store.deploy import key_distance
from tests.tune.kernels import add_kernel, grid_1d

SPACE = [triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})]


#: The same kernel, its `n` marked do_not_specialize.
add_unspecialized = triton.jit(add_kernel.fn, do_not_specialize=["n"])


def test_a_misaligned_slice_is_tuned_apart_from_the_aligned_tensor() -> None:
    store = MemoryStore()
    kernel = kernelpick.autotune(SPACE, key=["n"], store=store)(add_kernel)
    x, out = torch.randn(65), torch.empty(64)
    kernel[grid_1d(64)](x[:64], x[:64], out, 64)
    aligned = kernel.last_tuning
    kernel[grid_1d(64)](x[1:], x[1:], out, 64)  # the same n, the pointers 4 bytes off
    misaligned = kernel.last_tuning
    assert misaligned is not aligned and not misaligned.from_store
    torch.testing.assert_close(out, 2 * x[1:])
    assert len(kernel.cache) == 2
    assert misaligned.key[-2] == "x_ptr:- y_ptr:- out_ptr:D"  # n is in the key by value
    kernel[grid_1d(64)](x[4:], x[4:], out, 64)  # 16 bytes in: aligned again, no tuning
    assert kernel.last_tuning is misaligned and len(kernel.cache) == 2
    kernel[grid_1d(64)](x[:64], x[:64], out, 64)  # the fast path still tells them apart
    assert kernel.last_tuning is misaligned and len(kernel.cache) == 2
    assert kernel.best_config == aligned.best

    # Another process (a new tuned kernel, the same store): the aligned result is not reused.
    again = kernelpick.autotune(SPACE, key=["n"], store=store)(add_kernel)
    again[grid_1d(64)](x[1:], x[1:], out, 64)
    assert again.last_tuning.from_store  # the misaligned result, stored under its own key
    again[grid_1d(64)](x[2:], x[2:], out, 64)
    assert again.last_tuning.from_store and again.last_tuning.key == misaligned.key


def test_integers_divisible_by_16_are_tuned_apart_from_others() -> None:
    kernel = kernelpick.autotune(SPACE, key=[], store=MemoryStore())(add_kernel)
    x, out = torch.randn(64), torch.empty(64)
    kernel[grid_1d(16)](x, x, out, 16)
    sixteen = kernel.last_tuning
    kernel[grid_1d(17)](x, x, out, 17)
    seventeen = kernel.last_tuning
    assert seventeen is not sixteen and seventeen.key[-2].endswith("n:-")
    torch.testing.assert_close(out[:17], 2 * x[:17])
    kernel[grid_1d(32)](x, x, out, 32)  # divisible by 16 like 16: its tuning serves
    assert kernel.last_tuning is seventeen and kernel.best_config == sixteen.best
    kernel[grid_1d(1)](x, x, out, 1)  # Triton makes 1 a constant
    assert kernel.last_tuning.key[-2].endswith("n:1")
    assert len(kernel.cache) == 3


def test_do_not_specialize_arguments_share_a_tuning() -> None:
    kernel = kernelpick.autotune(SPACE, key=[], store=MemoryStore())(add_unspecialized)
    x, out = torch.randn(64), torch.empty(64)
    kernel[grid_1d(16)](x, x, out, 16)
    kernel[grid_1d(17)](x, x, out, 17)
    assert len(kernel.cache) == 1


def test_a_deployment_table_never_gives_an_aligned_winner_to_a_misaligned_key() -> None:
    kernel = kernelpick.autotune(SPACE, key=["n"], store=MemoryStore())(add_kernel)
    x, out = torch.randn(65), torch.empty(64)
    kernel[grid_1d(64)](x[:64], x[:64], out, 64)
    aligned_key = kernel.tuning_key(kernel.last_tuning.key, kernel.last_tuning.device)
    kernel[grid_1d(64)](x[1:], x[1:], out, 64)
    misaligned_key = kernel.tuning_key(kernel.last_tuning.key, kernel.last_tuning.device)
    assert aligned_key.digest != misaligned_key.digest
    assert key_distance(misaligned_key.inputs, aligned_key.inputs) is None  # not comparable
    kernel[grid_1d(48)](x[:48], x[:48], out, 48)
    near = kernel.tuning_key(kernel.last_tuning.key, kernel.last_tuning.device)
    assert key_distance(near.inputs, aligned_key.inputs) is not None  # only n differs: comparable


def test_do_not_specialize_on_alignment_keeps_only_the_equal_to_one_case() -> None:
    unaligned = triton.jit(add_kernel.fn, do_not_specialize_on_alignment=["n"])
    kernel = kernelpick.autotune(SPACE, key=[], store=MemoryStore())(unaligned)
    x, out = torch.randn(64), torch.empty(64)
    kernel[grid_1d(32)](x, x, out, 32)
    kernel[grid_1d(17)](x, x, out, 17)  # divisible by 16 or not: one specialization
    assert len(kernel.cache) == 1 and kernel.last_tuning is not None
    assert kernel.last_tuning.key[-2].endswith("n:-")
    kernel[grid_1d(1)](x, x, out, 1)  # equal to 1: tuned apart
    assert len(kernel.cache) == 2 and kernel.last_tuning.key[-2].endswith("n:1")
