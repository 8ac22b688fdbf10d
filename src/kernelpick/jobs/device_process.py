"""A device process of `kernelpick tune --devices`, forked by the zygote instead of spawned.

A spawned device process is a new interpreter: it spends seconds importing torch, kernelpick and
the spec before its first job, although the command has imported all of that already. The
command's zygote (`kernelpick.workers.zygote`, forked for its first device process; the command
uses no CUDA) forks one with torch and kernelpick imported, and it makes its own CUDA context on
its GPU.

`ForkedExecutor` is the command's handle on one: the part of `ProcessPoolExecutor`'s interface
that `cluster._ProcessRunner` uses (`submit`, `shutdown`), for one process that runs the calls it
is sent one at a time, in order. Calls and results cross as pickles (functions by reference), as
they do to a `ProcessPoolExecutor`'s process; what the process prints goes to the command's
stderr.
"""

from __future__ import annotations

import atexit
import collections
import os
import pickle
import signal
import struct
import threading
import traceback
from collections.abc import Callable, Mapping
from concurrent.futures import BrokenExecutor, Executor, Future
from typing import IO, Any

from kernelpick.workers.process import describe_exit
from kernelpick.workers.zygote import Zygote, signal_group

#: Each message: its length (8 bytes, big-endian), then the pickle.
_LENGTH = struct.Struct(">Q")
#: How long a device process may take to end once told to, before it is killed.
END_TIMEOUT_S = 30.0


