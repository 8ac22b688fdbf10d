"""A worker process: `python -m kernelpick.workers.main FD ENTRY` reads requests on stdin, answers on FD."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import traceback
from typing import Any


def _cuda_error(torch: Any) -> str | None:
    """What is wrong with this process's CUDA context, if anything."""
    if not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return None
    try:
        torch.cuda.synchronize()
        torch.ones(1, device="cuda").add_(1).item()
    except Exception as error:
        return f"{type(error).__name__}: {error}".strip()
    return None


def _warm_up(torch: Any) -> None:
    """What a worker's first request would otherwise wait for, done while it waits for one: Triton's
    cache key (hashing Triton's own files: its first launch of a cached kernel needs it too) and
    cuBLAS's handle (a reference's first product)."""
    with contextlib.suppress(Exception):  # a request does it again, and says what went wrong
        from kernelpick.compile.precompile import warm_up_compiler

        warm_up_compiler()
        ones = torch.ones(8, 8, device="cuda")
        (ones @ ones).sum().item()


#: Seconds past a request's time limit after which a worker ends itself, if its pool has not killed it.
OVERRUN_S = 5.0


def _limit(seconds: Any) -> None:
    """End this process (SIGALRM) once `seconds` (a request's `timeout_s`) and `OVERRUN_S` have passed;
    0 or None: no limit (the limit before is lifted)."""
    signal.setitimer(signal.ITIMER_REAL, seconds + OVERRUN_S if seconds else 0.0)


def serve_messages(fd: int) -> int:
    """A worker's loop, its messages written to file descriptor `fd` (what the zygote's workers run)."""
    import torch

    from kernelpick import settings, signals
    from kernelpick.workers import plan
    from kernelpick.workers.request import answer

    plan.inside_worker = True
    signals.crash_hints = False  # a crash here is the candidate's, which the pool records
    name = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    # Which GPU, as the machine knows it: its workers' GPU is a caller's check (`settings.visible_device`).
    uuid = str(getattr(torch.cuda.get_device_properties(0), "uuid", "")) if torch.cuda.is_available() else ""
    # A handler inherited from the caller would run Python code: ours ends it.
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    # Messages go through their own pipe: what benchmarked code prints on stdout cannot garble them.
    with os.fdopen(fd, "w", buffering=1) as messages:  # a line at a time
        messages.write(json.dumps({"ready": True, "pid": os.getpid(), "device": name, "uuid": uuid}) + "\n")
        if torch.cuda.is_available():  # a CPU worker interprets kernels: nothing of Triton's to warm
            threading.Thread(
                target=_warm_up, args=(torch,), name="kernelpick-worker-warm-up", daemon=True
            ).start()
        for line in sys.stdin:
            request = json.loads(line)
            _limit(request.get("timeout_s"))
            try:
                phases: dict[str, float] = {}
                try:
                    with settings.override(**request.get("settings", {})):
                        reply: dict[str, Any] = {"results": answer(request, phases), "seconds": phases}
                except Exception as failure:  # the request itself is unusable
                    reply = {
                        "error": f"{type(failure).__name__}: {failure}",
                        "traceback": "".join(traceback.format_exception(failure)),
                    }
                broken = _cuda_error(torch)
                if broken is not None:  # a candidate broke the context, whatever else went wrong after
                    why = f"it left the CUDA context broken ({broken}); the worker was restarted"
                    crashed = {"status": "crashed", "timing": None, "message": why}
                    results = dict.fromkeys(request["candidates"], crashed)
                    reply = {"results": results, "seconds": phases, "exiting": True}  # send it nothing more
                messages.write(json.dumps({"id": request.get("id"), **reply}) + "\n")
                if broken is not None:
                    return 3  # a broken context cannot run anything again
            finally:
                _limit(None)  # an idle worker waits for its next request for as long as it takes
        return 0


def main() -> int:
    from kernelpick.workers.zygote import die_with_parent, run_entry

    die_with_parent()  # a spawned worker: forked ones start it as they become the zygote's children
    return run_entry(sys.argv[2], int(sys.argv[1]))


if __name__ == "__main__":
    sys.exit(main())
