"""select/background.py: a new signature's first calls run the reference while the choices are tuned in a
thread; later calls switch to the pick, never during a capture (issue 41, item 2)."""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from tests.scripts import run_script

import kernelpick
from kernelpick import settings
from kernelpick.bench import timers
from kernelpick.engine.tuning import for_graphs
from kernelpick.select import background


def slow_add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The reference: right, and far slower than torch.add (20 ms a call)."""
    time.sleep(0.02)
    return a + b


@pytest.fixture(autouse=True)
def no_workers() -> Iterator[None]:
    with settings.override(isolate="off"):  # CPU functions, measured in the tuning thread
        yield
    assert kernelpick.wait_for_tuning(timeout=60)


def selector(**options: object) -> kernelpick.Selector:
    choices = [kernelpick.extern(slow_add), kernelpick.extern(torch.add)]
    return kernelpick.Selector("background_add", choices, cache=False, **options)  # type: ignore[arg-type]


def test_the_first_call_runs_the_reference_at_once_and_a_later_one_switches_to_the_pick(
    caplog: pytest.LogCaptureFixture,
) -> None:
    added = selector(background=True)
    x = torch.randn(64)
    started = time.perf_counter()
    assert torch.equal(added(x, x), x + x)
    first_call_s = time.perf_counter() - started
    provisional = added.last_selection
    assert provisional is not None and provisional.provisional
    assert provisional.best == "slow_add" and provisional.to_dict()["provisional"] is True
    assert "provisional" in provisional.note

    assert kernelpick.wait_for_tuning(timeout=60)
    with caplog.at_level(logging.INFO, logger="kernelpick.select"):
        assert torch.equal(added(x, x), x + x)  # this call switches
    final = added.records[provisional.key]
    assert not final.provisional and final.best == "torch.add" and added.last_selection is final
    assert {r.name for r in final.candidates} == {"slow_add", "torch.add"}
    assert first_call_s < final.seconds  # the caller did not wait for the tuning
    assert any("switched from the provisional pick to torch.add" in r.getMessage() for r in caplog.records)
    assert added.implementation(x, x) is torch.add  # the hot path runs the pick, nothing in between


def test_the_setting_turns_it_on_for_every_selector() -> None:
    with settings.override(background=True):
        added = selector()
        added(torch.randn(8), torch.randn(8))
    assert added.last_selection is not None and added.last_selection.provisional


ENDS_AFTER_ONE_CALL = """
import sys
import time
import torch
import kernelpick

def slow_twice(x):  # the reference: measured in the tuning thread for a while
    time.sleep(0.05)
    return x * 2

twice = kernelpick.Selector(
    "exit_twice", [kernelpick.extern(slow_twice), kernelpick.extern(lambda x: x + x, name="plus")],
    isolate=False, background=sys.argv[1] == "background",
)
twice(torch.ones(8))
if sys.argv[1] == "again":
    print(twice.last_selection.from_store, twice.last_selection.best)
"""


def ended_then_again(tmp_path: Path, source: str) -> list[str]:
    """Run `source` with "background" (it ends after one call, its key tuned in the background), then
    with "again" (tuned before the call returns); both exit 0; the second run's words."""
    ended = run_script(tmp_path, source, "background")
    assert ended.returncode == 0, ended.stderr[-2000:]
    assert "waiting up to 120 s for the tunings in the background" in ended.stderr  # says why it waits
    again = run_script(tmp_path, source, "again")
    assert again.returncode == 0, again.stderr[-2000:]
    return again.stdout.split()


def test_a_program_that_ends_while_a_key_is_tuned_in_this_process_waits_for_the_tuning(
    tmp_path: Path,
) -> None:
    # A daemon thread still measuring in CUDA as the interpreter finalized aborted the program
    # ("terminate called without an active exception", exit 134, on an H200 with isolation off). It
    # waits for the tuning instead, and the pick is stored: the next run takes it from the store.
    assert ended_then_again(tmp_path, ENDS_AFTER_ONE_CALL) == ["True", "plus"]


