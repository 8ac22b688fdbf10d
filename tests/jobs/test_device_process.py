"""jobs/device_process.py: the device processes of `kernelpick tune --devices`, forked by the zygote
(else spawned) as workers are.

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
    print("said by the device process")
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
    print("about to die", flush=True)
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


def run(tmp_path: Path, program: str, **environment: str) -> tuple[dict, str]:
    """What `program` printed last (JSON), and its stderr."""
    (tmp_path / "device_calls.py").write_text(CALLS)
    (tmp_path / "device_spec.py").write_text(SPEC)
    script = tmp_path / "program.py"
    script.write_text(program)
    env = {
        **os.environ,
        "KERNELPICK_ISOLATE": "on",
        "KERNELPICK_CACHE_DIR": str(tmp_path / "cache"),
        "KERNELPICK_COMPILE_WORKERS": "2",
        **environment,
    }
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "device_spec.py")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


DEVICE_PROCESS = """
import json, os, sys
import kernelpick
import device_calls
from kernelpick.jobs import cluster
from kernelpick.workers import plan, process, zygote

if HOW == "spawned":
    process._forking_works = False  # as where no zygote can be forked
plan.tune_elsewhere()  # as `tune_spec` says in the command's process
pool = cluster._ProcessRunner._pool("1")
print(json.dumps({
    "zygote_pid": zygote.fork_zygote().pid,
    "pid": os.getpid(),
    "model": pool.submit(cluster._ready, sys.argv[1]).result(timeout=120),
    "outcome": pool.submit(cluster.run_job, sys.argv[1], "add").result(timeout=240).error,
    "facts": pool.submit(device_calls.facts).result(timeout=60),
}))
pool.shutdown(cancel_futures=True)
"""


@pytest.mark.parametrize("how", ["forked", "spawned"])
def test_a_device_process_is_forked_by_the_zygote_else_spawned_and_tunes_its_jobs(
    tmp_path: Path, how: str
) -> None:
    # `CUDA_VISIBLE_DEVICES=5,7 kernelpick tune --devices 1`: the process owns GPU 7.
    found, stderr = run(tmp_path, f"HOW = {how!r}\n{DEVICE_PROCESS}", CUDA_VISIBLE_DEVICES="5,7")
    facts = found["facts"]
    # Forked by the command's zygote; else a new interpreter, the command's child.
    assert facts["ppid"] == (found["zygote_pid"] if how == "forked" else found["pid"])
    assert facts["visible"] == "7"  # its GPU, as the machine names it, before CUDA starts
    assert facts["setting"] == "2"  # the command's settings
    assert "said by the device process" in stderr  # what it prints goes to the command's stderr
    # It tunes: its own zygote for its workers, and not told it tunes elsewhere as the command was.
    assert facts["zygote"] and not facts["tuning_elsewhere"]
    # The whole of kernelpick is there: the zygote was forked once its module was defined.
    assert facts["ops"] == "kernelpick.ops"
    # NVML does not start in a process forked from one that used it: torch's warning is not shown.
    assert not facts["nvml_warning_shown"] or how == "spawned"
    assert found["model"] and found["outcome"] == ""  # the job ran, right, in the device process


def test_its_errors_come_back_as_a_process_pools_do_and_a_dead_process_breaks_it(tmp_path: Path) -> None:
    found, _ = run(
        tmp_path,
        """
import json, os, time
import kernelpick
import device_calls
from kernelpick.jobs.device_process import DeviceProcess


def outcome(future):
    try:
        return ["ok", future.result(timeout=60)]
    except BaseException as error:
        return [type(error).__name__, str(error)]


pool = DeviceProcess(None, print, ())
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

refused = DeviceProcess(None, device_calls.refuse, (1,))
found["refused"] = outcome(refused.submit(device_calls.sleep, 0))
refused.shutdown()

patient = DeviceProcess(None, print, ())
finishing = patient.submit(device_calls.sleep, 1)
patient.shutdown()  # waits for the running call, as a process pool's shutdown does
found["finished"] = outcome(finishing)

long = DeviceProcess(None, print, ())
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
    assert "its last output:" in found["dying"][1] and found["dying"][1].endswith("about to die")
    assert found["waiting"][0] == "BrokenExecutor"
    assert found["later"][0] == "BrokenExecutor"
    # An initializer that raises: nothing runs, and the calls say why.
    assert found["refused"][0] == "BrokenExecutor" and "no GPU here" in found["refused"][1]
    # Shut down with cancel_futures (the command interrupted): the running call is interrupted.
    assert found["interrupted_s"] < 20
    assert found["interrupted"][0] == "KeyboardInterrupt"


RESTARTED = """
import json, os
import kernelpick
from kernelpick.jobs import device_process
from kernelpick.workers import zygote

device_process.serve = lambda fd: 1  # the zygote's copy of this module: its device process ends unready
zygote.fork_zygote()
pool = device_process.DeviceProcess(None, print, ())
print(json.dumps({"parent": pool.submit(os.getppid).result(timeout=120), "pid": os.getpid()}))
pool.shutdown()
"""


def test_a_forked_device_process_that_ends_unready_leaves_a_new_interpreter_that_answers(
    tmp_path: Path,
) -> None:
    # As on an H200 when its zygote was a bad fork: the new interpreter's first reply was the dead
    # process's end of messages, and waiting for the live one's exit status hung the command.
    found, _ = run(tmp_path, RESTARTED)
    assert found["parent"] == found["pid"]


UNSTARTED = """
import json, sys, time
import torch
from kernelpick.errors import KernelpickError
from kernelpick.jobs import cluster, device_process

torch.cuda.is_available, torch.cuda.device_count = lambda: True, lambda: 1  # as on a GPU machine
device_process.serve = lambda fd: 1  # forked, it ends unready; as a new interpreter, it cannot start:
sys.executable = "/bin/false"
started = time.perf_counter()
try:
    cluster.tune_spec(sys.argv[1], devices=["0"])
    error = ""
except KernelpickError as failure:
    error = str(failure)
print(json.dumps({"error": error, "seconds": time.perf_counter() - started}))
"""


def test_a_device_process_that_does_not_start_is_reported_by_the_command(tmp_path: Path) -> None:
    found, _ = run(tmp_path, UNSTARTED)
    assert "did not start" in found["error"] and "exit code 1" in found["error"]
    assert found["seconds"] < 60
