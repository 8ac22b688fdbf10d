"""compile/precompile.py: every config compiled (on CPU: lowered to TTIR) at once, failures kept as data."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
import torch
import triton
import triton.language as tl

from kernelpick.compile import forked
from kernelpick.compile.forked import (
    ChildCompileError,
    CompilerCrashed,
    CompileStopped,
    OutOfResources,
    Patience,
    _ForkedExecutor,
)
from kernelpick.compile.precompile import (
    CompileJob,
    _patience,
    classify,
    compile_each,
    compiling_beside,
    current_patience,
    patience,
)
from kernelpick.config import Config
from kernelpick.threads import Threads
from tests.tune.kernels import add_kernel


@triton.heuristics({"BLOCK": lambda named: triton.next_power_of_2(named["n"])})
@triton.jit
def whole_kernel(x_ptr, n, BLOCK: tl.constexpr, SCALE: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    tl.store(x_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n) * SCALE, mask=offsets < n)


@triton.jit
def limited_kernel(x_ptr, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK <= 64, "BLOCK must be at most 64")
    tl.store(x_ptr + tl.arange(0, BLOCK), 0.0)


def precompile(kernel: Any, args: Any, kwargs: Any, configs: Any, *, grid: Any, **options: Any) -> Any:
    """`kernel` compiled for these arguments under every config (`compile_each`)."""
    return compile_each([lambda c=c: CompileJob(kernel, args, kwargs, c, grid) for c in configs], **options)


def lower(kernel: object, args: tuple[object, ...], configs: list[Config], workers: int = 2) -> list[object]:
    return list(precompile(kernel, args, {}, configs, grid=(1,), interpreter=True, workers=workers))


def test_a_non_power_of_two_block_is_a_compile_error_and_the_others_compile() -> None:
    x = torch.ones(100)
    configs = [Config({"BLOCK": 32}), Config({"BLOCK": 48}), Config({"BLOCK": 64}, num_warps=8)]
    outcomes = lower(add_kernel, (x, x, x, 100), configs)
    assert [o.status for o in outcomes] == ["ok", "compile_error", "ok"]  # in the configs' order
    assert outcomes[0].message == ""
    assert outcomes[1].message.startswith("CompilationError")
    assert "power of 2" in outcomes[1].message
    assert not outcomes[1].ok and outcomes[0].ok
    assert all(o.seconds >= 0 for o in outcomes)


def test_order_is_kept_with_many_configs_and_workers() -> None:
    x = torch.ones(100)
    blocks = [16, 24, 32, 40, 64, 96, 128, 12]
    outcomes = lower(add_kernel, (x, x, x, 100), [Config({"BLOCK": b}) for b in blocks], workers=3)
    assert [o.ok for o in outcomes] == [b & (b - 1) == 0 for b in blocks]


def test_static_asserts_of_the_kernel_are_compile_errors_with_their_message() -> None:
    x = torch.ones(128)
    outcomes = lower(limited_kernel, (x,), [Config({"BLOCK": 64}), Config({"BLOCK": 128})])
    assert [o.status for o in outcomes] == ["ok", "compile_error"]
    assert "BLOCK must be at most 64" in outcomes[1].message


def test_a_config_missing_a_meta_parameter_says_which() -> None:
    x = torch.ones(8)
    (outcome,) = lower(add_kernel, (x, x, x, 8), [Config({})])
    assert outcome.status == "compile_error"
    assert "missing `BLOCK`" in outcome.message


def test_heuristics_values_are_computed_before_lowering() -> None:
    x = torch.ones(100)
    outcomes = lower(whole_kernel, (x, 100), [Config({"SCALE": 2}), Config({"SCALE": 3})])
    assert [o.status for o in outcomes] == ["ok", "ok"]


def test_no_configs_no_work() -> None:
    assert precompile(add_kernel, (), {}, [], grid=(1,), interpreter=True, workers=2) == []


class TritonStyleOutOfResources(Exception):
    pass


TritonStyleOutOfResources.__name__ = "OutOfResources"


@pytest.mark.parametrize(
    ("error", "status", "message"),
    [
        (ValueError("bad block"), "compile_error", "ValueError: bad block"),
        (TritonStyleOutOfResources("shared memory"), "out_of_resources", "OutOfResources: shared memory"),
        (OutOfResources("OutOfResources: registers"), "out_of_resources", "OutOfResources: registers"),
        (ChildCompileError("ValueError: bad"), "compile_error", "ChildCompileError: ValueError: bad"),
        (CompilerCrashed("the compiler died"), "crashed", "CompilerCrashed: the compiler died"),
        (RuntimeError(), "compile_error", "RuntimeError"),
    ],
)
def test_classify_maps_errors_to_statuses(error: Exception, status: str, message: str) -> None:
    assert classify(error) == (status, message)


def test_classify_keeps_both_ends_of_a_long_message() -> None:
    status, message = classify(RuntimeError("a" * 3000 + "the real reason"))
    assert status == "compile_error"
    assert len(message) < 2100
    assert message.endswith("the real reason")
    assert "\n...\n" in message


def _fails() -> None:
    raise ValueError("bad block")


def _out_of_resources() -> None:
    raise TritonStyleOutOfResources("shared memory")


def test_forked_compiles_report_failures_and_a_crash_takes_down_only_the_config_in_flight() -> None:
    executor = _ForkedExecutor(workers=2)
    # Children draw jobs from a queue: the one that dies at job 2 loses only job 2.
    jobs = [lambda: "a", _fails, lambda: os._exit(3), _out_of_resources, lambda: "e"]
    futures = [executor.submit(job) for job in jobs]
    executor.run()
    assert futures[0].result() == "a"
    assert classify(futures[1].exception()) == ("compile_error", "ChildCompileError: ValueError: bad block")
    assert classify(futures[2].exception())[0] == "crashed"
    assert classify(futures[3].exception()) == ("out_of_resources", "OutOfResources: shared memory")
    assert futures[4].result() == "e"


class _Cancelled(BaseException):
    """Raised where only `BaseException` catches it (as asyncio's `CancelledError`)."""


def test_a_load_that_raises_what_is_not_an_exception_settles_its_future() -> None:
    parent = os.getpid()

    def loaded_badly() -> str:
        if os.getpid() == parent:  # the child compiled it; loading it here fails
            raise _Cancelled("cancelled")
        return "compiled"

    executor = _ForkedExecutor(workers=1)
    futures = [executor.submit(job) for job in (loaded_badly, lambda: "b")]
    executor.run()
    # Settled, not left pending: the compile that waits on it would wait forever.
    assert isinstance(futures[0].exception(timeout=5), _Cancelled)
    assert futures[1].result(timeout=5) == "b"


class _Compiled:
    """Stands in for Triton's `CompiledKernel`: what building its launcher reads."""

    def __init__(self, name: str, signature: dict[str, str]) -> None:
        self.name = name
        self.src = type("Source", (), {"signature": signature})()
        self.metadata = type("Metadata", (), {"tensordesc_meta": None})()


def test_the_compilers_build_each_signatures_launcher_once_per_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from triton.runtime import driver

    built = tmp_path / "built"

    class Driver:
        @staticmethod
        def launcher_cls(src: object, metadata: object) -> None:
            with built.open("a") as stream:  # the children are processes: they tell through a file
                stream.write(repr(list(src.signature.values())) + "\n")  # type: ignore[attr-defined]

    monkeypatch.setattr(driver, "_active", Driver())
    one, other = {"x": "*fp32", "n": "i32"}, {"x": "*bf16", "n": "i32"}
    executor = _ForkedExecutor(workers=3)
    kernels = [_Compiled(f"k{i}", one if i % 2 else other) for i in range(6)]
    futures = [executor.submit(lambda kernel=kernel: kernel) for kernel in (*kernels, "not a kernel")]
    executor.run()
    assert [f.result() for f in futures] == [*kernels, "not a kernel"]
    assert sorted(built.read_text().splitlines()) == [repr(["*bf16", "i32"]), repr(["*fp32", "i32"])]


def test_without_a_driver_made_before_the_children_none_is_made_in_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib

    drivers = importlib.import_module("triton.runtime.driver")  # the module: its `driver` is shadowed
    made = tmp_path / "made"

    def create_driver() -> None:  # what `driver.active` would call in the child
        made.touch()

    monkeypatch.setattr(drivers.driver, "_active", None)
    monkeypatch.setattr(drivers.driver, "_default", None)
    monkeypatch.setattr(drivers, "_create_driver", create_driver)
    executor = _ForkedExecutor(workers=2)
    future = executor.submit(lambda: _Compiled("k", {"x": "*fp32"}))
    executor.run()
    assert future.result().name == "k"
    assert not made.exists()


@pytest.mark.gpu
def test_gpu_launchers_are_in_tritons_cache_before_any_launch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from triton.runtime.cache import knobs

    monkeypatch.setattr(knobs.cache, "dir", str(tmp_path))
    x = torch.ones(1000, device="cuda")
    configs = [Config({"BLOCK": 128}), Config({"BLOCK": 256}), Config({"BLOCK": 512}, num_warps=8)]
    kernel = triton.jit(add_kernel.fn)
    outcomes = precompile(
        kernel, (x, x, x, 1000), {}, configs, grid=(8,), interpreter=False, workers=3, mode="process"
    )
    assert all(o.ok for o in outcomes)
    launchers = list(tmp_path.rglob("__triton_launcher*"))
    # Triton 3.6 compiles one C launcher for the kernel's signature; later releases compile none.
    assert len(launchers) == (1 if triton.__version__.startswith("3.6") else 0)


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["thread", "process"])
def test_gpu_compiles_in_parallel_and_reports_the_bad_config(mode: str) -> None:
    x = torch.ones(1000, device="cuda")
    configs = [Config({"BLOCK": 128}), Config({"BLOCK": 48}), Config({"BLOCK": 256}, num_warps=8)]
    # A kernel of its own: one that compiled these configs in this process (the other mode's run)
    # has them in memory, and no compiler runs for them, so none reports seconds.
    kernel = triton.jit(add_kernel.fn)
    outcomes = precompile(
        kernel, (x, x, x, 1000), {}, configs, grid=(8,), interpreter=False, workers=2, mode=mode
    )
    assert [o.status for o in outcomes] == ["ok", "compile_error", "ok"]
    assert "power of 2" in outcomes[1].message
    if mode == "process":  # the compilers' own seconds on each config
        assert all(o.seconds is not None and o.seconds > 0 for o in outcomes if o.ok)


