"""Workers forked by the zygote: started in milliseconds, measuring as spawned ones do, dying alone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

PROGRAM = """
import json, os, time
import torch
import triton
import triton.language as tl
import kernelpick
from kernelpick.workers import pool_for, zygote

started = time.perf_counter()
kernelpick.start_workers("cpu", wait=True)
ready_s = time.perf_counter() - started
worker = pool_for([None]).workers[0]


def make():  # a kernel defined in a function, one config of which faults the interpreter
    @kernelpick.autotune(
        configs=[kernelpick.Config({"BLOCK": 64, "WILD": False}), kernelpick.Config({"BLOCK": 64, "WILD": True})],
        key=["n"],
    )
    @triton.jit
    def copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr, WILD: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        if WILD:
            offsets = offsets.to(tl.int64) + (1 << 40)
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask), mask=mask)

    return copy


copy = make()
x = torch.randn(256)
out = torch.empty(256)
copy[lambda meta: (triton.cdiv(256, meta["BLOCK"]),)](x, out, 256)
print(json.dumps({
    "zygote": zygote.zygote() is not None,
    "forked": type(worker._process).__name__,
    "ready_s": ready_s,
    "copied": bool(torch.equal(out, x)),
    "statuses": {str(c.kwargs["WILD"]): [r.status, r.message] for c, r in copy.last_tuning.results.items()},
    "pid": os.getpid(),
    "worker_pid": worker.info["pid"],
}))
"""


def run(tmp_path: Path, program: str = PROGRAM, **environment: str) -> dict:
    script = tmp_path / "program.py"
    script.write_text(program)
    env = {**os.environ, "KERNELPICK_CACHE_DIR": str(tmp_path / "cache"), **environment}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_with_isolation_on_kernelpick_forks_a_zygote_whose_workers_measure_and_crash_alone(
    tmp_path: Path,
) -> None:
    found = run(tmp_path, KERNELPICK_ISOLATE="on")
    assert found["zygote"] and found["forked"] == "ForkedWorker"
    # No interpreter to start and nothing to import: a fork (a spawned worker takes seconds here).
    assert found["ready_s"] < 2.0
    assert found["copied"]
    assert found["statuses"]["False"] == ["ok", ""]
    status, message = found["statuses"]["True"]
    assert status == "crashed" and "SIGSEGV" in message  # its exit status, as the zygote saw it
    assert found["worker_pid"] != found["pid"]


CHILDREN = """
import os, sys
import kernelpick
from kernelpick.workers import zygote
task = f"/proc/{os.getpid()}/task"
children = [c for t in os.listdir(task) for c in open(f"{task}/{t}/children").read().split()]
print(zygote.zygote() is None, len(children))
@kernelpick.autotune(configs=[kernelpick.Config({"BLOCK": 16})], key=[])
@__import__("triton").jit
def k(x, BLOCK: "tl.constexpr"):
    pass
print(zygote.zygote() is not None)
"""


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads a process's children from /proc")
def test_import_kernelpick_starts_no_process_the_first_tuned_kernel_forks_the_zygote(tmp_path: Path) -> None:
    # Issue 39: settings are read at first use, and a process is made only when the program
    # shows it will tune (a tuned kernel or selector made, start_workers called).
    script = tmp_path / "program.py"
    script.write_text(CHILDREN)
    env = {**os.environ, "KERNELPICK_ISOLATE": "on"}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", "0", "True"]


def test_without_isolation_nothing_is_forked(tmp_path: Path) -> None:
    script = tmp_path / "program.py"
    script.write_text(
        "import kernelpick\nfrom kernelpick.workers import zygote\nprint(zygote.zygote() is None)\n"
    )
    env = {**os.environ, "KERNELPICK_ISOLATE": "off"}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert done.stdout.strip() == "True", done.stderr[-2000:]


CALLER = """
import sys, time
import torch
import kernelpick
from kernelpick import settings
from kernelpick.workers import pool_for

def hang(a, b):
    time.sleep(1000)  # a candidate that never ends, on a worker
    return a + b

with settings.override(isolate="on", bench_timeout_s=1000.0):
    kernelpick.start_workers("cpu", wait=True)
    print(" ".join(str(w.info["pid"]) for w in pool_for([None]).workers), flush=True)
    selector = kernelpick.Selector("hangs", [kernelpick.extern(torch.add), kernelpick.extern(hang)])
    selector(torch.randn(8), torch.randn(8))
