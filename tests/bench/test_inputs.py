"""bench/inputs.py: benchmarks write private copies of the arguments, never the user's tensors."""

from __future__ import annotations

import torch

from kernelpick.bench.inputs import Example


def same_view(a: torch.Tensor, b: torch.Tensor) -> bool:
    return (a.dtype, a.size(), a.stride(), a.storage_offset()) == (
        b.dtype,
        b.size(),
        b.stride(),
        b.storage_offset(),
    )


def shares_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def test_written_tensors_are_copies_and_the_users_stay_untouched() -> None:
    x = torch.arange(8, dtype=torch.float32)
    out = torch.full((8,), -1.0)
    example = Example((), {"x": x, "out": out}, written=["out"])
    copy = example.named["out"]
    assert not shares_storage(copy, out)
    assert torch.equal(copy, out)  # the copy starts with the user's values
    copy.add_(100.0)
    assert torch.equal(out, torch.full((8,), -1.0))
    assert example.copied_bytes == out.untyped_storage().nbytes()


def test_restore_brings_back_the_users_values() -> None:
    acc = torch.arange(6, dtype=torch.float64).reshape(2, 3)
    expected = acc.clone()
    example = Example((), {"acc": acc}, written=["acc"])
    example.named["acc"].mul_(7).add_(1)
    example.restore()
    assert torch.equal(example.named["acc"], expected)
    assert torch.equal(acc, expected)


def test_read_only_tensors_of_other_storages_are_passed_as_they_are() -> None:
    x, out = torch.ones(4), torch.zeros(4)
    example = Example((), {"x": x, "out": out}, written=["out"])
    assert example.named["x"] is x
    assert example.copied_bytes == out.untyped_storage().nbytes()


def test_non_tensor_arguments_pass_through() -> None:
    marker = object()
    out = torch.zeros(4)
    example = Example((), {"out": out, "n": 4, "alpha": 0.5, "name": None, "other": marker}, written=["out"])
    assert example.named["n"] == 4
    assert example.named["alpha"] == 0.5
    assert example.named["name"] is None
    assert example.named["other"] is marker
    assert list(example.named) == ["out", "n", "alpha", "name", "other"]


def test_written_names_that_are_not_tensors_are_ignored() -> None:
    example = Example((), {"n": 3, "x": torch.ones(2)}, written=["n", "missing"])
    assert example.named["n"] == 3
    assert example.copied_bytes == 0


def test_aliasing_arguments_alias_in_the_copies() -> None:
    # `src` and `dst` are two views of one buffer: a kernel writing `dst` must see its writes when
    # it reads `src`, in the copies as in the real call.
    buffer = torch.arange(10, dtype=torch.float32)
    src, dst = buffer[:5], buffer[5:]
    example = Example((), {"src": src, "dst": dst}, written=["dst"])
    copy_src, copy_dst = example.named["src"], example.named["dst"]
    assert shares_storage(copy_src, copy_dst)
    assert not shares_storage(copy_src, buffer)
    assert same_view(copy_src, src) and same_view(copy_dst, dst)
    copy_dst.fill_(-1.0)
    whole = torch.empty(0).set_(copy_src.untyped_storage(), 0, (10,), (1,))
    assert torch.equal(whole, torch.tensor([0.0, 1, 2, 3, 4, -1, -1, -1, -1, -1]))
    assert torch.equal(buffer, torch.arange(10, dtype=torch.float32))
    assert example.copied_bytes == buffer.untyped_storage().nbytes()  # one copy per storage


def test_the_same_tensor_passed_twice_is_one_copy() -> None:
    x = torch.zeros(4)
    example = Example((), {"a": x, "b": x}, written=["a", "b"])
    example.named["a"].fill_(3.0)
    assert torch.equal(example.named["b"], torch.full((4,), 3.0))
    assert example.copied_bytes == x.untyped_storage().nbytes()


def test_views_with_another_dtype_of_a_written_storage_follow_the_copy() -> None:
    bits = torch.zeros(4, dtype=torch.int32)
    floats = bits.view(torch.float32)
    example = Example((), {"bits": bits, "floats": floats}, written=["floats"])
    example.named["floats"].fill_(1.0)
    assert torch.equal(example.named["bits"], torch.full((4,), 0x3F800000, dtype=torch.int32))
    assert torch.equal(bits, torch.zeros(4, dtype=torch.int32))


def test_non_contiguous_and_offset_views_keep_their_layout() -> None:
    base = torch.arange(48, dtype=torch.float32).reshape(6, 8)
    transposed = base.t()
    strided = base[1:, 2::3]
    example = Example((), {"t": transposed, "s": strided}, written=["t", "s"])
    for name, original in (("t", transposed), ("s", strided)):
        copy = example.named[name]
        assert same_view(copy, original)
        assert torch.equal(copy, original)
    assert strided.storage_offset() == 10
    example.named["s"].zero_()
    assert example.named["t"][2, 1] == 0  # base[1, 2] through the other view of the copy
    assert base[1, 2] == 10
    example.restore()
    assert torch.equal(example.named["s"], strided)