def test_meanwhile_runs_exactly_once_on_every_path() -> None:
    calls: list[int] = []
    x = torch.ones(64)
    precompile(
        add_kernel,
        (x, x, x, 64),
        {},
        [Config({"BLOCK": 64})],
        grid=(1,),
        interpreter=True,
        workers=1,
        meanwhile=lambda: calls.append(1),
    )
    precompile(
        add_kernel,
        (x, x, x, 64),
        {},
        [],
        grid=(1,),
        interpreter=True,
        workers=1,
        meanwhile=lambda: calls.append(2),
    )
    assert calls == [1, 2]


def test_a_config_compiling_past_the_timeout_is_killed_and_the_others_finish() -> None:
    import time as clock

    executor = _ForkedExecutor(workers=2, timeout_s=1.0)
    futures = [executor.submit(job) for job in (lambda: "a", lambda: clock.sleep(60), lambda: "c")]
    started = clock.monotonic()
    executor.run()
    assert clock.monotonic() - started < 30
    assert futures[0].result() == "a" and futures[2].result() == "c"
    status, message = classify(futures[1].exception())
    assert status == "timeout" and "took over 1 s" in message


def test_stopped_from_another_thread_the_compilers_are_killed_at_once() -> None:
    import threading
    import time as clock

    stop = threading.Event()
    executor = _ForkedExecutor(workers=2, stop=stop)
    children: list[int] = []
    for _ in range(4):
        executor.submit(lambda: clock.sleep(60))
    threading.Timer(0.5, stop.set).start()  # a tuning interrupted while its configs compile
    started = clock.monotonic()
    real_fork = os.fork

    def fork() -> int:
        pid = real_fork()
        if pid:
            children.append(pid)
        return pid

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "fork", fork)
        with pytest.raises(CompileStopped):
            executor.run()
    assert clock.monotonic() - started < 5
    for pid in children:  # killed and reaped: none is left compiling for nobody
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def test_each_compiled_config_is_announced_as_its_child_reports_it() -> None:
    import time as clock

    executor = _ForkedExecutor(workers=2)
    announced: list[tuple[int, float]] = []
    executor.on_compiled = lambda index: announced.append((index, clock.monotonic()))
    # Jobs 0..2 belong to configs 5, 7 and 9 (configs compiled earlier submit no job).
    executor.configs = [5, 7, 9]
    jobs = [lambda: "quick", _fails, lambda: clock.sleep(1.5)]
    for job in jobs:
        executor.submit(job)
    started = clock.monotonic()
    executor.run()
    assert sorted(index for index, _ in announced) == [5, 9]  # the failure is not announced
    quick = dict(announced)[5]
    assert quick - started < 1.0  # before the slow one finished, not at the end


