"""calls/recorder.py and calls/origins.py: KERNELPICK_RECORD appends each key once, from any thread
or process, never failing the call; what another process cannot find again is warned of once."""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

import pytest
import torch

import kernelpick
from kernelpick.calls import read_recording, record_selector_call, replay_call
from kernelpick.calls.recorder import _Recorder
from kernelpick.errors import ConfigError

CPU = torch.device("cpu")


def plus(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a + b


#: At a module's top level: another process finds it as `tests.calls.test_recorder:SUM`.
SUM = kernelpick.Selector("sum", [kernelpick.extern(plus)])


def test_a_selector_bound_at_a_module_top_level_is_recorded_once_per_key(tmp_path: Path) -> None:
    path = tmp_path / "keys.jsonl"
    a = torch.randn(4, 8)
    for _ in range(2):
        record_selector_call(path, SUM, (a, a), {}, ("a key",))
    record_selector_call(path, SUM, (a[:2], a[:2]), {}, ("another key",))
    first, second = read_recording(path)
    assert first["target"] == "tests.calls.test_recorder:SUM" and first["kind"] == "select"
    assert first["job"].startswith("sum(float32[4, 8], float32[4, 8]) ")
    assert [t["tensor"]["size"] for t in second["args"]] == [[2, 8], [2, 8]]
    assert replay_call(first, CPU).best == "plus"  # type: ignore[attr-defined]


def test_what_no_module_binds_and_what_cannot_be_made_again_are_warned_of_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "keys.jsonl"
    local = kernelpick.Selector("local", [kernelpick.extern(plus)])
    a = torch.randn(4)
    with caplog.at_level(logging.WARNING, logger="kernelpick.record"):
        record_selector_call(path, local, (a, a), {}, (1,))
        record_selector_call(path, local, (a, a), {}, (2,))
        record_selector_call(path, SUM, (a, object()), {}, (3,))
        record_selector_call(path, SUM, (a, object()), {}, (4,))
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
    with caplog.at_level(logging.WARNING, logger="kernelpick.record"):
        record_selector_call(folder, SUM, (a, a), {}, (1,))
        record_selector_call(folder, SUM, (a, a), {}, (2,))
    [warning] = [r.getMessage() for r in caplog.records]
    assert f"the recording {folder} cannot be written" in warning


def test_processes_appending_at_once_write_each_key_once(tmp_path: Path) -> None:
    path = tmp_path / "keys.jsonl"
    path.write_text('{"key": "cut sho')  # a line a killed process left half written
    barrier = threading.Barrier(4)

    def process() -> None:
        recorder = _Recorder(path)  # its own view of the file, as another process has
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
    recorder = _Recorder(path)
    recorder.append("a", json.dumps({"key": "a"}))
    recorder.append("a", json.dumps({"key": "a"}))
    assert path.read_text().count("\n") == 1
    path.write_text("")
    recorder.append("a", json.dumps({"key": "a"}))
    assert path.read_text() == '{"key": "a"}\n'