def test_restore_covers_bytes_outside_the_view() -> None:
    # A kernel may write out of its view's bounds into the rest of the storage (e.g. padding).
    buffer = torch.arange(8, dtype=torch.float32)
    example = Example((), {"out": buffer[2:4]}, written=["out"])
    copy = example.named["out"]
    torch.empty(0).set_(copy.untyped_storage(), 0, (8,), (1,)).fill_(9.0)
    example.restore()
    assert torch.equal(torch.empty(0).set_(copy.untyped_storage(), 0, (8,), (1,)), buffer)


def test_zeroed_arguments_are_zero_after_every_restore() -> None:
    counts = torch.full((4,), 5, dtype=torch.int64)
    out = torch.full((4,), 2.0)
    example = Example((), {"counts": counts, "out": out}, written=["out"], zeroed=["counts"])
    copy_counts = example.named["counts"]
    assert not shares_storage(copy_counts, counts)
    copy_counts.add_(3)
    example.named["out"].add_(1)
    example.restore()
    assert torch.equal(copy_counts, torch.zeros(4, dtype=torch.int64))
    assert torch.equal(example.named["out"], out)
    assert torch.equal(counts, torch.full((4,), 5, dtype=torch.int64))


def test_empty_tensors_need_no_copy() -> None:
    empty = torch.empty(0)
    example = Example((), {"out": empty}, written=["out"])
    assert example.copied_bytes == 0
    example.restore()


def test_tensor_descriptors_of_written_tensors_point_at_the_copy() -> None:
    from triton.tools.tensor_descriptor import TensorDescriptor

    x = torch.zeros(16, 16)
    descriptor = TensorDescriptor.from_tensor(x, [8, 8])
    example = Example((), {"desc": descriptor, "x": x}, written=["desc"])
    copied = example.named["desc"]
    assert isinstance(copied, TensorDescriptor)
    assert (copied.shape, copied.strides, copied.block_shape) == (
        descriptor.shape,
        descriptor.strides,
        [8, 8],
    )
    assert not shares_storage(copied.base, x)
    assert shares_storage(example.named["x"], copied.base)  # aliasing kept with the plain tensor
    copied.base.fill_(5.0)
    assert torch.equal(x, torch.zeros(16, 16))
    example.restore()
    assert torch.equal(copied.base, torch.zeros(16, 16))


def test_descriptors_over_a_written_tensor_follow_the_copy() -> None:
    from triton.tools.tensor_descriptor import TensorDescriptor

    out = torch.zeros(16, 16)
    reader = TensorDescriptor.from_tensor(out, [16, 16])
    example = Example((), {"out": out, "reader": reader}, written=["out"])
    assert shares_storage(example.named["reader"].base, example.named["out"])
    assert reader.base is out  # the user's descriptor is left as it was


def test_zeroed_descriptors_are_zeroed() -> None:
    from triton.tools.tensor_descriptor import TensorDescriptor

    counts = torch.ones(16, 16)
    example = Example(
        (), {"desc": TensorDescriptor.from_tensor(counts, [16, 16])}, written=(), zeroed=["desc"]
    )
    example.restore()
    assert torch.equal(example.named["desc"].base, torch.zeros(16, 16))
    assert torch.equal(counts, torch.ones(16, 16))


def test_a_written_storage_nothing_reads_is_copied_but_never_restored() -> None:
    x, out = torch.ones(8), torch.zeros(8)
    example = Example((), {"x": x, "out": out}, written=["out"], read=["x"])
    example.named["out"].fill_(5.0)
    example.restore()
    assert example.restored_bytes == 0
    assert torch.equal(example.named["out"], torch.full((8,), 5.0))  # not restored
    assert torch.equal(out, torch.zeros(8))  # the user's tensor untouched


def test_a_written_storage_read_through_an_alias_is_restored() -> None:
    buffer = torch.arange(8.0)
    source, target = buffer[:4], buffer[4:]
    example = Example((), {"src": source, "dst": target}, written=["dst"], read=["src"])
    example.named["dst"].fill_(-1.0)
    example.restore()
    assert example.restored_bytes == buffer.numel() * buffer.element_size()
    assert torch.equal(example.named["dst"], torch.arange(4.0, 8.0))


def test_an_example_restores_before_every_run_only_where_its_front_says_so() -> None:
    x = torch.zeros(4)
    seen = Example((x,), {})  # a selection's: every tensor copied, restored once a run is seen writing
    assert not seen.changed()
    seen.args[0].add_(1.0)
    assert seen.changed() and torch.equal(x, torch.zeros(4))
    seen.restore()
    assert not seen.changed()
    always = Example((x,), {}, ["x"], written=["x"], restore_always=True)  # a tuned kernel's
    assert always.changed() and not shares_storage(always.named["x"], x)
    given = Example((x,), {}, written=())  # what compiling binds: nothing copied, nothing to restore
    assert given.args[0] is x and not given.changed()
