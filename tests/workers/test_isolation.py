"""Planted faults: choices and configs that abort, segfault, hang, raise or lie, measured in workers.

Every run completes, picks the right winner, records the right statuses, and leaves the caller healthy.
"""

from __future__ import annotations

import ast
import contextlib
import io
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl
from rich.console import Console

import kernelpick
from kernelpick import settings
from kernelpick.workers import WorkerPool, pool_for
from kernelpick.workers import pool as pool_module
from kernelpick.workers.pool import tuning_in_progress
from tests.workers import faulty

pytestmark = pytest.mark.slow


def test_a_selector_survives_every_kind_of_faulty_choice() -> None:
    a, b = torch.randn(256), torch.randn(256)
    with settings.override(bench_timeout_s=8.0):
        out = faulty.FAULTY_ADD(a, b)
    torch.testing.assert_close(out, a + b)
    statuses = {row.name: row.result.status for row in faulty.FAULTY_ADD.last_selection.candidates}
    assert statuses == {
        "slow but right": "ok",
        "aborts": "crashed",
        "segfaults": "crashed",
        "hangs": "timeout",
        "raises": "runtime_error",
        "wrong": "wrong_result",
        "torch.add": "ok",
    }
    messages = {row.name: row.result.message for row in faulty.FAULTY_ADD.last_selection.candidates}
    assert "SIGABRT" in messages["aborts"] and "SIGSEGV" in messages["segfaults"]
    assert "took over 8 s" in messages["hangs"]
    assert "this choice always fails" in messages["raises"]
    assert faulty.FAULTY_ADD.last_selection.best == "torch.add"
    assert torch.ones(3).sum().item() == 3.0  # the caller is healthy


def test_choices_compile_in_the_workers_first_and_a_compiler_death_is_survived() -> None:
    # The prepare step compiles every Triton choice in one worker; the segfaulting bind kills it
    # there, so every choice is compiled again one by one, and only the culprit is blamed.
    a, b = torch.randn(300), torch.randn(300)
    torch.testing.assert_close(faulty.COMPILED_ADD(a, b), a + b)
    statuses = {
        row.name.split(",")[0]: row.result.status for row in faulty.COMPILED_ADD.last_selection.candidates
    }
    assert statuses == {
        "torch.add": "ok",
        "add_blocks BLOCK=64": "ok",
        "add_blocks BLOCK=48": "compile_error",
        "segfaults binding BLOCK=128": "crashed",
    }
    assert torch.ones(3).sum().item() == 3.0


ADD_SOURCE = """
{{ def_kernel() }}
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < {{ size("X", 0) }}
    acc = tl.load(X + offsets, mask=mask).to(tl.float32) + tl.load(Y + offsets, mask=mask)
    {{ store_output(("offsets",), "acc", "mask") }}
"""

