"""tune/background.py: a tuned kernel's new key runs its default config at once while its configs are tuned
in a thread; a later call switches to the pick (issue 41, item 2)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
import torch

import kernelpick
from kernelpick import settings
from kernelpick.select import background as shared
from kernelpick.tune import background
from kernelpick.tune.first_launch import FirstLaunch
from tests.tune.kernels import add_kernel, grid_1d, increment_kernel

CONFIGS = [
    kernelpick.Config({"BLOCK": 16}),
    kernelpick.Config({"BLOCK": 64}),
    kernelpick.Config({"BLOCK": 128}),
]


@pytest.fixture(autouse=True)
def fresh_store(tmp_path: object) -> Iterator[None]:
    with settings.override(cache_dir=tmp_path, isolate="off"):
        yield
        assert kernelpick.wait_for_tuning(timeout=120)


def tuned(kernel: object = add_kernel, **options: object) -> kernelpick.Autotuner:
    return kernelpick.autotune(configs=CONFIGS, key=["n"], **options)(kernel)  # type: ignore[arg-type]


def test_a_new_key_runs_the_default_config_at_once_and_a_later_call_switches(
    caplog: pytest.LogCaptureFixture,
) -> None:
    add = tuned(background=True, default=1)
    x, y, out = torch.randn(300), torch.randn(300), torch.empty(300)
    add[grid_1d(300)](x, y, out, 300)
    torch.testing.assert_close(out, x + y)
    provisional = add.last_tuning
    assert provisional is not None and provisional.provisional
    assert provisional.best == CONFIGS[1] and add.best_config == CONFIGS[1]  # default=1 runs meanwhile

    assert kernelpick.wait_for_tuning(timeout=120)
    out.zero_()
    with caplog.at_level(logging.INFO, logger="kernelpick.tune"):
        add[grid_1d(300)](x, y, out, 300)  # switches, then launches the pick
    torch.testing.assert_close(out, x + y)
    final = add.last_tuning
    assert final is not None and not final.provisional and len(final.results) == 3
    assert add.best_config == final.best and add.cache[provisional.key] == final.best
    assert any("switched from the provisional config" in r.getMessage() for r in caplog.records)
    assert final.from_store is False and all(r.ok for r in final.results.values())


def test_a_key_tuned_in_this_process_is_waited_for_as_the_program_ends() -> None:
    # With isolation off its configs run in the tuning thread, which the interpreter's finalization
    # would end in the middle of a launch (on a GPU: the program aborted); the program waits for it.
    add = tuned(background=True)
    x, y, out = torch.randn(300), torch.randn(300), torch.empty(300)
    add[grid_1d(300)](x, y, out, 300)
    (pending,) = [e[1] for e in add._dispatch.entries.values() if isinstance(e[1], background.KernelPending)]
    shared._wait_at_exit()  # as the program ends
    assert pending.done.is_set() and pending.record is not None


def test_without_a_default_the_first_config_left_runs_meanwhile() -> None:
    add = tuned()
    x = torch.randn(100)
    out = torch.empty(100)
    with settings.override(background=True):  # read at the key's first call
        add[grid_1d(100)](x, x, out, 100)
    assert add.last_tuning is not None and add.last_tuning.provisional and add.best_config == CONFIGS[0]
    torch.testing.assert_close(out, x + x)


def test_an_in_place_kernel_runs_once_per_call_while_its_configs_are_tuned() -> None:
    increment = kernelpick.autotune(configs=CONFIGS, key=["n"], restore_value=["x_ptr"], background=True)(
        increment_kernel
    )
    x = torch.zeros(200)
    increment[grid_1d(200)](x, 200)
    assert kernelpick.wait_for_tuning(timeout=120)
    increment[grid_1d(200)](x, 200)
    assert torch.equal(x, torch.full((200,), 2.0))  # tuning never wrote the caller's tensor
    assert increment.last_tuning is not None and not increment.last_tuning.provisional


def test_a_stored_pick_switched_to_has_its_first_launch_checked_once_in_the_kernels_own_tables() -> None:
    # The shadow that tuned the key made the pick's first-launch check; bound to the shadow, it
    # swapped itself out of the shadow's tables, so the kernel checked every later call again.
    x, y, out = torch.randn(300), torch.randn(300), torch.empty(300)
    tuned()[grid_1d(300)](x, y, out, 300)  # the store holds the key's pick now
    add = tuned(background=True)
    add[grid_1d(300)](x, y, out, 300)
    assert kernelpick.wait_for_tuning(timeout=120)
    first_launches = []
    real = FirstLaunch.__call__

    def counted(self: FirstLaunch, *args: object, **kwargs: object) -> object:
        first_launches.append(self.tuner)
        return real(self, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(FirstLaunch, "__call__", counted)
        for _ in range(3):
            out.zero_()
            add[grid_1d(300)](x, y, out, 300)
            torch.testing.assert_close(out, x + y)
    assert add.last_tuning is not None and add.last_tuning.from_store
    assert first_launches == [add]  # the switch's call checked it, in the kernel itself, once
    tables = [*add._dispatch.entries.values(), *add._dispatch.fast.values()]
    assert tables and not any(isinstance(entry[1], FirstLaunch) for entry in tables)


def test_no_switch_while_a_cuda_graph_is_captured(monkeypatch: pytest.MonkeyPatch) -> None:
    add = tuned(background=True)
    x, out = torch.randn(64), torch.empty(64)
    add[grid_1d(64)](x, x, out, 64)
    assert kernelpick.wait_for_tuning(timeout=120)
    monkeypatch.setattr(shared, "capturing", lambda values: True)  # both fronts ask it when to switch
    add[grid_1d(64)](x, x, out, 64)
    assert add.last_tuning is not None and add.last_tuning.provisional
    monkeypatch.setattr(shared, "capturing", lambda values: False)
    add[grid_1d(64)](x, x, out, 64)
    assert add.last_tuning is not None and not add.last_tuning.provisional


def test_a_failed_tuning_leaves_the_provisional_config_running(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def failing(*arguments: object) -> None:
        raise RuntimeError("the tuning thread's own failure")

    monkeypatch.setattr(background, "_tuned", failing)
    add = tuned(background=True, default=2)
    x, out = torch.randn(48), torch.empty(48)
    add[grid_1d(48)](x, x, out, 48)
    assert kernelpick.wait_for_tuning(timeout=120)
    out.zero_()
    with caplog.at_level(logging.WARNING, logger="kernelpick.tune"):
        add[grid_1d(48)](x, x, out, 48)
    torch.testing.assert_close(out, x + x)
    said = [r.getMessage() for r in caplog.records]
    assert any("the tuning thread's own failure" in m and f"{CONFIGS[2]} keeps running" in m for m in said)
    assert add.last_tuning is not None and add.last_tuning.provisional and add.best_config == CONFIGS[2]


@pytest.mark.parametrize("why", ["a pre_hook", "a do_bench", "one config", "off"])
def test_where_a_provisional_config_cannot_stand_in_the_call_tunes_first(why: str) -> None:
    options: dict[str, object] = {"background": why != "off"}
    configs = CONFIGS
    if why == "a pre_hook":
        options["pre_hook"] = lambda arguments: None
    if why == "a do_bench":
        options["do_bench"] = lambda fn, quantiles=None: [1.0, 1.0, 1.0]
    if why == "one config":
        configs = CONFIGS[:1]
    add = kernelpick.autotune(configs=configs, key=["n"], **options)(add_kernel)  # type: ignore[arg-type]
    x, out = torch.randn(32), torch.empty(32)
    add[grid_1d(32)](x, x, out, 32)
    record = add.last_tuning
    assert record is None or not record.provisional  # a single config leaves no record, as in Triton


PROGRAM = """
import sys, torch, kernelpick
from kernelpick import settings
from tests.tune.kernels import add_kernel, grid_1d