def test_each_config_has_the_seconds_its_child_spent_on_it_killed_ones_too() -> None:
    import time as clock

    executor = _ForkedExecutor(workers=2, timeout_s=1.0)
    executor.configs = [3, 4, 6]  # jobs 0..2 belong to configs 3, 4 and 6
    for job in (lambda: clock.sleep(0.5), lambda: "quick", lambda: clock.sleep(60)):
        executor.submit(job)
    executor.run()
    seconds = executor.seconds_by_config()
    assert sorted(seconds) == [3, 4, 6]
    # Each its own time as the parent saw it, not the batch's (over 1 s): the quick one least.
    assert seconds[4] < seconds[3] < seconds[6] and 0.2 < seconds[3] < 5
    assert 1.0 < seconds[6] < 30  # the killed one: until it was killed, past the 1 s timeout


@pytest.mark.gpu
def test_gpu_configs_are_announced_as_they_compile() -> None:
    x = torch.ones(1000, device="cuda")
    configs = [Config({"BLOCK": 128}), Config({"BLOCK": 48}), Config({"BLOCK": 512}, num_warps=8)]

    def announced() -> list[int]:
        indices: list[int] = []
        precompile(
            add_kernel,
            (x, x, x, 1000),
            {},
            configs,
            grid=(8,),
            interpreter=False,
            workers=2,
            mode="process",
            on_ready=indices.append,
        )
        return sorted(indices)

    assert announced() == [0, 2]
    assert announced() == [0, 2]  # compiled already: announced at once


