"""The zygote: an idle copy of the caller, forked before it used CUDA, that forks each worker."""

from __future__ import annotations

import contextlib
import importlib
import itertools
import json
import logging
import multiprocessing
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Mapping
from typing import IO, Any

from kernelpick.compile.forked import fork

log = logging.getLogger("kernelpick.workers")

#: Seconds a new interpreter (a worker, or a spawned zygote) may take to import torch and Triton, and answer.
START_TIMEOUT_S = 180.0

_zygote: Zygote | None = None
#: Whether a forked zygote said its children could not use CUDA: every later fork of this process is alike.
_forks_lack_cuda = False
_zygote_lock = threading.Lock()


class ForkedWorker:
    """A worker forked by the zygote, with the part of `subprocess.Popen`'s interface the pool uses."""

    def __init__(self, pid: int, stdin: IO[bytes], stdout: IO[bytes], zygote: Zygote) -> None:
        self.pid = pid
        self.stdin = stdin
        self.stdout = stdout
        self._zygote = zygote

    def poll(self) -> int | None:
        return self._zygote.status(self.pid, 0.0)

    def wait(self, timeout: float | None = None) -> int | None:
        status = self._zygote.status(self.pid, 30.0 if timeout is None else timeout)
        if status is None and timeout is not None:
            raise subprocess.TimeoutExpired(["kernelpick worker", str(self.pid)], timeout)
        return status


