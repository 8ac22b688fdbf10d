"""Thread pools that still take work once the program's main thread has ended."""

from __future__ import annotations

import concurrent.futures.thread
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


class Threads(ThreadPoolExecutor):
    """A `ThreadPoolExecutor` that takes work after the main thread has ended, where Python's refuse it
    ("cannot schedule new futures after interpreter shutdown"): every tuning in a thread that a program
    goes on running after its main thread returns (a server's) failed in the pools it compiles with, and
    a tuning in the background still running as the program ended could not go on. Such work runs in a
    thread of its own, `max_workers` of them at once, and leaving a `with` block waits for them too."""

    def __init__(self, max_workers: int, thread_name_prefix: str = "kernelpick") -> None:
        super().__init__(max_workers, thread_name_prefix)
        self._late_slots = threading.Semaphore(max_workers)
        self._late: list[threading.Thread] = []

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        try:
            return super().submit(fn, *args, **kwargs)
        except RuntimeError:
            if self._shutdown or not concurrent.futures.thread._shutdown:
                raise  # this pool was shut down, or something else went wrong
        future: Future[T] = Future()

        def run() -> None:
            with self._late_slots:
                if not future.set_running_or_notify_cancel():
                    return
                try:
                    future.set_result(fn(*args, **kwargs))
                except BaseException as error:  # kept for the caller, as the pool's own threads do
                    future.set_exception(error)

        thread = threading.Thread(target=run, name=f"{self._thread_name_prefix}-late-{len(self._late)}")
        self._late.append(thread)
        thread.start()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        super().shutdown(wait, cancel_futures=cancel_futures)
        if wait:
            for thread in self._late:
                thread.join()
