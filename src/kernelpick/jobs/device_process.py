"""A device process of `kernelpick tune --devices`: a worker process that runs the calls it is sent."""

from __future__ import annotations

import atexit
import base64
import json
import os
import pickle
import queue
import sys
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import BrokenExecutor, Future, ThreadPoolExecutor
from typing import Any

from kernelpick.workers.process import Message, WorkerProcess, describe_exit, describe_output

#: How long a device process may take to end once told to, before it is killed.
END_TIMEOUT_S = 30.0


class DeviceProcess(ThreadPoolExecutor):
    """One device process, started in the background, running `initializer(*initargs)` first, then
    each call submitted, in order: each is a task of this executor's one thread, which sends it and
    waits for its reply (so waiting calls can be cancelled, and shutdown waits for the calls).
    Calls and results cross as pickles (functions by reference) inside the workers' JSON messages;
    what the process prints goes to the command's stderr.

    Args:
        device: its GPU, as this process numbers them (`WorkerProcess`'s), or None: the environment's.
        initializer, initargs: its first call, as `ProcessPoolExecutor`'s; if the process does not
            start or this raises, every later call fails (`BrokenExecutor`, saying why).
    """

    def __init__(
        self, device: int | None, initializer: Callable[..., object], initargs: tuple[Any, ...] = ()
    ) -> None:
        super().__init__(1, thread_name_prefix="kernelpick-device")
        self._replies: queue.Queue[Message] = queue.Queue()
        # Forked by the command's zygote (`kernelpick.workers.zygote`), as workers are, when that
        # zygote was forked before the command touched CUDA: a new interpreter would spend seconds
        # importing torch, kernelpick and the spec, which the command has imported already. It then
        # makes its own CUDA context on its GPU. With no zygote, or one that is a new interpreter,
        # it is a new interpreter itself.
        self._process = WorkerProcess(device, self._replies, 0, serve=f"{__name__}:serve")
        self._failure = ""  # why every later call fails (`_broken` is ThreadPoolExecutor's own)
        self._running = False
        super().submit(self._start, initializer, initargs)

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        return super().submit(self._call, fn, args, kwargs)

    def _start(self, initializer: Callable[..., object], initargs: tuple[Any, ...]) -> None:
        try:
            self._process.start()
            self._call(initializer, initargs, {})
        except BaseException as error:
            self._failure = self._failure or f"the device process {self._process.pid} did not start: {error}"
            raise

    def _call(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Run a call in the process (in this executor's one thread): its result, or its exception."""
        if self._failure:
            raise BrokenExecutor(self._failure)
        self._running = True
        try:
            try:
                self._process.send({"call": _encoded((fn, args, kwargs))})
            except (OSError, ValueError):  # it is gone: its messages end too, and say so
                pass
            reply = self._reply()
        finally:
            self._running = False
        if reply is None:
            code, tail = describe_exit(self._process.exit_code()), describe_output(self._process.tail())
            self._failure = f"the device process {self._process.pid} ended ({code}){tail}"
            raise BrokenExecutor(self._failure)
        try:
            ok, value = pickle.loads(base64.b64decode(reply["outcome"]))
        except Exception as error:  # e.g. an exception whose class rejects its own arguments
            raise RuntimeError(f"a reply of the device process did not unpickle: {error!r}") from None
        if not ok:
            raise value
        return value

    def _reply(self) -> dict[str, Any] | None:
        """The process's next reply; None once it has ended. Its messages end when it does, unless a
        process it started holds their pipe still: then it is gone once `poll` says so for 5 s.
        Messages of a predecessor that failed to start are not its own (`WorkerProcess.generation`)."""
        gone_since: float | None = None
        while True:
            try:
                _, generation, reply = self._replies.get(timeout=1.0)
            except queue.Empty:
                if self._process.alive:
                    continue
                gone_since = gone_since or time.monotonic()
                if time.monotonic() - gone_since > 5.0:
                    return None
                continue
            if generation == self._process.generation:
                return reply

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """End the process once its calls are done (with `wait`, wait for that). With
        `cancel_futures`, waiting calls are cancelled and a running one is interrupted (SIGINT: what
        Ctrl-C does to a process of the terminal's session, which this one is not). A process that
        has not ended `END_TIMEOUT_S` after its last call (or the interrupt) is killed."""
        super().shutdown(wait=False, cancel_futures=cancel_futures)
        if cancel_futures and self._running:
            self._process.interrupt()
        ending = threading.Thread(target=self._end, args=(cancel_futures,), name="kernelpick-device-end")
        ending.start()
        if wait:
            ending.join()

    def _end(self, interrupted: bool) -> None:
        if interrupted:  # it ends once the interrupted call answers; killed, that call fails saying so
            self._process.stop(END_TIMEOUT_S)
        super().shutdown()  # its calls done
        self._process.stop(END_TIMEOUT_S)


def _encoded(value: object) -> str:
    return base64.b64encode(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)).decode()


def serve(fd: int) -> int:  # pragma: no cover - runs in the device process (tested through it)
    """The device process's loop: run each call read from stdin, its outcome sent on `fd`. Ends when
    stdin closes, after what `atexit` holds (its workers stopped), as a spawned process's exit would."""
    try:
        with os.fdopen(fd, "w") as messages:
            messages.write(json.dumps({"ready": True, "pid": os.getpid(), "device": "device process"}) + "\n")
            messages.flush()
            for line in sys.stdin:
                try:
                    fn, args, kwargs = pickle.loads(base64.b64decode(json.loads(line)["call"]))
                    outcome: tuple[bool, Any] = (True, fn(*args, **kwargs))
                except BaseException as error:
                    outcome = (False, error)
                messages.write(json.dumps({"outcome": _pickled(outcome)}) + "\n")
                messages.flush()
    finally:
        atexit._run_exitfuncs()
    return 0


def _pickled(outcome: tuple[bool, Any]) -> str:
    """A reply's payload; an outcome that does not pickle (an exception holding a lock, say) as a
    RuntimeError that says what it was."""
    try:
        return _encoded(outcome)
    except Exception as failure:
        ok, value = outcome
        why = f"{type(failure).__name__}: {failure}"
        if ok:
            stand_in = RuntimeError(f"the device process's result did not pickle ({why})")
        else:
            text = "".join(traceback.format_exception(value)).rstrip()
            stand_in = RuntimeError(f"in the device process:\n{text}\n(its exception did not pickle: {why})")
        return _encoded((False, stand_in))
