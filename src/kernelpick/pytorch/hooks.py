"""Scoped, per-thread interception of Triton launches (`kernel[grid](...)`) made by user code."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class Launch:
    """One kernel launch, as the user's code made it.

    Attributes:
        kernel: what was launched: a `triton.jit` function or a tuning / heuristics wrapper of one.
        grid: the grid as given (a tuple, or a function of the meta-parameters).
        args: positional launch arguments.
        kwargs: keyword launch arguments (constexprs and compile options included).
    """

    kernel: Any
    grid: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)


class LaunchHandler(Protocol):
    """Receives a launch; `original` launches it as the intercepted method would have (None from `launch`)."""

    def __call__(self, launch: Launch, original: Callable[[], Any] | None) -> Any: ...


_state = threading.local()
_install_lock = threading.RLock()
_active = 0
_kept = False
_originals: list[tuple[type, Callable[..., Any]]] = []


def current_handler() -> LaunchHandler | None:
    """The handler active in this thread, if any."""
    return getattr(_state, "handler", None)


@contextmanager
def handling_launches(handler: LaunchHandler | None, *, keep_patches: bool = False) -> Iterator[None]:
    """Hand this thread's launches to `handler` for the duration of the block (None: launch as usual).

    Args:
        handler: receives each launch.
        keep_patches: leave the launch methods patched after the block, for the rest of the process,
            so that the next block costs no patching (each launch then pays a thread-local lookup).
    """
    previous = current_handler()
    if keep_patches:
        keep_installed()
    else:
        _install()
    _state.handler = handler
    try:
        yield
    finally:
        _state.handler = previous
        if not keep_patches:
            _uninstall()


def swap_handler(handler: LaunchHandler | None) -> LaunchHandler | None:
    """Make `handler` this thread's handler and return the previous one (a hot path's `handling_launches`).

    The caller must have the patches installed (see `keep_installed`) and put the previous handler
    back with another `swap_handler` in a `finally`.
    """
    previous = getattr(_state, "handler", None)
    _state.handler = handler
    return previous


@contextmanager
def suspended() -> Iterator[None]:
    """Launch as usual in this thread for the duration of the block (inside a handler)."""
    previous = current_handler()
    _state.handler = None
    try:
        yield
    finally:
        _state.handler = previous


def _launch_classes() -> list[type]:
    from triton.runtime.autotuner import Autotuner as TritonAutotuner
    from triton.runtime.autotuner import Heuristics
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    from kernelpick.tune.autotuner import Autotuner

    # InterpretedFunction: what `triton.jit` makes under TRITON_INTERPRET=1
    return [JITFunction, InterpretedFunction, TritonAutotuner, Heuristics, Autotuner]


def _intercepting(original: Callable[..., Any]) -> Callable[..., Any]:
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        handler = getattr(_state, "handler", None)
        if handler is None:
            return original(self, *args, **kwargs)
        grid = kwargs.pop("grid", None)
        if kwargs.pop("warmup", False):  # a compilation request, not a launch
            with suspended():
                return original(self, *args, grid=grid, warmup=True, **kwargs)

        def launch_as_usual() -> Any:
            with suspended():
                return original(self, *args, grid=grid, warmup=False, **kwargs)

        _state.handler = None  # launches the handler makes itself are not intercepted again
        try:
            return handler(Launch(self, grid, args, dict(kwargs)), launch_as_usual)
        finally:
            _state.handler = handler

    run.__wrapped__ = original  # type: ignore[attr-defined]
    return run


def _install() -> None:
    # The class attributes are patched only while a handler is active somewhere (or kept installed),
    # so that launches outside kernelpick's scopes pay nothing; a thread with no handler of its own
    # goes through the patch straight to the original.
    global _active
    with _install_lock:  # reentrant: keep_installed holds it too
        if _active == 0:
            for cls in _launch_classes():
                original = cls.__dict__["run"]
                _originals.append((cls, original))
                cls.run = _intercepting(original)  # type: ignore[attr-defined]
        _active += 1


def keep_installed() -> None:
    """Patch the launch methods for the rest of the process (once; later calls cost a flag check)."""
    global _kept
    if not _kept:
        with _install_lock:
            if not _kept:
                _kept = True
                _install()


def _uninstall() -> None:
    global _active
    with _install_lock:
        _active -= 1
        if _active == 0:
            while _originals:
                cls, original = _originals.pop()
                cls.run = original  # type: ignore[attr-defined]


def installed() -> bool:
    """Whether the launch methods are patched right now (for tests)."""
    return _active > 0
