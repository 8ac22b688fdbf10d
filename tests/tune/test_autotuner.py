"""The drop-in autotuner: Triton's interface, parallel compile, failures as data, the store, safety."""

from __future__ import annotations

import copy
import importlib.util
import json
import logging
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl

import kernelpick
from kernelpick import settings
from kernelpick.compile.launch import interpreting
from kernelpick.errors import ArgumentError, ConfigError
from kernelpick.store import MemoryStore
from tests.tune.kernels import (
    accumulate_kernel,
    add_kernel,
    grid_1d,
    increment_groups_kernel,
    increment_kernel,
    scale_kernel,
)


def wall_clock_do_bench(kernel_call, quantiles):  # type: ignore[no-untyped-def]
    """A CPU timer with Triton's do_bench interface, so that Triton's own autotuner runs without a GPU."""
    times = []
    for _ in range(3):
        start = time.perf_counter()
        kernel_call()
        times.append((time.perf_counter() - start) * 1e3)
    return [sorted(times)[1]] * len(quantiles)


# Block sizes far apart: in the interpreter a 16-wide block runs 16x as many programs as a 256-wide one.
SPACE = [triton.Config({"BLOCK": 16}, num_warps=4), triton.Config({"BLOCK": 256}, num_warps=4)]


def test_same_interface_and_results_as_triton_autotune() -> None:
    ours = kernelpick.autotune(SPACE, key=["n"])(add_kernel)
    with triton.knobs.runtime.scope():
        triton.knobs.runtime.interpret = True
        theirs = triton.autotune(SPACE, key=["n"], do_bench=wall_clock_do_bench)(triton.jit(add_kernel.fn))
        x, y = torch.randn(1000), torch.randn(1000)
        expected = torch.empty(1000)
        theirs[grid_1d(1000)](x, y, expected, 1000)
    out = torch.empty(1000)
    ours[grid_1d(1000)](x, y, out, 1000)

    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(out, x + y)
    assert ours.best_config.kwargs == theirs.best_config.kwargs == {"BLOCK": 256}
    assert ours.best_config.num_warps == theirs.best_config.num_warps
    assert len(ours.cache) == len(theirs.cache) == 1
    assert {str(c.kwargs) for c in ours.configs_timings} == {str(c.kwargs) for c in theirs.configs_timings}
    assert ours.arg_names == theirs.arg_names


def test_a_model_holding_a_tuned_kernel_can_be_deep_copied_and_the_copy_shares_its_picks() -> None:
    # triton.autotune's kernels raise there ("cannot pickle '_thread.RLock' object"), and so did ours.
    kernel = kernelpick.autotune(SPACE, key=["n"])(add_kernel)
    x, y, out = torch.randn(300), torch.randn(300), torch.empty(300)
    kernel[grid_1d(300)](x, y, out, 300)
    model = torch.nn.Module()
    model.kernel = kernel
    copied = copy.deepcopy(model)
    assert copied is not model and copied.kernel is kernel and len(kernel.cache) == 1


def test_a_cache_dir_that_is_a_file_costs_a_warning_and_the_kernel_still_runs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    file = tmp_path / "cache"
    file.write_text("")
    kernel = kernelpick.autotune(SPACE, key=["n"])(add_kernel)
    x, y, out = torch.randn(300), torch.randn(300), torch.empty(300)
    with settings.override(cache_dir=file), caplog.at_level(logging.WARNING, logger="kernelpick"):
        kernel[grid_1d(300)](x, y, out, 300)
        kernel[grid_1d(500)](torch.randn(500), torch.randn(500), torch.empty(500), 500)
    torch.testing.assert_close(out, x + y)
    warnings = [r.getMessage() for r in caplog.records if "KERNELPICK_CACHE_DIR" in r.getMessage()]
    assert len(warnings) == 1 and str(file) in warnings[0]


def test_a_meta_tensor_is_refused_by_name_before_any_config_runs() -> None:
    kernel = kernelpick.autotune(SPACE, key=["n"], store=MemoryStore())(add_kernel)
    x, out = torch.randn(64), torch.empty(64)
    with pytest.raises(ArgumentError) as raised:
        kernel[grid_1d(64)](x, torch.empty(64, device="meta"), out, 64)
    message = str(raised.value)
    assert message.startswith("argument `y_ptr` of kernel `add_kernel` is a meta tensor")
    assert "a float32 tensor of size [64] on meta" in message and "kernelpick.analyze" in message
    assert kernel.last_tuning is None


