"""engine/record.py: the AUTOTUNE table of a tuned kernel's record."""

from __future__ import annotations

from kernelpick.config import Config
from kernelpick.engine.record import TuningRecord
from tests.engine.test_record import CPU, body, ok


def test_record_table_lists_every_config_of_a_tuning_by_what_sets_it_apart() -> None:
    fast, slow = Config({"BLOCK": 64}), Config({"BLOCK": 32})
    record = TuningRecord.of_configs("add", (100,), CPU, {slow: ok(2.0), fast: ok(1.0)}, fast, 0.5, False)
    table = record.table()
    assert [row[0] for row in body(table)] == ["BLOCK=64", "BLOCK=32"]
    assert table.caption == "every candidate has warps=4 stages=3"


def test_the_table_is_titled_by_the_kernels_name_in_the_store_and_its_key() -> None:
    config = Config({"BLOCK": 64})
    record = TuningRecord.of_configs(
        "add_kernel", (100,), CPU, {config: ok(1.0)}, config, 0.5, False, key_text="(n=100)"
    )
    assert record.table().title.startswith("AUTOTUNE add_kernel(n=100) on cpu")