"""


def test_workers_die_with_a_sigkilled_caller_even_on_a_hanging_candidate(tmp_path: Path) -> None:
    script = tmp_path / "caller.py"
    script.write_text(CALLER)
    env = {**os.environ, "KERNELPICK_CACHE_DIR": str(tmp_path / "cache")}
    caller = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=env)
    assert caller.stdout is not None
    pids = [int(p) for p in caller.stdout.readline().split()]
    assert pids
    time.sleep(3.0)  # the selection reaches the hanging candidate
    caller.send_signal(signal.SIGKILL)
    caller.wait(timeout=30)
    deadline = time.monotonic() + 20.0
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        time.sleep(0.2)
        alive = [pid for pid in alive if _running(pid)]
    assert alive == [], "workers outlived their SIGKILLed caller"


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split()[2] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False


SPAWNED = """
import json, os, time
import torch
import kernelpick
from kernelpick.workers import pool_for, zygote

zygote._cuda_initialized = lambda: True  # as after torch.cuda.get_device_capability(): no fork of us
started = time.perf_counter()
kernelpick.start_workers("cpu", wait=True)
first_s = time.perf_counter() - started
pool = pool_for([None])
worker = pool.workers[0]
spawned = zygote.zygote()
x = torch.randn(64)
selector = kernelpick.Selector("plus", [kernelpick.extern(torch.add), kernelpick.extern(lambda a, b: a + b)])
torch.testing.assert_close(selector(x, x), x + x)
parent = int(open(f"/proc/{worker.info['pid']}/stat").read().split(")")[1].split()[1])
worker.stop()
started = time.perf_counter()
pool.start()
again_s = time.perf_counter() - started
print(json.dumps({
    "spawned": spawned is not None and spawned.spawned,
    "zygote_pid": spawned.pid,
    "zygote_command": open(f"/proc/{spawned.pid}/cmdline").read(),
    "worker_parent": parent,
    "forked": worker.forked,
    "statuses": [r.status for r in selector.last_selection.results.values()],
    "first_s": first_s,
    "again_s": again_s,
}))
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_after_cuda_was_used_the_zygote_is_a_new_interpreter_whose_workers_start_in_a_fork(
    tmp_path: Path,
) -> None:
    found = run(tmp_path, SPAWNED, KERNELPICK_ISOLATE="on")
    assert found["spawned"] and "serve_spawned" in found["zygote_command"]
    assert found["worker_parent"] == found["zygote_pid"] and found["forked"]
    assert found["statuses"] == ["ok", "ok"]
    # The first worker waits for the zygote's imports; the next one is a fork.
    assert found["again_s"] < 2.0 and found["again_s"] < found["first_s"]


BROKEN_SPAWN = """
import json, subprocess, sys
import torch
import kernelpick
from kernelpick.workers import pool_for, zygote

zygote._cuda_initialized = lambda: True
# A spawned zygote that dies before it serves (an import that fails in it, say).
zygote._spawn = lambda connection: subprocess.Popen([sys.executable, "-c", "raise SystemExit(1)"])
x = torch.randn(32)
selector = kernelpick.Selector("plus", [kernelpick.extern(torch.add), kernelpick.extern(lambda a, b: a + b)])
torch.testing.assert_close(selector(x, x), x + x)
worker = pool_for([None]).workers[0]
print(json.dumps({
    "forked": worker.forked,
    "alive": worker.alive,
    "statuses": [r.status for r in selector.last_selection.results.values()],
}))
"""


def test_a_spawned_zygote_that_dies_leaves_workers_that_are_new_interpreters(tmp_path: Path) -> None:
    found = run(tmp_path, BROKEN_SPAWN, KERNELPICK_ISOLATE="on")
    assert not found["forked"] and found["alive"]  # measured in a worker all the same
    assert found["statuses"] == ["ok", "ok"]


