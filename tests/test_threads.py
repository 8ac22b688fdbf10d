"""threads.py: thread pools that still take work once the program's main thread has ended."""

from __future__ import annotations

import concurrent.futures.thread
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kernelpick.threads import Threads
from tests.scripts import run_script


@pytest.fixture
def main_thread_ended(monkeypatch: pytest.MonkeyPatch) -> None:
    """What Python sets as the main thread ends (`threading._shutdown` runs the pools' exit hook)."""
    monkeypatch.setattr(concurrent.futures.thread, "_shutdown", True)


@pytest.mark.usefixtures("main_thread_ended")
def test_a_pool_takes_work_after_the_main_thread_ended_where_pythons_refuses_it() -> None:
    with pytest.raises(RuntimeError, match="after interpreter shutdown"), ThreadPoolExecutor(2) as plain:
        plain.submit(int)
    running, most = 0, 0
    lock = threading.Lock()

    def square(x: int) -> int:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.02)
        with lock:
            running -= 1
        return x * x

    with Threads(2) as pool:
        squares = list(pool.map(square, range(6)))
        failed = pool.submit(int, "x")
    assert squares == [0, 1, 4, 9, 16, 25]
    assert most <= 2  # `max_workers` at most at once, as the pool's own threads
    assert isinstance(failed.exception(timeout=0), ValueError)  # done when the block was left


def test_a_pool_that_was_shut_down_still_refuses_work() -> None:
    pool = Threads(1)
    pool.shutdown()
    with pytest.raises(RuntimeError, match="cannot schedule new futures after shutdown"):
        pool.submit(int)


TUNED_AFTER_MAIN_RETURNS = """
import threading
import time
import torch
import triton
import triton.language as tl
import kernelpick

@kernelpick.autotune(configs=[kernelpick.Config({"BLOCK": b}) for b in (64, 128, 256)], key=["n"])
@triton.jit
def scale(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    index = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + index, 2 * tl.load(x_ptr + index, mask=index < n), mask=index < n)

mm = kernelpick.Selector(
    "late_mm", [kernelpick.extern(torch.mm), kernelpick.extern(lambda a, b: a @ b, name="at")], isolate=True
)

def serve():  # goes on after the main thread has returned, as a server's thread does
    time.sleep(0.5)
    x = torch.randn(4000)
    out = torch.empty_like(x)
    scale[lambda meta: (triton.cdiv(4000, meta["BLOCK"]),)](x, out, 4000)
    print(torch.equal(out, 2 * x), sorted(r.status for r in scale.last_tuning.results.values()))
    a = torch.randn(64, 64)
    print(torch.allclose(mm(a, a), a @ a), sorted(r.status for r in mm.last_selection.results.values()))

threading.Thread(target=serve).start()
"""


def test_a_kernel_and_a_selector_tuned_in_a_thread_that_outlives_the_main_thread(tmp_path: Path) -> None:
    # Python's pools refuse work once the main thread has ended: each tuning raised "cannot schedule
    # new futures after interpreter shutdown" (the kernel's from its compile's pool, the selector's
    # from the pool that starts its workers).
    done = run_script(tmp_path, TUNED_AFTER_MAIN_RETURNS)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["True ['ok', 'ok', 'ok']", "True ['ok', 'ok']"]