def test_under_patience_a_straggler_is_skipped_once_half_the_batch_compiled() -> None:
    import time as clock

    executor = _ForkedExecutor(workers=2, timeout_s=300.0, patience=Patience(factor=5, floor_s=0.5))
    quick = [lambda: clock.sleep(0.05) for _ in range(4)]
    futures = [executor.submit(job) for job in (*quick, lambda: clock.sleep(60))]
    started = clock.monotonic()
    executor.run()
    assert clock.monotonic() - started < 30
    assert all(f.exception() is None for f in futures[:4])
    status, message = classify(futures[4].exception())
    assert status == "skipped"
    assert "the search went on without it" in message and "KERNELPICK_SEARCH_PATIENCE" in message


def test_patience_waits_until_half_the_batch_compiled_and_never_past_the_timeout() -> None:
    rule = Patience(factor=4, floor_s=1.0)
    assert rule.limit_s([], jobs=4) is None
    assert rule.limit_s([2.0], jobs=4) is None  # a quarter done: no median to judge by yet
    assert rule.limit_s([2.0, 3.0], jobs=4) == 10.0
    assert rule.limit_s([0.1, 0.1], jobs=4) == 1.0  # the floor
    executor = _ForkedExecutor(workers=1, timeout_s=2.0, patience=rule)
    assert executor._limit([1.0, 1.0])[:2] == (2.0, "CompileTimeout")  # the timeout is the nearer limit


