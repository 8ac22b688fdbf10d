"""cli/code.py: `kernelpick code NAME` prints the source of stored choices."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
import triton

from kernelpick import Config, Selector, autotune, cli, extern, template, triton_choice
from kernelpick.bench.result import BenchmarkResult, TimingSummary
from kernelpick.cli.code import stored_code
from kernelpick.errors import StoreError
from kernelpick.store.base import CandidateResult
from kernelpick.store.default import default_store_path
from kernelpick.store.keys import Toolchain, TuningKey
from kernelpick.store.sqlite import SQLiteStore
from tests.select.test_template_choice import SCALE, double
from tests.tune.kernels import add_kernel

OK = BenchmarkResult("ok", TimingSummary.of([1.0]))
KERNEL_LINE = "def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):"


def bind(x: torch.Tensor, y: torch.Tensor) -> tuple[tuple[Any, ...], torch.Tensor]:
    out = torch.empty_like(x)
    return (x, y, out, x.numel()), out


def grid(meta: dict[str, Any]) -> tuple[int]:
    return (triton.cdiv(meta["n"], meta["BLOCK"]),)


def code(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert cli.main(["code", *argv]) == 0
    return capsys.readouterr().out


@pytest.fixture
def tuned() -> None:
    """A selector of an extern and a Triton kernel, and one of a template, tuned into the store."""
    configs = [Config({"BLOCK": 64}), Config({"BLOCK": 128})]
    add = Selector(
        "add", [extern(torch.add), triton_choice(add_kernel, grid=grid, configs=configs, bind=bind)]
    )
    add.tune(torch.randn(100), torch.randn(100))
    scale = Selector(
        "scale", [extern(double), template(SCALE, configs=[Config({"BLOCK": 16})], constants={"FACTOR": 2.0})]
    )
    scale.tune(torch.randn(40))


def test_a_triton_choice_prints_its_kernel_source_and_config(
    tuned: None, capsys: pytest.CaptureFixture[str]
) -> None:
    out = code(capsys, "add", "--choice", "BLOCK=128")
    assert "# triton add_kernel BLOCK=128, num_warps=4, num_stages=3" in out
    assert '# config: {"kwargs": {"BLOCK": 128}' in out
    assert "@triton.jit\n" + KERNEL_LINE in out
    assert "BLOCK=64" not in out


def test_a_template_choice_prints_its_rendered_module(
    tuned: None, capsys: pytest.CaptureFixture[str]
) -> None:
    out = code(capsys, "scale", "--choice", "scale")
    assert "# Rendered by kernelpick from template `scale`; do not edit." in out
    assert "BLOCK: tl.constexpr = 16" in out and "FACTOR: tl.constexpr = 2.0" in out
    assert "/templates/" in out  # where it was read from


def test_by_default_each_keys_pick_and_with_all_every_candidate(
    tuned: None, capsys: pytest.CaptureFixture[str]
) -> None:
    picks = stored_code(default_store_path(), "add")
    assert len(picks) == 1 and picks[0].row.picked
    everything = stored_code(default_store_path(), "add", every=True)
    assert sorted(c.kind for c in everything) == ["extern", "triton", "triton"]
    extern_code = next(c for c in everything if c.kind == "extern")
    assert extern_code.source is None and "torch.add is a library function" in extern_code.missing
    listed = json.loads(code(capsys, "add", "--all", "--json"))
    assert {entry["name"] for entry in listed} == {c.name for c in everything}
    triton_entry = next(e for e in listed if e["kind"] == "triton")
    assert KERNEL_LINE in triton_entry["source"] and triton_entry["missing"] is None


def test_a_rendered_module_no_longer_cached_is_said_not_guessed(
    tuned: None, capsys: pytest.CaptureFixture[str]
) -> None:
    for module in (default_store_path().parent / "templates").iterdir():
        module.unlink()
    out = code(capsys, "scale", "--choice", "scale")
    assert "the rendered template module is not at" in out and "tuning it again" in out
    (found,) = stored_code(default_store_path(), "scale", choice="scale")
    assert found.source is None


def test_an_autotuned_kernel_prints_its_source_with_the_picked_config(
    capsys: pytest.CaptureFixture[str],
) -> None:
    tuned_add = autotune(configs=[Config({"BLOCK": 32}), Config({"BLOCK": 64})], key=["n"])(add_kernel)
    x, y = torch.randn(50), torch.randn(50)
    out = torch.empty_like(x)
    tuned_add[lambda meta: (triton.cdiv(50, meta["BLOCK"]),)](x, y, out, 50)
    text = code(capsys, "add_kernel")
    assert KERNEL_LINE in text
    assert '# config: {"kwargs": {"BLOCK": ' in text and "picked" in text


def test_unknown_names_keys_and_choices_list_what_there_is(tuned: None, tmp_path: Path) -> None:
    store = default_store_path()
    with pytest.raises(StoreError, match="stored kernels: add, scale"):
        stored_code(store, "mul")
    with pytest.raises(StoreError, match=r"no key of add starts with 'zz'; its keys: [0-9a-f]{12}"):
        stored_code(store, "add", key="zz")
    key = stored_code(store, "add")[0].row.key.digest
    assert stored_code(store, "add", key=key[:6])[0].row.key.digest == key
    with pytest.raises(StoreError, match="its candidates: add_kernel BLOCK=128"):
        stored_code(store, "add", choice="BLOCK=32")
    with pytest.raises(StoreError, match="no result store at"):
        stored_code(tmp_path / "none.sqlite3", "add")


def test_a_stored_source_path_outside_the_cache_folder_is_never_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "cache" / "results.sqlite3"
    secret = tmp_path / "secret.py"
    secret.write_text("SECRET = 'a file of the user outside the cache folder'\n")
    planted = {  # rows a writer of the store made, naming paths that leave its folder
        "up": {"kind": "template", "name": "up", "source_sha256": "../../secret"},
        "absolute": {"kind": "template", "name": "absolute", "source_sha256": str(tmp_path / "secret")},
        "kernel": {"kind": "triton", "name": "kernel", "source": "../../secret"},
    }
    SQLiteStore(store).save(
        TuningKey("planted", "source", "cpu", "", Toolchain.current(), (1,)),
        [CandidateResult(digest, description, OK) for digest, description in planted.items()],
    )
    listed = json.loads(code(capsys, "planted", "--all", "--json", "--store", str(store)))
    assert len(listed) == 3 and all(entry["source"] is None for entry in listed)
    assert all("is not a hash: it names no file kernelpick keeps" in entry["missing"] for entry in listed)
    assert "SECRET" not in code(capsys, "planted", "--all", "--store", str(store))