@pytest.mark.parametrize("background", [False, True])
def test_a_key_that_names_a_tensor_is_refused_before_any_config_runs(background: bool) -> None:
    # The key held the tensor by its identity: every call was tuned again (3 calls, 3 tunings), and
    # the tuned kernel's cache kept each call's tensor alive.
    kernel = kernelpick.autotune(SPACE, key=["x_ptr"], store=MemoryStore(), background=background)(add_kernel)
    x, out = torch.randn(64), torch.empty(64)
    with pytest.raises(ArgumentError) as raised:
        kernel[grid_1d(64)](x, x, out, 64)
    assert str(raised.value).startswith("kernel `add_kernel` is keyed on `x_ptr`, a tensor")
    assert "key on the sizes that select a config" in str(raised.value)
    assert kernel.last_tuning is None and not kernel.cache


@pytest.mark.parametrize("where", ["x_ptr", "n"])  # n is a key: a list there cannot even be looked up
def test_a_list_argument_is_refused_by_name_and_type(where: str) -> None:
    kernel = kernelpick.autotune(SPACE, key=["n"], store=MemoryStore())(add_kernel)
    x, out = torch.randn(64), torch.empty(64)
    args: list[object] = [x, x, out, 64]
    args[0 if where == "x_ptr" else 3] = [1.0, 2.0] if where == "x_ptr" else [64]
    with pytest.raises(
        ArgumentError, match=f"argument `{where}` of kernel `add_kernel` is a list: .*pass a tuple"
    ):
        kernel[grid_1d(64)](*args)
    assert issubclass(ArgumentError, TypeError)  # what Triton raises for such an argument


def test_same_key_is_tuned_once_and_a_new_key_tunes_again() -> None:
    kernel = kernelpick.autotune(SPACE, key=["n"], store=MemoryStore())(add_kernel)
    x = torch.randn(512)
    out = torch.empty(512)
    kernel[grid_1d(512)](x, x, out, 512)
    first = kernel.last_tuning
    kernel[grid_1d(512)](x, x, out, 512)
    assert kernel.last_tuning is first
    kernel[grid_1d(300)](x, x, out, 300)
    assert kernel.last_tuning is not first
    assert len(kernel.cache) == 2


def test_clearing_the_cache_resolves_each_key_again_from_the_store() -> None:
    kernel = kernelpick.autotune(SPACE, key=["n"], store=MemoryStore())(add_kernel)
    x = torch.randn(512)
    out = torch.empty(512)
    kernel[grid_1d(512)](x, x, out, 512)
    first = kernel.last_tuning
    kernel.cache.clear()
    kernel[grid_1d(512)](x, x, out, 512)
    again = kernel.last_tuning
    assert again is not first and again.from_store and not first.from_store
    assert len(kernel.cache) == 1


def test_dtype_is_part_of_the_key() -> None:
    kernel = kernelpick.autotune(SPACE, key=["n"], store=MemoryStore())(add_kernel)
    for dtype in (torch.float32, torch.float16):
        x = torch.randn(64).to(dtype)
        out = torch.empty_like(x)
        kernel[grid_1d(64)](x, x, out, 64)
        torch.testing.assert_close(out, x + x)
    assert len(kernel.cache) == 2


def test_constexpr_given_by_the_caller_is_part_of_the_key() -> None:
    kernel = kernelpick.autotune(SPACE, key=["n"], store=MemoryStore())(scale_kernel)
    x = torch.randn(64)
    out = torch.empty(64)
    for scale in (2.0, 3.0):
        kernel[grid_1d(64)](x, out, 64, SCALE=scale)
        torch.testing.assert_close(out, x * scale)
    assert len(kernel.cache) == 2


def test_a_config_that_cannot_compile_is_recorded_and_skipped() -> None:
    space = [*SPACE, triton.Config({"BLOCK": 48})]  # tl.arange needs a power of two
    kernel = kernelpick.autotune(space, key=["n"])(add_kernel)
    x = torch.randn(100)
    out = torch.empty(100)
    kernel[grid_1d(100)](x, x, out, 100)
    torch.testing.assert_close(out, 2 * x)
    results = kernel.last_tuning.results
    bad = kernelpick.Config({"BLOCK": 48})
    assert results[bad].status == "compile_error"
    assert "power of 2" in results[bad].message
    assert kernel.best_config != bad
    assert sum(r.ok for r in results.values()) == 2