HALF_IMPORTED = """
import json, torch
import kernelpick
from kernelpick import ops  # kernelpick.ops.gemm makes the zygote halfway through its own code
from kernelpick.workers import zygote

# ops.gemm.mm is defined after that line: a worker unpickles it by reference, from its own copy.
selector = kernelpick.Selector("late", [kernelpick.extern(torch.mm), kernelpick.extern(ops.gemm.mm, name="ops.mm")])
selector(torch.randn(8, 8), torch.randn(8, 8))
results = selector.last_selection.results
print(json.dumps({"zygote": zygote.zygote() is not None, "ops.mm": [results["ops.mm"].status, results["ops.mm"].message]}))
"""


def test_a_module_that_forked_the_zygote_while_imported_is_whole_in_its_workers(tmp_path: Path) -> None:
    # H200, 2026-11-29: every ops.scaled_mm selection fell back to measuring in the caller, its
    # workers failing to import kernelpick.ops.scaled_mm from their half-made kernelpick.ops.gemm.
    found = run(tmp_path, HALF_IMPORTED, KERNELPICK_ISOLATE="on")
    assert found == {"zygote": True, "ops.mm": ["ok", ""]}


def starts_early_then_has_a_zygote() -> bool:
    from kernelpick.workers import plan, zygote

    plan.start_early(None)  # as the first tuned kernel of a module the child imports
    return zygote.zygote() is not None


def test_a_multiprocessing_child_forks_no_zygote() -> None:
    # A data loader's worker that imports the program's modules must not fork one of its own. (The
    # device processes of `kernelpick tune --devices`, which do, are no multiprocessing children:
    # tests/jobs/test_device_process.py.)
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from kernelpick import settings

    environment = {**settings.as_environment(), "KERNELPICK_ISOLATE": "on"}
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(
        1, mp_context=context, initializer=settings.adopt_environment, initargs=(environment,)
    ) as pool:
        assert not pool.submit(starts_early_then_has_a_zygote).result(timeout=120)


BAD_FORK = """
import json, os
import torch
import kernelpick
from kernelpick.jobs.device_process import DeviceProcess
from kernelpick.workers import pool_for, zygote

# What torch.cuda.is_available() does on a GPU machine: torch._C._cuda_getDeviceCount registers a fork
# handler that marks every process forked from then on as unable to use CUDA ("Cannot re-initialize
# CUDA in forked subprocess" at its first CUDA call), while torch.cuda.is_initialized() stays False.
os.register_at_fork(after_in_child=lambda: setattr(torch.cuda, "_is_in_bad_fork", lambda: True))
without_spawn = zygote.fork_zygote()
kernelpick.start_workers("cpu", wait=True)
worker = pool_for([None]).workers[0]
spawned = zygote.zygote()
device = DeviceProcess(None, print, ())
device_parent = device.submit(os.getppid).result(timeout=120)
device.shutdown()
print(json.dumps({
    "without_spawn": without_spawn is not None,
    "spawned": spawned is not None and spawned.spawned,
    "zygote_pid": spawned.pid,
    "worker_parent": int(open(f"/proc/{worker.info['pid']}/stat").read().split(")")[1].split()[1]),
    "device_parent": device_parent,
    "pid": os.getpid(),
}))
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_after_cuda_was_asked_for_its_gpus_no_forked_zygote_workers_fork_from_a_spawned_one(
    tmp_path: Path,
) -> None:
    # A forked zygote would be a bad fork, and so would each worker or device process it forks.
    found = run(tmp_path, BAD_FORK, KERNELPICK_ISOLATE="on")
    assert not found["without_spawn"]  # the forked one said so and ended: no zygote
    assert found["spawned"] and found["worker_parent"] == found["zygote_pid"]
    # A device process is forked by a forked zygote only; else it is a new interpreter.
    assert found["device_parent"] == found["pid"]


KILLED = """
import json, os, signal, threading, time
from kernelpick.workers import zygote

forked = zygote.Zygote(spawned=False)
threading.Timer(0.5, os.kill, (forked.pid, signal.SIGKILL)).start()  # while it is waited on
started = time.perf_counter()
status = forked.status(os.getpid(), 60.0)  # a child it never had: only the zygote's end answers
print(json.dumps({"status": status, "waited_s": time.perf_counter() - started, "gone": forked.gone}))
"""


def test_a_zygote_that_dies_is_gone_at_once_for_whoever_waits_on_it(tmp_path: Path) -> None:
    found = run(tmp_path, KILLED)
    assert found["gone"] and found["status"] == -signal.SIGKILL
    assert found["waited_s"] < 10.0  # not the 60 s asked for