ADD = kernelpick.TritonTemplate(
    "add",
    ADD_SOURCE,
    inputs=("X", "Y"),
    output=lambda x, y: (x.size, x.dtype),
    grid=lambda context: (-(-context.output.size[0] // context.meta["BLOCK"]),),
)


def test_templates_compile_here_and_are_timed_there_beside_choices_the_workers_compile(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A template's compiling runs only kernelpick's code: it compiles here, each config timed in a
    # worker as soon as it compiled; a triton_choice's bind is the user's: it compiles in the workers.
    from kernelpick.engine import choice_measuring

    sent: set[tuple[str, bool]] = set()  # each choice sent, and whether it was compiled here
    encode = choice_measuring.values.encode

    def spy(value: object) -> str:
        if isinstance(value, choice_measuring.PortableChoice):
            sent.add((value.choice.name.split(",")[0], value.compiled))
        return encode(value)

    monkeypatch.setattr(choice_measuring.values, "encode", spy)
    selector = kernelpick.Selector(
        "mixed",
        [
            kernelpick.extern(torch.add, name="torch.add"),
            kernelpick.template(ADD, configs=[kernelpick.Config({"BLOCK": b}) for b in (64, 128, 48)]),
            kernelpick.triton_choice(
                faulty.add_blocks,
                grid=faulty._blocks,
                configs=[kernelpick.Config({"BLOCK": 32})],
                bind=faulty.bind_add,
            ),
        ],
        isolate=True,
    )
    a, b = torch.randn(300), torch.randn(300)
    torch.testing.assert_close(selector(a, b), a + b)
    record = selector.last_selection
    assert record is not None
    assert {r.name.split(",")[0]: r.result.status for r in record.candidates} == {
        "torch.add": "ok",
        "add BLOCK=64": "ok",
        "add BLOCK=128": "ok",
        "add BLOCK=48": "compile_error",  # found here: it never reached a worker
        "add_blocks BLOCK=32": "ok",
    }
    assert {
        ("torch.add", True),  # nothing to compile
        ("add BLOCK=64", True),
        ("add BLOCK=128", True),
        ("add BLOCK=48", True),
        ("add_blocks BLOCK=32", False),
    } <= sent
    assert ("add BLOCK=64", False) not in sent and ("add_blocks BLOCK=32", True) not in sent
    assert {"compile", "prepare", "screen"} <= set(record.phases)


def test_an_interrupted_selection_stops_the_compilers_it_started_here(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kernelpick.compile.forked import CompileStopped
    from kernelpick.engine import choice, choice_measuring

    stops: list[threading.Event] = []

    def compiling_until_stopped(jobs: object, *, stop: threading.Event, **options: object) -> None:
        stops.append(stop)
        assert stop.wait(30), "the compilers were never told to stop"
        raise CompileStopped("stopped")

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt  # Ctrl-C while the workers screen

    monkeypatch.setattr(choice, "compile_each", compiling_until_stopped)
    monkeypatch.setattr(choice_measuring, "measure_in_workers", interrupted)
    selector = kernelpick.Selector(
        "interrupted",
        [kernelpick.extern(torch.add), kernelpick.template(ADD, configs=[kernelpick.Config({"BLOCK": 64})])],
        isolate=True,
    )
    with pytest.raises(KeyboardInterrupt):
        selector(torch.randn(300), torch.randn(300))
    assert len(stops) == 1 and stops[0].is_set()


def test_an_autotuned_config_that_never_ends_is_killed_and_the_others_win() -> None:
    x, y = torch.randn(300), torch.randn(300)
    out = torch.empty(300)
    with settings.override(bench_timeout_s=8.0):
        faulty.add_or_spin[lambda meta: (triton.cdiv(300, meta["BLOCK"]),)](x, y, out, 300)
    torch.testing.assert_close(out, x + y)
    statuses = {
        (c.kwargs["BLOCK"], c.kwargs["SPIN"]): r.status
        for c, r in faulty.add_or_spin.last_tuning.results.items()
    }
    assert statuses == {(64, False): "ok", (128, False): "ok", (128, True): "timeout"}
    assert not faulty.add_or_spin.best_config.kwargs["SPIN"]


def test_workers_are_started_once_and_reused(caplog: pytest.LogCaptureFixture) -> None:
    pool = pool_for([None])
    pool.start()
    pids = [w.info["pid"] for w in pool.workers]
    a, b = torch.randn(8), torch.randn(8)
    with settings.override(isolate="on"), caplog.at_level(logging.WARNING, logger="kernelpick"):
        torch.testing.assert_close(faulty.REUSED(a, b), a + b)
    assert "not in workers" not in caplog.text  # measured in the workers, not here
    assert [w.info["pid"] for w in pool.workers] == pids


def wait_until(condition: Callable[[], bool], timeout_s: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


@contextlib.contextmanager
def retiring_pool() -> Iterator[WorkerPool]:
    """This process's CPU pool, ending its workers when idle as GPU pools do (`worker_idle_s`)."""
    pool = pool_for([None])
    pool.retires = True
    try:
        yield pool
    finally:
        pool.retires = False


def test_idle_workers_end_and_the_next_tuning_starts_them_again(caplog: pytest.LogCaptureFixture) -> None:
    # An idle GPU worker's CUDA context slows the caller's kernels: GPU pools retire their workers
    # (a CPU pool, like this one, only when told to).
    assert not pool_for([None]).retires and WorkerPool([0]).retires
    with retiring_pool() as pool:
        with settings.override(isolate="on", worker_idle_s=0.0), caplog.at_level(logging.WARNING):
            a = torch.randn(8)
            torch.testing.assert_close(faulty.RETIRED(a, a), a + a)
            assert wait_until(lambda: not any(w.alive for w in pool.workers))
            b = torch.randn(16)
            torch.testing.assert_close(faulty.RETIRED(b, b), b + b)  # measured in a new worker
        assert "not in workers" not in caplog.text
        assert all(r.status == "ok" for r in faulty.RETIRED.last_selection.results.values())
        with settings.override(isolate="on", worker_idle_s=60.0):
            c = torch.randn(24)
            faulty.RETIRED(c, c)
            time.sleep(0.5)
            assert all(w.alive for w in pool.workers)  # within its idle time: up


def test_workers_stay_up_while_any_tuning_runs_and_end_after_the_last() -> None:
    # A tuning measures several times (a search's batches, a selection's spaces); and tunings overlap.
    with retiring_pool() as pool:
        with settings.override(isolate="on", worker_idle_s=0.0):
            pids = []
            with tuning_in_progress():  # another tuning, under way throughout
                for n in (40, 48):
                    x = torch.randn(n)
                    faulty.RETIRED(x, x)
                    time.sleep(0.3)
                    assert all(w.alive for w in pool.workers)
                    pids.append(pool.workers[0].info["pid"])
            assert wait_until(lambda: not any(w.alive for w in pool.workers))
        assert pids[0] == pids[1]  # the same worker measured both


def test_workers_stay_up_through_a_burst_of_tunings_and_end_after_it() -> None:
    # A model's first forward meets its keys one after another: restarting the workers at each would
    # cost a CUDA context and every binary loaded again. Tunings that start right after the last one's
    # end keep them up; a tuning after a pause (the program's own run between) finds them ended.
    with retiring_pool() as pool:
        with settings.override(isolate="on", worker_idle_s=0.0):
            pids = []
            for n in (56, 64, 72, 80):  # new keys, back to back
                x = torch.randn(n)
                faulty.RETIRED(x, x)
                pids.append(pool.workers[0].info["pid"])
            assert len(set(pids[1:])) == 1  # the first key's end may still end them: not the burst's
            assert wait_until(lambda: not any(w.alive for w in pool.workers))
            time.sleep(0.3)  # a pause: the next tuning is no burst's, and its workers end at once
            y = torch.randn(88)
            faulty.RETIRED(y, y)
            assert pool.workers[0].info["pid"] not in pids and not pool_module._in_burst
            assert wait_until(lambda: not any(w.alive for w in pool.workers))


def test_a_selector_defined_in_a_function_with_closures_is_isolated(caplog: pytest.LogCaptureFixture) -> None:
    # Defined here, in a test function, as Triton's own tests define kernels: its choices cross to
    # the workers by value, so the one that aborts takes down only a worker.
    offset = 0.0

    def add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a + b + offset

    def add_and_abort(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        os.abort()

    local = kernelpick.Selector(
        "local",
        [
            kernelpick.extern(add, name="closure"),
            kernelpick.extern(add_and_abort, name="aborts"),
            kernelpick.extern(lambda a, b: a - b, name="lambda, wrong"),
        ],
        isolate=True,
    )
    a, b = torch.randn(64), torch.randn(64)
    with caplog.at_level(logging.INFO, logger="kernelpick"):
        torch.testing.assert_close(local(a, b), a + b)
    statuses = {row.name: row.result.status for row in local.last_selection.candidates}
    assert statuses == {"closure": "ok", "aborts": "crashed", "lambda, wrong": "wrong_result"}
    assert "not in workers" not in caplog.text and not local.timed_here
    assert {"screen", "confirm"} & set(local.last_selection.phases)  # the workers' steps, timed
    assert torch.ones(3).sum().item() == 3.0  # the caller is healthy


def test_an_autotuned_kernel_defined_in_a_function_survives_a_config_that_crashes() -> None:
    @kernelpick.autotune(
        configs=[
            kernelpick.Config({"BLOCK": 64, "WILD": False}),
            kernelpick.Config({"BLOCK": 64, "WILD": True}),
        ],
        key=["n"],
        isolate=True,
    )
    @triton.jit
    def copy_or_read_far_away(x_ptr, out_ptr, n, BLOCK: tl.constexpr, WILD: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        if WILD:  # an address a terabyte past the buffer: the interpreter's load faults
            offsets = offsets.to(tl.int64) + (1 << 40)
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask), mask=mask)

    x = torch.randn(256)
    out = torch.empty(256)
    copy_or_read_far_away[lambda meta: (triton.cdiv(256, meta["BLOCK"]),)](x, out, 256)
    torch.testing.assert_close(out, x)
    statuses = {c.kwargs["WILD"]: r.status for c, r in copy_or_read_far_away.last_tuning.results.items()}
    assert statuses == {False: "ok", True: "crashed"}
    assert copy_or_read_far_away.timed_here == {}
    # Its record says where the workers' seconds went, as a selection's does.
    assert {"screen", "worker_load", "worker_measure"} <= set(copy_or_read_far_away.last_tuning.phases)


UNGUARDED_SCRIPT = """
import torch
import triton
import triton.language as tl
import kernelpick

with open({runs!r}, "a") as counter:  # the top level: it must run once, here, never in a worker
    counter.write("ran\\n")

def double(x):
    return x * 2

DOUBLE = kernelpick.Selector("double", [kernelpick.extern(double), kernelpick.extern(lambda x: x + x)],
                             reference="double", isolate=True)

@kernelpick.autotune(configs=[kernelpick.Config({{"BLOCK": 32}}), kernelpick.Config({{"BLOCK": 64}})],
                     key=["n"], isolate=True)
@triton.jit
def copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n), mask=offsets < n)

x = torch.randn(100)
out = torch.empty(100)
copy[lambda meta: (triton.cdiv(100, meta["BLOCK"]),)](x, out, 100)
assert torch.equal(out, x)
print(DOUBLE.tune(x).best, copy.timed_here, flush=True)
"""


def test_an_unguarded_script_runs_its_top_level_once(tmp_path: Path) -> None:
    runs = tmp_path / "runs.txt"
    script = tmp_path / "my_script.py"
    script.write_text(UNGUARDED_SCRIPT.format(runs=str(runs)))
    env = {**os.environ, "KERNELPICK_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] in ("double {}", "<lambda> {}")
    assert "not in workers" not in done.stderr
    assert runs.read_text().splitlines() == ["ran"]


def test_a_script_run_with_triton_interpret_is_isolated_too(tmp_path: Path) -> None:
    # Its workers are forked from a zygote whose Triton was imported under TRITON_INTERPRET=1: they
    # keep the variable, or Triton's import of Gluon at their first launch fails an assertion
    # (every config's result was a bare `runtime_error: AssertionError`).
    runs = tmp_path / "runs.txt"
    script = tmp_path / "my_script.py"
    script.write_text(UNGUARDED_SCRIPT.format(runs=str(runs)))
    env = {
        **os.environ,
        "KERNELPICK_CACHE_DIR": str(tmp_path / "cache"),
        "TRITON_INTERPRET": "1",
        "KERNELPICK_ISOLATE": "on",
    }
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1].endswith(" {}")  # the kernel timed in its workers
    assert "AssertionError" not in done.stderr


ZYGOTE_THREAD_SCRIPT = """
import sys
import threading
import torch
import triton
import triton.language as tl
import kernelpick
from kernelpick import settings
from kernelpick.workers import zygote

forked_in = []
make = zygote.Zygote.__init__

def recording(self, *args, **kwargs):
    forked_in.append(threading.current_thread().name)
    make(self, *args, **kwargs)

zygote.Zygote.__init__ = recording

if sys.argv[1] == "made":  # a front that asks for workers forks the zygote as it is made
    kernelpick.Selector("double", [kernelpick.extern(lambda x: x * 2, name="times")], isolate=True)
    print(forked_in, flush=True)
    sys.exit()

@kernelpick.autotune(configs=[kernelpick.Config({"BLOCK": 16}), kernelpick.Config({"BLOCK": 32})], key=["n"])
@triton.jit
def scale(x_ptr, out_ptr, n, factor, BLOCK: tl.constexpr):
    index = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + index, factor * tl.load(x_ptr + index, mask=index < n), mask=index < n)

x, out = torch.randn(64), torch.empty(64)
with settings.override(isolate="on"):  # on a CPU, isolation is off until the call's settings say on
    scale[lambda meta: (triton.cdiv(64, meta["BLOCK"]),)](x, out, 64, 0.5)
assert torch.equal(out, 0.5 * x) and scale.timed_here == {}
print(forked_in, flush=True)
"""


@pytest.mark.parametrize("when", ["made", "called"])
def test_the_zygote_is_forked_in_the_callers_thread_not_beside_the_compilers(
    tmp_path: Path, when: str
) -> None:
    # A zygote forked while another thread of the process held a module's import lock (Triton's lazy
    # imports, in the thread that compiles beside the workers' start) keeps that lock held for good:
    # each worker it forked hung at its first launch, and every config timed out after 60 s on a
    # busy 2-core machine. It is forked in the caller's thread: as a front that wants workers is
    # made, else as the workers are asked to start, before the compiling starts.
    script = tmp_path / "zygote_thread.py"
    script.write_text(ZYGOTE_THREAD_SCRIPT)
    env = {**os.environ, "KERNELPICK_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run(
        [sys.executable, str(script), when], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    made_in = ast.literal_eval(done.stdout.strip().splitlines()[-1])  # two where a forked one failed
    assert made_in and set(made_in) == {"MainThread"}


def test_workers_can_be_started_ahead_of_the_first_tuning(caplog: pytest.LogCaptureFixture) -> None:
    with settings.override(isolate="off"):
        assert kernelpick.start_workers("cpu") is False  # not wanted: nothing is started
    with settings.override(isolate="on"):
        assert kernelpick.start_workers("cpu", wait=True) is True
        pool = pool_for([None])
        assert all(worker.alive for worker in pool.workers)
        pids = [w.info["pid"] for w in pool.workers]
        a, b = torch.randn(8), torch.randn(8)
        with caplog.at_level(logging.WARNING, logger="kernelpick"):
            torch.testing.assert_close(faulty.STARTED_AHEAD(a, b), a + b)
    assert "not in workers" not in caplog.text  # measured in the workers, not here
    assert [w.info["pid"] for w in pool.workers] == pids  # the tuning used them


def test_workers_verify_under_the_callers_tf32_switch() -> None:
    # Whether float32 products may use TF32 sets the reference's values and the tolerance: a
    # worker left at torch's default rejected every TF32 template of kernelpick.ops on an H200.
    x = torch.randn(8)
    previous = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = True
        with settings.override(isolate="on"):
            faulty.TF32_SWITCH(x)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    statuses = {row.name: row.result.status for row in faulty.TF32_SWITCH.last_selection.candidates}
    assert statuses == {"plus_one": "ok", "plus_tf32_switch": "ok"}


def test_what_runs_in_the_caller_says_so_in_the_autotune_table() -> None:
    # A choice that cannot be serialized (it holds a lock) and a kernel with the user's hooks are
    # timed in the caller's process: the record and the table say which, and why.
    lock = threading.Lock()

    def add_under_a_lock(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        with lock:
            return a + b

    selector = kernelpick.Selector(
        "locked",
        [
            kernelpick.extern(torch.add, name="torch.add"),
            kernelpick.extern(add_under_a_lock, name="locked add"),
        ],
        isolate=True,
    )
    a = torch.randn(64)
    torch.testing.assert_close(selector(a, a), a + a)
    record = selector.last_selection
    assert list(record.timed_here) == ["locked add"] and "lock" in record.timed_here["locked add"]
    assert "timed in this process, not in a worker: locked add" in render(record.table())

    @kernelpick.autotune(
        [kernelpick.Config({"BLOCK": 32}), kernelpick.Config({"BLOCK": 64})],
        key=["n"],
        isolate=True,
        pre_hook=lambda nargs: None,
    )
    @triton.jit
    def copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n), mask=offsets < n)

    out = torch.empty(64)
    copy[lambda meta: (triton.cdiv(64, meta["BLOCK"]),)](a, out, 64)
    assert "hooks" in copy.last_tuning.timed_here["copy"]
    assert "timed in this process, not in a worker: copy: its hooks" in render(copy.last_tuning.table())


def render(table: object) -> str:
    out = io.StringIO()
    Console(file=out, width=200).print(table)
    return out.getvalue()