def test_every_result_says_how_long_its_config_took_to_compile(tmp_path: Path) -> None:
    space = [*SPACE, triton.Config({"BLOCK": 48})]
    kernel = kernelpick.autotune(space, key=["n"], store=MemoryStore())(add_kernel)
    x = torch.randn(100)
    with settings.override(log_path=tmp_path / "log.jsonl"):
        kernel[grid_1d(100)](x, x, torch.empty(100), 100)
    results = kernel.last_tuning.results.values()  # on the CPU: the seconds lowering each to TTIR
    assert all(r.compile_s is not None and 0 < r.compile_s < 60 for r in results), results
    (line,) = (tmp_path / "log.jsonl").read_text().splitlines()
    logged = [c["compile_s"] for c in json.loads(line)["candidates"]]
    assert sorted(logged) == sorted(r.compile_s for r in results)


def test_when_every_config_fails_the_error_lists_each_with_its_reason() -> None:
    space = [triton.Config({"BLOCK": 48}), triton.Config({"BLOCK": 24}, num_warps=2)]
    kernel = kernelpick.autotune(space, key=["n"])(add_kernel)
    x = torch.randn(100)
    with pytest.raises(kernelpick.NoValidConfigs) as error:
        kernel[grid_1d(100)](x, x, torch.empty(100), 100)
    message = str(error.value)
    assert "all 2 configs of kernel `add_kernel` failed" in message
    assert "BLOCK=48, num_warps=4" in message and "BLOCK=24, num_warps=2" in message
    assert message.count("compile_error") == 2
    assert "power of 2" in message


@pytest.mark.parametrize("argument", ["key", "reset_to_zero", "restore_value"])
def test_unknown_argument_names_fail_at_decoration(argument: str) -> None:
    kwargs = {"key": ["n"], argument: ["n", "m_size"]}
    with pytest.raises(kernelpick.ConfigError) as error:
        kernelpick.autotune(SPACE, **kwargs)(add_kernel)
    assert f"{argument} of kernel `add_kernel` names 'm_size', which is not an argument" in str(error.value)
    assert "x_ptr, y_ptr, out_ptr, n, BLOCK" in str(error.value)


def test_key_given_as_a_string_is_an_error() -> None:
    with pytest.raises(kernelpick.ConfigError, match="list of argument names"):
        kernelpick.autotune(SPACE, key="n")(add_kernel)


def test_meta_parameter_given_by_call_and_config_is_an_error() -> None:
    kernel = kernelpick.autotune(SPACE, key=["n"])(add_kernel)
    x = torch.randn(16)
    with pytest.raises(kernelpick.ConfigError, match="BLOCK both by the call and by the config"):
        kernel[(1,)](x, x, torch.empty(16), 16, BLOCK=16)


def test_triton_autotuners_attributes_are_there_for_code_written_against_it() -> None:
    def keep_all(configs, named_args, **kwargs):  # type: ignore[no-untyped-def]
        return configs

    options = {"prune_configs_by": {"early_config_prune": keep_all, "top_k": 2}, "warmup": 5, "rep": 20}
    ours = kernelpick.autotune(SPACE, key=["n"], **options)(add_kernel)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # warmup= and rep=, in newer Tritons
        theirs = triton.autotune(SPACE, key=["n"], **options)(triton.jit(add_kernel.fn))
    for name in ("early_config_prune", "perf_model", "configs_top_k", "num_warmups", "num_reps"):
        assert getattr(ours, name) == getattr(theirs, name), name
    assert ours.bench_time is None and ours.cache_results  # kernelpick keeps every result by default
    x = torch.randn(64)
    ours[grid_1d(64)](x, x, torch.empty(64), 64)
    assert ours.last_tuning is not None and ours.bench_time == ours.last_tuning.seconds > 0


def test_in_place_kernel_is_applied_exactly_once() -> None:
    space = [triton.Config({"BLOCK": b}, num_warps=w) for b in (16, 32, 64, 128) for w in (1, 4)]
    kernel = kernelpick.autotune(space, key=["n"])(increment_kernel)
    x = torch.arange(200, dtype=torch.float32)
    kernel[grid_1d(200)](x, 200)
    torch.testing.assert_close(x, torch.arange(200, dtype=torch.float32) + 1)
    assert len(kernel.last_tuning.results) == 8


