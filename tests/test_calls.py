"""calls.py: a tuned call recorded as data (KERNELPICK_RECORD), each key once, and made again."""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import triton
import triton.language as tl

import kernelpick
from kernelpick import calls, settings
from kernelpick.calls import (
    Unrecordable,
    decode,
    encode,
    grid_of,
    read_recording,
    record_selector_call,
)
from kernelpick.errors import ConfigError
from kernelpick.tensors import TensorSpec, example_generator

CPU = torch.device("cpu")


def made_again(value: object) -> object:
    data = json.loads(json.dumps(encode(value, "argument 0")))  # through the file's JSON
    return decode(data, CPU, example_generator(CPU))


def test_a_tensor_is_made_again_with_its_dtype_layout_offset_and_alignment() -> None:
    base = torch.randn(64, 48)
    for tensor in (base, base.t(), base[3:, 1::2], base.view(-1)[1:]):  # the last starts misaligned
        again = made_again(tensor)
        assert isinstance(again, torch.Tensor)
        assert TensorSpec.of(again) == TensorSpec.of(tensor)
        assert not torch.equal(again, tensor)  # random values: the caller's data is not recorded


def test_small_integer_tensors_keep_their_values_and_large_ones_are_zeros() -> None:
    index = torch.randperm(100).to(torch.int32)[::2]  # a strided view: its storage is recorded
    again = made_again(index)
    assert isinstance(again, torch.Tensor)
    assert torch.equal(again, index) and again.stride() == (2,)
    mask = torch.rand(10) < 0.5
    assert torch.equal(made_again(mask), mask)  # type: ignore[arg-type]
    large = torch.arange(calls.VALUES_LIMIT + 1)
    zeros = made_again(large)
    assert isinstance(zeros, torch.Tensor) and zeros.dtype == torch.int64
    assert zeros.shape == large.shape and not zeros.any()


def test_other_arguments_are_made_again_as_they_were() -> None:
    values = [None, True, 3, 2.5, "name", (1, (2, "x")), [4, 5], torch.bfloat16, tl.float16]
    assert [made_again(v) for v in values] == values
    assert type(made_again((1, 2))) is tuple and type(made_again([1, 2])) is list


def test_a_tensor_descriptor_is_made_again_over_a_tensor_of_its_own() -> None:
    from triton.tools.tensor_descriptor import TensorDescriptor

    descriptor = TensorDescriptor.from_tensor(torch.randn(64, 32)[:, :16], [16, 8])
    again = made_again(descriptor)
    assert isinstance(again, TensorDescriptor)
    assert TensorSpec.of(again.base) == TensorSpec.of(descriptor.base)
    assert (tuple(again.shape), tuple(again.strides), again.block_shape) == ((64, 16), (32, 1), [16, 8])


def test_an_argument_of_another_type_cannot_be_recorded() -> None:
    with pytest.raises(Unrecordable, match="argument `x` is a object"):
        encode(object(), "argument `x`")
    with pytest.raises(Unrecordable, match="is a dict"):
        encode({"a": 1}, "argument 2")


def test_a_grid_function_is_recorded_as_its_value_for_each_config() -> None:
    kernel = SimpleNamespace(
        arg_names=["x", "n"], configs=[kernelpick.Config({"BLOCK": b}) for b in (16, 64)]
    )
    data = calls._grid_data(kernel, (None, 100), {}, lambda meta: (triton.cdiv(meta["n"], meta["BLOCK"]),))
    grid = grid_of(json.loads(json.dumps(data)))
    assert callable(grid)
    assert grid({"n": 100, "BLOCK": 16}) == (7,) and grid({"n": 100, "BLOCK": 64}) == (2,)
    with pytest.raises(ConfigError, match="has no grid for the meta-parameters"):
        grid({"n": 100, "BLOCK": 32})
    assert grid_of(calls._grid_data(kernel, (), {}, (3, 2))) == (3, 2)