LOCKED_CHOICE_ENDS = """
import sys
import threading
import torch
import kernelpick

lock = threading.Lock()
a = torch.randn(2048, 2048)

def plain(x):
    return torch.mm(torch.mm(a, a), x)

def locked(x):  # holds a lock: cannot cross to a worker, so it is timed in this process
    with lock:
        return torch.mm(torch.mm(a, a), x)

mm = kernelpick.Selector("exit_locked", [kernelpick.extern(plain), kernelpick.extern(locked)],
                         isolate=True, background=sys.argv[1] == "background")
mm(torch.ones(2048, 2048))
if sys.argv[1] == "again":
    print(mm.last_selection.from_store)
"""


def test_a_program_that_ends_while_a_key_is_tuned_with_isolation_on_waits_for_the_tuning(
    tmp_path: Path,
) -> None:
    # With isolation on, a choice that cannot cross to workers is timed in the tuning thread after the
    # others are measured in workers: ending while it ran torch's C++ code aborted the program
    # ("terminate called without an active exception", 3 of 3 runs on a 2-core CPU).
    assert ended_then_again(tmp_path, LOCKED_CHOICE_ENDS) == ["True"]  # the pick was stored, not cut short


def test_the_tuning_thread_measures_beside_the_programs_calls() -> None:
    # Its measurements time with CUDA events, not a CUDA-graph capture (bench.timers.timer_for).
    seen: list[bool] = []

    def add_seen(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        seen.append(timers.beside_the_program.get())
        return a + b

    choices = [kernelpick.extern(add_seen), kernelpick.extern(torch.add)]
    added = kernelpick.Selector("beside_add", choices, cache=False, background=True)
    a = torch.randn(8)
    added(a, a)  # the provisional pick, add_seen, runs here
    assert kernelpick.wait_for_tuning(timeout=60)
    assert seen[0] is False and True in seen


def test_no_switch_while_a_cuda_graph_is_captured(monkeypatch: pytest.MonkeyPatch) -> None:
    added = selector(background=True)
    x = torch.randn(16)
    added(x, x)
    assert kernelpick.wait_for_tuning(timeout=60)
    monkeypatch.setattr(background, "capturing", lambda values: True)  # as in torch.cuda.graph(...)
    added(x, x)
    assert added.last_selection is not None and added.last_selection.provisional  # the graph records it
    monkeypatch.setattr(background, "capturing", lambda values: False)
    added(x, x)
    assert added.last_selection is not None and not added.last_selection.provisional


def test_a_failed_tuning_leaves_the_provisional_pick_running(caplog: pytest.LogCaptureFixture) -> None:
    def check(a: torch.Tensor, b: torch.Tensor) -> None:
        if threading.current_thread().name == "kernelpick-background":
            raise RuntimeError("the tuning thread's own failure")

    added = selector(background=True, check=check)
    x = torch.randn(16)
    added(x, x)
    assert kernelpick.wait_for_tuning(timeout=60)
    with caplog.at_level(logging.WARNING, logger="kernelpick.select"):
        assert torch.equal(added(x, x), x + x)
    assert any("the provisional pick keeps running" in r.getMessage() for r in caplog.records)
    assert added.implementation(x, x) is not torch.add  # slow_add, for good


def test_inputs_a_check_refuses_fail_at_once_as_before() -> None:
    def check(a: torch.Tensor, b: torch.Tensor) -> None:
        if a.shape != b.shape:
            raise ValueError("shapes differ")

    with pytest.raises(ValueError, match="shapes differ"):
        selector(background=True, check=check)(torch.randn(4), torch.randn(5))


@pytest.mark.parametrize(
    "why",
    ["a compiled graph", "an input_gen", "integer inputs", "no reference choice", "off"],
)
def test_where_a_provisional_pick_cannot_stand_in_the_call_tunes_first(why: str) -> None:
    x = torch.randn(16)
    inputs = (x, x)
    options: dict[str, object] = {"background": why != "off"}
    if why == "an input_gen":
        options["input_gen"] = lambda a, b: (torch.randn_like(a), torch.randn_like(b))
    if why == "integer inputs":
        inputs = (torch.arange(16), torch.arange(16))
    if why == "no reference choice":
        options["reference"] = lambda a, b: a + b  # checks outputs; it is not a choice that could run
    added = selector(**options)
    if why == "a compiled graph":
        with for_graphs():
            added(*inputs)
    else:
        added(*inputs)
    record = added.last_selection
    assert record is not None and not record.provisional and record.best == "torch.add"


#: A rank of a gloo job: a selector tuned in the background, called in a loop; rank 1 starts later.
RANK = """
import json, sys, time
import torch, torch.distributed as dist
from kernelpick import Selector, extern

rank, world, port = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)

def choice(number):
    def sleepy(a):
        time.sleep(0.001 * (4 - number))
        return a + 0
    return extern(sleepy, name=f"choice{number}")

selector = Selector("ranked_background", [choice(n) for n in range(4)], background=True)
dist.barrier()
if rank == 1:
    time.sleep(0.3)
x, switched_at = torch.ones(16), None
for call in range(1, 5001):
    selector(x)
    if not selector.last_selection.provisional:
        switched_at = call
        break
print(json.dumps({"rank": rank, "switched_at": switched_at, "pick": selector.last_selection.best}))
"""


def test_the_ranks_of_a_job_switch_to_the_one_pick_at_the_same_call(tmp_path: object) -> None:
    from pathlib import Path

    from tests.engine.test_ranks import run_ranks

    done, printed = run_ranks(RANK, 2, Path(str(tmp_path)))
    assert all(d.returncode == 0 for d in done), [d.stderr[-2000:] for d in done]
    first, second = sorted(printed, key=lambda found: found["rank"])
    assert first["switched_at"] is not None and first["switched_at"] == second["switched_at"], printed
    assert first["pick"] == second["pick"] == "choice3"  # the fastest, agreed by the ranks
    assert first["switched_at"] > background.RANK_MARGIN  # both ran the provisional pick first


TUNED_KERNEL_ENDS = """
import sys
import torch
import triton
import triton.language as tl
import kernelpick

@kernelpick.autotune(configs=[kernelpick.Config({"BLOCK": b}) for b in (64, 128, 256)], key=["n"],
                     background=sys.argv[1] == "background")
@triton.jit
def scale(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    index = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + index, 2 * tl.load(x_ptr + index, mask=index < n), mask=index < n)

x = torch.randn(4000)
scale[lambda meta: (triton.cdiv(4000, meta["BLOCK"]),)](x, torch.empty_like(x), 4000)
if sys.argv[1] == "again":
    print(scale.last_tuning.from_store)
"""


def test_a_program_that_ends_while_a_kernel_compiles_in_the_background_waits_for_its_tuning(
    tmp_path: Path,
) -> None:
    # A tuning compiles in thread pools; once the program's main thread ended, Python's thread pools
    # refused work ("cannot schedule new futures after interpreter shutdown") before `atexit` ran the
    # wait: the tuning failed unsaid and nothing was stored (on an H200, forked compilers whose futures
    # were never resolved kept the program from ending at all: 1 of 10 runs). The wait now runs first.
    assert ended_then_again(tmp_path, TUNED_KERNEL_ENDS) == ["True"]


def test_a_program_that_ends_waits_once_and_says_which_tunings_it_did_not_wait_for(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    stuck = background.Pending(lambda: None)  # a tuning that never ends
    monkeypatch.setattr(background, "EXIT_WAIT_S", 0.2)
    monkeypatch.setattr(background, "_exit_deadline", None)
    monkeypatch.setattr(background, "_in_flight", {stuck})
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="kernelpick"):
        background._wait_at_exit()  # as the main thread ends
        background._wait_at_exit()  # and with atexit: within the same 0.2 s, not another
    assert 0.2 <= time.monotonic() - started < 1.0  # not twice: the messages below say it too
    said = [r.getMessage() for r in caplog.records]
    assert said == [
        "waiting up to 0.2 s for the tunings in the background before the program ends, so that their picks "
        "are stored (Ctrl-C ends without them); kernelpick.wait_for_tuning() waits where you choose",
        "1 tuning(s) in the background did not end in 0.2 s: the program ends without their picks",
    ]


def test_ctrl_c_ends_the_wait_at_the_programs_end_for_good(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Interrupted, the wait as the main thread ended raised out of Python's threading shutdown ("Exception
    # ignored in: <module 'threading'>"), and the wait at atexit then waited all over again.
    def interrupted(timeout: float | None = None) -> bool:
        raise KeyboardInterrupt

    monkeypatch.setattr(background, "wait", interrupted)
    monkeypatch.setattr(background, "_exit_deadline", None)
    monkeypatch.setattr(background, "_in_flight", {background.Pending(lambda: None)})
    with caplog.at_level(logging.WARNING, logger="kernelpick"):
        background._wait_at_exit()  # Ctrl-C during the wait: it ends, and says so
        background._wait_at_exit()  # at atexit: no second wait
    said = [r.getMessage() for r in caplog.records]
    assert said[1:] == ["interrupted: the program ends without the picks of 1 tuning(s)"]


def test_a_program_ended_by_ctrl_c_does_not_wait(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Its Ctrl-C ended the program, which then waited up to 120 s for its tunings (17-19 s in probes).
    monkeypatch.setattr(sys, "last_value", KeyboardInterrupt(), raising=False)  # what Python kept of it
    monkeypatch.setattr(background, "EXIT_WAIT_S", 5.0)
    monkeypatch.setattr(background, "_exit_deadline", None)
    monkeypatch.setattr(background, "_in_flight", {background.Pending(lambda: None)})
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="kernelpick"):
        background._wait_at_exit()
        background._wait_at_exit()
    assert time.monotonic() - started < 1.0
    assert [r.getMessage() for r in caplog.records] == [
        "interrupted: the program ends without the picks of 1 tuning(s)"
    ]


STARTED_BY_A_THREAD_THAT_OUTLIVES_MAIN = """
import sys
import threading
import time
import torch
import kernelpick

def slow_twice(x):
    time.sleep(0.05)
    return x * 2

twice = kernelpick.Selector(
    "exit_late", [kernelpick.extern(slow_twice), kernelpick.extern(lambda x: x + x, name="plus")],
    isolate=False, background=sys.argv[1] == "background",
)

def serve():  # goes on after the main thread has returned, as a server's thread does
    time.sleep(0.3)
    twice(torch.ones(8))
    if sys.argv[1] == "again":
        print(twice.last_selection.from_store)

threading.Thread(target=serve).start()
"""


def test_a_tuning_that_a_thread_starts_after_the_main_thread_ended_is_waited_for_too(tmp_path: Path) -> None:
    # The wait that runs as the main thread ends comes before the program's own threads have ended: a
    # tuning one of them started later was cut short by the exit, and nothing was stored.
    assert ended_then_again(tmp_path, STARTED_BY_A_THREAD_THAT_OUTLIVES_MAIN) == ["True"]


FORKS_DURING_A_TUNING = """
import multiprocessing
import time
import torch
import kernelpick
from kernelpick.select import background

background.EXIT_WAIT_S = 5.0  # what a child would wait for its parent's tuning, shortened

def slow_twice(x):
    time.sleep(0.5)
    return x * 2

twice = kernelpick.Selector(
    "fork_twice", [kernelpick.extern(slow_twice), kernelpick.extern(lambda x: x + x, name="plus")],
    isolate=False, background=True,
)

if __name__ == "__main__":
    twice(torch.ones(8))  # its tuning runs for a second or more
    started = time.perf_counter()
    child = multiprocessing.get_context("fork").Process(target=print, args=("child",))
    child.start()
    child.join()
    print(child.exitcode, time.perf_counter() - started < 4.0)
"""


def test_a_process_forked_during_a_tuning_does_not_wait_for_it(tmp_path: Path) -> None:
    # A forked child inherited the tunings in flight but not the thread that runs them: every
    # `multiprocessing` child (a DataLoader's worker, say) waited the whole exit wait at its end.
    done = run_script(tmp_path, FORKS_DURING_A_TUNING)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["child", "0", "True"]