def test_a_kernel_writing_through_a_table_of_pointers_is_warned_of(caplog: pytest.LogCaptureFixture) -> None:
    """Copies of the table keep the addresses: the tensors they point to cannot be kept from the
    tuning's runs, so the caller is told instead of finding them written many times over."""
    kernel = kernelpick.autotune(SPACE, key=["n"])(increment_groups_kernel)
    a, b = torch.zeros(100), torch.zeros(100)
    table = torch.tensor([a.data_ptr(), b.data_ptr()], dtype=torch.int64)
    with caplog.at_level(logging.WARNING, logger="kernelpick"):
        kernel[lambda meta: (triton.cdiv(100, meta["BLOCK"]), 2)](table, 100)
        kernel[lambda meta: (triton.cdiv(100, meta["BLOCK"]), 2)](table, 100)  # tuned: no warning again
    said = [r.getMessage() for r in caplog.records if "pointer loaded from `pointers_ptr`" in r.getMessage()]
    assert len(said) == 1 and "pre_hook" in said[0]
    assert a.min().item() > 2.0  # what it warns of: the tuning's runs wrote the caller's tensors


def test_an_in_place_kernel_warns_of_nothing(caplog: pytest.LogCaptureFixture) -> None:
    kernel = kernelpick.autotune(SPACE, key=["n"])(increment_kernel)
    with caplog.at_level(logging.WARNING, logger="kernelpick"):
        kernel[grid_1d(100)](torch.zeros(100), 100)
    assert not [r for r in caplog.records if "memory they point to" in r.getMessage()]


def test_atomic_accumulator_gives_the_untuned_result_while_triton_autotune_does_not() -> None:
    space = [triton.Config({"BLOCK": b}, num_warps=w) for b in (16, 32, 64, 128) for w in (1, 4)]
    x = torch.ones(256)

    ours = kernelpick.autotune(space, key=["n"])(accumulate_kernel)
    total = torch.zeros(1)
    ours[grid_1d(256)](x, total, 256)
    assert total.item() == 256.0  # one launch's worth

    with triton.knobs.runtime.scope():
        triton.knobs.runtime.interpret = True
        theirs = triton.autotune(space, key=["n"], do_bench=wall_clock_do_bench)(
            triton.jit(accumulate_kernel.fn)
        )
        naive_total = torch.zeros(1)
        with interpreting():  # lets Triton's interpreter call tl.sum, decorated without TRITON_INTERPRET
            theirs[grid_1d(256)](x, naive_total, 256)
    assert naive_total.item() > 256.0  # every benchmark run added to the user's buffer


def test_reset_to_zero_applies_to_benchmark_copies_only() -> None:
    seen: list[float] = []

    def record(named):  # type: ignore[no-untyped-def]
        seen.append(named["total_ptr"].item())

    space = [triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 64})]
    kernel = kernelpick.autotune(space, key=["n"], reset_to_zero=["total_ptr"], pre_hook=record)(
        accumulate_kernel
    )
    total = torch.full((1,), 5.0)
    kernel[grid_1d(64)](torch.ones(64), total, 64)
    assert total.item() == 69.0  # the user's 5 plus one launch
    assert seen and set(seen) == {0.0}  # every benchmark run started from a zeroed copy


def test_prune_configs_by_follows_triton_semantics() -> None:
    space = [triton.Config({"BLOCK": b}) for b in (16, 32, 64, 128)]

    def early(configs, named, **kwargs):  # type: ignore[no-untyped-def]
        assert named["n"] == 100
        return [c for c in configs if c.kwargs["BLOCK"] >= 32]

    def model(**kwargs):  # type: ignore[no-untyped-def]
        return -kwargs["BLOCK"]  # "predicts" the largest block fastest

    kernel = kernelpick.autotune(
        space, key=["n"], prune_configs_by={"early_config_prune": early, "perf_model": model, "top_k": 2}
    )(add_kernel)
    x = torch.randn(100)
    kernel[grid_1d(100)](x, x, torch.empty(100), 100)
    assert {c.kwargs["BLOCK"] for c in kernel.last_tuning.results} == {64, 128}


def test_a_single_config_is_launched_without_benchmarking() -> None:
    kernel = kernelpick.autotune([triton.Config({"BLOCK": 64})], key=["n"])(add_kernel)
    x = torch.randn(100)
    out = torch.empty(100)
    kernel[grid_1d(100)](x, x, out, 100)
    torch.testing.assert_close(out, 2 * x)
    assert kernel.last_tuning.results == {}
    assert kernel.best_config == kernelpick.Config({"BLOCK": 64})