class ForkedExecutor(Executor):
    """One device process forked by `zygote`, running `initializer(*initargs)` first, then each call
    submitted, in order.

    Args:
        zygote: the zygote that forks it.
        environment: its whole environment (CUDA_VISIBLE_DEVICES names its GPU).
        initializer, initargs: its first call, as `ProcessPoolExecutor`'s; if it raises, every
            later call fails (`BrokenExecutor`, saying why).

    Raises:
        OSError: the zygote is gone.
    """

    def __init__(
        self,
        zygote: Zygote,
        environment: Mapping[str, str],
        initializer: Callable[..., object],
        initargs: tuple[Any, ...] = (),
    ) -> None:
        requests_read, requests_write = os.pipe()
        replies_read, replies_write = os.pipe()
        try:
            self.pid = zygote.fork_child(
                (requests_read, 2, replies_write), environment, entry=f"{__name__}:serve"
            )
        except BaseException:
            for fd in (requests_write, replies_read):
                os.close(fd)
            raise
        finally:
            os.close(requests_read)
            os.close(replies_write)
        self._zygote = zygote
        self._requests = os.fdopen(requests_write, "wb")
        self._lock = threading.Lock()
        self._waiting: collections.deque[tuple[Future[Any], bytes]] = collections.deque()
        self._running: Future[Any] | None = None
        self._broken = ""
        self._closed = False
        # The first call is sent before the replies are read: the reader tells its reply by it.
        self._first = self._submit(initializer, initargs, {})
        self._reader = threading.Thread(
            target=self._read, args=(os.fdopen(replies_read, "rb"),), name="kernelpick-device", daemon=True
        )
        self._reader.start()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        if self._closed:
            raise RuntimeError("cannot submit to a device process after shutdown")
        return self._submit(fn, args, kwargs)

    def _submit(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Future[Any]:
        future: Future[Any] = Future()
        call = pickle.dumps((fn, args, kwargs), protocol=pickle.HIGHEST_PROTOCOL)
        with self._lock:
            if self._broken:
                future.set_exception(BrokenExecutor(self._broken))
                return future
            self._waiting.append((future, call))
            self._send_next()
        return future

    def _send_next(self) -> None:
        """Send the next call that was not cancelled, if none is running; after `shutdown`, once
        none is left, close the process's stdin: it ends (the lock held)."""
        while self._running is None and self._waiting:
            future, call = self._waiting.popleft()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                self._requests.write(_LENGTH.pack(len(call)) + call)
                self._requests.flush()
            except OSError as error:
                self._break(f"the device process {self.pid} cannot be sent a call: {error}")
                future.set_exception(BrokenExecutor(self._broken))
                return
            self._running = future
        if self._closed and self._running is None and not self._waiting:
            self._end_requests()

    def _end_requests(self) -> None:
        try:
            self._requests.close()
        except OSError:  # the process is gone: nothing was left to send
            pass

    def _read(self, replies: IO[bytes]) -> None:
        with replies:
            while (reply := _read_message(replies)) is not None:
                try:
                    ok, value = pickle.loads(reply)
                except Exception as error:  # e.g. an exception whose class rejects its own arguments
                    ok, value = (
                        False,
                        RuntimeError(f"a reply of the device process did not unpickle: {error!r}"),
                    )
                with self._lock:
                    future, self._running = self._running, None
                    if future is self._first and not ok:
                        self._break(f"the device process {self.pid} did not start: {value}")
                    self._send_next()
                if future is None:  # pragma: no cover - a reply to nothing sent: the protocol broke
                    continue
                if ok:
                    future.set_result(value)
                else:
                    future.set_exception(value)
        status = self._zygote.status(self.pid, END_TIMEOUT_S)
        with self._lock:
            self._break(f"the device process {self.pid} ended ({describe_exit(status)})")
            running, self._running = self._running, None
            self._end_requests()
        if running is not None:
            running.set_exception(BrokenExecutor(self._broken))

    def _break(self, reason: str) -> None:
        """Fail every waiting call with `reason` (the lock held); later submissions fail alike."""
        if not self._broken:
            self._broken = reason
        while self._waiting:
            future, _ = self._waiting.popleft()
            if future.set_running_or_notify_cancel():
                future.set_exception(BrokenExecutor(self._broken))

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """End the process once its calls are done (with `wait`, wait for that). With
        `cancel_futures`, waiting calls are cancelled and a running one is interrupted (SIGINT: what
        Ctrl-C does to a spawned process, which shares the command's terminal; this one does not),
        and a process that has not ended `END_TIMEOUT_S` later is killed."""
        with self._lock:
            self._closed = True
            if cancel_futures:
                for future, _ in self._waiting:
                    future.cancel()
                self._waiting.clear()
                if self._running is not None:
                    signal_group(self.pid, signal.SIGINT)
            self._send_next()  # the process ends once its calls are done
        if wait:
            if self._zygote.status(self.pid, END_TIMEOUT_S if cancel_futures else None) is None:
                signal_group(self.pid, signal.SIGKILL)
            self._reader.join()


def _read_message(stream: IO[bytes]) -> bytes | None:
    header = stream.read(_LENGTH.size)
    if len(header) < _LENGTH.size:
        return None
    (length,) = _LENGTH.unpack(header)
    return stream.read(length)


def serve(replies_fd: int) -> int:  # pragma: no cover - runs in the forked process (tested through it)
    """The device process's loop: run each call read from stdin, its outcome pickled to `replies_fd`.
    Ends when stdin closes, after what `atexit` holds (its workers stopped), as a spawned process's
    exit would."""
    try:
        with os.fdopen(0, "rb", closefd=False) as requests, os.fdopen(replies_fd, "wb") as replies:
            while (message := _read_message(requests)) is not None:
                try:
                    fn, args, kwargs = pickle.loads(message)
                    outcome: tuple[bool, Any] = (True, fn(*args, **kwargs))
                except BaseException as error:
                    outcome = (False, error)
                replies.write(_pickled(outcome))
                replies.flush()
    finally:
        atexit._run_exitfuncs()
    return 0


def _pickled(outcome: tuple[bool, Any]) -> bytes:
    """A reply's bytes; an outcome that does not pickle (an exception holding a lock, say) as a
    RuntimeError that says what it was."""
    try:
        data = pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as failure:
        ok, value = outcome
        why = f"{type(failure).__name__}: {failure}"
        if ok:
            stand_in = RuntimeError(f"the device process's result did not pickle ({why})")
        else:
            text = "".join(traceback.format_exception(value)).rstrip()
            stand_in = RuntimeError(f"in the device process:\n{text}\n(its exception did not pickle: {why})")
        data = pickle.dumps((False, stand_in), protocol=pickle.HIGHEST_PROTOCOL)
    return _LENGTH.pack(len(data)) + data
