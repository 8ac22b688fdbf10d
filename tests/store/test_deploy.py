"""store/deploy.py: tabled winners run with no tuning, for the exact key or the nearest; NO_TUNING forbids the rest."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import triton

import kernelpick
from kernelpick import Selector, TableError, TuningRequired, extern, settings
from kernelpick.store import default_store
from kernelpick.store.deploy import key_distance, tables
from kernelpick.store.sqlite import SQLiteStore
from kernelpick.store.table import export_table
from tests.jobs.specs.small_spec import fast_add, slow_add
from tests.tune.kernels import add_kernel, grid_1d

SPACE = [triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 256})]


@pytest.fixture(autouse=True)
def no_tables() -> Iterator[None]:
    tables().clear()
    yield
    tables().clear()


def tuned_table(tmp_path: Path, *sizes: int) -> Path:
    """Tune `add_kernel` for `sizes` in a store of its own and export the table."""
    with settings.override(cache_dir=tmp_path / "tuning-machine"):
        kernel = kernelpick.autotune(SPACE, key=["n"])(add_kernel)
        for n in sizes:
            x = torch.randn(n)
            kernel[grid_1d(n)](x, x, torch.empty(n), n)
        store = default_store()
        assert isinstance(store, SQLiteStore)
        return export_table(store.rows()).write(tmp_path / "table.json")


def add(n: int, dtype: torch.dtype = torch.float32) -> kernelpick.Autotuner:
    kernel = kernelpick.autotune(SPACE, key=["n"])(add_kernel)
    x = torch.randn(n).to(dtype)
    out = torch.empty_like(x)
    kernel[grid_1d(n)](x, x, out, n)
    torch.testing.assert_close(out, x + x)
    return kernel


def test_the_exact_key_runs_the_tabled_pick_without_tuning(tmp_path: Path) -> None:
    path = tuned_table(tmp_path, 128)
    tabled = json.loads(path.read_text())["entries"][0]["choice"]["kwargs"]
    kernelpick.load_table(path)
    with settings.override(no_tuning=True):
        kernel = add(128)
    record = kernel.last_tuning
    assert record is not None and record.from_store
    assert record.best.kwargs == tabled
    assert f"from the deployment table {path}" == record.note
    assert "benchmark" not in record.phases and "compile" not in record.phases


def test_a_new_key_takes_the_nearest_tabled_key(tmp_path: Path) -> None:
    kernelpick.load_table(tuned_table(tmp_path, 64, 4096))
    with settings.override(no_tuning=True):
        near_small, near_large = add(100), add(3000)
    assert (
        near_small.last_tuning is not None
        and "nearest key [64, 'torch.float32'" in near_small.last_tuning.note
    )
    assert (
        near_large.last_tuning is not None
        and "nearest key [4096, 'torch.float32'" in near_large.last_tuning.note
    )


def test_a_stored_exact_key_is_preferred_to_a_nearest_tabled_one(tmp_path: Path) -> None:
    add(100)  # tuned here before any table was loaded
    kernelpick.load_table(tuned_table(tmp_path, 64))
    again = add(100)
    assert again.last_tuning is not None and again.last_tuning.from_store and again.last_tuning.note == ""


def test_no_tuning_raises_and_says_what_was_looked_at(tmp_path: Path) -> None:
    kernelpick.load_table(tuned_table(tmp_path, 64))
    with settings.override(no_tuning=True), pytest.raises(TuningRequired) as raised:
        add(64, torch.float64)  # another dtype: no comparable key
    message = str(raised.value)
    assert "kernel `add_kernel` has no pick for (n=64" in message
    assert "KERNELPICK_NO_TUNING=1 forbids tuning" in message
    assert f"{tmp_path / 'table.json'} (1 picks)" in message
    assert "kernelpick tune SPEC.py --export table.json" in message


def test_a_table_from_another_device_is_refused_naming_the_field(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tuned_table(tmp_path, 64)
    data = json.loads(path.read_text())
    data["device"] = "NVIDIA H200"
    path.write_text(json.dumps(data))
    with pytest.raises(
        TableError, match=r"made on NVIDIA H200 .* its device model is 'NVIDIA H200', here it is 'cpu'"
    ):
        kernelpick.load_table(path)

    data["device"], data["toolchain"]["torch"] = "cpu", "1.0"
    path.write_text(json.dumps(data))
    with caplog.at_level(logging.WARNING), settings.override(tables=str(path), no_tuning=True):
        with pytest.raises(TuningRequired, match=r"refused: .*its torch version is '1.0'"):
            add(64)
    assert "does not apply here" in caplog.text


def test_tables_from_the_environment_are_read_at_the_first_tuning(tmp_path: Path) -> None:
    path = tuned_table(tmp_path, 64)
    missing = tmp_path / "missing.json"
    with settings.override(tables=f"{missing}:{path}", no_tuning=True):
        kernel = add(64)
        assert [str(t.path) for t in tables().tables] == [str(path)]
        assert tables().refused[0].startswith(f"{missing}: cannot read")
    assert kernel.last_tuning is not None and kernel.last_tuning.note.startswith("from the deployment table")


def test_a_selector_runs_the_tabled_choice_for_the_exact_and_the_nearest_key(tmp_path: Path) -> None:
    with settings.override(cache_dir=tmp_path / "tuning-machine"):
        Selector("add", [extern(slow_add), extern(fast_add)])(torch.randn(256, 256), torch.randn(256, 256))
        store = default_store()
        assert isinstance(store, SQLiteStore)
        path = export_table(store.rows()).write(tmp_path / "table.json")
    winner = json.loads(path.read_text())["entries"][0]["choice"]["name"]
    kernelpick.load_table(path)
    selector = Selector("add", [extern(slow_add), extern(fast_add)])
    with settings.override(no_tuning=True):
        a = torch.randn(256, 256)
        assert torch.equal(selector(a, a), a + a)
        record = selector.last_selection
        assert (
            record is not None
            and record.best == winner
            and record.note == f"from the deployment table {path}"
        )
        b = torch.randn(200, 256)
        assert torch.equal(selector(b, b), b + b)
        record = selector.last_selection
        assert record is not None and record.best == winner and "nearest key" in record.note
        with pytest.raises(TuningRequired, match=r"selector `add` has no pick for \(int64"):
            selector(a.long(), a.long())


def test_distance_compares_sizes_by_ratio_and_only_comparable_keys() -> None:
    assert key_distance([100, "f16"], [128, "f16"]) < key_distance([100, "f16"], [64, "f16"])  # type: ignore[operator]
    assert key_distance([64, "f16"], [64, "f16"]) == 0.0
    assert key_distance([64, "f16"], [64, "f32"]) is None
    assert key_distance([64, True], [64, False]) is None  # flags are not numbers
    assert key_distance([[1, 2]], [[1, 2, 3]]) is None
    assert key_distance({"size": [16, 8]}, {"size": [32, 8]}) == pytest.approx(1.0, abs=0.1)


def test_tables_named_by_the_setting_go_when_it_changes(tmp_path: Path) -> None:
    path = tuned_table(tmp_path, 64)
    with settings.override(tables=str(path)):
        assert len(tables().tables) == 1
    with settings.override(tables=""):
        assert tables().tables == []
    kernelpick.load_table(path)  # a table loaded from Python stays
    with settings.override(tables=str(path)):
        assert len(tables().tables) == 2
    assert len(tables().tables) == 1


def test_a_tuning_with_tables_loaded_reads_the_store_once(tmp_path: Path) -> None:
    kernelpick.load_table(tuned_table(tmp_path, 64))  # a nearest key for 100, so the lookup asks the store
    reads: list[str] = []
    with settings.override(cache_dir=tmp_path / "here"):
        store = default_store()
        load = store.load
        store.load = lambda key: reads.append(key.digest) or load(key)  # type: ignore[method-assign]
        try:
            kernel = kernelpick.autotune(SPACE, key=["n"])(add_kernel)
            x = torch.randn(100)
            kernel[grid_1d(100)](x, x, torch.empty(100), 100)
        finally:
            del store.load
    assert kernel.last_tuning is not None and "nearest key" in kernel.last_tuning.note
    assert len(reads) == 1  # the table lookup and the results shared one read


def test_a_tabled_template_winner_is_rendered_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A deployment's first call binds the tabled config of a template without rendering the others
    # (a template of 16 configs rendered all of them first: milliseconds at every new shape).
    from kernelpick import TritonTemplate, template
    from tests.select.search_choices import CONFIGS, DOUBLE, slow_double

    def choices() -> list[object]:
        return [extern(slow_double), template(DOUBLE, configs=CONFIGS)]

    x = torch.randn(2048)
    with settings.override(cache_dir=tmp_path / "tuning-machine"):
        Selector("double", choices())(x)
        store = default_store()
        assert isinstance(store, SQLiteStore)
        path = export_table(store.rows()).write(tmp_path / "table.json")
    winner = json.loads(path.read_text())["entries"][0]["choice"]
    assert winner["kind"] == "template"  # the slow extern lost
    kernelpick.load_table(path)
    rendered: list[object] = []
    prepare = TritonTemplate.prepare
    monkeypatch.setattr(
        TritonTemplate,
        "prepare",
        lambda self, config, *a, **k: rendered.append(config) or prepare(self, config, *a, **k),
    )
    selector = Selector("double", choices())
    with settings.override(no_tuning=True):
        torch.testing.assert_close(selector(x), x * 2)
    assert selector.last_selection is not None and selector.last_selection.best == winner["name"]
    assert [config.to_data() for config in rendered] == [winner["config"]]


def a_string_median(data: dict[str, Any]) -> str:
    data["entries"][0]["result"]["timing"]["median_ms"] = "0.001"  # reached kernel.last_tuning as text
    return json.dumps(data)


def a_negative_median(data: dict[str, Any]) -> str:
    data["entries"][0]["result"]["timing"]["median_ms"] = -1.0
    return json.dumps(data)


def nested_too_deep(data: dict[str, Any]) -> str:
    return "[" * 100_000 + "]" * 100_000  # a RecursionError while decoding broke every tuned call


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (a_string_median, "timing.median_ms is '0.001', not a number"),
        (a_negative_median, "timing.median_ms is -1.0"),
        (nested_too_deep, "nested too deep"),
    ],
)
def test_a_table_that_lies_is_refused_and_from_the_environment_skipped_while_calls_tune(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: Any, why: str
) -> None:
    path = tuned_table(tmp_path, 64)
    path.write_text(damage(json.loads(path.read_text())))
    with pytest.raises(TableError, match=re.escape(why)):
        kernelpick.load_table(path)
    with caplog.at_level(logging.WARNING), settings.override(tables=str(path)):
        kernel = add(64)  # the call runs: tuned here, the table skipped
    assert kernel.last_tuning is not None and not kernel.last_tuning.note.startswith("from the deployment")
    assert all(isinstance(r.median_ms, float) for r in kernel.last_tuning.results.values() if r.ok)
    [warning] = [r.getMessage() for r in caplog.records if "KERNELPICK_TABLES" in r.getMessage()]
    assert str(path) in warning and why in warning