def test_heuristics_under_autotune() -> None:
    inner = triton.heuristics({"BLOCK": lambda args: 64})(triton.jit(scale_kernel.fn))
    kernel = kernelpick.autotune([triton.Config({}, num_warps=1), triton.Config({}, num_warps=4)], key=["n"])(
        inner
    )
    x = torch.randn(100)
    out = torch.empty(100)
    kernel[lambda meta: (triton.cdiv(100, 64),)](x, out, 100, SCALE=2.0)
    torch.testing.assert_close(out, 2 * x)


def test_print_setting_shows_an_autotune_table(capsys: pytest.CaptureFixture[str]) -> None:
    kernel = kernelpick.autotune(SPACE, key=["n"])(add_kernel)
    x = torch.randn(64)
    with settings.override(print_tables=True):
        kernel[grid_1d(64)](x, x, torch.empty(64), 64)
    err = capsys.readouterr().err
    assert "AUTOTUNE add_kernel(n=64)" in err
    assert "BLOCK=256" in err and "100.0%" in err and "Triton interpreter" in err


def test_warmup_compiles_every_config_without_running() -> None:
    space = [*SPACE, triton.Config({"BLOCK": 48})]
    kernel = kernelpick.autotune(space, key=["n"])(increment_kernel)
    x = torch.zeros(64)
    outcomes = kernel.warmup(x, 64, grid=grid_1d(64))
    assert [o.status for o in outcomes] == ["ok", "ok", "compile_error"]
    assert torch.count_nonzero(x) == 0


# -- the store ----------------------------------------------------------------------------------


def test_a_second_tuner_reads_the_store_and_benchmarks_nothing() -> None:
    x = torch.randn(128)
    first = kernelpick.autotune(SPACE, key=["n"])(add_kernel)
    first[grid_1d(128)](x, x, torch.empty(128), 128)
    assert not first.last_tuning.from_store

    second = kernelpick.autotune(SPACE, key=["n"])(add_kernel)
    second[grid_1d(128)](x, x, torch.empty(128), 128)
    assert second.last_tuning.from_store
    assert all(r.from_store for r in second.last_tuning.results.values())
    assert second.best_config == first.best_config


def test_the_store_remembers_which_config_was_picked() -> None:
    store = MemoryStore()
    kernel = kernelpick.autotune(SPACE, key=["n"], store=store)(add_kernel)
    x = torch.randn(128)
    kernel[grid_1d(128)](x, x, torch.empty(128), 128)
    assert list(store.picks.values()) == [kernel.last_tuning.best.digest]


def test_adding_a_config_benchmarks_only_that_config() -> None:
    x = torch.randn(128)
    kernelpick.autotune(SPACE, key=["n"])(add_kernel)[grid_1d(128)](x, x, torch.empty(128), 128)

    bigger = kernelpick.autotune([*SPACE, triton.Config({"BLOCK": 64})], key=["n"])(add_kernel)
    bigger[grid_1d(128)](x, x, torch.empty(128), 128)
    fresh = [c.kwargs["BLOCK"] for c, r in bigger.last_tuning.results.items() if not r.from_store]
    assert fresh == [64]
    assert not bigger.last_tuning.from_store


def test_cache_false_never_touches_the_store(tmp_path: Path) -> None:
    x = torch.randn(64)
    kernelpick.autotune(SPACE, key=["n"], cache=False)(add_kernel)[grid_1d(64)](x, x, torch.empty(64), 64)
    again = kernelpick.autotune(SPACE, key=["n"], cache=False)(add_kernel)
    again[grid_1d(64)](x, x, torch.empty(64), 64)
    assert not again.last_tuning.from_store


KERNEL_SOURCE = """
import triton
import triton.language as tl

@triton.jit
def helper(x):
    return x + {helper_constant}

@triton.jit
def kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, helper(tl.load(x_ptr + offsets, mask=mask)) * {scale}, mask=mask)
"""


def _load(path: Path, name: str, **values: object):  # type: ignore[no-untyped-def]
    path.write_text(KERNEL_SOURCE.format(**values))
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.kernel