def signal_group(pid: int, number: int) -> None:
    """Send signal `number` to the process group of a child of the zygote (each leads its own: the
    child and what it started), if it is still there."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, number)


class Zygote:
    """The forked copy of this process that forks workers (docs/design.md, "Isolation", says when)."""

    def __init__(self, spawned: bool = False) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.owner = os.getpid()
        self.spawned = spawned  # a new interpreter (this process touched CUDA), not a fork of this one
        self._process = _spawn(theirs) if spawned else None
        self.pid = self._process.pid if self._process is not None else fork(_be_zygote, ours, theirs)
        theirs.close()
        self._socket = ours
        self._lock = threading.Lock()
        self._started: dict[int, int] = {}  # by request number: the worker's pid
        self._exits: dict[int, int] = {}  # by worker pid: its exit status (a negative signal number)
        self._changed = threading.Condition()
        self._requests = itertools.count(1)
        self._usable: bool | None = None
        threading.Thread(target=self._read, name="kernelpick-zygote", daemon=True).start()
        if spawned:
            return
        with self._changed:  # its first report, at once: whether its children can use CUDA
            self._changed.wait_for(lambda: self._usable is not None or self.gone, timeout=30.0)
        if not self._usable:
            global _forks_lack_cuda
            _forks_lack_cuda = self._usable is False
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)  # it ends itself, having said so; else it did not answer
                os.waitpid(self.pid, 0)
            raise OSError("its children could not use CUDA: this process had asked CUDA for its GPUs")

    def fork_child(self, environment: Mapping[str, str], messages: int, entry: str) -> ForkedWorker:
        """Fork a child on pipes like those `subprocess.Popen` would make, writing its messages to file
        descriptor `messages`, `environment` as its whole environment, running `entry` ("module:function",
        called with the messages' descriptor; its return value is the exit status).

        Raises:
            OSError: the zygote is gone.
        """
        stdin_read, stdin_write = os.pipe()
        output_read, output_write = os.pipe()
        # One request at a time: on a stream socket, the pipes of two requests sent at once could
        # arrive with the wrong one.
        try:
            with self._lock:
                number = next(self._requests)
                request = {"request": number, "environment": dict(environment), "entry": entry}
                message = json.dumps(request).encode() + b"\n"
                socket.send_fds(self._socket, [message], [stdin_read, output_write, messages])
                # A spawned zygote answers its first request once it has imported torch and Triton.
                wait_s = START_TIMEOUT_S if self.spawned and number == 1 else 30.0
                with self._changed:
                    if not self._changed.wait_for(
                        lambda: number in self._started or self.gone, timeout=wait_s
                    ):
                        raise OSError(f"the zygote did not answer in {wait_s:.0f} s")
                    if number not in self._started:
                        raise OSError("the zygote is gone")
                    pid = self._started.pop(number)
        except BaseException:  # no child has the caller's ends
            os.close(stdin_write)
            os.close(output_read)
            raise
        finally:
            os.close(stdin_read)
            os.close(output_write)
        return ForkedWorker(pid, os.fdopen(stdin_write, "wb"), os.fdopen(output_read, "rb"), self)

    def status(self, pid: int, timeout: float) -> int | None:
        """The exit status of child `pid`, waiting up to `timeout` seconds; None if it still runs."""
        with self._changed:
            self._changed.wait_for(lambda: pid in self._exits or self.gone, timeout=timeout)
            return self._exits.get(pid, -signal.SIGKILL if self.gone else None)

    @property
    def gone(self) -> bool:
        return self._socket.fileno() < 0

    def _read(self) -> None:
        # The stream is closed before the socket: a socket with a stream open keeps its descriptor (not `gone`).
        with self._socket.makefile("rb") as stream:
            for line in stream:
                report = json.loads(line)
                with self._changed:
                    if "started" in report:
                        self._started[report["request"]] = report["started"]
                    elif "usable" in report:
                        self._usable = report["usable"]
                    else:
                        self._exits[report["exited"]] = report["status"]
                    self._changed.notify_all()
        with self._changed:
            self._socket.close()
            self._changed.notify_all()
        if self._process is not None:
            self._process.wait()  # reaped: a spawned zygote is this process's child


def _spawn(connection: socket.socket) -> subprocess.Popen[bytes]:
    """A new interpreter running `serve_spawned` on `connection`, importing what this one can."""
    from kernelpick import settings

    environment = settings.child_environment({"TRITON_INTERPRET": None})  # its Triton made for the GPU
    fd = connection.fileno()
    code = f"from kernelpick.workers.zygote import serve_spawned; serve_spawned({fd})"
    return subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        pass_fds=(fd,),
        env=environment,
        start_new_session=True,  # out of the caller's terminal session, as a forked zygote
    )


def _be_zygote(ours: socket.socket, theirs: socket.socket) -> int:  # pragma: no cover - the zygote
    global _zygote_lock
    _zygote_lock = threading.Lock()  # forked while `fork_zygote` held it: its children fork their own
    _forget_unfinished_imports()
    ours.close()
    try:
        usable = not _in_bad_fork()
        _report(theirs, {"usable": usable})
        if usable:
            _serve(theirs)
    except BaseException:  # the caller is gone: nobody to tell
        return 1
    return 0


def serve_spawned(fd: int) -> None:  # pragma: no cover - runs in a spawned zygote
    """A spawned zygote: import what a worker needs (using no CUDA), then serve as a forked one does."""
    import torch  # noqa: F401
    import triton  # noqa: F401

    import kernelpick.workers.main  # noqa: F401  the worker's loop and all it imports

    _serve(socket.socket(fileno=fd))


def _serve(connection: socket.socket) -> None:  # pragma: no cover - runs in the zygote
    """The zygote's loop: fork a worker per request, report each worker's start and exit."""
    with contextlib.suppress(PermissionError):  # a spawned zygote leads its session already
        os.setsid()  # out of the caller's terminal session: its Ctrl-C is the caller's
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    keep = connection.fileno()
    os.closerange(3, keep)
    os.closerange(keep + 1, os.sysconf("SC_OPEN_MAX"))
    watch = selectors.DefaultSelector()
    watch.register(connection, selectors.EVENT_READ)
    pending = b""
    children: set[int] = set()
    while True:
        for _ in watch.select(timeout=0.2):
            data, fds, _flags, _address = socket.recv_fds(connection, 1 << 16, 3)
            if not data:
                # The caller is gone (even SIGKILLed): so are its workers, a busy one too (an idle
                # one would see its stdin close; one on a hanging candidate would not).
                for child in children:
                    signal_group(child, signal.SIGKILL)  # its group: what it started too
                return
            *lines, pending = (pending + data).split(b"\n")
            for line in lines:
                request = json.loads(line)
                pid = fork(_become_child, connection, fds, request["environment"], request["entry"])
                children.add(pid)
                for fd in fds:
                    os.close(fd)
                _report(connection, {"request": request["request"], "started": pid})
        with contextlib.suppress(ChildProcessError):  # reap: every worker that ended since
            while (ended := os.waitpid(-1, os.WNOHANG))[0]:
                children.discard(ended[0])
                _report(connection, {"exited": ended[0], "status": os.waitstatus_to_exitcode(ended[1])})


def _forget_unfinished_imports() -> None:
    """In the forked zygote: drop the modules whose import was under way when it was forked, so that
    its workers import them whole. A module that makes a tuned kernel or selector as it is imported
    (`kernelpick.ops.gemm` does) forks the zygote halfway through its own code: the zygote's copy
    lacks what follows that line, and a worker could not unpickle the functions defined there."""
    for name, module in list(sys.modules.items()):
        spec = getattr(module, "__spec__", None)
        if name != "__main__" and spec is not None and getattr(spec, "_initializing", False):
            del sys.modules[name]


def _in_bad_fork() -> bool:
    """Whether torch says this process cannot use CUDA, nor any process it forks: it was forked after
    its parent initialized CUDA or merely asked it for its GPUs (`torch.cuda.is_available()` calls
    `torch._C._cuda_getDeviceCount`, which registers torch's fork handler: `torch.cuda.is_initialized()`
    stays False, yet every child forked from then on fails at its first CUDA call)."""
    torch = sys.modules.get("torch")
    return torch is not None and bool(torch.cuda._is_in_bad_fork())


def _report(connection: socket.socket, message: dict[str, Any]) -> None:  # pragma: no cover
    connection.sendall(json.dumps(message).encode() + b"\n")


def _become_child(
    connection: socket.socket, fds: list[int], environment: Mapping[str, str], entry: str
) -> int:  # pragma: no cover
    """In a child of the zygote: take the pipes and the environment, and run `entry` (a worker's
    loop, or a device process's); its exit status."""
    connection.close()
    os.setsid()  # its own process group: the pool kills the worker and what it started at once
    signal.signal(signal.SIGINT, signal.default_int_handler)
    die_with_parent()
    stdin, output, messages = fds
    os.dup2(stdin, 0)
    os.dup2(output, 1)
    os.dup2(output, 2)
    os.close(stdin)
    os.close(output)
    sys.stdin = open(0, closefd=False)
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False)
    for handler in logging.root.handlers[:]:  # the caller's log files are the caller's
        logging.root.removeHandler(handler)
    # NVML does not start in a process forked from one that used it (the caller asked it for its
    # GPUs before forking the zygote); torch then counts GPUs through CUDA, but warns first.
    warnings.filterwarnings("ignore", message="Can't initialize NVML")
    from kernelpick import settings

    settings.replace_environment(environment)  # CUDA_VISIBLE_DEVICES among it, read when CUDA starts
    try:
        return run_entry(entry, messages)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


def run_entry(entry: str, messages: int) -> int:  # pragma: no cover - runs in a worker or a device process
    """Run a child's loop, `entry` ("module:function"), given its messages' file descriptor; its exit status."""
    module, _, name = entry.partition(":")
    code: int = getattr(importlib.import_module(module), name)(messages)
    return code


def die_with_parent() -> None:  # pragma: no cover - runs in a worker or a device process
    """End this process and its group once its parent (the zygote that forked it, or the caller that
    spawned it) is gone, whatever it is busy with: a watchdog thread. A worker on a hanging candidate
    reads no request, so its stdin closing does not end it."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os.killpg(0, signal.SIGKILL)

    threading.Thread(target=watch, name="kernelpick-die-with-zygote", daemon=True).start()


def fork_zygote(*, spawn: bool = False) -> Zygote | None:
    """Fork this process's zygote if it may have one: it is not a worker or a `multiprocessing` child,
    it can fork, and it has not touched CUDA (initialized it, or asked it for its GPUs: a process
    forked after that cannot use CUDA, `_in_bad_fork`); where it has, with `spawn`, the zygote is a
    new interpreter (`Zygote.spawned`), else there is none. Once per process."""
    global _zygote
    with _zygote_lock:
        if _zygote is not None and _zygote.owner == os.getpid():
            return _zygote if spawn or not _zygote.spawned else None
        if not hasattr(os, "fork") or multiprocessing.parent_process() is not None:
            return None
        forked = [] if _forks_lack_cuda or _cuda_initialized() else [False]
        for spawned in forked + ([True] if spawn else []):
            try:
                _zygote = Zygote(spawned=spawned)
                return _zygote
            except OSError as error:
                log.debug("no %s zygote: %s", "spawned" if spawned else "forked", error)
        return None


def _cuda_initialized() -> bool:
    return "torch" in sys.modules and bool(sys.modules["torch"].cuda.is_initialized())


def zygote() -> Zygote | None:
    """This process's zygote, if it has a live one (not one inherited from a process it forked from)."""
    found = _zygote
    return found if found is not None and found.owner == os.getpid() and not found.gone else None