def test_the_patience_context_reaches_the_forked_compiles_only_inside_it() -> None:
    assert _patience.get() is None
    with patience(3.0):
        assert _patience.get() == Patience(3.0)
        with patience(0):
            assert _patience.get() is None  # 0: wait for every compile
    assert _patience.get() is None


def test_jobs_of_different_kernels_compile_in_one_batch() -> None:
    # A selection's choices are different kernels (a template per config, a triton_choice): one
    # batch compiles them all, and each keeps its own outcome.
    x = torch.ones(64)
    other = triton.jit(add_kernel.fn)
    jobs = [
        CompileJob(add_kernel, (x, x, x, 64), {}, Config({"BLOCK": 64})),
        CompileJob(other, (x, x, x, 64), {}, Config({"BLOCK": 48})),  # not a power of 2
        CompileJob(other, (x, x, x, 64), {}, Config({"BLOCK": 32})),
    ]
    outcomes = compile_each([lambda job=job: job for job in jobs], interpreter=True, workers=2)
    assert [o.status for o in outcomes] == ["ok", "compile_error", "ok"]


def test_a_job_and_its_companions_compile_together_with_one_outcome() -> None:
    # A split-K template launches two kernels per call: its job carries the second as a companion,
    # and the choice fails when either kernel does.
    x = torch.ones(64)
    companion = CompileJob(limited_kernel, (x,), {}, Config({"BLOCK": 32}))
    broken = CompileJob(limited_kernel, (x,), {}, Config({"BLOCK": 128}))  # fails its static assert
    jobs = [
        CompileJob(add_kernel, (x, x, x, 64), {}, Config({"BLOCK": 64}), companions=(companion,)),
        CompileJob(add_kernel, (x, x, x, 64), {}, Config({"BLOCK": 32}), companions=(companion, broken)),
        CompileJob(add_kernel, (x, x, x, 64), {}, Config({"BLOCK": 16})),
    ]
    compiled: list[int] = []
    outcomes = compile_each(
        [lambda job=job: job for job in jobs], interpreter=True, workers=2, on_ready=compiled.append
    )
    assert [o.status for o in outcomes] == ["ok", "compile_error", "ok"]
    assert "BLOCK must be at most 64" in outcomes[1].message
    assert outcomes[0].seconds is not None and outcomes[0].seconds > 0  # both kernels' lowering
    assert sorted(compiled) == [0, 2]  # announced once all of its kernels compiled


def test_patience_is_what_the_innermost_scope_set() -> None:
    assert current_patience() == 0.0
    with patience(4.0):
        assert current_patience() == 4.0
        with patience(0):
            assert current_patience() == 0.0
    assert current_patience() == 0.0


