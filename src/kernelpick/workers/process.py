"""One worker process: started once, fed requests as JSON lines, watched, killed and restarted."""

from __future__ import annotations

import collections
import json
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from typing import Any

from kernelpick import settings
from kernelpick.errors import IsolationError
from kernelpick.workers.zygote import START_TIMEOUT_S, ForkedWorker, fork_zygote, signal_group

log = logging.getLogger("kernelpick.workers")

#: False once a forked worker failed to start: this process's later workers are new interpreters.
_forking_works = True
_TAIL_LINES = 40
#: What a worker runs unless told otherwise: an isolation worker's loop.
WORKER_ENTRY = "kernelpick.workers.main:serve_messages"
#: What a worker's reader puts on its pool's queue: (slot, generation, message; None once it is gone).
Message = tuple[int, int, "dict[str, Any] | None"]


def describe_exit(code: int | None) -> str:
    if code is None:
        return "no exit status"
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


def describe_output(tail: str) -> str:
    """The end of a message saying why a process ended: its last output (`WorkerProcess.tail`), if any."""
    return f"; its last output:\n{tail}" if tail.strip() else ""


class WorkerProcess:
    """A process bound to one device, forked by the zygote where there is one, else a new interpreter
    (`python -m kernelpick.workers.main`), running an isolation worker's loop or a device process's.

    Args:
        device: the GPU index it owns, as this process numbers its GPUs (it sees only that GPU, as
            `cuda:0`: `settings.visible_device`), or None for the CPU (or the environment's GPUs).
        messages: where its messages go, as `(slot, generation, message)`; `slot` tells workers apart.
        slot: this worker's number in its pool.
        serve: a device process's loop ("module:function", called with its messages' file descriptor,
            first saying it is ready), not an isolation worker's (`WORKER_ENTRY`): what it prints goes to
            this process's stderr too, not only into `tail`, and no spawned zygote (`Zygote.spawned`)
            forks it (with no forked zygote, it is a new interpreter itself).
    """

    def __init__(
        self,
        device: int | None,
        messages: queue.Queue[Message],
        slot: int,
        *,
        serve: str | None = None,
    ) -> None:
        self.device = device
        self.slot = slot
        self._messages = messages
        self._serve = serve
        self._tail: collections.deque[str] = collections.deque(maxlen=_TAIL_LINES)
        self._process: subprocess.Popen[bytes] | ForkedWorker | None = None
        self.generation = 0  # bumped at every start: messages of a dead predecessor are ignored
        self.info: dict[str, Any] = {}

    @property
    def forked(self) -> bool:
        """Whether a zygote forked it (quick to start again), not a new interpreter."""
        return isinstance(self._process, ForkedWorker)

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def start(self) -> None:
        """Start the process and wait until it has imported everything and said so.

        Raises:
            IsolationError: it did not start (the message holds its output).
        """
        global _forking_works
        self.generation += 1
        self._tail.clear()
        read_end, write_end = os.pipe()
        forked = fork_zygote(spawn=self._serve is None) if _forking_works else None  # made now if not yet
        changes: dict[str, str | None] = {
            # A new interpreter imports Triton to compile (kernelpick interprets CPU kernels itself);
            # a child of the zygote has the Triton it imported, made as TRITON_INTERPRET then said,
            # which its knob must keep saying (Triton asserts it when it imports Gluon later).
            **({} if forked is not None and not forked.spawned else {"TRITON_INTERPRET": None}),
            # Isolation inside a worker is off: it measures what it is sent itself, and forks no zygote.
            **({"KERNELPICK_ISOLATE": "off"} if self._serve is None else {}),
        }
        if self.device is not None:
            changes["CUDA_VISIBLE_DEVICES"] = settings.visible_device(self.device)
        environment = settings.child_environment(changes)
        entry = self._serve or WORKER_ENTRY
        if forked is not None:
            try:
                self._process = forked.fork_child(environment, write_end, entry)
            except OSError as error:  # the zygote is gone (a spawned one may have failed to start)
                log.info("no zygote to fork a worker (%s); starting new interpreters", error)
                _forking_works = False
                os.close(read_end)
                os.close(write_end)
                self.start()
                return
        else:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "kernelpick.workers.main", str(write_end), entry],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                pass_fds=(write_end,),
                env=environment,
                start_new_session=True,  # a signal meant for the caller's terminal does not hit it
            )
        os.close(write_end)
        self.info = {}
        ready = threading.Event()
        threading.Thread(
            target=self._read_messages, args=(read_end, self.generation, ready), daemon=True
        ).start()
        threading.Thread(target=self._read_output, args=(self._process,), daemon=True).start()
        started = time.perf_counter()
        if not ready.wait(START_TIMEOUT_S):
            self.kill()
            raise IsolationError(f"a worker did not start in {START_TIMEOUT_S:.0f} s:\n{self.tail()}")
        if not self.info:
            code = self.exit_code()
            if forked is not None:  # e.g. this process used CUDA before the zygote was forked
                log.info("a forked worker failed to start (%s); starting new interpreters", self.tail())
                _forking_works = False
                self.start()
                return
            raise IsolationError(f"a worker failed to start ({describe_exit(code)}):\n{self.tail()}")
        log.info(
            "worker %d (%s) started in %.1f s",
            self.slot,
            self.info.get("device"),
            time.perf_counter() - started,
        )

    def send(self, request: Mapping[str, Any]) -> None:
        assert self._process is not None and self._process.stdin is not None
        self._process.stdin.write(json.dumps(request).encode() + b"\n")
        self._process.stdin.flush()

    def kill(self) -> None:
        """End the process at once (it may be hung in a kernel or a C extension)."""
        if self._process is None:
            return
        if self._process.poll() is None:
            signal_group(self._process.pid, signal.SIGKILL)  # its group: what it started too
        self._process.wait()

    def interrupt(self) -> None:
        """Interrupt what it runs (SIGINT, what Ctrl-C does: it is out of the terminal's session)."""
        if self._process is not None:
            signal_group(self._process.pid, signal.SIGINT)

    def exit_code(self, timeout_s: float = 30.0) -> int | None:
        """Its exit status, once it has ended (waiting up to `timeout_s`: its messages may end just
        before it does); None if it has not, or never started."""
        if self._process is None:
            return None
        try:
            return self._process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, timeout_s: float = 5.0) -> None:
        """Ask the process to end (its stdin closes); kill it if it has not `timeout_s` later."""
        if self._process is None or self._process.poll() is not None:
            return
        try:
            assert self._process.stdin is not None
            self._process.stdin.close()
            self._process.wait(timeout=timeout_s)
        except (OSError, subprocess.TimeoutExpired):
            self.kill()

    def tail(self) -> str:
        return "\n".join(self._tail)

    def _read_messages(self, read_end: int, generation: int, ready: threading.Event) -> None:
        with os.fdopen(read_end, "rb") as stream:
            for line in stream:
                try:
                    message = json.loads(line)
                except json.JSONDecodeError:
                    log.warning("worker %s sent an unreadable message: %r", self.slot, line[:200])
                    continue
                if "ready" in message:
                    self.info = message
                    ready.set()
                else:
                    self._messages.put((self.slot, generation, message))
        ready.set()  # a worker that died while starting wakes its starter too
        self._messages.put((self.slot, generation, None))  # the process is gone

    def _read_output(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            text = line.decode(errors="replace").rstrip()
            self._tail.append(text)
            if self._serve is not None:  # a device process: the command shows what it prints
                sys.stderr.write(text + "\n")
                sys.stderr.flush()