configs = [kernelpick.Config({"BLOCK": b}) for b in (16, 64, 128)]
add = kernelpick.autotune(configs=configs, key=["n"], background=True)(add_kernel)
with settings.override(isolate="on"):  # the zygote is not forked yet: the first tuning forks it
    x, out = torch.randn(500), torch.empty(500)
    add[grid_1d(500)](x, x, out, 500)
    assert add.last_tuning.provisional
    assert kernelpick.wait_for_tuning(timeout=120), "the tuning did not end"
    add[grid_1d(500)](x, x, out, 500)
    torch.testing.assert_close(out, x + x)
    print(add.last_tuning.provisional, sorted(add.last_tuning.phases)[:3], add.last_tuning.timed_here)
"""


def test_in_worker_processes_while_the_caller_runs_the_provisional_config(tmp_path: object) -> None:
    # The workers' zygote is forked in the caller's thread: forked from the tuning thread while the
    # caller interpreted the provisional config, a CPU worker inherited the interpreter's lock, held.
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "KERNELPICK_CACHE_DIR": str(tmp_path), "PYTHONPATH": f"{root}:{root / 'src'}"}
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, env=env, timeout=240, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[0] == "False" and "{}" in done.stdout  # final, measured in the workers


#: A rank of a gloo job: a tuned kernel tuned in the background, launched in a loop; rank 1 starts later.
RANK = """
import json, sys, time
import torch, torch.distributed as dist
import kernelpick
from tests.tune.kernels import add_kernel, grid_1d

rank, world, port = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
configs = [kernelpick.Config({"BLOCK": b}) for b in (16, 64, 128)]
add = kernelpick.autotune(configs=configs, key=["n"], background=True)(add_kernel)
dist.barrier()
if rank == 1:
    time.sleep(0.3)
x, out, switched_at = torch.randn(256), torch.empty(256), None
for call in range(1, 5001):
    add[grid_1d(256)](x, x, out, 256)
    if not add.last_tuning.provisional:
        switched_at = call
        break
print(json.dumps({"rank": rank, "switched_at": switched_at, "pick": str(add.last_tuning.best)}))
"""


def test_the_ranks_of_a_job_switch_a_kernel_to_the_one_pick_at_the_same_call(tmp_path: object) -> None:
    from pathlib import Path

    from kernelpick.select.background import RANK_MARGIN
    from tests.engine.test_ranks import run_ranks

    done, printed = run_ranks(RANK, 2, Path(str(tmp_path)))
    assert all(d.returncode == 0 for d in done), [d.stderr[-2000:] for d in done]
    first, second = sorted(printed, key=lambda found: found["rank"])
    assert first["switched_at"] is not None and first["switched_at"] == second["switched_at"], printed
    assert first["pick"] == second["pick"] and first["switched_at"] > RANK_MARGIN