def test_jobs_with_companions_are_stopped_like_any_others(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from kernelpick.compile import precompile as module

    stops: list[object] = []

    class Recorded(Exception):
        pass

    def forked(workers: int, timeout_s: object, patience: object, stop: object, *_: object) -> None:
        stops.append(stop)
        raise Recorded

    monkeypatch.setattr(module, "_ForkedExecutor", forked)
    x = torch.ones(64)
    companion = CompileJob(limited_kernel, (x,), {}, Config({"BLOCK": 32}))
    jobs = [CompileJob(add_kernel, (x, x, x, 64), {}, Config({"BLOCK": 64}), companions=(companion,))]
    stop = threading.Event()
    with pytest.raises(Recorded):
        compile_each([lambda: jobs[0]], interpreter=False, workers=2, mode="process", stop=stop)
    assert stops == [stop]


def test_compiling_beside_a_block_raises_the_compilers_failure_first() -> None:
    def fails(stop: threading.Event) -> None:
        raise ValueError("the compilers' own failure")

    with pytest.raises(ValueError, match="compilers' own"), compiling_beside(fails):
        raise RuntimeError("what the block saw of it")


def test_an_interrupted_block_stops_the_compiling_beside_it() -> None:
    stopped: list[bool] = []

    def compiles_until_stopped(stop: threading.Event) -> None:
        stopped.append(stop.wait(30))

    with pytest.raises(KeyboardInterrupt), compiling_beside(compiles_until_stopped):
        raise KeyboardInterrupt
    assert stopped == [True]


# The compiler warmed up (`warm_up_compiler`): what Triton's first compile in a process waits for,
# done ahead of it.


def test_after_the_warm_up_tritons_first_specialization_imports_nothing() -> None:
    # A fresh interpreter: this one's first specialization happened long ago.
    script = textwrap.dedent(
        """
        import sys
        from triton.runtime.jit import mangle_type
        from kernelpick.compile.precompile import warm_up_compiler
        try:
            warm_up_compiler()
        except Exception:  # no GPU here: the driver's part fails, after the specialization's
            pass
        before = set(sys.modules)
        mangle_type(7)
        print(len(set(sys.modules) - before))
        """
    )
    found = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert found.stdout.split()[-1] == "0"


def test_without_it_the_first_specialization_imports_tritons_modules() -> None:
    script = textwrap.dedent(
        """
        import sys
        from triton.runtime.jit import mangle_type
        before = set(sys.modules)
        mangle_type(7)
        print(len(set(sys.modules) - before))
        """
    )
    found = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert int(found.stdout.split()[-1]) > 10  # what the warm-up takes off the first tuning


def test_a_compile_that_comes_while_the_warm_up_runs_waits_for_it_and_nothing_runs_twice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kernelpick.compile import precompile as module

    calls: list[float] = []

    def slow_warm_up() -> None:
        time.sleep(0.3)
        calls.append(time.monotonic())

    monkeypatch.setattr(module, "_warm", False)
    monkeypatch.setattr(module, "_warm_up", slow_warm_up)
    background = threading.Thread(target=module.warm_up_compiler)  # as start_early runs it
    background.start()
    time.sleep(0.05)
    module.warm_up_compiler()  # the first compile's
    returned = time.monotonic()
    background.join()
    assert len(calls) == 1 and returned >= calls[0]  # it waited for the one in flight
    module.warm_up_compiler()
    assert len(calls) == 1


def test_a_warm_up_that_failed_is_tried_again(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelpick.compile import precompile as module

    calls: list[int] = []

    def failing() -> None:
        calls.append(1)
        raise RuntimeError("0 active drivers")

    monkeypatch.setattr(module, "_warm", False)
    monkeypatch.setattr(module, "_warm_up", failing)
    for _ in range(2):
        with pytest.raises(RuntimeError):
            module.warm_up_compiler()
    assert len(calls) == 2


def test_forked_compilers_leave_what_the_callers_output_buffers_hold_to_the_caller() -> None:
    # Output into a pipe is block-buffered: a child that flushed its copy of the buffer would write
    # the caller's unwritten lines a second time.
    script = textwrap.dedent(
        """
        from kernelpick.compile.forked import _ForkedExecutor

        print("written once")
        executor = _ForkedExecutor(workers=2)
        futures = [executor.submit(lambda: "a"), executor.submit(lambda: 1 / 0)]
        executor.run()
        """
    )
    environment = {name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"}
    found = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, env=environment
    )
    assert found.stdout == "written once\n"


def test_a_run_that_fails_leaves_no_future_pending(monkeypatch: pytest.MonkeyPatch) -> None:
    # As the program ended, Python's thread pools refused work ("cannot schedule new futures after
    # interpreter shutdown"): loading the compiled configs failed, and Triton's `AsyncCompileMode`
    # waited for the futures left pending forever (a program that never ended, on an H200).
    class Refusing(Threads):
        def submit(self, *args: object, **kwargs: object) -> Future[object]:
            raise RuntimeError("cannot schedule new futures after interpreter shutdown")

    monkeypatch.setattr(forked, "Threads", Refusing)
    executor = _ForkedExecutor(workers=2)
    futures = [executor.submit(job) for job in (_fails, lambda: "b", lambda: "c")]
    with pytest.raises(RuntimeError, match="interpreter shutdown"):
        executor.run()
    assert classify(futures[0].exception(timeout=5))[0] == "compile_error"  # its child's report, as before
    assert all(isinstance(f.exception(timeout=5), CompileStopped) for f in futures[1:])  # never loaded