def plus(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a + b


#: At a module's top level: another process finds it as `tests.test_calls:SUM`.
SUM = kernelpick.Selector("sum", [kernelpick.extern(plus)])


def test_a_selector_bound_at_a_module_top_level_is_recorded_once_per_key(tmp_path: Path) -> None:
    path = tmp_path / "keys.jsonl"
    a = torch.randn(4, 8)
    with settings.override(record_path=path):
        for _ in range(2):
            record_selector_call(SUM, (a, a), {}, ("a key",))
        record_selector_call(SUM, (a[:2], a[:2]), {}, ("another key",))
    first, second = read_recording(path)
    assert first["target"] == "tests.test_calls:SUM" and first["kind"] == "select"
    assert first["job"].startswith("sum(float32[4, 8], float32[4, 8]) ")
    assert [t["tensor"]["size"] for t in second["args"]] == [[2, 8], [2, 8]]
    assert calls.replay_call(first, CPU).best == "plus"  # type: ignore[attr-defined]


def test_what_no_module_binds_and_what_cannot_be_made_again_are_warned_of_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "keys.jsonl"
    local = kernelpick.Selector("local", [kernelpick.extern(plus)])
    a = torch.randn(4)
    with settings.override(record_path=path), caplog.at_level(logging.WARNING, logger="kernelpick.record"):
        record_selector_call(local, (a, a), {}, (1,))
        record_selector_call(local, (a, a), {}, (2,))
        record_selector_call(SUM, (a, object()), {}, (3,))
        record_selector_call(SUM, (a, object()), {}, (4,))
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2, messages
    assert "local cannot be recorded (KERNELPICK_RECORD): no module binds it" in messages[0]
    assert "calls of sum cannot be recorded (KERNELPICK_RECORD): argument 1 is a object" in messages[1]
    assert not path.exists()


def test_a_recording_that_cannot_be_written_costs_one_warning_and_no_failure(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "a-folder"
    folder.mkdir()
    a = torch.randn(4)
    with settings.override(record_path=folder), caplog.at_level(logging.WARNING, logger="kernelpick.record"):
        record_selector_call(SUM, (a, a), {}, (1,))
        record_selector_call(SUM, (a, a), {}, (2,))
    [warning] = [r.getMessage() for r in caplog.records]
    assert f"the recording {folder} cannot be written" in warning


def test_processes_appending_at_once_write_each_key_once(tmp_path: Path) -> None:
    path = tmp_path / "keys.jsonl"
    path.write_text('{"key": "cut sho')  # a line a killed process left half written
    barrier = threading.Barrier(4)

    def process() -> None:
        recorder = calls._Recorder(path)  # its own view of the file, as another process has
        barrier.wait()
        for number in range(20):
            recorder.append(f"key {number}", json.dumps({"key": f"key {number}"}))

    threads = [threading.Thread(target=process) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    lines = path.read_text().splitlines()
    assert lines[0] == '{"key": "cut sho'
    assert sorted(json.loads(line)["key"] for line in lines[1:]) == sorted(f"key {n}" for n in range(20))


def test_a_reader_leaves_out_lines_that_are_no_calls(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "keys.jsonl"
    call = {"version": 1, "kind": "select", "job": "j", "key": "k", "target": "m:n", "args": [], "kwargs": {}}
    path.write_text(
        "\n".join([json.dumps(call), "not json", json.dumps({**call, "version": 99}), json.dumps(call)])
    )
    with caplog.at_level(logging.WARNING, logger="kernelpick.record"):
        assert read_recording(path) == [call]
    assert "2 lines that are not recorded calls were left out" in caplog.text
    with pytest.raises(ConfigError, match="no recording at"):
        read_recording(tmp_path / "missing.jsonl")
    path.write_text("")
    with pytest.raises(ConfigError, match="holds no call"):
        read_recording(path)


def test_a_recording_emptied_while_the_process_runs_gets_its_keys_again(tmp_path: Path) -> None:
    path = tmp_path / "keys.jsonl"
    recorder = calls._Recorder(path)
    recorder.append("a", json.dumps({"key": "a"}))
    recorder.append("a", json.dumps({"key": "a"}))
    assert path.read_text().count("\n") == 1
    path.write_text("")
    recorder.append("a", json.dumps({"key": "a"}))
    assert path.read_text() == '{"key": "a"}\n'
