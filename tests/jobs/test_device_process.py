"""tune/device_process.py: the device processes of `kernelpick tune --devices`, forked by the zygote.

Each test runs a program in a new process with `KERNELPICK_ISOLATE=on`, which forks a zygote on
this CPU machine (as the command does for its first device process) and gets one in each device
process as it would on a GPU machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

CALLS = '''
"""Functions the device process runs (by reference, as a ProcessPoolExecutor's would)."""
import os, signal, threading, time


def facts():
    import warnings
    from kernelpick.workers import plan, zygote

    import kernelpick

    with warnings.catch_warnings(record=True) as shown:
        warnings.warn("Can't initialize NVML")  # what torch says where NVML does not start
    return {
        "ops": kernelpick.ops.__name__,  # one of the attributes kernelpick makes on first use
        "nvml_warning_shown": bool(shown),
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "visible": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "setting": os.environ.get("KERNELPICK_COMPILE_WORKERS"),
        "zygote": zygote.zygote() is not None,
        "tuning_elsewhere": plan._tuning_elsewhere,
    }


def fail():
    raise ValueError("a job's own error")


def unpicklable():
    return threading.Lock()


def sleep(seconds):
    time.sleep(seconds)
    return "slept"


def die():
    os.kill(os.getpid(), signal.SIGKILL)


class Picky(Exception):
    """An exception that pickles, but does not unpickle: its class wants two arguments."""

    def __init__(self, what, why):
        super().__init__(what)


def picky():
    raise Picky("what", "why")


def refuse(*args):
    raise RuntimeError("no GPU here")
'''

SPEC = """
import torch
import kernelpick
from kernelpick.demo import add_configs, add_kernel
from kernelpick.jobs import Job


def add(device):
    kernel = kernelpick.autotune(configs=add_configs(gpu=False), key=["n"])(add_kernel)
    x = torch.randn(1000, device=device)
    out = torch.empty_like(x)
    kernel[lambda meta: ((1000 + meta["BLOCK"] - 1) // meta["BLOCK"],)](x, x, out, 1000)
    assert torch.equal(out, x + x)


JOBS = [Job("add", add)]
"""


def run(tmp_path: Path, program: str) -> dict:
    (tmp_path / "device_calls.py").write_text(CALLS)
    (tmp_path / "device_spec.py").write_text(SPEC)
    script = tmp_path / "program.py"
    script.write_text(program)
    env = {
        **os.environ,
        "KERNELPICK_ISOLATE": "on",
        "KERNELPICK_CACHE_DIR": str(tmp_path / "cache"),
        "KERNELPICK_COMPILE_WORKERS": "2",
    }
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "device_spec.py")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_device_process_is_forked_by_the_zygote_and_tunes_its_jobs_as_a_spawned_one_did(
    tmp_path: Path,
) -> None:
    found = run(
        tmp_path,
        """
import json, sys
import kernelpick
import device_calls
from kernelpick.jobs import cluster
from kernelpick.workers import plan, zygote

plan.tune_elsewhere()  # as `tune_spec` says in the command's process
pool = cluster._ProcessRunner._pool("0")
print(json.dumps({
    "executor": type(pool).__name__,
    "zygote_pid": zygote.fork_zygote().pid,
    "model": pool.submit(cluster._ready, sys.argv[1]).result(timeout=120),
    "outcome": pool.submit(cluster.run_job, sys.argv[1], "add").result(timeout=240).error,
    "facts": pool.submit(device_calls.facts).result(timeout=60),
}))
pool.shutdown(cancel_futures=True)
""",
    )
    assert found["executor"] == "ForkedExecutor"
    facts = found["facts"]
    assert facts["ppid"] == found["zygote_pid"]  # forked by the command's zygote, not spawned
    assert facts["visible"] == "0"  # its GPU, as the machine names it
    assert facts["setting"] == "2"  # the command's settings
    # It tunes: its own zygote for its workers, and not told it tunes elsewhere as the command was.
    assert facts["zygote"] and not facts["tuning_elsewhere"]
    # The whole of kernelpick is there: the zygote was forked once its module was defined.
    assert facts["ops"] == "kernelpick.ops"
    # NVML does not start in a process forked from one that used it: torch's warning is not shown.
    assert not facts["nvml_warning_shown"]
    assert found["model"] and found["outcome"] == ""  # the job ran, right, in the device process


def test_its_errors_come_back_as_a_process_pools_do_and_a_dead_process_breaks_it(tmp_path: Path) -> None:
    found = run(
        tmp_path,
        """
import json, os, time
import kernelpick
import device_calls
from kernelpick.jobs.device_process import ForkedExecutor
from kernelpick.workers import zygote


def outcome(future):
    try:
        return ["ok", future.result(timeout=60)]
    except BaseException as error:
        return [type(error).__name__, str(error)]


pool = ForkedExecutor(zygote.fork_zygote(), dict(os.environ), print, ())
found = {
    "fail": outcome(pool.submit(device_calls.fail)),
    "unpicklable": outcome(pool.submit(device_calls.unpicklable)),
    "after": outcome(pool.submit(device_calls.sleep, 0)),
    "picky": outcome(pool.submit(device_calls.picky)),
}
dying = pool.submit(device_calls.die)
waiting = pool.submit(device_calls.sleep, 0)
found["dying"] = outcome(dying)
found["waiting"] = outcome(waiting)
found["later"] = outcome(pool.submit(device_calls.sleep, 0))
pool.shutdown()

refused = ForkedExecutor(zygote.fork_zygote(), dict(os.environ), device_calls.refuse, (1,))
found["refused"] = outcome(refused.submit(device_calls.sleep, 0))
refused.shutdown()

patient = ForkedExecutor(zygote.fork_zygote(), dict(os.environ), print, ())
finishing = patient.submit(device_calls.sleep, 1)
patient.shutdown()  # waits for the running call, as a process pool's shutdown does
found["finished"] = outcome(finishing)

long = ForkedExecutor(zygote.fork_zygote(), dict(os.environ), print, ())
running = long.submit(device_calls.sleep, 60)
time.sleep(1.0)
started = time.perf_counter()
long.shutdown(cancel_futures=True)
found["interrupted_s"] = time.perf_counter() - started
found["interrupted"] = outcome(running)
print(json.dumps(found))
""",
    )
    assert found["fail"] == ["ValueError", "a job's own error"]
    assert found["unpicklable"][0] == "RuntimeError" and "did not pickle" in found["unpicklable"][1]
    assert found["after"] == ["ok", "slept"]  # an error is the call's, not the process's
    assert found["picky"][0] == "RuntimeError" and "did not unpickle" in found["picky"][1]
    assert found["finished"] == ["ok", "slept"]
    # Killed in a call: that call and the one waiting fail, saying so; later ones too.
    assert found["dying"][0] == "BrokenExecutor" and "SIGKILL" in found["dying"][1]
    assert found["waiting"][0] == "BrokenExecutor"
    assert found["later"][0] == "BrokenExecutor"
    # An initializer that raises: nothing runs, and the calls say why.
    assert found["refused"][0] == "BrokenExecutor" and "no GPU here" in found["refused"][1]
    # Shut down with cancel_futures (the command interrupted): the running call is interrupted.
    assert found["interrupted_s"] < 20
    assert found["interrupted"][0] == "KeyboardInterrupt"