@pytest.mark.parametrize("changed", ["scale", "helper_constant"])
def test_changing_the_kernel_or_a_helper_invalidates_stored_results(tmp_path: Path, changed: str) -> None:
    values = {"scale": 2, "helper_constant": 1}
    x = torch.randn(64)
    tuned = kernelpick.autotune(SPACE, key=["n"])(_load(tmp_path / "v1.py", "kp_v1", **values))
    tuned[grid_1d(64)](x, torch.empty(64), 64)

    same = kernelpick.autotune(SPACE, key=["n"])(_load(tmp_path / "v1.py", "kp_v1_again", **values))
    same[grid_1d(64)](x, torch.empty(64), 64)
    assert same.last_tuning.from_store

    values[changed] += 1
    edited = kernelpick.autotune(SPACE, key=["n"])(_load(tmp_path / "v1.py", "kp_v2", **values))
    out = torch.empty(64)
    edited[grid_1d(64)](x, out, 64)
    assert not edited.last_tuning.from_store
    torch.testing.assert_close(out, (x + values["helper_constant"]) * values["scale"])


SCRIPT = """
import sys, json, torch, triton
sys.path.insert(0, {root!r})
import kernelpick
from tests.tune.kernels import add_kernel, grid_1d
kernel = kernelpick.autotune([triton.Config({{"BLOCK": 16}}), triton.Config({{"BLOCK": 256}})], key=["n"])(add_kernel)
x = torch.randn(300)
out = torch.empty(300)
kernel[grid_1d(300)](x, x, out, 300)
assert torch.allclose(out, 2 * x)
print(json.dumps(kernel.last_tuning.to_dict()))
"""


def test_a_new_process_reuses_stored_results(tmp_path: Path) -> None:
    import json
    import os

    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "KERNELPICK_CACHE_DIR": str(tmp_path / "store")}
    env.pop("TRITON_INTERPRET", None)
    runs = []
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-c", SCRIPT.format(root=root)],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    assert runs[0]["cache_hit"] is False and runs[1]["cache_hit"] is True
    assert runs[0]["best_config"] == runs[1]["best_config"]


def test_plain_jit_kernel_is_required() -> None:
    with pytest.raises(kernelpick.ConfigError, match=r"expects a @triton\.jit function"):
        kernelpick.autotune(SPACE, key=["n"])(lambda x: x)


@triton.jit
def _two_dims(x_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n) * 2, mask=offsets < n)


def test_user_given_do_bench_is_used() -> None:
    calls = []

    def do_bench(kernel_call, quantiles):  # type: ignore[no-untyped-def]
        calls.append(1)
        kernel_call()
        return [1.0, 1.0, 1.0]

    kernel = kernelpick.autotune(SPACE, key=["n"], do_bench=do_bench)(_two_dims)
    x = torch.ones(32)
    kernel[grid_1d(32)](x, 32)
    assert len(calls) == 2
    torch.testing.assert_close(x, torch.full((32,), 2.0))


def test_the_analysis_decides_what_is_copied_and_what_is_restored() -> None:
    add = kernelpick.autotune(SPACE, key=["n"])(add_kernel)
    x = torch.randn(64)
    assert add.accesses((x, x, torch.empty(64), 64), {}) == (["out_ptr"], ["x_ptr", "y_ptr"])
    increment = kernelpick.autotune(SPACE, key=["n"])(increment_kernel)
    assert increment.accesses((x, 64), {}) == (["x_ptr"], ["x_ptr"])
    listed = kernelpick.autotune(SPACE, key=["n"], restore_value=["y_ptr"])(add_kernel)
    written, read = listed.accesses((x, x, torch.empty(64), 64), {})
    assert written == ["y_ptr", "out_ptr"] and "y_ptr" in read


def test_a_misspelt_meta_parameter_is_named_at_decoration_however_many_configs() -> None:
    # Triton accepts it at decoration and raises a KeyError at launch; kernelpick accepted one
    # config silently and recorded two as compile_error.
    for configs in (
        [triton.Config({"BLOCK": 128, "BLOKC": 2})],
        [triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128, "BLOKC": 2})],
    ):
        with pytest.raises(ConfigError, match=r"sets `BLOKC`, which the kernel has no parameter of") as error:
            kernelpick.autotune(configs, key=["n"])(add_kernel)
        assert "Keyword argument BLOKC was specified but unrecognised" in str(error.value)


def test_an_empty_config_list_is_said_at_decoration() -> None:
    # Not a KeyError from the user's grid at the first launch (Triton runs a config of no meta-parameters).
    with pytest.raises(ConfigError, match=r"configs is empty; give at least one triton.Config"):
        kernelpick.autotune([], key=["n"])(add_kernel)
