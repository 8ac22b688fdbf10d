"""tune/record.py: the AUTOTUNE table of a tuning record."""

from __future__ import annotations

from kernelpick.config import Config
from kernelpick.tune.record import TuningRecord, record_table
from tests.select.test_record import CPU, body, ok


def test_record_table_lists_every_config_of_a_tuning() -> None:
    fast, slow = Config({"BLOCK": 64}), Config({"BLOCK": 32})
    record = TuningRecord("add", (100,), CPU, {slow: ok(2.0), fast: ok(1.0)}, fast, 0.5, False)
    names = [row[0] for row in body(record_table("add", record))]
    assert names == [str(fast), str(slow)]
