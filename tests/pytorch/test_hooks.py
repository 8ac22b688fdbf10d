"""Launch interception: per thread, scoped, every kind of launcher, nothing patched outside a scope."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
import torch
import triton
from triton.runtime.jit import JITFunction

import kernelpick
from kernelpick.pytorch import hooks
from kernelpick.pytorch.hooks import Launch, handling_launches, installed
from kernelpick.pytorch.launch_tracing import recording
from kernelpick.pytorch.running import routing_cpu_launches
from tests.pytorch.kernels import BLOCK, increment_kernel


def test_every_launcher_is_recorded_with_its_arguments() -> None:
    x = torch.zeros(4)
    autotuned = triton.autotune([triton.Config({"BLOCK": 16})], key=["n"])(increment_kernel)
    heuristic = triton.heuristics({"BLOCK": lambda args: 16})(increment_kernel)
    tuned = kernelpick.autotune([triton.Config({"BLOCK": 16})], key=["n"])(increment_kernel)
    with recording() as launches:
        increment_kernel[(1,)](x, 4, BLOCK=BLOCK)
        autotuned[(1,)](x, 4)
        heuristic[(2,)](x, n=4)
        tuned[(3,)](x, 4)
        increment_kernel.run(x, 4, grid=(4,), warmup=False, BLOCK=BLOCK)
    assert [type(launch.kernel) for launch in launches] == [
        JITFunction,
        type(autotuned),
        type(heuristic),
        type(tuned),
        JITFunction,
    ]
    assert [launch.grid for launch in launches] == [(1,), (1,), (2,), (3,), (4,)]
    assert launches[0] == Launch(increment_kernel, (1,), (x, 4), {"BLOCK": BLOCK})
    assert launches[2].kwargs == {"n": 4}
    assert torch.equal(x, torch.zeros(4)), "recorded launches must not run"


def test_patches_exist_only_inside_a_scope_unless_routing_kept_them() -> None:
    before = hooks._active
    with recording():
        assert installed() and JITFunction.run.__wrapped__ is not None  # type: ignore[attr-defined]
        with recording():
            assert hooks._active == before + 2
    assert hooks._active == before
    if not hooks._kept:
        assert not installed() and not hasattr(JITFunction.run, "__wrapped__")
    with routing_cpu_launches():
        pass
    assert hooks._kept and installed(), "CPU routing keeps the patches for the next call"


def test_other_threads_launch_as_usual() -> None:
    inside = threading.Event()
    release = threading.Event()
    other_thread: list[Any] = []

    def other() -> None:
        inside.wait()
        try:
            increment_kernel[(1,)](torch.zeros(4), 4, BLOCK=BLOCK)  # no GPU here: a real launch fails
        except Exception as error:
            other_thread.append(error)
        else:
            other_thread.append(None)
        release.set()

    thread = threading.Thread(target=other)
    thread.start()
    with recording() as launches:
        inside.set()
        release.wait(30)
    thread.join()
    assert launches == []
    assert (other_thread and other_thread[0] is not None) or torch.cuda.is_available()


@pytest.fixture
def launched(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[Any, ...]]]:
    """`JITFunction.run` replaced by a stand-in noting its calls (a real launch needs a GPU)."""
    calls: list[tuple[Any, ...]] = []

    def run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> str:
        calls.append((self, grid, warmup, args, kwargs))
        return "launched"

    kept, active = hooks._kept, hooks._active
    while hooks._active:  # start unpatched, so that the stand-in is what the patches wrap
        hooks._uninstall()
    hooks._kept = False
    monkeypatch.setattr(JITFunction, "run", run)
    yield calls
    monkeypatch.undo()
    for _ in range(active):
        hooks._install()
    hooks._kept = kept


def test_a_handler_can_launch_as_usual_and_is_not_reentered(launched: list[tuple[Any, ...]]) -> None:
    seen: list[Launch] = []

    def handler(launch: Launch, original: Any) -> Any:
        seen.append(launch)
        increment_kernel[(2,)](torch.zeros(1), 1, BLOCK=BLOCK)  # made by the handler: not handled again
        return original()

    with handling_launches(handler):
        assert increment_kernel[(1,)](torch.zeros(4), 4, BLOCK=BLOCK) == "launched"
    assert len(seen) == 1
    assert [(grid, warmup) for _, grid, warmup, _, _ in launched] == [((2,), False), ((1,), False)]


def test_warmup_requests_are_passed_on_not_recorded(launched: list[tuple[Any, ...]]) -> None:
    with recording() as launches:
        increment_kernel.warmup(torch.zeros(4), 4, grid=(1,), BLOCK=BLOCK)
    assert launches == []
    assert [(grid, warmup) for _, grid, warmup, _, _ in launched] == [((1,), True)]


def test_a_failing_handler_leaves_nothing_patched() -> None:
    def handler(launch: Launch, original: Any) -> None:
        raise RuntimeError("boom")

    before = hooks._active
    with pytest.raises(RuntimeError, match="boom"), handling_launches(handler):
        increment_kernel[(1,)](torch.zeros(4), 4, BLOCK=BLOCK)
    assert hooks._active == before
